"""Model shapes of the models whose profiles ship in ``../shared/data``; user-extensible.

Each entry is a :class:`schedlab.kv_capacity.ModelShape` (layers, attention heads, KV
heads, head dimension, hidden size, parameter count, bytes per element), the figures that
per-layer profiles are scaled by (the layer count) and that the KV capacity formula of
:mod:`schedlab.kv_capacity` needs (weight bytes, KV bytes per token). Figures are those of
each model's published ``config.json`` and model card:

========================  ======  =====  ========  ====  ======  =============
model                     layers  heads  KV heads  head  hidden  parameters
========================  ======  =====  ========  ====  ======  =============
meta-llama/Llama-3.1-8B   32      32     8         128   4096    8.03e9
meta-llama/Llama-2-7b-hf  32      32     32        128   4096    6,738,415,616
meta-llama/Llama-2-70b-hf 80      64     8         128   8192    68,976,648,192
bigscience/bloom (176B)   70      112    112       128   14336   176,247,271,424
========================  ======  =====  ========  ====  ======  =============

Aliases give the spellings the profile files use (Splitwise's ``llama2-70b``,
``bloom-176b``). :func:`register_model_shape` adds a model.
"""

from __future__ import annotations

from schedlab.errors import UnknownNameError
from schedlab.kv_capacity import LLAMA_3_1_8B, ModelShape

__all__ = ["MODEL_SHAPES", "get_model_shape", "register_model_shape"]

#: Shapes by canonical (Hugging Face) name.
MODEL_SHAPES: dict[str, ModelShape] = {}
_ALIASES: dict[str, str] = {}


def register_model_shape(shape: ModelShape, aliases: tuple[str, ...] = ()) -> None:
    """Add (or replace) ``shape`` under ``shape.name`` and each alias (case-insensitive)."""
    MODEL_SHAPES[shape.name] = shape
    for name in (shape.name, *aliases):
        _ALIASES[name.lower()] = shape.name


def get_model_shape(name: str) -> ModelShape:
    """The shape registered under ``name`` or one of its aliases (case-insensitive).

    Raises
    ------
    UnknownNameError
        Listing the known names.
    """
    canonical = _ALIASES.get(name.lower())
    if canonical is None:
        raise UnknownNameError("model", name, sorted(_ALIASES))
    return MODEL_SHAPES[canonical]


register_model_shape(LLAMA_3_1_8B, ("llama-3.1-8b",))
register_model_shape(
    ModelShape("meta-llama/Llama-2-7b-hf", 32, 32, 32, 128, 4096, 6_738_415_616),
    ("llama-2-7b", "llama2-7b"),
)
register_model_shape(
    ModelShape("meta-llama/Llama-2-70b-hf", 80, 64, 8, 128, 8192, 68_976_648_192),
    ("llama-2-70b", "llama2-70b"),
)
register_model_shape(
    ModelShape("bigscience/bloom", 70, 112, 112, 128, 14336, 176_247_271_424),
    ("bloom-176b",),
)
