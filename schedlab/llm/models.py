r"""Facts about the served models: their shapes, KV bytes per token and KV capacity.

Shapes
------
Each :class:`ModelShape` holds the figures of a decoder model that per-layer profiles are
scaled by (the layer count), that collectives move (the hidden size) and that the
KV-capacity formula needs (weight bytes, KV bytes per token, the widths of the profiling
forward pass); :data:`MODEL_SHAPES` holds them by Hugging Face name and
:func:`register_model_shape` adds one. Figures are those of each model's published
``config.json`` and model card:

==============================  ======  =====  ===  ====  ======  ======  ========  ==============
model                           layers  heads  KV   head  hidden  vocab   experts   params
==============================  ======  =====  ===  ====  ======  ======  ========  ==============
meta-llama/Llama-3.1-8B         32      32     8    128   4096    128256  -         8.03e9
meta-llama/Llama-2-7b-hf        32      32     32   128   4096    32000   -         6,738,415,616
meta-llama/Llama-2-70b-hf       80      64     8    128   8192    32000   -         68,976,648,192
bigscience/bloom (176B)         70      112    112  128   14336   250880  -         176.2e9
Qwen/Qwen3-32B                  64      64     8    128   5120    151936  -         32,762,123,264
Qwen/Qwen3-30B-A3B-Inst.-2507   48      32     4    128   2048    151936  8 of 128  30,532,122,624
==============================  ======  =====  ===  ====  ======  ======  ========  ==============

and, for the profiling pass of the KV-capacity formula, the MLP's intermediate size and
the rotary embedding's positions (``max_position_embeddings``): Llama-3.1-8B 14,336 and
131,072; Llama-2-7B 11,008 and 4,096; Llama-2-70B 28,672 and 4,096; BLOOM 57,344 and none
(ALiBi); Qwen3-32B 25,600 and 40,960; Qwen3-30B-A3B no dense MLP (every layer an expert
block of 128 experts of intermediate size 768) and 262,144. Qwen3-30B-A3B's 3.3e9
*active* parameters are the model card's too. The Qwen3 counts are the sum of the weight
matrices of their ``config.json``, untied embeddings and q/k norms included;
Llama-3.1-8B's is its model card's rounded figure, the others' their exact counts.
Aliases give the spellings the profile files
use (Splitwise's ``llama2-70b``, ``bloom-176b``).

KV capacity
-----------
A decoder stores, per token and per layer, one key and one value vector for each KV head;
under tensor parallelism of degree ``tp`` a GPU holds :math:`\max(1, H_{kv} / tp)` of the
heads (vLLM ``config/model.py``, ``get_num_kv_heads``, lines 1217–1228), so

.. math:: b_{kv} = 2 \cdot L \cdot \max(1, H_{kv}/tp) \cdot d_{head} \cdot \text{bytes}.

vLLM 0.19 sizes the KV cache by profiling (``vllm/v1/worker/gpu_worker.py``,
``determine_available_memory``, lines 364–421; ``vllm/utils/mem_utils.py``,
``memory_profiling``, lines 197–300):

.. math::

    A = \lceil u \cdot G \rceil - W_{gpu} - P - N, \qquad
    \text{blocks} = \left\lfloor \frac{A}{\text{block} \cdot b_{kv}} \right\rfloor

(``vllm/v1/worker/utils.py`` ``request_memory`` lines 403–423 for :math:`\lceil uG \rceil`;
``vllm/v1/core/kv_cache_utils.py`` ``get_num_blocks`` lines 839–854 for the blocks) with

* ``G`` the memory CUDA reports for the GPU (``mem_get_info``'s total) and ``u`` the
  ``gpu_memory_utilization`` (default 0.9);
* :math:`W_{gpu}` what loading the model allocated on one GPU
  (``model_memory_usage``): the weights it holds — dense weights over ``tp``, experts over
  ``ep`` with expert parallelism, else over ``tp`` — and the rotary embedding's cos/sin
  cache, :math:`\text{positions} \cdot d_{head}` float32 values
  (``vllm/model_executor/layers/rotary_embedding/base.py``, ``_compute_cos_sin_cache``,
  lines 83–92);
* ``P`` the rise of PyTorch's allocation peak during the profiling run
  (:func:`profile_peak_bytes`);
* ``N`` the rise of memory outside PyTorch from the worker's creation to the end of the
  profiling run (``mem_utils.py`` lines 249–274, ``non_torch_increase``: the CUDA
  driver's memory less PyTorch's reserved pool): the code of the kernels loaded lazily on
  their first use in the profiling run, the cuBLAS/cuBLASLt workspaces, NCCL and custom
  all-reduce buffers with tensor parallelism. No formula gives the kernels' code, so
  ``N`` is evidence, not derivation: 0 by default (an upper bound on the blocks), and
  :data:`NON_TORCH_MEASURED_BYTES`, the one measurement, for the band of
  :meth:`schedlab.llm.gpu_deployment.GpuDeployment.kv_band`.

CUDA-graph memory is not subtracted: 0.19 counts it only when
``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is set (``vllm/envs.py`` lines 1654–1656,
default off; ``gpu_worker.py`` lines 395–399).

The profiling run (``vllm/v1/worker/gpu_model_runner.py``, ``profile_run``, lines
5721–5795) is one forward pass of :math:`B` = ``max_num_batched_tokens`` tokens spread over
:math:`R = \min(B, S)` requests, :math:`S` = ``max_num_seqs`` (``_dummy_run`` lines
5260–5290), then the sampler on the last token of each, with top-k and top-p on
(``_dummy_sampler_run``, lines 5556–5606). With :math:`b` bytes per element, hidden size
:math:`h`, vocabulary :math:`V`:

* *forward*: the residual stream and the normalised input, :math:`2Bhb`, plus the larger
  of the attention stage, :math:`B (H + 2H_{kv}) d/tp \cdot b` for q, k, v and
  :math:`B H d / tp \cdot b` for its output, and the MLP stage: a dense MLP's gate/up
  output and activation, :math:`3 B I / tp \cdot b`; an expert block's router logits
  :math:`B E b`, its shared buffer for the gate/up output and the down projection,
  :math:`B k \max(2 I_e / tp, h) b`, its activation :math:`B k I_e / tp \cdot b` and
  output :math:`B h b` (``vllm/model_executor/layers/fused_moe/fused_moe.py`` lines
  1725–1741);
* *sampler*: the hidden states :math:`(B + 2R) h b` (the pass's output, the last tokens
  gathered, and the random stand-in of ``_dummy_sampler_run``), the logits :math:`R V b`,
  their float32 copy (``vllm/v1/sample/sampler.py`` line 90), the float32 probabilities
  and exponential draws (``vllm/v1/sample/ops/topk_topp_sampler.py``, ``forward_native``
  and ``random_sample``), :math:`3 \cdot 4 R V` together, and the Triton top-k/top-p
  kernel's buffer of :math:`\min(2^{\lceil \log_2 \min(R, m) \rceil}, m)` float32 rows of
  :math:`V`, ``m`` the GPU's streaming multiprocessors (``topk_topp_triton.py`` lines
  1010–1019; the rows are taken as :math:`R` where ``m`` is unknown; below 8 rows the
  small PyTorch path runs and is counted alike).

:math:`P` is the larger of the two stages. The worked figures and the error against every
record of vLLM's blocks are in ``docs/kv-capacity.md`` (``benchmarks/kv_capacity.py``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from schedlab.errors import InstanceError, UnknownNameError

__all__ = [
    "BUILTIN_MODEL_SHAPES",
    "GIB",
    "LLAMA_3_1_8B",
    "MODEL_SHAPES",
    "NON_TORCH_MEASURED_BYTES",
    "KvBudget",
    "ModelShape",
    "get_model_shape",
    "kv_budget",
    "kv_bytes_per_token",
    "kv_token_capacity",
    "profile_peak_bytes",
    "register_model_shape",
]

GIB = 2**30

#: ``N`` as measured once: the run ``vllm-0.19.0_RTX4090_Llama-3.1-8B`` (vLLM 0.19.0,
#: Llama-3.1-8B, RTX 4090, tp 1) records 2,588 blocks where :func:`kv_budget` with ``N = 0``
#: gives 2,885 at its recorded GPU memory: 297 blocks of 16 tokens at 131,072 bytes a token
#: (``docs/kv-capacity.md``, ``benchmarks/kv_capacity.py``;
#: ``tests/llm/test_kv_capacity.py`` derives it again from the run).
NON_TORCH_MEASURED_BYTES = 297 * 16 * 131_072


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
    intermediate
        A dense MLP's intermediate size (0: no dense MLP, every layer an expert block).
    max_positions
        Positions of the rotary embedding's cos/sin cache, ``max_position_embeddings``
        (0: no rotary embedding).
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
    intermediate: int = 0
    max_positions: int = 0

    @property
    def weight_bytes(self) -> float:
        """Bytes of all the weights."""
        return self.params * self.dtype_bytes

    @property
    def expert_params(self) -> float:
        """Parameters in the routed experts (gate, up and down projections)."""
        return float(self.layers * self.experts * 3 * self.hidden * self.expert_intermediate)

    def weight_bytes_per_gpu(self, tp: int = 1, ep: int = 1) -> float:
        """Bytes loading the model allocates on one GPU (module docstring): dense weights
        over ``tp``, experts over ``ep`` GPUs with expert parallelism (``ep > 1``), else
        over ``tp``, and the rotary cos/sin cache of ``max_positions x head_dim`` float32
        values."""
        experts = self.expert_params
        dense = self.params - experts
        rotary = self.max_positions * self.head_dim * 4
        return (dense / tp + experts / (ep if ep > 1 else tp)) * self.dtype_bytes + rotary


#: Llama-3.1-8B (Meta's model card and config.json).
LLAMA_3_1_8B = ModelShape(
    "meta-llama/Llama-3.1-8B",
    32,
    32,
    8,
    128,
    4096,
    8.03e9,
    vocab=128_256,
    intermediate=14_336,
    max_positions=131_072,
)


def kv_bytes_per_token(model: ModelShape, tp: int = 1, kv_dtype_bytes: int | None = None) -> int:
    """Bytes of KV cache one token takes on one GPU (module docstring), with elements of
    ``kv_dtype_bytes`` bytes (default: the model's dtype)."""
    heads = max(1, model.kv_heads // tp)
    element = model.dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
    return 2 * model.layers * heads * model.head_dim * element


#: The default KV budget ``M`` of the offline backlogs, in tokens: a round illustrative
#: figure, Llama-3.1-8B (bf16, 128 KiB of KV per token) on a 24 GiB GPU (NVIDIA L4 /
#: RTX 4090 class) at vLLM's default gpu_memory_utilization 0.9, 1 GiB reserved for
#: activations: ``floor((0.9 * 24 GiB - 16.06 GB - 1 GiB) / 128 KiB)``. (vLLM's own
#: sizing of a real card, :func:`kv_budget`, gives less: ``docs/kv-capacity.md``.)
BACKLOG_KV_TOKENS = int(
    (0.9 * 24 * GIB - LLAMA_3_1_8B.weight_bytes - GIB) // kv_bytes_per_token(LLAMA_3_1_8B)
)

#: The KV capacity of the illustrative serving engine, in tokens: 32 GiB of KV cache for
#: Llama-3.1-8B (128 KiB per token: 32 layers x 8 KV heads x 128 dims x 2 (K, V) x 2
#: bytes), 262,144 tokens. It describes no real GPU; a calibrated cost model's
#: deployment replaces it (:func:`schedlab.serving.engine_config.engine_for`).
ILLUSTRATIVE_KV_TOKENS = 32 * GIB // kv_bytes_per_token(LLAMA_3_1_8B)


@dataclass(frozen=True)
class KvBudget:
    """The terms of vLLM's KV-cache sizing for one GPU (module docstring), in bytes.

    Attributes
    ----------
    requested
        :math:`\\lceil u G \\rceil`.
    weights
        :math:`W_{gpu}`.
    forward_peak, sampler_peak
        The two stages of the profiling run; ``P`` is the larger.
    non_torch
        ``N``.
    bytes_per_token
        :math:`b_{kv}`.
    """

    requested: float
    weights: float
    forward_peak: float
    sampler_peak: float
    non_torch: float
    bytes_per_token: int

    @property
    def peak(self) -> float:
        """``P``: the larger stage of the profiling run."""
        return max(self.forward_peak, self.sampler_peak)

    @property
    def available(self) -> float:
        """``A``: bytes left for the KV cache."""
        return self.requested - self.weights - self.peak - self.non_torch

    @property
    def tokens(self) -> int:
        """KV tokens ``A`` holds, :math:`\\lfloor A / b_{kv} \\rfloor`."""
        return int(self.available // self.bytes_per_token)

    def blocks(self, block_size: int) -> int:
        """vLLM's ``num_gpu_blocks``,
        :math:`\\lfloor A / (\\text{block} \\cdot b_{kv}) \\rfloor`."""
        return int(self.available // (block_size * self.bytes_per_token))


def profile_peak_bytes(
    model: ModelShape,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    *,
    tp: int = 1,
    sms: int | None = None,
) -> tuple[float, float]:
    """The PyTorch allocations of vLLM's profiling run on one GPU, ``(forward, sampler)``
    in bytes (module docstring): a forward pass of ``max_num_batched_tokens`` tokens and
    the sampler on ``min(max_num_batched_tokens, max_num_seqs)`` rows, on a GPU of ``sms``
    streaming multiprocessors (``None``: unknown)."""
    b, h, d = model.dtype_bytes, model.hidden, model.head_dim
    tokens, rows = max_num_batched_tokens, min(max_num_batched_tokens, max_num_seqs)
    attention = tokens * (model.heads + 2 * model.kv_heads) * d * b / tp
    attention += tokens * model.heads * d * b / tp
    mlp = 3.0 * tokens * model.intermediate * b / tp
    if model.experts:
        k, width = model.experts_per_token, model.expert_intermediate / tp
        mlp = tokens * b * (model.experts + k * max(2 * width, h) + k * width + h)
    forward = 2.0 * tokens * h * b + max(attention, mlp)
    programs = rows if sms is None else min(rows, sms)
    buffer_rows = 1 << max(0, programs - 1).bit_length()
    if sms is not None:
        buffer_rows = min(buffer_rows, sms)
    vocab = model.vocab
    sampler = (tokens + 2 * rows) * h * b + rows * vocab * (b + 12) + 4.0 * buffer_rows * vocab
    return float(forward), float(sampler)


def kv_budget(
    model: ModelShape,
    gpu_bytes: float,
    utilization: float = 0.9,
    *,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    tp: int = 1,
    ep: int = 1,
    kv_dtype_bytes: int | None = None,
    sms: int | None = None,
    non_torch_bytes: float = 0.0,
) -> KvBudget:
    """The terms of vLLM's KV-cache sizing on one GPU of ``gpu_bytes`` (module docstring).

    Raises
    ------
    InstanceError
        If the weights and the profiling run leave no room for the cache, ``u`` is not in
        (0, 1], the memory is not a positive finite number, or a degree, size or limit is
        below 1.
    """
    if not 0 < utilization <= 1:
        raise InstanceError(f"utilization: must be in (0, 1], got {utilization}")
    if not (math.isfinite(gpu_bytes) and gpu_bytes > 0):
        raise InstanceError(f"gpu_bytes: must be a positive finite number, got {gpu_bytes}")
    for name, value in (
        ("tp", tp),
        ("ep", ep),
        ("kv_dtype_bytes", kv_dtype_bytes),
        ("max_num_batched_tokens", max_num_batched_tokens),
        ("max_num_seqs", max_num_seqs),
        ("sms", sms),
    ):
        if value is not None and value < 1:
            raise InstanceError(f"{name}: must be >= 1, got {value}")
    if not (math.isfinite(non_torch_bytes) and non_torch_bytes >= 0):
        raise InstanceError(f"non_torch_bytes: must be >= 0, got {non_torch_bytes}")
    forward, sampler = profile_peak_bytes(
        model, max_num_batched_tokens, max_num_seqs, tp=tp, sms=sms
    )
    budget = KvBudget(
        float(math.ceil(utilization * gpu_bytes)),
        model.weight_bytes_per_gpu(tp, ep),
        forward,
        sampler,
        float(non_torch_bytes),
        kv_bytes_per_token(model, tp, kv_dtype_bytes),
    )
    if budget.tokens < 1:
        raise InstanceError(
            f"gpu_bytes: {gpu_bytes / GIB:.1f} GiB at utilization {utilization} leaves no room "
            f"for the KV cache of {model.name} (tp {tp}, ep {ep})"
        )
    return budget


def kv_token_capacity(
    model: ModelShape,
    gpu_bytes: float,
    utilization: float = 0.9,
    reserve_bytes: float | None = None,
    *,
    tp: int = 1,
    ep: int = 1,
    kv_dtype_bytes: int | None = None,
    max_num_batched_tokens: int = 2048,
    max_num_seqs: int = 256,
    sms: int | None = None,
) -> int:
    """KV-cache capacity of one GPU in tokens, :math:`\\lfloor A / b_{kv} \\rfloor`
    (:func:`kv_budget`), with KV elements of ``kv_dtype_bytes`` bytes (default: the
    model's dtype). ``reserve_bytes`` given stands for ``P + N`` (the profiling run and
    the memory outside PyTorch); by default ``P`` is derived and ``N`` is 0. The limits
    default to vLLM 0.19's for an API server on a GPU under 70 GiB
    (``vllm/engine/arg_utils.py`` lines 2063–2072).

    Raises
    ------
    InstanceError
        As :func:`kv_budget`.
    """
    budget = kv_budget(
        model,
        gpu_bytes,
        utilization,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        tp=tp,
        ep=ep,
        kv_dtype_bytes=kv_dtype_bytes,
        sms=sms,
    )
    if reserve_bytes is not None:
        budget = dataclasses.replace(
            budget, forward_peak=float(reserve_bytes), sampler_peak=0.0, non_torch=0.0
        )
        if budget.tokens < 1:
            raise InstanceError(
                f"gpu_bytes: {gpu_bytes / GIB:.1f} GiB at utilization {utilization} with "
                f"{reserve_bytes / GIB:.2f} GiB reserved leaves no room for the KV cache of "
                f"{model.name} (tp {tp}, ep {ep})"
            )
    return budget.tokens


#: The models schedlab knows, with the aliases profile files use for them.
BUILTIN_MODEL_SHAPES: tuple[tuple[ModelShape, tuple[str, ...]], ...] = (
    (LLAMA_3_1_8B, ("llama-3.1-8b",)),
    (
        ModelShape(
            "meta-llama/Llama-2-7b-hf",
            32,
            32,
            32,
            128,
            4096,
            6_738_415_616,
            vocab=32_000,
            intermediate=11_008,
            max_positions=4096,
        ),
        ("llama-2-7b", "llama2-7b"),
    ),
    (
        ModelShape(
            "meta-llama/Llama-2-70b-hf",
            80,
            64,
            8,
            128,
            8192,
            68_976_648_192,
            vocab=32_000,
            intermediate=28_672,
            max_positions=4096,
        ),
        ("llama-2-70b", "llama2-70b"),
    ),
    (
        ModelShape(
            "bigscience/bloom",
            70,
            112,
            112,
            128,
            14336,
            176_247_271_424,
            vocab=250_880,
            intermediate=57_344,
        ),
        ("bloom-176b",),
    ),
    (
        ModelShape(
            "Qwen/Qwen3-32B",
            64,
            64,
            8,
            128,
            5120,
            32_762_123_264,
            vocab=151_936,
            intermediate=25_600,
            max_positions=40_960,
        ),
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
            30_532_122_624,
            vocab=151_936,
            experts=128,
            experts_per_token=8,
            expert_intermediate=768,
            max_positions=262_144,
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
