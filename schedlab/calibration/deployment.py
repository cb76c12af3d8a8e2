r"""How a recorded run was deployed: engine limits, parallelism, KV capacity, links.

:func:`deployment_of` reads every setting from the run's own records, so that a replay
needs no flag (each may still be overridden), and says where each came from:

* ``meta.json`` ``engine_kwargs`` (vLLM's engine arguments): ``max_num_seqs``,
  ``max_num_batched_tokens``, ``tensor_parallel_size``, ``data_parallel_size``,
  ``enable_expert_parallel``, ``enable_prefix_caching``, ``async_scheduling``,
  ``gpu_memory_utilization``; vLLM 0.19's defaults where absent (prefix caching on, GPU
  memory utilisation 0.9, asynchronous scheduling from 0.14.0 on: release notes of
  v0.14.0, "Async scheduling is now enabled by default", PR #27614), and the admission
  gate ``scheduler_reserve_full_isl`` from ``resolved_config.scheduler_config`` (on by
  default, ``vllm/config/scheduler.py`` line 139);
* ``meta.json`` ``kv_cache``, when the recorder saved it: the blocks vLLM allocated,
  ``num_gpu_blocks``, of which vLLM keeps one as its *null block* and never hands out
  (``vllm/v1/core/block_pool.py`` lines 175–176), so ``num_gpu_blocks - 1`` are usable;
* otherwise the KV capacity of one GPU computed as vLLM does
  (:func:`schedlab.llm.models.kv_token_capacity`, per tensor-parallel rank), from the GPU's
  memory (``meta.json`` ``hardware.device_total_memory_bytes``, else ``config.json``
  ``npu_mem.mem_size`` in GiB, the unit LLMServingSim's memory model reads it in) and the
  engine's ``gpu_memory_utilization`` (``config.json``'s ``mem_util`` is a knob of
  LLMServingSim's own simulator, not vLLM's);
* ``config.json`` ``link_bw`` (GB/s) and ``link_latency`` (ns): the link between the GPUs,
  for tensor-parallel and expert-parallel collectives
  (:mod:`schedlab.llm.interconnect`); and the hardware's name.

Data parallelism runs one engine per replica (:mod:`schedlab.serving.engine`), each with
one GPU's KV capacity; with expert parallelism (``enable_expert_parallel``, over
``tp * dp`` GPUs) the replicas step in lockstep.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from schedlab.calibration.recorded_run import RecordedRun
from schedlab.errors import FormatError
from schedlab.llm.interconnect import Link
from schedlab.llm.models import GIB, get_model_shape, kv_token_capacity
from schedlab.serving.engine_config import EngineConfig

__all__ = ["ASYNC_SCHEDULING_SINCE", "Deployment", "deployment_of"]

#: First vLLM release whose engine schedules asynchronously by default (v0.14.0 notes).
ASYNC_SCHEDULING_SINCE = (0, 14, 0)

#: vLLM's default ``gpu_memory_utilization``.
DEFAULT_UTILIZATION = 0.9


@dataclass(frozen=True)
class Deployment:
    """How a run was served.

    Attributes
    ----------
    engine
        One replica's limits and behaviours.
    replicas
        Data-parallel replicas.
    lockstep
        Whether the replicas step together (expert parallelism).
    tp, ep
        Tensor-parallel degree and expert-parallel degree (1: none).
    link
        The link between GPUs (``None``: not recorded).
    model, hardware
        The served model and the GPU's name, as recorded (``""``: not recorded).
    notes
        Where each setting came from.
    """

    engine: EngineConfig
    replicas: int = 1
    lockstep: bool = False
    tp: int = 1
    ep: int = 1
    link: Link | None = None
    model: str = ""
    hardware: str = ""
    notes: tuple[str, ...] = ()


def _version(text: Any) -> tuple[int, ...] | None:
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return None if found is None else tuple(int(part or 0) for part in found.groups())


def _kwargs(run: RecordedRun) -> dict[str, Any]:
    kwargs = run.meta.get("engine_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise FormatError(f"{run.directory / 'meta.json'}: engine_kwargs: expected an object")
    return kwargs


def _is_kind(value: Any, kind: type) -> bool:
    """Whether ``value`` is a ``kind`` (a bool is no number; an int is a float)."""
    if isinstance(value, bool) or kind is bool:
        return isinstance(value, bool) and kind is bool
    return isinstance(value, int | float) if kind is float else isinstance(value, kind)


def _setting(
    run: RecordedRun,
    key: str,
    given: Any,
    fallback: tuple[Any, str] | None,
    kind: type,
    notes: list[str],
) -> Any:
    """A setting: ``given``, else ``engine_kwargs[key]``, else ``fallback`` (a value and
    where it comes from); its source noted.

    Raises
    ------
    FormatError
        If the recorded value is not a ``kind``, or nothing gives the setting.
    """
    where = run.directory / "meta.json"
    if given is not None:
        notes.append(f"{key} = {given} (given)")
        return given
    found = _kwargs(run).get(key)
    if found is None:
        if fallback is None or fallback[0] is None:
            raise FormatError(f"{where}: engine_kwargs.{key}: not recorded; give it explicitly")
        value, source = fallback
        notes.append(f"{key} = {value} ({source})")
        return value
    if not _is_kind(found, kind):
        raise FormatError(f"{where}: engine_kwargs.{key}: expected {kind.__name__}, got {found!r}")
    notes.append(f"{key} = {found} (meta.json)")
    return found


def _recorded_or(value: Any, kind: type, default: Any) -> tuple[Any, str]:
    """The fallback of a setting that ``meta.json`` ``kv_cache`` may also record."""
    if _is_kind(value, kind):
        return value, "meta.json kv_cache"
    return default, "vLLM's default"


def _instances(run: RecordedRun) -> list[dict[str, Any]]:
    nodes = run.config.get("nodes")
    if not isinstance(nodes, list):
        return []
    return [
        instance
        for node in nodes
        if isinstance(node, dict)
        for instance in node.get("instances", [])
        if isinstance(instance, dict)
    ]


def _link(run: RecordedRun, notes: list[str]) -> Link | None:
    bandwidth, latency = run.config.get("link_bw"), run.config.get("link_latency")
    if bandwidth is None:
        return None
    try:
        link = Link(float(bandwidth) * 1e9, float(latency or 0) * 1e-9)
    except (TypeError, ValueError) as exc:
        raise FormatError(
            f"{run.directory / 'config.json'}: link_bw, link_latency: {exc}"
        ) from None
    notes.append(f"link {bandwidth} GB/s, {latency} ns (config.json)")
    return link


def _kv_tokens(
    run: RecordedRun, block_size: int, tp: int, ep: int, utilization: float, notes: list[str]
) -> int:
    cache = run.meta.get("kv_cache")
    if isinstance(cache, dict) and isinstance(cache.get("num_gpu_blocks"), int):
        blocks = cache["num_gpu_blocks"] - 1
        notes.append(
            f"KV capacity {blocks:,} blocks of {block_size} (meta.json kv_cache: "
            f"{cache['num_gpu_blocks']:,} GPU blocks, one kept as vLLM's null block)"
        )
        return blocks * block_size
    where = run.directory / "config.json"
    hardware = run.meta.get("hardware")
    total = hardware.get("device_total_memory_bytes") if isinstance(hardware, dict) else None
    source = "meta.json hardware"
    if not isinstance(total, int | float):
        instances = _instances(run)
        try:
            total = float(instances[0]["npu_mem"]["mem_size"]) * GIB
        except (IndexError, KeyError, TypeError, ValueError):
            raise FormatError(
                f"{where}: no GPU memory recorded (nodes[].instances[].npu_mem.mem_size); "
                "give the KV capacity explicitly"
            ) from None
        source = "config.json npu_mem.mem_size, GiB"
    name = run.meta.get("model") or (_instances(run) or [{}])[0].get("model_name")
    if not isinstance(name, str):
        raise FormatError(f"{where}: no model name; give the KV capacity explicitly")
    tokens = kv_token_capacity(get_model_shape(name), float(total), utilization, tp=tp, ep=ep)
    blocks = tokens // block_size - 1
    notes.append(
        f"KV capacity {blocks:,} blocks of {block_size} per GPU (vLLM's formula: "
        f"{float(total) / GIB:.1f} GiB ({source}) x {utilization:g}, less the weights of "
        f"{name} on one GPU and 1 GiB; one block kept as vLLM's null block)"
    )
    return blocks * block_size


def deployment_of(
    run: RecordedRun,
    *,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_tokens: int | None = None,
    tp: int | None = None,
    dp: int | None = None,
    async_scheduling: bool | None = None,
    prefix_caching: bool | None = None,
) -> Deployment:
    """The deployment of ``run`` (module docstring); given values override the records.

    Raises
    ------
    FormatError
        Naming the file and field of a setting that is malformed, or missing without a
        default.
    """
    notes: list[str] = []
    seqs = _setting(run, "max_num_seqs", max_num_seqs, None, int, notes)
    budget = _setting(run, "max_num_batched_tokens", max_num_batched_tokens, None, int, notes)
    tp = _setting(run, "tensor_parallel_size", tp, (1, "vLLM's default"), int, notes)
    dp = _setting(run, "data_parallel_size", dp, (1, "vLLM's default"), int, notes)
    expert = _setting(run, "enable_expert_parallel", None, (False, "vLLM's default"), bool, notes)
    recorded = run.meta.get("kv_cache")
    cache: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    caching = _setting(
        run,
        "enable_prefix_caching",
        prefix_caching,
        _recorded_or(cache.get("enable_prefix_caching"), bool, True),
        bool,
        notes,
    )
    utilization = _setting(
        run,
        "gpu_memory_utilization",
        None,
        _recorded_or(cache.get("gpu_memory_utilization"), float, DEFAULT_UTILIZATION),
        float,
        notes,
    )
    version = _version(run.meta.get("vllm_version"))
    lagged = _setting(
        run,
        "async_scheduling",
        async_scheduling,
        (
            version is not None and version >= ASYNC_SCHEDULING_SINCE,
            f"default of vLLM {run.meta.get('vllm_version', '(version not recorded)')}",
        ),
        bool,
        notes,
    )
    scheduler = (run.meta.get("resolved_config") or {}).get("scheduler_config") or {}
    reserve = scheduler.get("scheduler_reserve_full_isl", True)
    block_size = int(cache.get("block_size", 16))
    ep = tp * dp if expert else 1
    if kv_tokens is None:
        kv_tokens = _kv_tokens(run, block_size, tp, ep, utilization, notes)
    else:
        notes.append(f"KV capacity {kv_tokens:,} tokens (given)")
    if not isinstance(reserve, bool):
        raise FormatError(
            f"{run.directory / 'meta.json'}: resolved_config.scheduler_config."
            f"scheduler_reserve_full_isl: expected true or false, got {reserve!r}"
        )
    engine = EngineConfig(
        kv_capacity_tokens=kv_tokens,
        block_size=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        prefix_caching=caching,
        reserve_full_prompt=reserve,
        async_scheduling=lagged,
    )
    instances = _instances(run)
    hardware = str(instances[0].get("hardware", "")) if instances else ""
    return Deployment(
        engine,
        replicas=dp,
        lockstep=expert and dp > 1,
        tp=tp,
        ep=ep,
        link=_link(run, notes),
        model=str(run.meta.get("model", "")),
        hardware=hardware,
        notes=tuple(notes),
    )
