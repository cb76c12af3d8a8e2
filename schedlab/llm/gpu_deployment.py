"""The GPU deployment a calibrated cost model describes, and the KV capacity it implies.

A :class:`GpuDeployment` is what vLLM's KV-cache sizing needs besides the engine's limits:
the model, one GPU's memory (with where the figure came from), the tensor- and
expert-parallel degrees, the KV cache's bytes per element, the block size and the
``gpu_memory_utilization``. :meth:`GpuDeployment.kv_tokens` applies
:func:`schedlab.llm.models.kv_budget` for given ``max_num_batched_tokens`` and
``max_num_seqs`` (the profiling run depends on them) and keeps one block back, vLLM's
null block (``vllm/v1/core/block_pool.py`` lines 175–176).

JSON form (the ``deployment`` object of a ``profile-grid`` cost model)::

    {"model": "meta-llama/Llama-3.1-8B", "gpu": "RTX4090",
     "gpu_memory_bytes": 25250627584, "memory_source": "...", "sms": 128,
     "tp": 1, "ep": 1, "kv_dtype_bytes": 2, "block_size": 16,
     "gpu_memory_utilization": 0.9}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from schedlab.errors import FormatError, InstanceError
from schedlab.json_files import json_integer
from schedlab.llm.models import NON_TORCH_MEASURED_BYTES, KvBudget, get_model_shape, kv_budget

__all__ = ["MAX_GPU_MEMORY_BYTES", "GpuDeployment"]

#: The most memory a GPU may be given (bytes): 16 TiB, 55 times the 288 GB of the largest
#: GPU (B300), so only a wrong value passes it.
MAX_GPU_MEMORY_BYTES = 2**44

#: The integers of the JSON form and the most each may be: :data:`MAX_GPU_MEMORY_BYTES`,
#: 1,024 GPUs of tensor or expert parallelism, 8 bytes a KV element, 65,536 tokens a
#: block or SMs a GPU: only a wrong value passes one.
_INTS = {
    "gpu_memory_bytes": MAX_GPU_MEMORY_BYTES,
    "tp": 1024,
    "ep": 1024,
    "kv_dtype_bytes": 8,
    "block_size": 2**16,
    "sms": 2**16,
}


@dataclass(frozen=True)
class GpuDeployment:
    """One engine's GPUs, as vLLM sizes their KV cache (module docstring).

    Attributes
    ----------
    model
        The served model (a name :func:`~schedlab.llm.models.get_model_shape` knows).
    gpu
        The GPU's short name.
    gpu_memory_bytes, memory_source
        One GPU's memory and where the figure came from.
    sms
        Its streaming multiprocessors (``None``: unknown).
    tp, ep
        Tensor- and expert-parallel degrees.
    kv_dtype_bytes
        Bytes per KV element.
    block_size
        Tokens per KV block.
    gpu_memory_utilization
        vLLM's ``u``.
    """

    model: str
    gpu: str
    gpu_memory_bytes: int
    memory_source: str
    sms: int | None = None
    tp: int = 1
    ep: int = 1
    kv_dtype_bytes: int = 2
    block_size: int = 16
    gpu_memory_utilization: float = 0.9

    def budget(
        self, max_num_batched_tokens: int, max_num_seqs: int, non_torch_bytes: float = 0.0
    ) -> KvBudget:
        """The terms of the KV sizing (:func:`~schedlab.llm.models.kv_budget`), with
        ``non_torch_bytes`` outside PyTorch."""
        return kv_budget(
            get_model_shape(self.model),
            self.gpu_memory_bytes,
            self.gpu_memory_utilization,
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            tp=self.tp,
            ep=self.ep,
            kv_dtype_bytes=self.kv_dtype_bytes,
            sms=self.sms,
            non_torch_bytes=non_torch_bytes,
        )

    def kv_band(
        self, max_num_batched_tokens: int, max_num_seqs: int, block_size: int | None = None
    ) -> tuple[int, int]:
        """Usable KV tokens of one GPU at the low and high ends of the evidence on the
        memory outside PyTorch: with the one measurement,
        :data:`~schedlab.llm.models.NON_TORCH_MEASURED_BYTES`, and with none (an upper
        bound; :meth:`kv_tokens` is this end)."""
        block = self.block_size if block_size is None else block_size
        high = (self.budget(max_num_batched_tokens, max_num_seqs).blocks(block) - 1) * block
        try:
            budget = self.budget(max_num_batched_tokens, max_num_seqs, NON_TORCH_MEASURED_BYTES)
        except InstanceError:  # no room left at that end: one block, the least that runs
            return block, high
        return (max(budget.blocks(block), 2) - 1) * block, high

    def kv_tokens(
        self, max_num_batched_tokens: int, max_num_seqs: int, block_size: int | None = None
    ) -> tuple[int, str]:
        """Usable KV tokens of one GPU, ``(blocks - 1) * block_size``, and a line saying
        where the figure came from (``block_size``: default the deployment's).

        Raises
        ------
        InstanceError
            If the weights and the profiling run leave less than two blocks.
        """
        block = self.block_size if block_size is None else block_size
        budget = self.budget(max_num_batched_tokens, max_num_seqs)
        blocks = budget.blocks(block)
        tokens = (blocks - 1) * block
        low, _ = self.kv_band(max_num_batched_tokens, max_num_seqs, block)
        note = (
            f"KV capacity {tokens:,} tokens at most: vLLM 0.19's memory profiling of "
            f"{self.model} on {self.gpu} ({self.gpu_memory_bytes / 2**30:.2f} GiB, "
            f"{self.memory_source}), tp {self.tp}, ep {self.ep}, utilization "
            f"{self.gpu_memory_utilization:g}, max_num_batched_tokens {max_num_batched_tokens}, "
            f"max_num_seqs {max_num_seqs}: {blocks:,} blocks of {block}, one kept as the null "
            f"block, with nothing outside PyTorch; {low:,} tokens with the "
            f"{NON_TORCH_MEASURED_BYTES / 2**20:.0f} MiB measured there once (RTX 4090): "
            "not known better than that band (schedlab.llm.models.kv_budget; "
            "docs/kv-capacity.md)"
        )
        return tokens, note

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (module docstring)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> GpuDeployment:
        """The deployment of a JSON form; errors name ``where`` and the field.

        Raises
        ------
        FormatError
            If a field is missing, unknown or of the wrong kind.
        """
        if not isinstance(data, Mapping):
            raise FormatError(f"{where}: expected an object")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise FormatError(f"{where}: unknown key {unknown[0]!r}")
        for key in ("model", "gpu", "gpu_memory_bytes", "memory_source"):
            if key not in data:
                raise FormatError(f"{where}: missing {key!r}")
        for key in ("model", "gpu", "memory_source"):
            if not isinstance(data[key], str):
                raise FormatError(f"{where}: {key}: expected a string, got {data[key]!r}")
        for key, most in _INTS.items():
            value = data.get(key, 1)
            if key != "sms" or value is not None:
                json_integer(value, f"{where}: {key}", 1, most)
        utilization = data.get("gpu_memory_utilization", 0.9)
        if not (
            isinstance(utilization, int | float)
            and not isinstance(utilization, bool)
            and math.isfinite(utilization)
            and 0 < utilization <= 1
        ):
            raise FormatError(
                f"{where}: gpu_memory_utilization: expected a number in (0, 1], "
                f"got {utilization!r}"
            )
        return cls(**{**data, "gpu_memory_utilization": float(utilization)})
