r"""Capacity (highest rate meeting an SLO-attainment target) and policy sweeps.

Capacity (``docs/design.md``, "Metrics and SLOs"; DistServe, Zhong et al., OSDI 2024, call
it per-GPU goodput) is the highest mean arrival rate :math:`\lambda` whose run reaches
attainment :math:`\ge 0.9`. It is found by bracketing (doubling or halving from
``start_rps``) and then geometric bisection until :math:`hi / lo - 1 \le` ``rel_tol``
(at least :data:`MIN_REL_TOL`); the answer is the highest rate *tested* that met the
target. Streams use common random numbers (:mod:`schedlab.serving.workloads`), so each
rate sees the same requests at a different spacing and one explicit seed fixes everything.

Two stop rules make overloaded runs cheap without changing any decision:

* *exact horizon* (``every-token`` and ``mean`` SLOs): a request unfinished at
  :math:`H = \max_i (a_i + X + (o_i - 1) D)` has missed the SLO for certain (either its
  first token came after :math:`a_i + X`, or its last after :math:`t_1 + (o_i - 1) D`,
  so its mean gap, and then its largest, exceeds :math:`D`), so the run stops at
  :math:`H` and attainment is exact. A ``p99`` SLO tolerates a few gaps of any length,
  so it has no such horizon and its runs go to the end;
* *early failure*: once more than :math:`\lfloor (1 - 0.9) N \rfloor` requests are known
  to miss, the rate fails; the attainment then reported is a lower bound (marked
  ``exact=False``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from schedlab.arguments_check import check_real, check_type, check_types
from schedlab.errors import FormatError, ServingError
from schedlab.jobs import Executor, Job, Outcome, executor_of, run_jobs
from schedlab.progress import Progress, progress_for
from schedlab.serving.cost_model import hardware_of
from schedlab.serving.metrics import Summary
from schedlab.serving.policy_registry import get_policy
from schedlab.serving.prediction import check_spec
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import DEFAULT_WINDOW_S, simulate
from schedlab.serving.workloads import DEFAULT_WORKLOAD, Workload, make_workload
from schedlab.tables import to_pandas

__all__ = [
    "CAPACITY_WINDOW_S",
    "DEFAULT_SWEEP_POLICIES",
    "MIN_REL_TOL",
    "CapacityResult",
    "GridError",
    "Probe",
    "SweepPoint",
    "capacity",
    "capacity_grid",
    "probe",
    "run_serving_job",
    "sweep",
    "sweep_title",
]


T = TypeVar("T")

#: The arrival window (seconds) of each run of a capacity search: longer than a single
#: simulation's, so that a rate near capacity has time to build its queue.
CAPACITY_WINDOW_S = 120.0

#: The finest relative tolerance of a capacity search. Bisecting a factor-2 bracket down to
#: it takes 20 runs; a finer step moves the last arrival of a 120 s window by under 120 us,
#: less than one iteration, so no finer answer means anything (and below the spacing of
#: floats no rate lies between ``lo`` and ``hi`` at all).
MIN_REL_TOL = 1e-6

#: The policies ``schedlab sweep`` compares when none are named.
DEFAULT_SWEEP_POLICIES: tuple[str, ...] = ("vllm", "sarathi", "sloweave", "fixed:512")


@dataclass(frozen=True)
class Probe:
    """Attainment at one rate.

    ``exact`` is ``False`` when the run stopped at the early-failure rule (then
    ``attainment`` is a lower bound, and below the target). ``preemptions`` and
    ``peak_kv_tokens`` are the run's (up to where it stopped).
    """

    rate_rps: float
    attainment: float
    n_requests: int
    exact: bool
    preemptions: int = 0
    peak_kv_tokens: int = 0

    def meets(self, target: float) -> bool:
        """Whether the run reached ``target``; a run without requests shows nothing and
        does not (:func:`capacity` searches on above it, and refuses to answer with it)."""
        return self.n_requests > 0 and self.attainment >= target


def probe(
    workload: Workload,
    rate: float,
    scenario: Scenario,
    *,
    duration_s: float,
    target: float = 0.9,
) -> Probe:
    """Simulate one rate with both stop rules of the module docstring."""
    stream = workload.generate(rate, duration_s, scenario.seed)
    n = len(stream)
    if n == 0:
        return Probe(rate, math.nan, 0, True)
    slo = scenario.slo
    horizon = math.inf
    if slo.kind != "p99":
        limits = stream.arrival_s + slo.ttft_limit_s + (stream.output - 1) * slo.gap_limit_s
        horizon = float(limits.max())
    allowed = math.floor((1 - target) * n + 1e-9)
    stop = None if horizon == math.inf else horizon
    result = simulate(stream, scenario, stop_at_s=stop, max_violations=allowed)
    summary = result.summary
    exact = not summary.truncated or result.run.end_s >= horizon
    return Probe(rate, summary.attainment, n, exact, summary.preemptions, summary.peak_kv_tokens)


@dataclass(frozen=True)
class CapacityResult:
    """Outcome of :func:`capacity`.

    Attributes
    ----------
    hardware
        The GPU the cost model describes (:func:`~schedlab.serving.cost_model.hardware_of`).
    capacity_rps
        Highest tested rate meeting the target (0 if even the lowest failed).
    saturated
        ``True`` if ``max_rps`` itself met the target (capacity is at least that).
    probes
        Every rate tested, in order.
    predictions
        The prediction model of the output lengths the policy saw
        (:attr:`~schedlab.serving.scenario.Scenario.prediction_spec`).
    """

    policy: str
    workload: str
    cost_model: str
    hardware: str
    tpot_s: float
    ttft_s: float
    tpot_slo: str
    target: float
    duration_s: float
    seed: int
    capacity_rps: float
    saturated: bool
    probes: tuple[Probe, ...]
    predictions: str = "perfect"

    @property
    def at_capacity(self) -> Probe | None:
        """The probe at the capacity rate (``None`` if capacity is 0)."""
        return next((p for p in self.probes if p.rate_rps == self.capacity_rps), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["probes"] = [
            {**p, "attainment": None if math.isnan(p["attainment"]) else p["attainment"]}
            for p in data["probes"]
        ]
        return data

    def row(self) -> dict[str, Any]:
        """One flat row for tables and CSV (the probes as their count, ``runs``)."""
        return {
            "policy": self.policy,
            "predictions": self.predictions,
            "workload": self.workload,
            "cost_model": self.cost_model,
            "hardware": self.hardware,
            "seed": self.seed,
            "capacity_rps": self.capacity_rps,
            "saturated": self.saturated,
            "target": self.target,
            "ttft_slo_s": self.ttft_s,
            "tpot_slo_s": self.tpot_s,
            "tpot_slo": self.tpot_slo,
            "duration_s": self.duration_s,
            "runs": len(self.probes),
        }

    def to_pandas(self) -> Any:
        """:meth:`row` as a pandas DataFrame of one row (pandas is optional:
        :func:`~schedlab.tables.require_pandas`); a grid's: ``to_pandas([r.row() for r in
        results])`` of :func:`schedlab.tables.to_pandas`."""
        return to_pandas([self.row()])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacityResult:
        """The result :meth:`to_dict` gave."""
        probes = tuple(
            Probe(**{**p, "attainment": math.nan if p["attainment"] is None else p["attainment"]})
            for p in data["probes"]
        )
        return cls(**{**data, "probes": probes})


def capacity(
    workload: str | Workload = DEFAULT_WORKLOAD,
    scenario: Scenario | None = None,
    *,
    duration_s: float = CAPACITY_WINDOW_S,
    target: float = 0.9,
    rel_tol: float = 0.02,
    start_rps: float = 1.0,
    max_rps: float = 1000.0,
    data_dir: str | None = None,
    progress: bool | Progress = False,
) -> CapacityResult:
    """Highest arrival rate with SLO attainment ``>= target``, by bisection.

    The scenario's policy must be a spelling (each rate runs a fresh policy). The search
    halves the rate down to ``20 / duration_s`` (about 20 requests) at most; if that
    still fails, the capacity is reported as 0. ``progress``: show each probe on a bar on
    standard error (:mod:`schedlab.progress`), or step the caller's.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type.
    ServingError
        On a target outside (0, 1], a tolerance below :data:`MIN_REL_TOL`, rate bounds or
        a window that are not finite and positive, or a policy object in the scenario;
        and when the highest rate that met the target drew no request in ``duration_s``
        (an empty run meets nothing).
    """
    check_types(
        "capacity",
        workload=(workload, (str, Workload)),
        scenario=(scenario, (Scenario, type(None))),
        data_dir=(data_dir, (str, Path, type(None))),
        progress=(progress, (bool, Progress)),
    )
    scenario = scenario or Scenario()
    if not isinstance(scenario.policy, str):
        raise ServingError("capacity: give the policy by name (each rate needs a fresh one)")
    _check_search(target, rel_tol, start_rps, max_rps)
    check_real(duration_s, "capacity: duration_s", 0, error=ServingError, above=True)
    model = scenario.predicted()
    scenario = scenario.with_(cost_model=model)  # loaded once for every probe
    load = make_workload(workload, data_dir=data_dir) if isinstance(workload, str) else workload
    probes: list[Probe] = []
    with progress_for(progress, f"capacity of {scenario.policy}") as bar:

        def meets(rate: float) -> bool:
            bar.doing(f"{rate:.4g} req/s")
            p = probe(load, rate, scenario, duration_s=duration_s, target=target)
            probes.append(p)
            bar.step(f"{rate:.4g} req/s: attainment {p.attainment:.3f}")
            # a run without requests shows nothing; the search goes on above it (with
            # common random numbers a higher rate draws at least the same requests)
            return p.n_requests == 0 or p.meets(target)

        # below ~20 requests an attainment means little
        lo, hi = _bisect(meets, start_rps, max_rps, 20.0 / duration_s, rel_tol)
    result = CapacityResult(
        policy=str(scenario.policy),
        workload=load.name,
        cost_model=model.name,
        hardware=hardware_of(model),
        tpot_s=scenario.slo.tpot_s,
        ttft_s=scenario.slo.ttft_s,
        tpot_slo=scenario.slo.kind,
        target=target,
        duration_s=duration_s,
        seed=scenario.seed,
        capacity_rps=lo,
        saturated=hi == math.inf,
        probes=tuple(probes),
        predictions=scenario.prediction_spec,
    )
    kept = result.at_capacity
    if kept is not None and kept.n_requests == 0:
        raise ServingError(
            f"capacity: no request arrives at {lo:.4g} req/s in {duration_s:g} s (seed "
            f"{scenario.seed}), the highest rate the search kept, so it shows nothing; "
            "lengthen the duration"
        )
    return result


def _check_search(target: float, rel_tol: float, start_rps: float, max_rps: float) -> None:
    """Refuse the parameters of a capacity search that cannot give an answer.

    Raises
    ------
    InputTypeError
        For a parameter that is no number.
    ServingError
        On a target outside (0, 1], a tolerance below :data:`MIN_REL_TOL`, or rate
        bounds that are not ``0 < start_rps <= max_rps``, finite.
    """
    for name, value in (("target", target), ("rel_tol", rel_tol), ("start_rps", start_rps)):
        check_real(value, f"capacity: {name}", error=ServingError)
    check_real(max_rps, "capacity: max_rps", error=ServingError)
    if not 0 < target <= 1:
        raise ServingError(f"capacity: target attainment must be in (0, 1], got {target}")
    if not rel_tol >= MIN_REL_TOL:
        raise ServingError(f"capacity: rel_tol must be at least {MIN_REL_TOL:g}, got {rel_tol}")
    if not (start_rps > 0 and max_rps >= start_rps):
        raise ServingError(f"capacity: need 0 < start_rps <= max_rps, got {start_rps}, {max_rps}")


def _bisect(
    meets: Callable[[float], bool], start: float, top: float, floor: float, rel_tol: float
) -> tuple[float, float]:
    """Bracket by doubling (up to ``top``) or halving (down to ``floor``) from ``start``,
    then bisect geometrically until ``hi / lo - 1 <= rel_tol`` or no float lies between
    them; ``(lo, hi)``: the highest rate that met the target (0 if none) and the lowest
    above it that failed (``inf`` if none)."""
    lo, hi = 0.0, math.inf
    rate = start
    if meets(rate):
        lo = rate
        while hi == math.inf:
            rate = min(rate * 2, top)
            if meets(rate):
                lo = rate
                if rate >= top:
                    break
            else:
                hi = rate
    else:
        hi = rate
        while lo == 0.0 and rate > floor:
            rate = max(rate / 2, floor)
            if meets(rate):
                lo = rate
            else:
                hi = rate
    while lo > 0 and hi < math.inf and hi / lo - 1 > rel_tol:
        mid = math.sqrt(lo) * math.sqrt(hi)  # lo * hi may overflow
        if not lo < mid < hi:
            break  # adjacent floats: no rate left between them to test
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


@dataclass(frozen=True)
class SweepPoint:
    """One (policy, rate) cell of a sweep (attainment under ``summary.slo``); ``workload``
    is the name the sweep was asked for (``summary.workload`` may add a replay's
    rescaling to this point's rate)."""

    policy: str
    rate_rps: float
    summary: Summary
    workload: str = ""

    def row(self) -> dict[str, Any]:
        """Flat row for tables and CSV."""
        s = self.summary
        return {
            "policy": self.policy,
            "cost_model": s.cost_model,
            "hardware": s.hardware,
            "tpot_slo": s.slo.kind,
            "rate_rps": self.rate_rps,
            "n_requests": s.n_requests,
            "attainment": s.attainment,
            "goodput_rps": s.goodput_rps,
            "ttft_p50_s": s.ttft.p50,
            "ttft_p99_s": s.ttft.p99,
            "tpot_p50_s": s.tpot.p50,
            "tpot_p99_s": s.tpot.p99,
            "tbt_p99_s": s.itl.p99,
            "preemptions": s.preemptions,
        }

    def to_pandas(self) -> Any:
        """:meth:`row` as a pandas DataFrame of one row (pandas is optional:
        :func:`~schedlab.tables.require_pandas`); a sweep's: ``to_pandas([p.row() for p in
        points])`` of :func:`schedlab.tables.to_pandas`."""
        return to_pandas([self.row()])


class GridError(ServingError):
    """Some jobs of a grid failed; the others' results are in :attr:`done` (and, with a
    results file, on disk), the failures in :attr:`failed` (one line each)."""

    def __init__(self, what: str, done: list[Any], failed: list[str]) -> None:
        super().__init__(
            f"{what}: {len(failed)} of {len(done) + len(failed)} jobs failed; first: {failed[0]}"
        )
        self.what = what
        self.done = done
        self.failed = failed

    def __reduce__(self) -> tuple[type, tuple[str, list[Any], list[str]]]:
        return (type(self), (self.what, self.done, self.failed))


def run_serving_job(job: Job) -> dict[str, Any]:
    """The runner of serving jobs (:mod:`schedlab.jobs`): kind ``simulate`` gives a
    :class:`Summary`'s JSON form, kind ``capacity`` a :class:`CapacityResult`'s; the
    parameters are :func:`simulate`'s and :func:`capacity`'s, with the scenario as
    :meth:`Scenario.to_dict` gives it."""
    p = dict(job.params)
    p.pop("inputs", None)  # digests that key the job by content (:func:`_inputs`)
    scenario = Scenario.from_dict(p.pop("scenario"))
    if job.kind == "simulate":
        return simulate(p.pop("workload"), scenario, **p).summary.to_dict()
    if job.kind == "capacity":
        return capacity(p.pop("workload"), scenario, **p).to_dict()
    raise ServingError(f"serving job: unknown kind {job.kind!r}")


def _run_grid(
    what: str,
    jobs: list[Job],
    read: Callable[[Job, Any], T],
    where: Callable[[Job], str],
    executor: Executor,
) -> list[T]:
    """Run serving ``jobs`` (:func:`schedlab.jobs.run_jobs` on ``executor``),
    ``read`` each value back; after every job ran, a :class:`GridError` if some failed,
    each named by ``where``. A value read back from the results file that is not one
    (edited, or written by another version) is refused in one line naming the file."""
    outcomes = run_jobs(run_serving_job, jobs, executor, desc=what)

    def value(outcome: Outcome) -> T:
        try:
            result = read(outcome.job, outcome.value)
            if outcome.resumed:
                _check_fields(result)
            return result
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if not outcome.resumed:
                raise
            raise FormatError(
                f"{outcome.source}: the line of {where(outcome.job)} does not hold a true "
                f"{what} result ({type(exc).__name__}: {exc}); remove that line to run it again"
            ) from None

    done = [value(o) for o in outcomes if o.ok]
    failed = [f"{where(o.job)}: {o.error}" for o in outcomes if not o.ok]
    if failed:
        raise GridError(what, done, failed)
    return done


#: The field types :func:`_check_fields` checks, by their annotation.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "float": (int, float),
    "int": (int,),
    "str": (str,),
    "bool": (bool,),
}


#: Fields read back that are fractions, in [0, 1].
_FRACTIONS = frozenset({"attainment", "target"})


def _check_fields(obj: Any) -> None:
    """What a result read back from a results file must pass: raise ``TypeError`` where a
    field of the dataclass ``obj`` (or of one inside it) annotated ``float``, ``int``,
    ``str`` or ``bool`` holds another type (``"attainment": "high"`` was printed), and
    ``ValueError`` where a number is out of its range: every count and time of a serving
    result is finite and ``>= 0`` (``nan``, written ``null``, where nothing was
    measured), an attainment or target in [0, 1] (a forged 9.99 was printed), and a
    policy's counters integers ``>= 0``."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        inner = value if isinstance(value, tuple) else (value,)
        for item in inner:
            if is_dataclass(item):
                _check_fields(item)
        expected = _FIELD_TYPES.get(str(f.type))
        wrong_bool = isinstance(value, bool) and f.type != "bool"
        if expected is not None and (wrong_bool or not isinstance(value, expected)):
            raise TypeError(f"{f.name}: expected {f.type}, got {value!r}")
        if expected in (_FIELD_TYPES["float"], _FIELD_TYPES["int"]) and not math.isnan(value):
            top = 1.0 if f.name in _FRACTIONS else math.inf
            if not (math.isfinite(value) and 0 <= value <= top):
                span = "in [0, 1]" if f.name in _FRACTIONS else "finite and >= 0"
                raise ValueError(f"{f.name}: must be {span}, got {value!r}")
        if isinstance(value, dict):  # a policy's counters
            for key, count in value.items():
                if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                    raise ValueError(f"{f.name}.{key}: expected a count >= 0, got {count!r}")


def sweep_title(points: Sequence[SweepPoint]) -> str:
    """``WORKLOAD, cost model NAME (HARDWARE)``: what every table and figure of a sweep is
    headed by."""
    s = points[0].summary
    return f"{points[0].workload or s.workload}, cost model {s.cost_model} ({s.hardware})"


def _checked(
    base: Scenario, policies: Sequence[str], workload: str, data_dir: Any
) -> dict[str, str | None]:
    """Refuse a bad policy name or workload here, not once per job in the workers; the
    digests of what the jobs read (:func:`_inputs`)."""
    twice = sorted({p for p in policies if list(policies).count(p) > 1})
    if twice:
        raise ServingError(f"policies: {', '.join(twice)} given twice")
    for policy in policies:
        base.with_(policy=policy).build_policy()
    load = make_workload(workload, data_dir=data_dir)
    path = getattr(load, "path", None) or (Path(workload) if Path(workload).is_file() else None)
    return _inputs(path, base)


def _inputs(path: Path | None, scenario: Scenario) -> dict[str, str | None]:
    """SHA-256 digests of the trace file a workload reads (``None`` for a synthetic one)
    and of the cost models' JSON: a job's key then changes with their content, so a
    results file never hands back a point computed from another trace or model found
    under the same name or path."""

    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()[:24]

    models = [scenario.predicted(), scenario.actual()]
    return {
        "trace": None if path is None else digest(Path(path).read_bytes()),
        "cost_models": digest(
            json.dumps([m.to_dict() for m in models if m is not None], sort_keys=True).encode()
        ),
    }


def sweep(
    workload: str,
    policies: Sequence[str],
    rates: Sequence[float],
    scenario: Scenario | None = None,
    *,
    duration_s: float = DEFAULT_WINDOW_S,
    data_dir: str | None = None,
    executor: Executor | None = None,
) -> list[SweepPoint]:
    """Simulate every policy at every rate of ``scenario`` (its policy is replaced by
    each of ``policies``; same seed: common random numbers), one job a point.

    ``executor`` (:class:`schedlab.jobs.Executor`) runs the jobs: the points are the
    same on every executor, and with a results file a rerun computes only the points not
    yet there.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type (a policy name where a list
        of them belongs).
    ServingError
        For no policy or rate, a rate or window that is not finite and positive.
    GridError
        After every point ran, if some failed (the others in ``error.done``).
    """
    executor = executor_of("sweep", executor)
    check_types(
        "sweep",
        workload=(workload, (str,)),
        policies=(policies, (list, tuple)),
        rates=(rates, (list, tuple)),
        scenario=(scenario, (Scenario, type(None))),
        data_dir=(data_dir, (str, Path, type(None))),
    )
    for k, policy in enumerate(policies):
        check_type(policy, (str,), f"sweep: policies[{k}]")
    for k, rate in enumerate(rates):
        check_real(rate, f"sweep: rates[{k}]", 0, error=ServingError, above=True)
    check_real(duration_s, "sweep: duration_s", 0, error=ServingError, above=True)
    if not policies or not rates:
        raise ServingError("sweep: give at least one policy and one rate")
    base = scenario or Scenario()
    inputs = _checked(base, policies, workload, data_dir)
    if len(set(rates)) < len(rates):
        raise ServingError(f"rates: a rate given twice in {list(rates)}")
    jobs = [
        Job(
            "simulate",
            {
                "inputs": inputs,
                "workload": workload,
                "scenario": base.with_(policy=p).to_dict(),
                "rate": float(r),
                "duration_s": float(duration_s),
                "data_dir": None if data_dir is None else str(data_dir),
            },
        )
        for p in policies
        for r in rates
    ]

    def point(job: Job, value: Any) -> SweepPoint:
        policy, rate = job.params["scenario"]["policy"], job.params["rate"]
        return SweepPoint(policy, rate, Summary.from_dict(value), workload)

    def where(job: Job) -> str:
        return f"{job.params['scenario']['policy']} at {job.params['rate']:g} req/s"

    return _run_grid("sweep", jobs, point, where, executor)


def capacity_grid(
    workload: str,
    policies: Sequence[str],
    scenario: Scenario | None = None,
    *,
    seeds: Sequence[int] = (0,),
    predictions: Sequence[str] | None = None,
    duration_s: float = CAPACITY_WINDOW_S,
    target: float = 0.9,
    rel_tol: float = 0.02,
    start_rps: float = 1.0,
    max_rps: float = 1000.0,
    data_dir: str | None = None,
    executor: Executor | None = None,
) -> list[CapacityResult]:
    """:func:`capacity` of every policy under every prediction model and seed, one job a
    search, in the order policy by policy, model by model, seed by seed. The search
    parameters are :func:`capacity`'s; ``executor`` is as for :func:`sweep`.

    ``predictions`` are the models (:mod:`schedlab.serving.prediction`; ``None``: the
    scenario's own). A policy that reads no prediction
    (:attr:`~schedlab.serving.policy_registry.PolicySpec.reads_predictions`) would find the same
    capacity under each, so it is searched once, under ``perfect``.

    Raises
    ------
    ServingError
        Before any search runs, on search parameters :func:`capacity` refuses.
    GridError
        After every search ran, if some failed.
    """
    executor = executor_of("capacity_grid", executor)
    if not policies or not seeds:
        raise ServingError("capacity grid: give at least one policy and one seed")
    _check_search(target, rel_tol, start_rps, max_rps)
    base = scenario or Scenario()
    inputs = _checked(base, policies, workload, data_dir)
    if len(set(seeds)) < len(seeds):
        raise ServingError(f"seeds: a seed given twice in {list(seeds)}")
    search = {
        "inputs": inputs,
        "duration_s": float(duration_s),
        "target": float(target),
        "rel_tol": float(rel_tol),
        "start_rps": float(start_rps),
        "max_rps": float(max_rps),
        "data_dir": None if data_dir is None else str(data_dir),
    }
    models = list(predictions) if predictions else [base.prediction_spec]
    if len(set(models)) < len(models):
        raise ServingError(f"predictions: a model given twice in {models}")
    for spec in models:
        check_spec(spec, "predictions")

    def params(policy: str, spec: str, seed: int) -> dict[str, Any]:
        fields = {"policy": policy, "seed": seed}
        if predictions:
            fields |= {"predictions": spec, "prediction_cv": 0.0}
        return base.with_(**fields).to_dict()

    jobs = [
        Job("capacity", {"workload": workload, "scenario": params(p, spec, s), **search})
        for p in policies
        for spec in (models if get_policy(p).reads_predictions else ["perfect"])
        for s in seeds
    ]

    def where(job: Job) -> str:
        params = job.params["scenario"]
        spec = Scenario.from_dict(params).prediction_spec
        return f"{params['policy']} seed {params['seed']} predictions {spec}"

    return _run_grid(
        "capacity grid", jobs, lambda job, value: CapacityResult.from_dict(value), where, executor
    )
