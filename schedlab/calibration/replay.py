r"""Replay of a recorded serving run on the simulator, and measured-vs-simulated metrics.

:func:`replay` simulates a recorded run (:mod:`schedlab.calibration.recorded_run`) on the
engine of its own deployment (:mod:`schedlab.calibration.deployment`: limits, KV capacity,
prefix caching, asynchronous scheduling, tensor, data and expert parallelism, all from the
run's records) with a cost model, and compares.

The simulation gets the run's requests with arrival :math:`a_i` = ``queued_ts`` minus the
earliest ``queued_ts``. Its TTFT and latency are measured the way vLLM measures them, from
the *queued* instant :math:`q_i`: vLLM's engine-core busy loop takes new requests off its
input queue only between iterations (``EngineCoreProc._process_input_queue`` runs before
each engine step; ``Scheduler.add_request`` records the ``QUEUED`` event), so a request
that arrives while an iteration runs is queued when that iteration ends. Likewise
:math:`q_i` is the end of the simulated iteration running at :math:`a_i`
(``start < a_i <= end``) on the replica that serves it — in lockstep, of the group's
step, which an idle replica runs as a dummy batch — or :math:`a_i` itself when that
replica is idle then (:func:`queued_instants`). A benchmark's timestamps are the client's
(:attr:`~schedlab.calibration.recorded_run.RecordedRun.clock`): its TTFT and latency run
from when the request was sent, and so do the simulated ones, :math:`q_i = a_i`. TPOT
does not depend on it. Each metric
is compared at the mean and the 50th, 90th, 95th and 99th percentiles (numpy's linear
interpolation on both sides): ``diff_pct`` :math:`= 100\,(\text{sim} - \text{measured})
/ \text{measured}`.

The cost model must be one of the run's model and hardware (a ``profile-grid`` model says
which it was fitted for): a replay on another refuses to run unless told to, as its
figures would mean nothing. A calibrated model gets the deployment's machine terms
(:func:`~schedlab.calibration.machine_file.machine_terms`: the link, expert parallelism,
the host time of a machine file), each named with its evidence in the report; where a
term is assumed or a range of published figures, every metric is also simulated at the
ends of that evidence and shown as a band.

On request (``series=True``) the replay also builds the run's per-second time series the
way vLLM's stat logger
does (``IterationStats``: a request's prompt tokens count once, when its first token is
out; every emitted token counts as a generation token; running and waiting as last
sampled in the second; KV use as the blocks held over the usable blocks), for
:func:`schedlab.plotting.plot_replay`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.deployment import Deployment, check_modelled, deployment_of
from schedlab.calibration.machine_file import (
    MachineFile,
    MachineTerms,
    calibrated,
    machine_terms,
)
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.recorded_run import MeasuredSeries, RecordedRun
from schedlab.calibration.run_model import check_model_fits, model_for_run
from schedlab.errors import CalibrationError
from schedlab.json_files import nan_to_null
from schedlab.serving.cost_model import CostModel, get_cost_model, hardware_of
from schedlab.serving.driver import EngineRun
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.tables import to_pandas

__all__ = [
    "METRIC_KEYS",
    "MetricComparison",
    "ReplayReport",
    "queued_instants",
    "replay",
    "run_metrics",
    "simulate_recorded",
    "simulated_series",
]

#: The TPOT target handed to SLO-aware policies by default (``vllm`` reads none).
TPOT_TARGET_S = 0.025

#: Statistics compared, in report order.
STATISTICS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99")
#: Metric keys of :class:`ReplayReport`, ``<ttft|tpot|latency>_<statistic>``.
METRIC_KEYS: tuple[str, ...] = tuple(
    f"{metric}_{stat}" for metric in ("ttft", "tpot", "latency") for stat in STATISTICS
)


def queued_instants(arrival_s: np.ndarray, start_s: np.ndarray, end_s: np.ndarray) -> np.ndarray:
    """When each request is queued: the end of the iteration running at its arrival
    (``start < a <= end``), else the arrival itself (module docstring).

    ``start_s`` and ``end_s`` are one replica's iterations' start and end times, in order.
    """
    if end_s.size == 0:
        return np.asarray(arrival_s, dtype=float).copy()
    index = np.minimum(np.searchsorted(end_s, arrival_s, side="left"), end_s.size - 1)
    busy = (start_s[index] < arrival_s) & (arrival_s <= end_s[index])
    return np.where(busy, end_s[index], arrival_s)


@dataclass(frozen=True)
class MetricComparison:
    """One metric statistic, measured and simulated (seconds), and their difference; and
    ``band``, its lowest and highest simulated value at the ends of the terms that are
    assumed or published ranges (the KV capacity of a run that does not record it, a
    link without a measurement), ``None`` when every term is measured."""

    measured: float
    simulated: float
    diff_pct: float
    band: tuple[float, float] | None = None


def simulated_series(
    run: EngineRun, prompt: np.ndarray, total_blocks: int, window_s: float = 1.0
) -> MeasuredSeries:
    """The simulated run's per-second series, as vLLM's stat logger counts (module docs).

    Needs the run's batch records; buckets end at ``window_s, 2 window_s, ...``.
    """
    ends = run.iteration_end_s
    horizon = max(1, math.ceil(float(run.end_s) / window_s))
    edges = np.arange(1, horizon + 1) * window_s
    bucket = np.minimum(np.searchsorted(edges, ends, side="left"), horizon - 1)
    generated = np.zeros(horizon)
    for record in run.records:
        for a, b in record.segments:
            np.add.at(generated, bucket[a : b + 1], 1.0)
    first = np.array([r.first_token_s for r in run.records])
    done = ~np.isnan(first)
    prompts = np.zeros(horizon)
    where = np.minimum(np.searchsorted(edges, first[done], side="left"), horizon - 1)
    np.add.at(prompts, where, prompt[done].astype(float))
    running, waiting, kv = np.zeros(horizon), np.zeros(horizon), np.zeros(horizon)
    sizes = run.replica_iterations or (len(run.batches),)
    replicas = max(1, len(sizes))
    offset = 0
    for size in sizes:
        closing: dict[int, int] = {}
        for k in range(offset, offset + size):
            closing[int(bucket[k])] = k  # the last iteration of each second
        state = (0, 0, 0)
        for b in range(horizon):
            if b in closing:
                batch = run.batches[closing[b]]
                state = (batch.running, batch.waiting, batch.used_blocks)
            running[b] += state[0]
            waiting[b] += state[1]
            kv[b] += state[2]
        offset += size
    return MeasuredSeries(
        edges,
        prompts / window_s,
        generated / window_s,
        running,
        waiting,
        100.0 * kv / (total_blocks * replicas),
    )


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
    policy, cost_model
        What ran.
    deployment
        The deployment simulated, with where each setting came from.
    measured, simulated
        Per-request TTFT, TPOT (NaN for one-token outputs) and latency, seconds.
    series, measured_series
        The per-second series of the simulation and of the run (if recorded).
    reused_tokens
        KV tokens resumed requests took back from the prefix cache.
    hardware
        The GPU the cost model describes.
    engine_kind
        Whose scheduler ran (:mod:`schedlab.serving.engine_kinds`).
    machine_notes
        Where each machine term (link, host time) came from, one line each.
    """

    metrics: dict[str, MetricComparison]
    wall_s: float
    n_requests: int
    n_finished: int
    preemptions: int
    iterations: int
    policy: str
    cost_model: str
    deployment: Deployment
    measured: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    simulated: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    series: MeasuredSeries | None = field(default=None, repr=False)
    measured_series: MeasuredSeries | None = field(default=None, repr=False)
    reused_tokens: int = 0
    hardware: str = ""
    engine_kind: str = "schedlab"
    machine_notes: tuple[str, ...] = ()

    @property
    def config(self) -> Any:
        """The engine limits used (one replica's)."""
        return self.deployment.engine

    @property
    def async_scheduling(self) -> bool:
        return self.deployment.engine.async_scheduling

    @property
    def worst(self) -> tuple[str, float]:
        """The metric furthest from its measurement, and its difference (percent); metrics
        whose difference is undefined (a measured 0) are passed over."""
        defined = [k for k in self.metrics if not math.isnan(self.metrics[k].diff_pct)]
        if not defined:
            return "", math.nan
        key = max(defined, key=lambda k: abs(self.metrics[k].diff_pct))
        return key, self.metrics[key].diff_pct

    def to_dict(self) -> dict[str, Any]:
        """``{"metrics": {key: {measured, simulated, diff_pct}}, "wall_s": ...}`` plus context
        (``null`` where a figure is undefined)."""
        engine = self.deployment.engine
        data = {
            "metrics": {
                key: {
                    "measured": m.measured,
                    "simulated": m.simulated,
                    "diff_pct": m.diff_pct,
                    **({} if m.band is None else {"band": list(m.band)}),
                }
                for key, m in self.metrics.items()
            },
            "worst": {"metric": self.worst[0], "diff_pct": self.worst[1]},
            "wall_s": self.wall_s,
            "n_requests": self.n_requests,
            "n_finished": self.n_finished,
            "preemptions": self.preemptions,
            "reused_tokens": self.reused_tokens,
            "iterations": self.iterations,
            "policy": self.policy,
            "engine_kind": self.engine_kind,
            "cost_model": self.cost_model,
            "hardware": self.hardware,
            "async_scheduling": engine.async_scheduling,
            "engine": dataclasses.asdict(engine),
            "deployment": {
                "replicas": self.deployment.replicas,
                "lockstep": self.deployment.lockstep,
                "tp": self.deployment.tp,
                "ep": self.deployment.ep,
                "notes": list(self.deployment.notes),
                "unmodelled": list(self.deployment.unmodelled),
            },
            "machine": list(self.machine_notes),
        }
        return nan_to_null(data)

    def rows(self) -> list[dict[str, Any]]:
        """One flat row a metric statistic (``ttft_mean``...): measured and simulated in
        seconds, their difference in percent, and the band's ends in seconds when a term
        is assumed (:class:`MetricComparison`)."""
        rows = []
        for key, m in self.metrics.items():
            row: dict[str, Any] = {
                "metric": key,
                "measured_s": m.measured,
                "simulated_s": m.simulated,
                "diff_pct": m.diff_pct,
            }
            if m.band is not None:
                row["band_low_s"], row["band_high_s"] = m.band
            rows.append(row)
        return rows

    def to_pandas(self) -> Any:
        """:meth:`rows` as a pandas DataFrame (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas(self.rows())

    def to_text(self) -> str:
        """A table in milliseconds, then the deployment."""
        banded = any(m.band is not None for m in self.metrics.values())
        head = f"{'metric':<14}{'measured ms':>14}{'simulated ms':>14}{'diff %':>9}"
        lines = [head + (f"{'band ms':>22}" if banded else "")]
        for key, m in self.metrics.items():
            row = (
                f"{key:<14}{m.measured * 1e3:>14.1f}{m.simulated * 1e3:>14.1f}{m.diff_pct:>+9.2f}"
            )
            if m.band is not None:
                row += f"{f'{m.band[0] * 1e3:.1f} .. {m.band[1] * 1e3:.1f}':>22}"
            lines.append(row)
        worst, diff = self.worst
        d = self.deployment
        lines.append(
            f"worst {worst} {diff:+.2f}%; simulated {self.n_finished}/{self.n_requests} "
            f"requests, {self.iterations} iterations, {self.preemptions} preemptions, "
            f"policy {self.policy} on engine {self.engine_kind}, cost model {self.cost_model} "
            f"({self.hardware}); wall time "
            f"{self.wall_s:.3f} s"
        )
        lines.append(
            f"deployment: {d.replicas} replica(s){' in lockstep' if d.lockstep else ''}, "
            f"tp {d.tp}, ep {d.ep}; " + "; ".join(d.notes)
        )
        lines += [f"machine: {note}" for note in self.machine_notes]
        if banded:
            lines.append(
                "band: each metric at the ends of the assumed or published terms (KV "
                "capacity, link); give measured ones (--kv-tokens, --link, --machine) to "
                "narrow it"
            )
        lines += [f"NOT MODELLED (replayed with --allow-mismatch): {u}" for u in d.unmodelled]
        return "\n".join(lines)


def simulate_recorded(
    run: RecordedRun, cost_model: CostModel, deployment: Deployment, policy: str = "vllm"
) -> tuple[EngineRun, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Simulate ``run``'s requests on ``deployment`` with ``cost_model`` as it is (no
    machine terms put on it, no band): the simulated run, with its batches, and each
    request's TTFT, TPOT and latency from when it was queued (module docstring)."""
    scenario = _scenario(cost_model, deployment, policy)
    return _simulate(run, scenario, deployment.lockstep)


def _scenario(
    cost_model: CostModel,
    deployment: Deployment,
    policy: str,
    tpot_target_s: float = TPOT_TARGET_S,
) -> Scenario:
    return Scenario(
        policy=policy,
        cost_model=cost_model,
        slo=SLO(60.0, tpot_target_s),
        engine=deployment.engine,
        replicas=deployment.replicas,
        lockstep=deployment.lockstep,
    )


def _simulate(
    run: RecordedRun, scenario: Scenario, lockstep: bool
) -> tuple[EngineRun, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Simulate ``run``'s requests under ``scenario``: the run, and each request's TTFT,
    TPOT (NaN for one-token outputs) and latency from when it was queued."""
    result = run_engine(run.stream(), scenario, record_batches=True)
    queued = _queued(run, result, lockstep)
    records = result.records
    first = np.array([r.first_token_s for r in records]) - queued
    finish = np.array([r.finish_s for r in records]) - queued
    tpot = np.array([r.tpot_s if r.output > 1 else math.nan for r in records])
    return result, (first, tpot, finish)


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


def _queued(run: RecordedRun, result: EngineRun, lockstep: bool) -> np.ndarray:
    """Each simulated request's queued instant (module docstring): the arrival itself for
    a benchmark's client-side clock; else per replica, over the steps of the whole group
    in lockstep (a replica without work runs a dummy batch in each)."""
    arrival = np.array(run.arrival_s, dtype=float)
    if run.clock == "client":
        return arrival
    queued = arrival.copy()
    replicas = np.array([r.replica for r in result.records])
    offset = 0
    steps = [(b.start_s, b.end_s) for b in result.batches]
    for replica, size in enumerate(result.replica_iterations):
        mine = steps if lockstep else steps[offset : offset + size]
        bounds = np.array(sorted(set(mine))) if mine else np.zeros((0, 2))
        serves = replicas == replica
        queued[serves] = queued_instants(arrival[serves], bounds[:, 0], bounds[:, 1])
        offset += size
    return queued


def replay(
    run: RecordedRun,
    cost_model: str | CostModel | None = None,
    *,
    deployment: Deployment | None = None,
    policy: str = "vllm",
    tpot_target_s: float = TPOT_TARGET_S,
    allow_mismatch: bool = False,
    series: bool = False,
    engine_kind: str = "schedlab",
    engine_model: str | None = None,
    data_dir: str | Path | None = None,
    machine: MachineFile | None = None,
) -> ReplayReport:
    """Simulate ``run``'s requests on its deployment and compare the metrics.

    Parameters
    ----------
    run
        The recorded run.
    cost_model
        Iteration cost model (an object, or a name or path for
        :func:`~schedlab.serving.cost_model.get_cost_model`); default
        :func:`~schedlab.calibration.run_model.model_for_run` the deployment (the shipped
        model of its model, GPU and TP degree, else one calibrated from the matching
        profile under ``data_dir``).
    deployment
        Default :func:`~schedlab.calibration.deployment.deployment_of` the run.
    policy
        Policy spelling (:func:`~schedlab.serving.policy_registry.make_policy`); ``vllm``
        reproduces vLLM v1's decode-first token budget.
    tpot_target_s
        TPOT target handed to SLO-aware policies (unused by ``vllm``).
    allow_mismatch
        Replay even with a cost model of another model, GPU or TP degree, or a run that
        records a setting the simulator does not model (the report's notes name it).
    series
        Also build the per-second series (for :func:`~schedlab.plotting.plot_replay`).
    engine_kind
        Whose scheduler runs the replicas: ``schedlab``, or ``vllm`` for vLLM's own
        (:mod:`schedlab.serving.engine_kinds`; ``policy`` must then be ``vllm``).
    engine_model
        The model folder of an engine kind that reads one (``vllm``; ``None``: its own).
    data_dir
        Where a run without a shipped model finds ``profiles/`` (``$SCHEDLAB_DATA``).
    machine
        A machine file of the run's GPU and release, fitted on another run, whose terms
        the model takes (:func:`~schedlab.calibration.machine_file.machine_terms`).

    Raises
    ------
    CalibrationError
        If ``machine``, or a measured link in ``deployment``, is given with a cost model
        that is not calibrated, or ``data_dir`` with a cost model (it would not be read).
    FormatError
        If ``machine`` is of another GPU or release, or was fitted on ``run``.
    """
    deployment = deployment or deployment_of(run)
    check_modelled(deployment, allow=allow_mismatch, where=str(run.path))
    cost_model = _model(run, deployment, cost_model, data_dir, allow_mismatch)
    terms = None
    if machine is not None:
        machine.check(deployment.hardware or hardware_of(cost_model), run)
        calibrated(cost_model, machine)
    if isinstance(cost_model, ProfileCostModel):
        terms = machine_terms(cost_model, deployment, machine)
        cost_model = terms.model
    started = time.perf_counter()
    scenario = _scenario(cost_model, deployment, policy, tpot_target_s).with_(
        engine_kind=engine_kind, engine_model=engine_model
    )
    result, per_request = _simulate(run, scenario, deployment.lockstep)
    simulated = run_metrics(*per_request)
    band = _band(run, scenario, deployment, terms, simulated)
    built = (
        simulated_series(result, run.prompt, deployment.engine.total_blocks) if series else None
    )
    wall = time.perf_counter() - started
    records = result.records
    first, tpot, latency = per_request
    return ReplayReport(
        _compare(run_metrics(run.ttft_s, run.tpot_s, run.latency_s), simulated, band),
        wall,
        len(records),
        sum(r.finished for r in records),
        sum(r.preemptions for r in records),
        int(result.iteration_end_s.size),
        result.policy,
        cost_model.name,
        deployment,
        measured={"ttft": run.ttft_s, "tpot": run.tpot_s, "latency": run.latency_s},
        simulated={"ttft": first, "tpot": tpot, "latency": latency},
        series=built,
        measured_series=run.series,
        reused_tokens=result.reused_tokens,
        hardware=result.hardware,
        engine_kind=engine_kind,
        machine_notes=() if terms is None else terms.notes,
    )


def _compare(
    measured: dict[str, float], simulated: dict[str, float], band: dict[str, tuple[float, float]]
) -> dict[str, MetricComparison]:
    """Each metric measured, simulated, their difference (%) and its band."""
    return {
        key: MetricComparison(
            measured[key],
            simulated[key],
            100.0 * (simulated[key] - measured[key]) / measured[key]
            if measured[key]
            else math.nan,
            band.get(key),
        )
        for key in METRIC_KEYS
    }


def _model(
    run: RecordedRun,
    deployment: Deployment,
    cost_model: CostModel | str | None,
    data_dir: str | Path | None,
    allow_mismatch: bool,
) -> CostModel:
    """The cost model of :func:`replay`, refusing an option it would not act on."""
    if cost_model is None:
        cost_model, _ = model_for_run(deployment, data_dir, run=run)
    elif data_dir is not None:
        raise CalibrationError(
            "--data-dir: read only to calibrate the run's profile when no cost model is given"
        )
    else:
        cost_model = get_cost_model(cost_model)
    given = deployment.link is not None and deployment.link.kind == "measured"
    if given and not isinstance(cost_model, ProfileCostModel):
        raise CalibrationError(
            f"--link: only a calibrated (profile-grid) cost model times collectives; "
            f"{cost_model.name} would not use it"
        )
    if given and cost_model.parallelism.tp <= 1 and not deployment.lockstep:  # type: ignore[attr-defined]
        raise CalibrationError(
            f"--link: the cost model {cost_model.name} is of one GPU (tp 1) and this "
            "deployment has no expert parallelism across replicas: no collective would use it"
        )
    if not allow_mismatch:
        check_model_fits(cost_model, deployment)
    return cost_model


def _band(
    run: RecordedRun,
    scenario: Scenario,
    deployment: Deployment,
    terms: MachineTerms | None,
    simulated: dict[str, float],
) -> dict[str, tuple[float, float]]:
    """Each metric's lowest and highest simulated value over every combination of the ends
    of the terms that are assumed or taken from a range of published figures: the KV
    capacity of a run that does not record it (its low end and the point), and a
    published or assumed link (its slow end, the point and its fast end); empty when every
    term is measured."""
    engines = [deployment.engine]
    if deployment.kv_band is not None and deployment.kv_band[0] < deployment.engine.kv_tokens:
        engines.append(dataclasses.replace(deployment.engine, kv_tokens=deployment.kv_band[0]))
    models = [scenario.cost_model]
    link = None if terms is None else terms.link
    if terms is not None and link is not None and link.ends is not None:
        models += [terms.model.deployed(link=end) for end in link.at_ends()]
    corners = [
        scenario.with_(engine=engine, cost_model=model)
        for engine in engines
        for model in models
        if (engine, model) != (deployment.engine, scenario.cost_model)
    ]
    if not corners:
        return {}
    ends = [run_metrics(*_simulate(run, c, deployment.lockstep)[1]) for c in corners]
    return {
        key: (
            min(simulated[key], *(e[key] for e in ends)),
            max(simulated[key], *(e[key] for e in ends)),
        )
        for key in METRIC_KEYS
    }
