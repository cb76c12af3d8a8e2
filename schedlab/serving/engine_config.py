"""Limits and behaviours of one continuous-batching engine, as vLLM names them.

The limits follow vLLM (Kwon et al., "Efficient Memory Management for Large Language
Model Serving with PagedAttention", SOSP 2023; engine arguments ``block_size``,
``max_num_seqs``, ``max_num_batched_tokens``); the behaviours are vLLM v1's defaults in
release 0.19.0: prefix caching (``enable_prefix_caching``), the admission gate that
checks a waiting request's whole sequence against the free KV blocks
(``scheduler_reserve_full_isl``, ``vllm/config/scheduler.py`` line 139) and asynchronous
scheduling (``async_scheduling``, the default since 0.14.0) — which this engine models
only when asked, because a deadline-aware policy cannot plan one iteration ahead. A
request holding ``t`` KV tokens occupies ``ceil(t / block_size)`` blocks
(:mod:`schedlab.serving.kv_cache`; ``docs/design.md``, section "Online model").

KV capacity by default. :func:`engine_for` builds the engine a cost model runs on: a
calibrated model carries its GPU deployment (attribute ``deployment``, a
:class:`~schedlab.llm.gpu_deployment.GpuDeployment`), and the engine's KV capacity is
what vLLM's memory profiling would give on it for the engine's own limits; a model that
carries none (the illustrative ``sloweave-default``) keeps the default of
:class:`EngineConfig` (:data:`~schedlab.llm.models.ILLUSTRATIVE_KV_TOKENS`), and the line
:func:`engine_for` returns says which it was. :func:`engine_for` is the one place the
serving KV budget's default is decided: the simulator, the scenarios and the command line
all take it from there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from schedlab.errors import ServingError
from schedlab.llm.gpu_deployment import GpuDeployment
from schedlab.llm.models import ILLUSTRATIVE_KV_TOKENS

__all__ = ["BLOCK_SIZES", "EngineConfig", "engine_for"]

#: The KV block sizes vLLM accepts (``BlockSize`` in ``vllm/config/cache.py``, line 22).
BLOCK_SIZES: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class EngineConfig:
    """Limits and behaviours of one serving engine.

    Attributes
    ----------
    kv_tokens
        The KV budget (KV-cache capacity) in tokens; the engine has ``kv_tokens //
        block_size`` blocks. The default,
        :data:`~schedlab.llm.models.ILLUSTRATIVE_KV_TOKENS` (262,144 tokens, 32 GiB of KV
        cache for Llama-3.1-8B), describes no real GPU: it is the illustrative engine's,
        and :func:`engine_for` replaces it by a calibrated cost model's deployment.
    block_size
        Tokens per KV block, one of :data:`BLOCK_SIZES` (vLLM's default is 16).
    max_num_seqs
        Most requests admitted at once (prefilling or decoding).
    max_num_batched_tokens
        Most tokens (one per decode plus every prefill-chunk token) in one iteration.
        Policies that never split a prompt may exceed it with a single whole prompt, as
        vLLM raises the budget to the model length when chunked prefill is off.
    prefix_caching
        Freed full KV blocks stay cached until evicted, so a request resumed after a
        preemption recomputes only its evicted blocks (vLLM's ``enable_prefix_caching``).
    reserve_full_prompt
        A waiting request is admitted only if its whole sequence fits in the free blocks
        (vLLM's ``scheduler_reserve_full_isl``); otherwise its first chunk suffices.
    async_scheduling
        vLLM's asynchronous scheduling: the next batch is planned while the current one
        runs, so new arrivals and the seats and blocks of finished requests reach it one
        iteration late (:mod:`schedlab.serving.engine`).
    """

    kv_tokens: int = ILLUSTRATIVE_KV_TOKENS
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    prefix_caching: bool = True
    reserve_full_prompt: bool = True
    async_scheduling: bool = False

    def __post_init__(self) -> None:
        for field in (
            "kv_tokens",
            "block_size",
            "max_num_seqs",
            "max_num_batched_tokens",
        ):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ServingError(f"engine.{field}: must be an integer >= 1, got {value!r}")
        for field in ("prefix_caching", "reserve_full_prompt", "async_scheduling"):
            if not isinstance(getattr(self, field), bool):
                raise ServingError(
                    f"engine.{field}: must be true or false, got {getattr(self, field)!r}"
                )
        if self.block_size not in BLOCK_SIZES:
            sizes = ", ".join(map(str, BLOCK_SIZES))
            raise ServingError(
                f"engine.block_size: vLLM takes {sizes} tokens per block, got {self.block_size}"
            )
        if self.kv_tokens < self.block_size:
            raise ServingError(
                f"engine.kv_tokens: must hold at least one block of "
                f"{self.block_size} tokens, got {self.kv_tokens}"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ServingError(
                "engine.max_num_batched_tokens: must be >= max_num_seqs "
                f"({self.max_num_seqs}) so every running decode fits, got "
                f"{self.max_num_batched_tokens}"
            )

    @property
    def total_blocks(self) -> int:
        """Number of KV blocks, ``floor(kv_tokens / block_size)``."""
        return self.kv_tokens // self.block_size

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` KV tokens: ``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size)


def engine_for(cost_model: Any, **given: Any) -> tuple[EngineConfig, str]:
    """The engine of the settings ``given`` (:class:`EngineConfig`'s fields; ``None``:
    its default) on which ``cost_model`` runs, and one line saying where its KV capacity
    came from (module docstring): given, the cost model's deployment, or the literal
    default.

    Raises
    ------
    ServingError
        If a setting is out of its domain.
    InstanceError
        If the deployment's memory leaves no room for a KV cache at these limits.
    """
    settings = {key: value for key, value in given.items() if value is not None}
    tokens = settings.pop("kv_tokens", None)
    engine = EngineConfig(**settings)
    if tokens is not None:
        return (
            dataclasses.replace(engine, kv_tokens=tokens),
            f"KV capacity {tokens:,} tokens (given)",
        )
    deployment = getattr(cost_model, "deployment", None)
    if isinstance(deployment, GpuDeployment):
        tokens, note = deployment.kv_tokens(
            engine.max_num_batched_tokens, engine.max_num_seqs, engine.block_size
        )
        return dataclasses.replace(engine, kv_tokens=tokens), note
    name = getattr(cost_model, "name", "?")
    return engine, (
        f"KV capacity {engine.kv_tokens:,} tokens: the illustrative engine's literal "
        f"default (cost model {name!r} describes no GPU deployment; set it with --kv-tokens)"
    )
