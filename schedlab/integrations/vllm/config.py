"""vLLM's own scheduler, built from an :class:`~schedlab.serving.engine_config.EngineConfig`.

Each field of the engine configuration maps onto one field of vLLM's configuration
(release 0.19.0; paths below are in its source tree), and :func:`config_mapping` lists
the pairs so that a run can print them:

==========================  =================================================  ==========
schedlab                    vLLM                                               value
==========================  =================================================  ==========
``kv_tokens``      ``cache_config.num_gpu_blocks``                    blocks + 1
``block_size``              ``cache_config.block_size``                        same
``max_num_seqs``            ``scheduler_config.max_num_seqs``                  same
``max_num_batched_tokens``  ``scheduler_config.max_num_batched_tokens``        same
``prefix_caching``          ``cache_config.enable_prefix_caching``             same
``reserve_full_prompt``     ``scheduler_config.scheduler_reserve_full_isl``    same
``async_scheduling``        ``scheduler_config.async_scheduling``, and the     same
                            ``AsyncScheduler`` class
(chunked prefill)           ``scheduler_config.enable_chunked_prefill``        on
==========================  =================================================  ==========

vLLM keeps block 0 as its null block and never hands it out
(``vllm/v1/core/block_pool.py``, ``BlockPool.__init__``), so ``total_blocks`` usable
blocks are ``total_blocks + 1`` of vLLM's. Chunked prefill stays on (vLLM's default,
``enable_chunked_prefill``, ``vllm/config/scheduler.py``), as the ``vllm`` policy of
:mod:`schedlab.serving.policies` assumes.

The model vLLM is configured with is only a ``config.json`` in a local folder: the
scheduler reads the maximum model length and whether the model is an encoder-decoder
or multimodal one from it, and nothing loads weights or a tokenizer
(``skip_tokenizer_init``). The folder shipped beside this module describes a small
decoder-only model whose positions reach 2**20 tokens; a user may give their own
folder. The hub is never asked (``HF_HUB_OFFLINE`` is set before vLLM is imported).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from schedlab.errors import ServingError
from schedlab.integrations.vllm.release import ANY_VERSION_ENV, SUPPORTED_VERSION, require_vllm
from schedlab.serving.engine_config import EngineConfig

__all__ = [
    "ANY_VERSION_ENV",
    "MODEL_DIR",
    "SUPPORTED_VERSION",
    "VllmSetup",
    "build_scheduler",
    "config_mapping",
    "require_vllm",
]

#: The model folder used when none is given: a ``config.json`` only.
MODEL_DIR = Path(str(files("schedlab.integrations.vllm") / "model"))


def config_mapping(config: EngineConfig) -> list[tuple[str, str, Any]]:
    """``(schedlab field, vLLM field, value given to vLLM)`` for each engine setting;
    chunked prefill is always on (the ``vllm`` policy's rule, and vLLM's default)."""
    return [
        ("kv_tokens", "cache_config.num_gpu_blocks", config.total_blocks + 1),
        ("block_size", "cache_config.block_size", config.block_size),
        ("max_num_seqs", "scheduler_config.max_num_seqs", config.max_num_seqs),
        (
            "max_num_batched_tokens",
            "scheduler_config.max_num_batched_tokens",
            config.max_num_batched_tokens,
        ),
        ("prefix_caching", "cache_config.enable_prefix_caching", config.prefix_caching),
        (
            "reserve_full_prompt",
            "scheduler_config.scheduler_reserve_full_isl",
            config.reserve_full_prompt,
        ),
        ("async_scheduling", "scheduler_config.async_scheduling", config.async_scheduling),
        ("chunked prefill", "scheduler_config.enable_chunked_prefill", True),
    ]


@dataclass(frozen=True)
class VllmSetup:
    """What builds one vLLM scheduler: the engine settings and the model folder.

    Attributes
    ----------
    engine
        The engine's limits and behaviours.
    model_dir
        A folder holding the model's ``config.json`` (default :data:`MODEL_DIR`).
    policy
        ``vllm`` (vLLM's own ``Scheduler``, or ``AsyncScheduler``), or a policy of
        :func:`~schedlab.integrations.vllm.sloweave.vllm_policies` (``SLOWeaveScheduler``,
        configured by the caller).
    """

    engine: EngineConfig
    model_dir: str | None = None
    policy: str = "vllm"

    def folder(self) -> Path:
        """The model folder, checked: it must hold a readable ``config.json``."""
        folder = MODEL_DIR if self.model_dir is None else Path(self.model_dir)
        path = folder / "config.json"
        if not path.is_file():
            raise ServingError(f"engine vllm: model folder {str(folder)!r} has no config.json")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ServingError(f"engine vllm: {path}: unreadable config.json ({error})") from None
        if not isinstance(data, dict):
            raise ServingError(f"engine vllm: {path}: config.json must hold an object")
        return folder


@lru_cache(maxsize=4)
def _model_config(folder: str) -> Any:
    """vLLM's model configuration of ``folder`` (cached: it takes seconds to build)."""
    from vllm.config import ModelConfig

    try:
        model = ModelConfig(model=folder, skip_tokenizer_init=True, dtype="bfloat16")
    except Exception as error:  # vLLM raises many kinds on a config it cannot read
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ServingError(f"engine vllm: model folder {folder!r}: {message}") from None
    if model.is_encoder_decoder or model.is_multimodal_model:
        raise ServingError(
            f"engine vllm: model folder {folder!r} describes an encoder-decoder or "
            "multimodal model; the integration maps decoder-only text models"
        )
    return model


def build_scheduler(setup: VllmSetup, planning: Mapping[str, Any] | None = None) -> Any:
    """A fresh vLLM scheduler (``AsyncScheduler`` under asynchronous scheduling, or
    ``SLOWeaveScheduler`` for a SLOWeave policy, planning with ``planning``: the arguments
    of its ``configure``) of ``setup``'s engine settings, with one full-attention KV cache
    group.

    Raises
    ------
    ServingError
        If vLLM is missing or of another release, or the model folder is unusable.
    """
    require_vllm()
    import torch
    from vllm.config import CacheConfig, DeviceConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    config = setup.engine
    model = _model_config(str(setup.folder()))
    blocks = config.total_blocks + 1  # vLLM's null block
    scheduler_config = SchedulerConfig(
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_model_len=model.max_model_len,
        is_encoder_decoder=False,
        enable_chunked_prefill=True,
        async_scheduling=config.async_scheduling,
        scheduler_reserve_full_isl=config.reserve_full_prompt,
    )
    cache_config = CacheConfig(
        block_size=config.block_size, enable_prefix_caching=config.prefix_caching
    )
    cache_config.num_gpu_blocks = blocks
    vllm_config = VllmConfig(
        model_config=model,
        cache_config=cache_config,
        scheduler_config=scheduler_config,
        device_config=DeviceConfig(device="cpu"),
    )
    spec = FullAttentionSpec(
        block_size=config.block_size, num_kv_heads=1, head_size=64, dtype=torch.bfloat16
    )
    kv_cache_config = KVCacheConfig(
        num_blocks=blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)],
    )
    _check_kept(vllm_config, config)
    kind: type
    if setup.policy != "vllm":
        from schedlab.integrations.vllm.sloweave import SLOWeaveScheduler, check_policy

        check_policy(setup.policy)
        kind = SLOWeaveScheduler
    else:
        kind = AsyncScheduler if config.async_scheduling else Scheduler
    extra = {} if planning is None else {"planning": planning}
    return kind(
        vllm_config,
        kv_cache_config,
        StructuredOutputManager(vllm_config),
        block_size=config.block_size,
        log_stats=False,
        **extra,
    )


def _check_kept(vllm_config: Any, config: EngineConfig) -> None:
    """Refuse a configuration that vLLM changed while building it (it adjusts some
    settings to others), so that no run silently uses settings other than those printed."""
    for ours, theirs, value in config_mapping(config):
        section, _, name = theirs.partition(".")
        got = getattr(getattr(vllm_config, section), name)
        if got != value:
            raise ServingError(
                f"engine vllm: {ours} = {value!r} became {theirs} = {got!r} in vLLM's "
                "configuration; this setting cannot be mapped"
            )
