"""Simulating a workload on one engine: :func:`run_engine` and :func:`simulate`.

:func:`run_engine` runs a ready request stream on the engine of
:mod:`schedlab.serving.engine` under a :class:`~schedlab.serving.scenario.Scenario`;
:func:`simulate` also draws the stream from a workload and summarises the run
(:mod:`schedlab.serving.metrics`). The semantics are those of ``docs/design.md``,
section "Online model".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.arguments_check import check_int, check_real, check_types
from schedlab.errors import ServingError
from schedlab.serving.driver import Driver, EngineRun
from schedlab.serving.engine import Engine
from schedlab.serving.engine_kinds import BUILTIN_KIND, Replica, replica_factory
from schedlab.serving.iteration import BatchRecord, IterationTime
from schedlab.serving.metrics import RequestRecord, Summary, summarize
from schedlab.serving.prediction import predict_outputs
from schedlab.serving.scenario import Scenario
from schedlab.serving.workloads import (
    DEFAULT_WORKLOAD,
    MAX_REQUESTS,
    RequestStream,
    make_workload,
)
from schedlab.tables import to_pandas

__all__ = [
    "DEFAULT_WINDOW_S",
    "BatchRecord",
    "EngineRun",
    "SimulationResult",
    "check_stops",
    "check_window",
    "run_engine",
    "simulate",
]

#: The arrival window (seconds) of :func:`simulate` and of each point of a sweep.
DEFAULT_WINDOW_S = 60.0


def check_window(entry: str, rate: Any, duration_s: Any, max_requests: Any) -> None:
    """Refuse, at the door of ``entry``, the arguments that draw a stream: a ``rate``
    (``None``: the workload's) and a window ``duration_s`` that are not finite and
    positive, a request cap ``max_requests`` that is no integer ``>= 1``.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for a value that is no number.
    ServingError
        For one out of its domain, NaN included.
    """
    if rate is not None:
        check_real(rate, f"{entry}: rate", 0, error=ServingError, above=True)
    check_real(duration_s, f"{entry}: duration_s", 0, error=ServingError, above=True)
    check_int(max_requests, f"{entry}: max_requests", 1, error=ServingError)


def check_stops(entry: str, stop_at_s: Any, max_violations: Any) -> None:
    """Refuse, at the door of ``entry``, a stop time that is not finite and ``>= 0`` or
    a count of violations that is no integer ``>= 0`` (``None``: no such stop).

    Raises
    ------
    InputTypeError, ServingError
        As :func:`check_window`.
    """
    if stop_at_s is not None:
        check_real(stop_at_s, f"{entry}: stop_at_s", 0, error=ServingError)
    if max_violations is not None:
        check_int(max_violations, f"{entry}: max_violations", 0, error=ServingError)


def run_engine(
    stream: RequestStream,
    scenario: Scenario,
    *,
    stop_at_s: float | None = None,
    max_violations: int | None = None,
    record_batches: bool = False,
) -> EngineRun:
    """Simulate ``stream`` on one engine.

    Parameters
    ----------
    stream
        The requests.
    scenario
        Engine, policy, cost models, SLO and seed.
    stop_at_s
        Stop at this simulated time.
    max_violations
        Stop as soon as more than this many requests are known to miss the SLO.
    record_batches
        Keep a :class:`~schedlab.serving.iteration.BatchRecord` per iteration.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type.
    ServingError
        For a stop time that is not finite and ``>= 0``, a negative ``max_violations``.
    """
    check_types(
        "run_engine",
        stream=(stream, (RequestStream,)),
        scenario=(scenario, (Scenario,)),
        record_batches=(record_batches, (bool,)),
    )
    check_stops("run_engine", stop_at_s, max_violations)
    model = scenario.predicted()
    timing = IterationTime(model, scenario.actual(), scenario.noise_cv, scenario.seed)
    engines: list[Replica]
    if scenario.engine_kind == BUILTIN_KIND:
        engines = [
            Engine(
                scenario.build_policy(model),
                scenario.engine,
                timing,
                slo=scenario.slo,
                index=k,
                record_batches=record_batches,
            )
            for k in range(scenario.replicas)
        ]
    else:
        factory = replica_factory(scenario.engine_kind)
        engines = [
            factory(scenario, timing=timing, index=k, record_batches=record_batches)
            for k in range(scenario.replicas)
        ]
    driver = Driver(
        stream,
        engines,
        lockstep=scenario.lockstep,
        max_violations=max_violations,
        stop_at_s=stop_at_s,
        predictions=predict_outputs(scenario.prediction_spec, stream.output, scenario.seed),
    )
    return driver.result(driver.run())


@dataclass(frozen=True)
class SimulationResult:
    """Per-request records, their summary, and the raw run."""

    records: tuple[RequestRecord, ...]
    summary: Summary
    run: EngineRun = field(repr=False)
    wall_s: float = 0.0

    def to_pandas(self) -> Any:
        """The per-request records (:meth:`RequestRecord.to_dict`) as a pandas DataFrame,
        one row a request (the summary's: ``summary.to_pandas()``; pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas([record.to_dict() for record in self.records])


def simulate(
    workload: str | RequestStream = DEFAULT_WORKLOAD,
    scenario: Scenario | None = None,
    *,
    rate: float | None = None,
    duration_s: float = DEFAULT_WINDOW_S,
    data_dir: str | Path | None = None,
    stop_at_s: float | None = None,
    max_violations: int | None = None,
    record_batches: bool = False,
    max_requests: int = MAX_REQUESTS,
) -> SimulationResult:
    """Simulate a workload under a scenario and summarise it.

    Parameters
    ----------
    workload
        A name of :data:`~schedlab.serving.workloads.WORKLOADS`, a trace path, or a
        ready :class:`RequestStream`.
    scenario
        Engine, policy, cost models, SLO and seed (default :class:`Scenario`'s defaults).
    rate, duration_s
        Mean arrival rate (requests/s) and arrival window of a generated stream. ``None``:
        :data:`~schedlab.serving.workloads.DEFAULT_RATE_RPS` for a synthetic workload, the
        recorded timestamps for a replay (a rate given rescales them, and the stream's
        name says so).
    data_dir
        Where replayed traces are looked up (default ``$SCHEDLAB_DATA``).
    stop_at_s, max_violations, record_batches
        See :func:`run_engine`.
    max_requests
        Refuse a generated stream of more requests than this (estimated before drawing).

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type, e.g. a policy name where a
        :class:`Scenario` belongs.
    ServingError
        On a stream without requests (the rate and window give none) or one too large;
        for a rate or window that is not finite and positive, a stop time that is not
        finite and ``>= 0`` (:func:`check_window`, :func:`check_stops`).
    """
    started = time.perf_counter()
    check_types(
        "simulate",
        workload=(workload, (str, RequestStream)),
        scenario=(scenario, (Scenario, type(None))),
        data_dir=(data_dir, (str, Path, type(None))),
        record_batches=(record_batches, (bool,)),
    )
    check_window("simulate", rate, duration_s, max_requests)
    check_stops("simulate", stop_at_s, max_violations)
    scenario = scenario or Scenario()
    if isinstance(workload, RequestStream):
        stream = workload
    else:
        stream = make_workload(workload, data_dir=data_dir).generate(
            rate, duration_s, scenario.seed, max_requests=max_requests
        )
    if len(stream) == 0:
        raise ServingError(
            f"workload {stream.name!r}: no request arrives in the {stream.duration_s:g} s "
            "window; raise the rate or the window"
        )
    run = run_engine(
        stream,
        scenario,
        stop_at_s=stop_at_s,
        max_violations=max_violations,
        record_batches=record_batches,
    )
    summary = summarize(
        run.records,
        run.iteration_end_s,
        slo=scenario.slo,
        duration_s=stream.duration_s,
        end_s=run.end_s,
        policy=run.policy,
        workload=stream.name,
        cost_model=run.cost_model,
        policy_stats=run.policy_stats,
        peak_kv_tokens=run.peak_kv_tokens,
        hardware=run.hardware,
    )
    return SimulationResult(run.records, summary, run, time.perf_counter() - started)
