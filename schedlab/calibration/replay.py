r"""Replay of a recorded serving run on the simulator, and measured-vs-simulated metrics.

A recorded run (LLMServingSim's ``bench`` format, as in
``../shared/data/validation/vllm-0.19.0_RTXPRO6000_Llama-3.1-8B``) is a ``requests.jsonl``
with, per request, ``input_toks``, ``output_toks`` and the engine's timestamps
``queued_ts``, ``first_token_ts``, ``last_token_ts`` (monotonic seconds), optionally next
to a ``meta.json`` (engine arguments) and a ``config.json`` (hardware).

Definitions (issue 6), for a request with ``o`` output tokens:

* TTFT :math:`=` ``first_token_ts`` :math:`-` ``queued_ts``;
* latency :math:`=` ``last_token_ts`` :math:`-` ``queued_ts``;
* TPOT :math:`= (\text{last} - \text{first}) / (o - 1)`, over requests with :math:`o > 1`.

The simulation gets the same requests with arrival :math:`a_i` = ``queued_ts`` minus the
earliest ``queued_ts`` (only differences of monotonic timestamps are meaningful). Its
TTFT and latency are measured the way vLLM measures them, from the *queued* instant
:math:`q_i`: vLLM's engine-core busy loop takes new requests off its input queue only
between iterations (``EngineCoreProc._process_input_queue`` runs before each engine step;
``Scheduler.add_request`` records the ``QUEUED`` event), so a request that arrives while
an iteration runs is queued when that iteration ends. Likewise :math:`q_i` is the end of
the simulated iteration running at :math:`a_i` (``start < a_i <= end``), or :math:`a_i`
itself when the simulated engine is idle then. (Measuring from :math:`a_i` instead would
charge every request the wait until the next iteration boundary, on average half an
iteration, which the recorded ``queued_ts`` never contains.) TPOT does not depend on it.
Each metric is compared at the mean
and the 50th, 90th, 95th and 99th percentiles (numpy's linear interpolation on both sides):
``diff_pct`` :math:`= 100\,(\text{simulated} - \text{measured}) / \text{measured}`.

Asynchronous scheduling. vLLM 0.14.0 made async scheduling the default (release notes:
"Async scheduling is now enabled by default", PR #27614); the engine then plans each
iteration one iteration ahead (:mod:`schedlab.serving.simulator`). :func:`async_scheduling_of`
reads it from ``meta.json``: ``engine_kwargs.async_scheduling`` if given, else on for
``vllm_version`` >= 0.14.0 (the shared run: 0.19.0, not overridden) and off otherwise.

KV capacity, unless given, follows :func:`schedlab.llm.models.kv_token_capacity`:
:math:`\lfloor (u G - W - R) / b_{kv} \rfloor` with :math:`G` the card's memory from
``config.json`` (``npu_mem.mem_size``, in GB = :math:`10^9` bytes), :math:`u` its
``mem_util``, :math:`W` the model's weight bytes and :math:`R` the core's 1 GiB activation
reserve.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import DataNotFoundError, FormatError
from schedlab.json_files import read_json
from schedlab.llm.models import get_model_shape, kv_token_capacity
from schedlab.llm.traces import jsonl_rows
from schedlab.serving.cost_model import CostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RequestStream

__all__ = [
    "METRIC_KEYS",
    "MetricComparison",
    "RecordedRun",
    "ReplayReport",
    "async_scheduling_of",
    "engine_config_for_run",
    "kv_tokens_for_run",
    "read_recorded_run",
    "replay",
    "run_metrics",
]

#: Statistics compared, in report order.
STATISTICS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99")
#: Metric keys of :class:`ReplayReport`, ``<ttft|tpot|latency>_<statistic>``.
METRIC_KEYS: tuple[str, ...] = tuple(
    f"{metric}_{stat}" for metric in ("ttft", "tpot", "latency") for stat in STATISTICS
)


@dataclass(frozen=True)
class RecordedRun:
    """A recorded serving run, requests sorted by ``queued_ts``.

    Attributes
    ----------
    path
        The ``requests.jsonl`` read.
    arrival_s
        ``queued_ts`` minus the earliest one.
    prompt, output
        Token counts.
    ttft_s, tpot_s, latency_s
        Measured metrics (``tpot_s`` is ``nan`` for one-token outputs).
    meta, config
        ``meta.json`` and ``config.json`` of the same directory (empty if absent).
    """

    path: Path
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    latency_s: np.ndarray
    meta: dict[str, Any]
    config: dict[str, Any]

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def stream(self) -> RequestStream:
        """The requests as a simulator stream; its window is the measured run's span
        (first arrival to last token), which only goodput figures would use."""
        return RequestStream(
            self.path.name,
            self.arrival_s,
            self.prompt,
            self.output,
            float(np.max(self.arrival_s + self.latency_s)),
        )


def _read_json(path: Path) -> dict[str, Any]:
    """The object in ``path``, or ``{}`` where the run has no such file."""
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise FormatError(f"{path}: expected a JSON object")
    return data


_FIELDS = ("input_toks", "output_toks", "queued_ts", "first_token_ts", "last_token_ts")


def read_recorded_run(path: str | Path) -> RecordedRun:
    """Read ``requests.jsonl`` (and ``meta.json``/``config.json`` beside it).

    Raises
    ------
    DataNotFoundError
        If the file does not exist.
    FormatError
        On a malformed line (named ``path:line``): invalid JSON, a missing field, a
        non-integer or non-positive token count, a non-finite timestamp, or timestamps
        out of order (``first_token_ts < queued_ts`` or ``last_token_ts < first_token_ts``).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such requests file")
    records: list[tuple[float, ...]] = []
    try:
        rows = list(jsonl_rows(path, _FIELDS))
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None
    for where, item in rows:
        values = []
        for name in _FIELDS:
            value = item.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise FormatError(f"{where}: {name}: expected a number, got {value!r}")
            if not math.isfinite(value):
                raise FormatError(f"{where}: {name}: must be finite")
            values.append(float(value))
        prompt, output, queued, first, last = values
        for name, count in (("input_toks", prompt), ("output_toks", output)):
            if count != int(count) or count < 1:
                raise FormatError(f"{where}: {name}: expected an integer >= 1, got {count:g}")
        if not queued <= first <= last:
            raise FormatError(
                f"{where}: timestamps out of order (need queued_ts <= first_token_ts "
                "<= last_token_ts)"
            )
        records.append((queued, prompt, output, first, last))
    if not records:
        raise FormatError(f"{path}: no requests")
    data = np.array(records)
    data = data[np.argsort(data[:, 0], kind="stable")]
    queued, prompt, output, first, last = data.T
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(output > 1, (last - first) / (output - 1), np.nan)
    return RecordedRun(
        path,
        queued - queued[0],
        prompt.astype(np.int64),
        output.astype(np.int64),
        first - queued,
        tpot,
        last - queued,
        _read_json(path.parent / "meta.json"),
        _read_json(path.parent / "config.json"),
    )


def kv_tokens_for_run(run: RecordedRun, model: str | None = None) -> int:
    """KV capacity in tokens from the run's ``config.json`` (module docstring).

    ``model`` defaults to ``meta.json``'s ``model``.

    Raises
    ------
    FormatError
        If ``config.json`` lacks the GPU memory or the model is unknown.
    """
    where = run.path.parent / "config.json"
    try:
        instance = run.config["nodes"][0]["instances"][0]
        mem = instance["npu_mem"]
        gpu_bytes = float(mem["mem_size"]) * 1e9
        utilization = float(mem.get("mem_util", 0.9))
    except (KeyError, IndexError, TypeError, ValueError):
        raise FormatError(
            f"{where}: expected nodes[0].instances[0].npu_mem.mem_size (GB) and mem_util; "
            "give the KV capacity explicitly instead"
        ) from None
    name = model or instance.get("model_name") or run.meta.get("model")
    if not isinstance(name, str):
        raise FormatError(f"{where}: no model name; give the KV capacity explicitly")
    return kv_token_capacity(get_model_shape(name), gpu_bytes, utilization)


#: First vLLM release whose engine schedules asynchronously by default (v0.14.0 notes).
ASYNC_SCHEDULING_SINCE = (0, 14, 0)


def async_scheduling_of(run: RecordedRun) -> bool:
    """Whether the recorded engine scheduled asynchronously (module docstring).

    Raises
    ------
    FormatError
        If ``engine_kwargs.async_scheduling`` is present but not a boolean.
    """
    kwargs = run.meta.get("engine_kwargs") or {}
    if isinstance(kwargs, dict) and kwargs.get("async_scheduling") is not None:
        value = kwargs["async_scheduling"]
        if not isinstance(value, bool):
            raise FormatError(
                f"{run.path.parent / 'meta.json'}: engine_kwargs.async_scheduling: expected "
                f"true or false, got {value!r}"
            )
        return value
    found = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", str(run.meta.get("vllm_version", "")))
    if found is None:
        return False
    version = tuple(int(part or 0) for part in found.groups())
    return version >= ASYNC_SCHEDULING_SINCE


def queued_instants(arrival_s: np.ndarray, start_s: np.ndarray, end_s: np.ndarray) -> np.ndarray:
    """When each request is queued: the end of the iteration running at its arrival
    (``start < a <= end``), else the arrival itself (module docstring).

    ``start_s`` and ``end_s`` are the iterations' start and end times, in order.
    """
    if end_s.size == 0:
        return np.asarray(arrival_s, dtype=float).copy()
    index = np.minimum(np.searchsorted(end_s, arrival_s, side="left"), end_s.size - 1)
    busy = (start_s[index] < arrival_s) & (arrival_s <= end_s[index])
    return np.where(busy, end_s[index], arrival_s)


def engine_config_for_run(
    run: RecordedRun,
    *,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_tokens: int | None = None,
    block_size: int = 16,
) -> EngineConfig:
    """Engine limits for a replay: explicit values, else ``meta.json``'s ``engine_kwargs``
    and :func:`kv_tokens_for_run`."""
    kwargs = run.meta.get("engine_kwargs") or {}
    where = run.path.parent / "meta.json"

    def limit(value: int | None, key: str) -> int:
        if value is not None:
            return value
        found = kwargs.get(key) if isinstance(kwargs, dict) else None
        if isinstance(found, bool) or not isinstance(found, int):
            raise FormatError(f"{where}: engine_kwargs.{key}: not given; pass it explicitly")
        return found

    return EngineConfig(
        kv_capacity_tokens=kv_tokens if kv_tokens is not None else kv_tokens_for_run(run),
        block_size=block_size,
        max_num_seqs=limit(max_num_seqs, "max_num_seqs"),
        max_num_batched_tokens=limit(max_num_batched_tokens, "max_num_batched_tokens"),
    )


@dataclass(frozen=True)
class MetricComparison:
    """One metric statistic, measured and simulated (seconds), and their difference."""

    measured: float
    simulated: float
    diff_pct: float


@dataclass(frozen=True)
class ReplayReport:
    """Result of :func:`replay`.

    Attributes
    ----------
    metrics
        By :data:`METRIC_KEYS`.
    wall_s
        Wall time of the simulation and the metric computation.
    n_requests, n_finished, preemptions, iterations
        Of the simulated run.
    async_scheduling
        Whether the engine scheduled asynchronously.
    policy, cost_model
        What ran.
    config
        The engine limits used.
    """

    metrics: dict[str, MetricComparison]
    wall_s: float
    n_requests: int
    n_finished: int
    preemptions: int
    iterations: int
    policy: str
    cost_model: str
    config: EngineConfig
    async_scheduling: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"metrics": {key: {measured, simulated, diff_pct}}, "wall_s": ...}`` plus context."""
        return {
            "metrics": {
                key: {"measured": m.measured, "simulated": m.simulated, "diff_pct": m.diff_pct}
                for key, m in self.metrics.items()
            },
            "wall_s": self.wall_s,
            "n_requests": self.n_requests,
            "n_finished": self.n_finished,
            "preemptions": self.preemptions,
            "iterations": self.iterations,
            "policy": self.policy,
            "cost_model": self.cost_model,
            "async_scheduling": self.async_scheduling,
            "engine": {
                "kv_capacity_tokens": self.config.kv_capacity_tokens,
                "block_size": self.config.block_size,
                "max_num_seqs": self.config.max_num_seqs,
                "max_num_batched_tokens": self.config.max_num_batched_tokens,
            },
        }

    def to_text(self) -> str:
        """A table in milliseconds."""
        lines = [f"{'metric':<14}{'measured ms':>14}{'simulated ms':>14}{'diff %':>9}"]
        for key, m in self.metrics.items():
            lines.append(
                f"{key:<14}{m.measured * 1e3:>14.1f}{m.simulated * 1e3:>14.1f}{m.diff_pct:>+9.2f}"
            )
        lines.append(
            f"simulated {self.n_finished}/{self.n_requests} requests, {self.iterations} "
            f"iterations, {self.preemptions} preemptions, policy {self.policy}"
            f"{' (async scheduling)' if self.async_scheduling else ''}, "
            f"cost model {self.cost_model}; wall time {self.wall_s:.3f} s"
        )
        return "\n".join(lines)


def _stat(values: np.ndarray, stat: str) -> float:
    data = values[~np.isnan(values)]
    if data.size == 0:
        return math.nan
    if stat == "mean":
        return float(data.mean())
    return float(np.percentile(data, float(stat[1:])))


def run_metrics(ttft: np.ndarray, tpot: np.ndarray, latency: np.ndarray) -> dict[str, float]:
    """Mean and percentiles of each metric by :data:`METRIC_KEYS` (NaNs ignored)."""
    series = {"ttft": ttft, "tpot": tpot, "latency": latency}
    return {
        f"{metric}_{stat}": _stat(series[metric], stat) for metric in series for stat in STATISTICS
    }


def replay(
    run: RecordedRun,
    cost_model: CostModel,
    *,
    policy: str = "vllm",
    config: EngineConfig | None = None,
    tpot_target_s: float = 0.025,
    async_scheduling: bool | None = None,
) -> ReplayReport:
    """Simulate ``run``'s requests and compare the metrics with the measured ones.

    Parameters
    ----------
    run
        The recorded run.
    cost_model
        Iteration cost model.
    policy
        Policy spelling (:func:`~schedlab.serving.policies.make_policy`); ``vllm``
        reproduces vLLM v1's decode-first token budget.
    config
        Engine limits (default :func:`engine_config_for_run`).
    tpot_target_s
        TPOT target handed to SLO-aware policies (unused by ``vllm``).
    async_scheduling
        Simulate vLLM's asynchronous scheduling (default :func:`async_scheduling_of`).
    """
    config = config or engine_config_for_run(run)
    if async_scheduling is None:
        async_scheduling = async_scheduling_of(run)
    config = dataclasses.replace(config, async_scheduling=async_scheduling)
    started = time.perf_counter()
    scenario = Scenario(
        policy=policy, cost_model=cost_model, slo=SLO(60.0, tpot_target_s), engine=config
    )
    result = run_engine(run.stream(), scenario, record_batches=True)
    records = result.records
    queued = queued_instants(
        run.arrival_s,
        np.array([b.start_s for b in result.batches]),
        np.array([b.end_s for b in result.batches]),
    )
    simulated = run_metrics(
        np.array([r.first_token_s for r in records]) - queued,
        np.array([r.tpot_s if r.output > 1 else math.nan for r in records]),
        np.array([r.finish_s for r in records]) - queued,
    )
    wall = time.perf_counter() - started
    measured = run_metrics(run.ttft_s, run.tpot_s, run.latency_s)
    metrics = {
        key: MetricComparison(
            measured[key],
            simulated[key],
            100.0 * (simulated[key] - measured[key]) / measured[key]
            if measured[key]
            else math.nan,
        )
        for key in METRIC_KEYS
    }
    return ReplayReport(
        metrics,
        wall,
        len(records),
        sum(r.finished for r in records),
        sum(r.preemptions for r in records),
        int(result.iteration_end_s.size),
        result.policy,
        cost_model.name,
        config,
        async_scheduling,
    )
