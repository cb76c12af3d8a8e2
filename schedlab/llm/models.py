r"""Facts about the served models: their shapes, KV bytes per token and KV capacity.

Shapes
------
Each :class:`ModelShape` holds the figures of a decoder model that per-layer profiles are
scaled by (the layer count), that collectives move (the hidden size) and that the
KV-capacity formula needs (weight bytes, KV bytes per token); :data:`MODEL_SHAPES` holds
them by Hugging Face name and :func:`register_model_shape` adds one. Figures are those of
each model's published ``config.json`` and model card:

==============================  ======  =====  ==  ====  ======  ======  ===========  ========
model                           layers  heads  KV  head  hidden  vocab   experts      params
==============================  ======  =====  ==  ====  ======  ======  ===========  ========
meta-llama/Llama-3.1-8B         32      32     8   128   4096    128256  -            8.03e9
meta-llama/Llama-2-7b-hf        32      32     32  128   4096    32000   -            6.74e9
meta-llama/Llama-2-70b-hf       80      64     8   128   8192    32000   -            68.98e9
bigscience/bloom (176B)         70      112    112 128   14336   250880  -            176.2e9
Qwen/Qwen3-32B                  64      64     8   128   5120    151936  -            32.8e9
Qwen/Qwen3-30B-A3B-Instruct-2507 48     32     4   128   2048    151936  8 of 128     30.5e9
==============================  ======  =====  ==  ====  ======  ======  ===========  ========

(Qwen3-30B-A3B: experts of intermediate size 768; its 3.3e9 *active* parameters are the
model card's too.) Aliases give the spellings the profile files use (Splitwise's
``llama2-70b``, ``bloom-176b``).

KV capacity
-----------
A decoder stores, per token and per layer, one key and one value vector for each KV head;
under tensor parallelism of degree ``tp`` a GPU holds :math:`\max(1, H_{kv} / tp)` of the
heads (vLLM ``config/model.py``, ``get_num_kv_heads``, lines 1217–1228), so

.. math:: b_{kv} = 2 \cdot L \cdot \max(1, H_{kv}/tp) \cdot d_{head} \cdot \text{bytes}.

vLLM gives the KV cache what is left of its share of one GPU's memory once the weights and
the peak of a profiling forward pass are in (``vllm/v1/worker/gpu_worker.py``,
``determine_available_memory``, lines 332–482; ``vllm/v1/core/kv_cache_utils.py``,
lines 839–854):

.. math:: M = \left\lfloor \frac{u \cdot G - W_{gpu} - R}{b_{kv}} \right\rfloor

with ``G`` the GPU's memory, ``u`` the ``gpu_memory_utilization`` (default 0.9),
:math:`W_{gpu}` the weight bytes one GPU holds and ``R`` the activation peak and other
memory of the profiling run, which only a measurement gives; 1 GiB is the figure used
here. A GPU holds the dense weights divided by ``tp`` and, with expert parallelism over
``ep`` GPUs, the experts divided by ``ep`` (otherwise by ``tp``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schedlab.errors import InstanceError, UnknownNameError

__all__ = [
    "BUILTIN_MODEL_SHAPES",
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

#: Memory of the profiling forward pass and the rest that the KV cache does not get (R).
ACTIVATION_RESERVE = 1.0 * GIB


@dataclass(frozen=True)
class ModelShape:
    """The figures of a decoder model that its cost and memory depend on.

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
    vocab
        Vocabulary size.
    experts, experts_per_token, expert_intermediate
        Mixture of experts: routed experts, experts per token (top-k) and each expert's
        intermediate size (0 for dense models).
    """

    name: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    params: float
    dtype_bytes: int = 2
    vocab: int = 0
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0

    @property
    def weight_bytes(self) -> float:
        """Bytes of all the weights."""
        return self.params * self.dtype_bytes

    @property
    def expert_params(self) -> float:
        """Parameters in the routed experts (gate, up and down projections)."""
        return float(self.layers * self.experts * 3 * self.hidden * self.expert_intermediate)

    def weight_bytes_per_gpu(self, tp: int = 1, ep: int = 1) -> float:
        """Weight bytes one GPU holds: dense weights over ``tp``, experts over ``ep``
        GPUs with expert parallelism (``ep > 1``), else over ``tp``."""
        experts = self.expert_params
        dense = self.params - experts
        return (dense / tp + experts / (ep if ep > 1 else tp)) * self.dtype_bytes


#: Llama-3.1-8B (Meta's model card and config.json).
LLAMA_3_1_8B = ModelShape("meta-llama/Llama-3.1-8B", 32, 32, 8, 128, 4096, 8.03e9, vocab=128_256)


def kv_bytes_per_token(model: ModelShape, tp: int = 1, kv_dtype_bytes: int | None = None) -> int:
    """Bytes of KV cache one token takes on one GPU (module docstring), with elements of
    ``kv_dtype_bytes`` bytes (default: the model's dtype)."""
    heads = max(1, model.kv_heads // tp)
    element = model.dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
    return 2 * model.layers * heads * model.head_dim * element


def kv_token_capacity(
    model: ModelShape,
    gpu_bytes: float,
    utilization: float = 0.9,
    reserve_bytes: float = ACTIVATION_RESERVE,
    *,
    tp: int = 1,
    ep: int = 1,
    kv_dtype_bytes: int | None = None,
) -> int:
    """KV-cache capacity of one GPU in tokens, ``floor((u G - W_gpu - R) / b_kv)``, with
    KV elements of ``kv_dtype_bytes`` bytes (default: the model's dtype).

    Raises
    ------
    InstanceError
        If the weights and reserve leave no room for the cache, ``u`` is not in (0, 1],
        the memory is not a positive finite number, or a degree or size is below 1.
    """
    if not 0 < utilization <= 1:
        raise InstanceError(f"utilization: must be in (0, 1], got {utilization}")
    if not (math.isfinite(gpu_bytes) and gpu_bytes > 0):
        raise InstanceError(f"gpu_bytes: must be a positive finite number, got {gpu_bytes}")
    for name, value in (("tp", tp), ("ep", ep), ("kv_dtype_bytes", kv_dtype_bytes or 1)):
        if value < 1:
            raise InstanceError(f"{name}: must be >= 1, got {value}")
    room = utilization * gpu_bytes - model.weight_bytes_per_gpu(tp, ep) - reserve_bytes
    if room <= 0:
        raise InstanceError(
            f"gpu_bytes: {gpu_bytes / GIB:.1f} GiB at utilization {utilization} leaves no room "
            f"for the KV cache of {model.name} (tp {tp}, ep {ep})"
        )
    return int(room // kv_bytes_per_token(model, tp, kv_dtype_bytes))


#: The models schedlab knows, with the aliases profile files use for them.
BUILTIN_MODEL_SHAPES: tuple[tuple[ModelShape, tuple[str, ...]], ...] = (
    (LLAMA_3_1_8B, ("llama-3.1-8b",)),
    (
        ModelShape("meta-llama/Llama-2-7b-hf", 32, 32, 32, 128, 4096, 6_738_415_616, vocab=32_000),
        ("llama-2-7b", "llama2-7b"),
    ),
    (
        ModelShape(
            "meta-llama/Llama-2-70b-hf", 80, 64, 8, 128, 8192, 68_976_648_192, vocab=32_000
        ),
        ("llama-2-70b", "llama2-70b"),
    ),
    (
        ModelShape("bigscience/bloom", 70, 112, 112, 128, 14336, 176_247_271_424, vocab=250_880),
        ("bloom-176b",),
    ),
    (
        ModelShape("Qwen/Qwen3-32B", 64, 64, 8, 128, 5120, 32.8e9, vocab=151_936),
        ("qwen3-32b",),
    ),
    (
        ModelShape(
            "Qwen/Qwen3-30B-A3B-Instruct-2507",
            48,
            32,
            4,
            128,
            2048,
            30.5e9,
            vocab=151_936,
            experts=128,
            experts_per_token=8,
            expert_intermediate=768,
        ),
        ("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B"),
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
