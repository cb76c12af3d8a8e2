"""Facts about the served models: their shapes, KV bytes per token and KV capacity.

Shapes
------
Each :class:`ModelShape` holds the figures of a decoder model that per-layer profiles are
scaled by (the layer count) and that the KV-capacity formula needs (weight bytes, KV
bytes per token); :data:`MODEL_SHAPES` holds them by Hugging Face name and
:func:`register_model_shape` adds one. Figures are those of each model's published
``config.json`` and model card:

========================  ======  =====  ========  ====  ======  =============
model                     layers  heads  KV heads  head  hidden  parameters
========================  ======  =====  ========  ====  ======  =============
meta-llama/Llama-3.1-8B   32      32     8         128   4096    8.03e9
meta-llama/Llama-2-7b-hf  32      32     32        128   4096    6,738,415,616
meta-llama/Llama-2-70b-hf 80      64     8         128   8192    68,976,648,192
bigscience/bloom (176B)   70      112    112       128   14336   176,247,271,424
========================  ======  =====  ========  ====  ======  =============

Aliases give the spellings the profile files use (Splitwise's ``llama2-70b``,
``bloom-176b``).

KV capacity
-----------
A decoder stores, per token and per layer, one key and one value vector for each KV
head, so

.. math:: b_{kv} = 2 \\cdot L \\cdot H_{kv} \\cdot d_{head} \\cdot \\text{bytes per element}.

A vLLM-style engine gives the KV cache what is left of its share of GPU memory after
the weights and a reserve for activations:

.. math:: M = \\left\\lfloor \\frac{u \\cdot G - W - R}{b_{kv}} \\right\\rfloor

with ``G`` the GPU memory, ``u`` the ``gpu_memory_utilization`` (vLLM's default 0.9),
``W`` the weight bytes and ``R`` the activation reserve. Source of the formula:
vLLM's memory profiling (``gpu_memory_utilization`` minus model and peak activation
memory); model shapes from the models' published configs.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.errors import InstanceError, UnknownNameError

__all__ = [
    "GIB",
    "LLAMA_3_1_8B",
    "MODEL_SHAPES",
    "ModelShape",
    "get_model_shape",
    "kv_bytes_per_token",
    "kv_token_capacity",
    "register_model_shape",
]

GIB = 2**30


@dataclass(frozen=True)
class ModelShape:
    """The figures of a decoder model that its memory footprint depends on.

    Attributes
    ----------
    name
        Hugging Face name.
    layers, heads, kv_heads, head_dim, hidden
        Architecture (from the model's ``config.json``).
    params
        Parameter count.
    dtype_bytes
        Bytes per weight and per KV element (2 for bf16).
    """

    name: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    params: float
    dtype_bytes: int = 2

    @property
    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes


#: Llama-3.1-8B: 32 layers, 32 heads, 8 KV heads, head dim 128, hidden 4096,
#: 8.03e9 parameters (Meta's model card and config.json).
LLAMA_3_1_8B = ModelShape("meta-llama/Llama-3.1-8B", 32, 32, 8, 128, 4096, 8.03e9)


def kv_bytes_per_token(model: ModelShape) -> int:
    """Bytes of KV cache one token occupies: ``2 * layers * kv_heads * head_dim * bytes``."""
    return 2 * model.layers * model.kv_heads * model.head_dim * model.dtype_bytes


def kv_token_capacity(
    model: ModelShape,
    gpu_bytes: float,
    utilization: float = 0.9,
    reserve_bytes: float = 1.0 * GIB,
) -> int:
    """KV-cache capacity in tokens, ``floor((u G - W - R) / b_kv)``.

    Raises
    ------
    InstanceError
        If the weights and reserve leave no room for the cache, or ``u`` is not in (0, 1].
    """
    if not 0 < utilization <= 1:
        raise InstanceError(f"utilization: must be in (0, 1], got {utilization}")
    room = utilization * gpu_bytes - model.weight_bytes - reserve_bytes
    if room <= 0:
        raise InstanceError(
            f"gpu_bytes: {gpu_bytes / GIB:.1f} GiB at utilization {utilization} leaves no room "
            f"for the KV cache of {model.name}"
        )
    return int(room // kv_bytes_per_token(model))


#: The models schedlab knows, with the aliases profile files use for them.
BUILTIN_MODEL_SHAPES: tuple[tuple[ModelShape, tuple[str, ...]], ...] = (
    (LLAMA_3_1_8B, ("llama-3.1-8b",)),
    (
        ModelShape("meta-llama/Llama-2-7b-hf", 32, 32, 32, 128, 4096, 6_738_415_616),
        ("llama-2-7b", "llama2-7b"),
    ),
    (
        ModelShape("meta-llama/Llama-2-70b-hf", 80, 64, 8, 128, 8192, 68_976_648_192),
        ("llama-2-70b", "llama2-70b"),
    ),
    (
        ModelShape("bigscience/bloom", 70, 112, 112, 128, 14336, 176_247_271_424),
        ("bloom-176b",),
    ),
)

#: Shapes by canonical (Hugging Face) name (the built-ins and those registered).
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


for _shape, _aliases in BUILTIN_MODEL_SHAPES:
    register_model_shape(_shape, _aliases)
