r"""How a recorded run was deployed: engine limits, parallelism, KV capacity, links.

:func:`deployment_of` reads every setting from the run's own records, so that a replay
needs no flag (each may still be overridden), and says where each came from. A setting
is looked up, first found first used:

1. given explicitly (a flag);
2. ``meta.json`` ``resolved_config``: the configuration vLLM actually ran with, when the
   recorder saved it (``scheduler_config``: ``max_num_seqs``, ``max_num_batched_tokens``,
   ``async_scheduling``, ``scheduler_reserve_full_isl``; ``cache_config``:
   ``block_size``, ``cache_dtype``, ``enable_prefix_caching``,
   ``gpu_memory_utilization``, ``num_gpu_blocks``; ``parallel_config``:
   ``tensor_parallel_size``, ``data_parallel_size``, ``enable_expert_parallel``);
3. ``meta.json`` ``engine_kwargs``: the engine arguments it was started with (``null``
   meaning vLLM's default);
4. ``meta.json`` ``kv_cache``: what the recorder read off the KV cache;
5. vLLM 0.19's defaults: prefix caching on, GPU memory utilisation 0.9, blocks of 16,
   the KV cache in the model's dtype, the whole-prompt admission gate
   ``scheduler_reserve_full_isl`` on (``vllm/config/scheduler.py`` line 139), and
   asynchronous scheduling from 0.14.0 on (release notes of v0.14.0, "Async scheduling is
   now enabled by default", PR #27614) — also when the run records no version at all, as
   a ``vllm bench serve`` result does not, since every release since has it.

The KV capacity is the blocks vLLM allocated, ``num_gpu_blocks``, of which it keeps one
as its *null block* and never hands out (``vllm/v1/core/block_pool.py`` lines 175–176), so
``num_gpu_blocks - 1`` are usable. Without that record it is computed as vLLM does
(:meth:`schedlab.llm.gpu_deployment.GpuDeployment.kv_tokens`, per tensor-parallel rank,
for the engine's ``max_num_batched_tokens`` and ``max_num_seqs``, at the KV cache's
dtype: ``fp8`` variants take one byte an element), from the GPU's memory
(``meta.json`` ``hardware.device_total_memory_bytes``, else ``config.json``
``npu_mem.mem_size`` in GiB, the unit LLMServingSim's memory model reads it in) and the
engine's ``gpu_memory_utilization`` (``config.json``'s ``mem_util`` is a knob of
LLMServingSim's own simulator, not vLLM's). The link between the GPUs, for tensor-parallel
and expert-parallel collectives, is the given one or the published measurement for the
run's hardware (:mod:`schedlab.llm.link_evidence`); ``config.json``'s ``link_bw`` and
``link_latency`` are LLMServingSim's network settings and are not read. ``config.json``
gives the hardware's name.

A profile's GPUs (:func:`profile_deployment`), which a calibrated cost model carries so
that an engine simulated on it gets that GPU's KV capacity: the model and tensor-parallel
degree of the profile, the GPU's memory from ``meta.yaml`` where it records it
(``gpu_memory_bytes``), else from the table of :mod:`schedlab.llm.gpus` by ``hardware``
or ``gpu``; ``engine_effective``'s ``block_size`` and ``gpu_memory_utilization`` (else
vLLM's defaults), and the KV cache in the model's dtype.

Data parallelism runs one engine per replica (:mod:`schedlab.serving.engine`), each with
one GPU's KV capacity; with expert parallelism (``enable_expert_parallel``, over
``tp * dp`` GPUs) the replicas step in lockstep. A tensor-parallel degree above
:data:`MAX_TENSOR_PARALLEL` or more replicas than
:data:`~schedlab.serving.scenario.MAX_REPLICAS` is refused, recorded or given.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from schedlab.calibration.profiles import LLMServingSimProfile
from schedlab.calibration.recorded_run import RecordedRun
from schedlab.errors import CalibrationError, FormatError
from schedlab.llm.gpu_deployment import MAX_GPU_MEMORY_BYTES, GpuDeployment
from schedlab.llm.gpus import find_gpu
from schedlab.llm.link_evidence import LinkEvidence, link_for
from schedlab.llm.models import GIB, get_model_shape
from schedlab.llm.traces import MAX_TOKENS
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.scenario import MAX_REPLICAS

__all__ = [
    "ASYNC_SCHEDULING_SINCE",
    "KV_CACHE_DTYPE_BYTES",
    "MAX_TENSOR_PARALLEL",
    "MODELLED_RELEASE",
    "UNMODELLED_ENGINE_ARGS",
    "Deployment",
    "check_modelled",
    "deployment_of",
    "profile_deployment",
    "release_of",
]

#: First vLLM release whose engine schedules asynchronously by default (v0.14.0 notes).
ASYNC_SCHEDULING_SINCE = (0, 14, 0)

#: The vLLM release whose scheduler the engine follows (``docs/vllm.md``): a run of
#: another release records behaviour the engine may not have.
MODELLED_RELEASE = (0, 19)


#: vLLM's default ``gpu_memory_utilization``.
DEFAULT_UTILIZATION = 0.9

#: The highest tensor-parallel degree read or given. vLLM splits the attention heads over
#: the ranks and refuses a degree that does not divide their count
#: (``vllm/config/model.py``, ``verify_with_parallel_config``); the most heads of open
#: models is 128 (DeepSeek-V3, Llama-3.1-405B). The data-parallel size is capped at
#: :data:`~schedlab.serving.scenario.MAX_REPLICAS`, the simulator's limit.
MAX_TENSOR_PARALLEL = 128

#: Bytes per element of vLLM's ``kv_cache_dtype`` values (``vllm/config/cache.py``
#: ``CacheDType``; ``auto`` is the model's dtype).
KV_CACHE_DTYPE_BYTES: dict[str, int | None] = {
    "auto": None,
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}

_SCHEDULER, _CACHE, _PARALLEL = "scheduler_config", "cache_config", "parallel_config"
#: Where each setting may be recorded, in the order looked up (module docstring).
_WHERE: dict[str, tuple[tuple[str, ...], ...]] = {
    "max_num_seqs": (
        ("resolved_config", _SCHEDULER, "max_num_seqs"),
        ("engine_kwargs", "max_num_seqs"),
    ),
    "max_num_batched_tokens": (
        ("resolved_config", _SCHEDULER, "max_num_batched_tokens"),
        ("engine_kwargs", "max_num_batched_tokens"),
    ),
    "tensor_parallel_size": (
        ("resolved_config", _PARALLEL, "tensor_parallel_size"),
        ("engine_kwargs", "tensor_parallel_size"),
    ),
    "data_parallel_size": (
        ("resolved_config", _PARALLEL, "data_parallel_size"),
        ("engine_kwargs", "data_parallel_size"),
    ),
    "enable_expert_parallel": (
        ("resolved_config", _PARALLEL, "enable_expert_parallel"),
        ("engine_kwargs", "enable_expert_parallel"),
    ),
    "enable_prefix_caching": (
        ("resolved_config", _CACHE, "enable_prefix_caching"),
        ("engine_kwargs", "enable_prefix_caching"),
        ("kv_cache", "enable_prefix_caching"),
    ),
    "gpu_memory_utilization": (
        ("resolved_config", _CACHE, "gpu_memory_utilization"),
        ("engine_kwargs", "gpu_memory_utilization"),
        ("kv_cache", "gpu_memory_utilization"),
    ),
    "async_scheduling": (
        ("resolved_config", _SCHEDULER, "async_scheduling"),
        ("engine_kwargs", "async_scheduling"),
    ),
    "scheduler_reserve_full_isl": (("resolved_config", _SCHEDULER, "scheduler_reserve_full_isl"),),
    "block_size": (
        ("resolved_config", _CACHE, "block_size"),
        ("engine_kwargs", "block_size"),
        ("kv_cache", "block_size"),
    ),
    "kv_cache_dtype": (
        ("resolved_config", _CACHE, "cache_dtype"),
        ("engine_kwargs", "kv_cache_dtype"),
    ),
    "num_gpu_blocks": (
        ("kv_cache", "num_gpu_blocks"),
        ("resolved_config", _CACHE, "num_gpu_blocks"),
    ),
}


#: vLLM engine arguments that change what its scheduler or a step does and that the
#: simulator does not model (either engine kind), with what each turns on, the values
#: that leave it off (vLLM's defaults), and where ``resolved_config`` records it
#: (``vllm/engine/arg_utils.py``, ``EngineArgs``). A run that records one, or a KV cache
#: in fp8, or another release than :data:`MODELLED_RELEASE`, is refused unless the user
#: allows the mismatch (:func:`check_modelled`).
UNMODELLED_ENGINE_ARGS: dict[str, tuple[str, tuple[Any, ...], tuple[str, ...] | None]] = {
    "speculative_config": ("speculative decoding", (None, {}), ("speculative_config",)),
    "speculative_model": ("speculative decoding", (None, ""), None),
    "num_speculative_tokens": ("speculative decoding", (None, 0), None),
    "enable_lora": ("LoRA adapters", (None, False), ("lora_config",)),
    "pipeline_parallel_size": (
        "pipeline parallelism",
        (None, 1),
        (_PARALLEL, "pipeline_parallel_size"),
    ),
    "scheduling_policy": (
        "a scheduling policy other than fcfs",
        (None, "fcfs"),
        (_SCHEDULER, "policy"),
    ),
    "long_prefill_token_threshold": (
        "a long-prefill threshold",
        (None, 0),
        (_SCHEDULER, "long_prefill_token_threshold"),
    ),
    "max_num_partial_prefills": (
        "several partial prefills",
        (None, 1),
        (_SCHEDULER, "max_num_partial_prefills"),
    ),
    "enable_chunked_prefill": (
        "chunked prefill switched off",
        (None, True),
        (_SCHEDULER, "enable_chunked_prefill"),
    ),
    "kv_transfer_config": ("a KV connector", (None, {}), ("kv_transfer_config",)),
    "scheduler_cls": (
        "another scheduler class",
        (None, "vllm.v1.core.sched.scheduler.Scheduler"),
        (_SCHEDULER, "scheduler_cls"),
    ),
}


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
        The link between one engine's GPUs when its collectives are modelled, with its
        evidence (``None``: no collective).
    model, hardware
        The served model and the GPU's name, as recorded (``""``: not recorded).
    notes
        Where each setting came from.
    unmodelled
        Settings the run records that the simulator does not model, one line each
        naming the ``meta.json`` key (:func:`check_modelled`).
    kv_band
        One replica's KV tokens at the low and high ends of the evidence when the run
        does not record its blocks and none were given
        (:meth:`~schedlab.llm.gpu_deployment.GpuDeployment.kv_band`; ``engine`` has the
        high end); ``None`` when the capacity is known.
    """

    engine: EngineConfig
    replicas: int = 1
    lockstep: bool = False
    tp: int = 1
    ep: int = 1
    link: LinkEvidence | None = None
    model: str = ""
    hardware: str = ""
    notes: tuple[str, ...] = ()
    unmodelled: tuple[str, ...] = ()
    kv_band: tuple[int, int] | None = None


def check_modelled(deployment: Deployment, *, allow: bool, where: str = "") -> list[str]:
    """Refuse a deployment with a setting the simulator does not model, unless ``allow``;
    then the lines to show the user loudly.

    Raises
    ------
    FormatError
        Naming the first such ``meta.json`` key, and ``--allow-mismatch``.
    """
    if deployment.unmodelled and not allow:
        place = f"{where}: " if where else ""
        raise FormatError(
            f"{place}{deployment.unmodelled[0]} (not modelled; --allow-mismatch replays anyway)"
        )
    return [f"replayed anyway (--allow-mismatch): {line}" for line in deployment.unmodelled]


def release_of(text: Any) -> tuple[int, ...] | None:
    """``(major, minor, patch)`` of a vLLM version text (``v0.19.0``, ``0.19``; a missing
    patch is 0), ``None`` if it is not one."""
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return None if found is None else tuple(int(part or 0) for part in found.groups())


def _fits(value: Any, kind: type, minimum: float | None, maximum: float | None = None) -> bool:
    """Whether ``value`` is a ``kind`` (a bool is no number, an int is a float) of at
    least ``minimum`` and at most ``maximum``."""
    if isinstance(value, bool) or kind is bool:
        return isinstance(value, bool) and kind is bool
    if kind is float:
        ok = isinstance(value, int | float) and math.isfinite(value)
    else:
        ok = isinstance(value, kind)
    return ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)


def _expected(kind: type, minimum: float | None, maximum: float | None = None) -> str:
    name = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    if minimum is not None and maximum is not None:
        return f"{name[kind]} from {minimum:g} to {maximum:g}"
    return name[kind] + ("" if minimum is None else f" >= {minimum:g}")


class _Records:
    """A run's records, read with the place of every value (module docstring)."""

    def __init__(self, run: RecordedRun) -> None:
        self.run = run
        meta = run.directory / "meta.json"
        self.meta_name = str(meta) if meta.is_file() else f"{run.path} (no meta.json beside it)"
        self.notes: list[str] = []
        self.kv_band: tuple[int, int] | None = None  # set when the capacity is estimated

    def lookup(self, path: tuple[str, ...]) -> Any:
        """The value at ``path`` in ``meta.json`` (``None``: not recorded)."""
        node: Any = self.run.meta
        for depth, key in enumerate(path):
            if node is None:
                return None
            if not isinstance(node, dict):
                where = ".".join(path[:depth])
                raise FormatError(f"{self.meta_name}: {where}: expected an object")
            node = node.get(key)
        return node

    def recorded(
        self, key: str, kind: type, minimum: float | None = None, maximum: float | None = None
    ) -> tuple[Any, str] | None:
        """The first recorded value of ``key`` and its place (``None``: not recorded).

        Raises
        ------
        FormatError
            If the value is not of its kind.
        """
        first: tuple[Any, str] | None = None
        for path in _WHERE[key]:  # every place is checked, not only the one used
            found = self.lookup(path)
            if found is None:
                continue
            place = ".".join(path)
            if not _fits(found, kind, minimum, maximum):
                raise FormatError(
                    f"{self.meta_name}: {place}: expected "
                    f"{_expected(kind, minimum, maximum)}, got {found!r}"
                )
            first = first or (found, f"meta.json {place}")
        return first

    def unmodelled(self) -> list[str]:
        """What the run records that the engine does not model, one line each naming the
        ``meta.json`` key (:data:`UNMODELLED_ENGINE_ARGS`, fp8 KV, and a release other than
        :data:`MODELLED_RELEASE`)."""
        found = []
        recorded = self.run.meta.get("vllm_version")
        version = release_of(recorded) if isinstance(recorded, str) else None
        if recorded is not None and version is None:
            raise FormatError(
                f"{self.meta_name}: vllm_version: expected a release such as '0.19.0', "
                f"got {recorded!r}"
            )
        if version is not None and version[:2] != MODELLED_RELEASE:
            release = ".".join(map(str, MODELLED_RELEASE))
            found.append(
                f"meta.json vllm_version {recorded!r}: the engine follows vLLM {release}'s "
                "scheduler"
            )
        for name, (what, off, resolved) in UNMODELLED_ENGINE_ARGS.items():
            places: list[tuple[str, ...]] = [("engine_kwargs", name)]
            if resolved is not None:
                places.insert(0, ("resolved_config", *resolved))
            for path in places:
                value = self.lookup(path)
                if isinstance(off[-1], bool) and value is not None and not isinstance(value, bool):
                    raise FormatError(
                        f"{self.meta_name}: {'.'.join(path)}: expected true or false, "
                        f"got {value!r}"
                    )
                if value not in off:
                    found.append(f"meta.json {'.'.join(path)} = {value!r}: {what}")
                    break
        for path in _WHERE["kv_cache_dtype"]:
            value = self.lookup(path)
            if isinstance(value, str) and value.startswith("fp8"):
                found.append(
                    f"meta.json {'.'.join(path)} = {value!r}: an fp8 KV cache (the profile's "
                    "attention reads KV in the model's dtype)"
                )
                break
        return found

    def setting(
        self,
        key: str,
        given: Any,
        kind: type,
        default: tuple[Any, str] | None = None,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> Any:
        """``given``, else the first recorded value, else ``default`` (a value and its
        source); the source noted.

        Raises
        ------
        FormatError
            If a value is not of its kind, or nothing gives the setting.
        """
        if given is not None:
            if not _fits(given, kind, minimum, maximum):
                raise FormatError(
                    f"{key}: expected {_expected(kind, minimum, maximum)}, got {given!r}"
                )
            found: tuple[Any, str] | None = (given, "given")
        else:
            found = self.recorded(key, kind, minimum, maximum) or default
        if found is None:
            raise FormatError(f"{self.meta_name}: {key} is not recorded: give it explicitly")
        value, source = found
        self.notes.append(f"{key} = {value} ({source})")
        return value

    # -- config.json -------------------------------------------------------------------------
    def instances(self) -> list[dict[str, Any]]:
        nodes = self.run.config.get("nodes")
        if not isinstance(nodes, list):
            return []
        found = []
        for node in nodes:
            items = node.get("instances") if isinstance(node, dict) else None
            if isinstance(items, list):
                found += [item for item in items if isinstance(item, dict)]
        return found

    def link(self, given: LinkEvidence | None, needed: bool) -> LinkEvidence | None:
        """The link between one engine's GPUs when its collectives are modelled
        (``needed``): the given one, else :func:`~schedlab.llm.link_evidence.link_for`
        the run's hardware. ``config.json``'s ``link_bw``/``link_latency`` are a setting
        of LLMServingSim's network model and are not read."""
        config = self.run.config
        if "link_bw" in config or "link_latency" in config:
            self.notes.append(
                "config.json link_bw/link_latency not read (a setting of LLMServingSim's "
                "own network model, not a measurement)"
            )
        if not needed:
            if given is not None:
                raise CalibrationError(
                    "--link: this deployment has no collective to time (tensor-parallel "
                    "size 1, no expert parallelism across replicas): the link would not be "
                    "used"
                )
            return None
        instances = self.instances()
        # its note goes with the link chosen (schedlab.calibration.machine_file)
        return given or link_for(str(instances[0].get("hardware", "")) if instances else "")

    def gpu_bytes(self) -> tuple[float, str]:
        """One GPU's memory in bytes, and where it was read."""
        hardware = self.run.meta.get("hardware")
        total = hardware.get("device_total_memory_bytes") if isinstance(hardware, dict) else None
        if total is not None:
            if not _fits(total, float, 1):
                raise FormatError(
                    f"{self.meta_name}: hardware.device_total_memory_bytes: expected a "
                    f"positive number, got {total!r}"
                )
            return float(total), "meta.json hardware"
        where = self.run.directory / "config.json"
        instances = self.instances()
        size = instances[0].get("npu_mem", {}) if instances else None
        size = size.get("mem_size") if isinstance(size, dict) else None
        if size is None:
            raise FormatError(
                f"{where}: no GPU memory recorded (nodes[].instances[].npu_mem.mem_size); "
                "give the KV capacity explicitly"
            )
        if not _fits(size, float, 1e-9):
            raise FormatError(
                f"{where}: nodes[0].instances[0].npu_mem.mem_size: expected a positive "
                f"number of GiB, got {size!r}"
            )
        return float(size) * GIB, "config.json npu_mem.mem_size, GiB"

    def hardware(self) -> str:
        """The GPU's name in ``config.json``, else the short name of ``meta.json``'s
        ``hardware.device_name`` where :mod:`schedlab.llm.gpus` knows it (``""``: not
        recorded)."""
        instances = self.instances()
        if instances and instances[0].get("hardware"):
            return str(instances[0]["hardware"])
        hardware = self.run.meta.get("hardware")
        device = hardware.get("device_name") if isinstance(hardware, dict) else None
        gpu = find_gpu(device) if isinstance(device, str) else None
        return "" if gpu is None else gpu.name

    def model_name(self) -> str:
        name = self.run.meta.get("model") or (self.instances() or [{}])[0].get("model_name")
        return name if isinstance(name, str) else ""


def _kv_tokens(
    records: _Records,
    limits: tuple[int, int, int],
    tp: int,
    ep: int,
    utilization: float,
    dtype: str,
) -> int:
    """The usable KV tokens of one GPU (module docstring), for the engine's ``limits``
    ``(block_size, max_num_batched_tokens, max_num_seqs)``."""
    block_size, budget, seqs = limits
    found = records.recorded("num_gpu_blocks", int, minimum=2)
    if found is not None:
        blocks, place = found
        records.notes.append(
            f"KV capacity {blocks - 1:,} blocks of {block_size} ({place}: {blocks:,} GPU "
            "blocks, one kept as vLLM's null block)"
        )
        return (blocks - 1) * block_size
    total, source = records.gpu_bytes()
    name = records.model_name()
    if not name:
        raise FormatError(f"{records.meta_name}: no model name: give the KV capacity explicitly")
    shape = get_model_shape(name)
    gpu = find_gpu(records.hardware())
    deployment = GpuDeployment(
        model=shape.name,
        gpu=records.hardware() or "GPU",
        gpu_memory_bytes=round(total),
        memory_source=source,
        sms=None if gpu is None else gpu.sms,
        tp=tp,
        ep=ep,
        kv_dtype_bytes=KV_CACHE_DTYPE_BYTES[dtype] or shape.dtype_bytes,
        block_size=block_size,
        gpu_memory_utilization=utilization,
    )
    tokens, note = deployment.kv_tokens(budget, seqs)
    records.notes.append(note)
    records.kv_band = deployment.kv_band(budget, seqs)
    return tokens


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
    link: LinkEvidence | None = None,
) -> Deployment:
    """The deployment of ``run`` (module docstring); given values override the records.

    Raises
    ------
    FormatError
        Naming the file and field of a setting that is malformed, or missing without a
        default.
    """
    records = _Records(run)
    setting = records.setting
    vllm = "vLLM's default"
    seqs = setting("max_num_seqs", max_num_seqs, int, minimum=1, maximum=MAX_TOKENS)
    budget = setting(
        "max_num_batched_tokens", max_num_batched_tokens, int, minimum=1, maximum=MAX_TOKENS
    )
    tp = setting(
        "tensor_parallel_size", tp, int, (1, vllm), minimum=1, maximum=MAX_TENSOR_PARALLEL
    )
    dp = setting("data_parallel_size", dp, int, (1, vllm), minimum=1, maximum=MAX_REPLICAS)
    expert = setting("enable_expert_parallel", None, bool, (False, vllm))
    caching = setting("enable_prefix_caching", prefix_caching, bool, (True, vllm))
    utilization = setting(
        "gpu_memory_utilization", None, float, (DEFAULT_UTILIZATION, vllm), minimum=1e-9, maximum=1
    )
    recorded = run.meta.get("vllm_version")
    version = release_of(recorded)
    lagged = setting(
        "async_scheduling",
        async_scheduling,
        bool,
        (
            version is None or version >= ASYNC_SCHEDULING_SINCE,
            f"default of vLLM {recorded}"
            if version is not None
            else "the default since vLLM 0.14.0; the run records no version",
        ),
    )
    reserve = setting("scheduler_reserve_full_isl", None, bool, (True, vllm))
    block_size = setting("block_size", None, int, (16, vllm), minimum=1, maximum=MAX_TOKENS)
    dtype = setting("kv_cache_dtype", None, str, ("auto", vllm))
    if dtype not in KV_CACHE_DTYPE_BYTES:
        raise FormatError(
            f"{records.meta_name}: kv_cache_dtype {dtype!r}: not one of "
            f"{', '.join(KV_CACHE_DTYPE_BYTES)}"
        )
    ep = tp * dp if expert else 1
    lockstep = expert and dp > 1
    if kv_tokens is None:
        kv_tokens = _kv_tokens(records, (block_size, budget, seqs), tp, ep, utilization, dtype)
    else:
        if not _fits(kv_tokens, int, 1):
            raise FormatError(f"kv_tokens: expected an integer >= 1, got {kv_tokens!r}")
        records.notes.append(f"KV capacity {kv_tokens:,} tokens (given)")
    engine = EngineConfig(
        kv_tokens=kv_tokens,
        block_size=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=budget,
        prefix_caching=caching,
        reserve_full_prompt=reserve,
        async_scheduling=lagged,
    )
    return Deployment(
        engine,
        replicas=dp,
        lockstep=lockstep,
        tp=tp,
        ep=ep,
        link=records.link(link, tp > 1 or lockstep),
        model=records.model_name(),
        hardware=records.hardware(),
        notes=tuple(records.notes),
        unmodelled=tuple(records.unmodelled()),
        kv_band=records.kv_band,
    )


def profile_deployment(profile: LLMServingSimProfile) -> GpuDeployment | None:
    """The GPUs ``profile`` was measured on (module docstring); ``None`` if neither its
    ``meta.yaml`` nor :mod:`schedlab.llm.gpus` gives the GPU's memory.

    Raises
    ------
    FormatError
        If ``meta.yaml`` records a malformed memory, block size or utilisation.
    """
    meta, where = profile.meta, f"{profile.root / 'meta.yaml'}"
    engine = meta.get("engine_effective")
    engine = engine if isinstance(engine, dict) else {}
    checks = (
        ("gpu_memory_bytes", meta.get("gpu_memory_bytes"), int, 1, MAX_GPU_MEMORY_BYTES),
        ("engine_effective.block_size", engine.get("block_size", 16), int, 1, MAX_TOKENS),
        (
            "engine_effective.gpu_memory_utilization",
            engine.get("gpu_memory_utilization", DEFAULT_UTILIZATION),
            float,
            1e-9,
            1,
        ),
    )
    for place, value, kind, least, most in checks:
        if value is not None and not _fits(value, kind, least, most):
            raise FormatError(f"{where}: {place}: expected {_expected(kind, least, most)}")
    gpu = find_gpu(profile.hardware) or find_gpu(str(meta.get("gpu", "")))
    recorded = meta.get("gpu_memory_bytes")
    if recorded is not None:
        memory, source = int(recorded), "meta.yaml gpu_memory_bytes"
    elif gpu is not None:
        memory, source = gpu.memory_bytes, gpu.source
    else:
        return None
    shape = get_model_shape(profile.model)
    return GpuDeployment(
        model=shape.name,
        gpu=profile.hardware or (gpu.name if gpu else ""),
        gpu_memory_bytes=memory,
        memory_source=source,
        sms=None if gpu is None else gpu.sms,
        tp=profile.tp,
        kv_dtype_bytes=shape.dtype_bytes,
        block_size=int(engine.get("block_size", 16)),
        gpu_memory_utilization=float(engine.get("gpu_memory_utilization", DEFAULT_UTILIZATION)),
    )
