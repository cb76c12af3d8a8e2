"""Run several solvers on one instance and tabulate them against one lower bound.

Every row's gap is measured against the same bound, the bound method's value on the
instance, so it does not depend on which other solvers are listed; a higher bound that a
listed solver proves (an exact solver's optimum, an LP-guided solver's own) is reported
beside it as ``best_proven``. A solver that refuses the instance is recorded in its row
(:class:`Failure`) and the others still run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from schedlab.arguments_check import check_seed
from schedlab.budget import check_max_memory, check_time_limit
from schedlab.errors import (
    BoundError,
    FormatError,
    InputError,
    InputTypeError,
    SchedlabError,
    SolverError,
    UnknownNameError,
)
from schedlab.jobs import Executor, Job, Outcome, executor_of, run_jobs
from schedlab.json_files import nan_to_null
from schedlab.offline.bounds import Bound, lower_bound
from schedlab.offline.instance import Instance, check_instance
from schedlab.offline.instance_io import instance_from_dict, instance_to_dict
from schedlab.offline.result import Result, Status, relative_gap
from schedlab.offline.solve import available_solvers, solve, with_bound
from schedlab.offline.solvers import get_solver
from schedlab.offline.solvers.contract import check_options
from schedlab.offline.verify import verify
from schedlab.tables import rows_to_csv, to_pandas

__all__ = [
    "DEFAULT_SOLVERS",
    "Comparison",
    "Failure",
    "compare",
    "compare_all",
    "online_solvers",
    "run_offline_job",
    "solver_names",
    "solver_options",
]

#: Solvers :func:`compare` runs when none are named: the list-scheduling rules (``sof`` is
#: left out: it computes the same schedule as ``mc-sf``), Sorted-F and local search (10 s
#: unless ``time_limit`` says otherwise); all scale to any size.
DEFAULT_SOLVERS: tuple[str, ...] = (
    "fcfs",
    "total-size",
    "svf",
    "mc-sf",
    "mc-sf-backfill",
    "sorted-f",
    "local-search",
)

_COLUMNS = (
    ("solver", "solver"),
    ("status", "status"),
    ("objective", "objective"),
    ("mean_latency", "mean latency"),
    ("makespan", "makespan"),
    ("runtime_s", "runtime s"),
    ("lower_bound", "lower bound"),
    ("gap", "gap"),
)


@dataclass(frozen=True)
class Failure:
    """A solver that gave no schedule for an instance, and why.

    Attributes
    ----------
    solver
        Its name.
    status
        ``"refused"`` (it does not take this instance or these options, e.g. ``dp`` on
        more than ``max_requests`` requests) or ``"error"`` (its schedule failed the
        verifier: a bug).
    reason
        The solver's one-line message.
    """

    solver: str
    status: str
    reason: str


@dataclass(frozen=True)
class Comparison:
    """Results of several solvers on one instance, against one lower bound.

    Attributes
    ----------
    instance
        The instance.
    results
        The schedules found, in the order the solvers were named.
    lower_bound
        The bound method's value on this instance (``None`` without one): every row's
        ``gap`` is measured against it, so a row's gap does not depend on which other
        solvers are listed.
    failures
        Solvers that gave no schedule (:class:`Failure`), in order.
    solvers
        Every solver named, in order (rows of :meth:`records`).
    """

    instance: Instance
    results: tuple[Result, ...]
    lower_bound: float | None
    failures: tuple[Failure, ...] = ()
    solvers: tuple[str, ...] = ()

    @property
    def best_proven(self) -> float | None:
        """The largest valid bound known: :attr:`lower_bound`, the solvers' own bounds and
        proven optima. Reported beside :attr:`lower_bound`, labelled; it depends on the
        solvers listed, so gaps are not measured against it."""
        bounds = (self.lower_bound, *(r.lower_bound for r in self.results))
        known = [b for b in bounds if b is not None]
        return max(known) if known else None

    def records(self) -> list[dict[str, Any]]:
        """One plain dict a solver named: the table's columns, ``best_proven`` and
        ``reason`` (why a solver gave no schedule; empty otherwise)."""
        done = {r.solver: r for r in self.results}
        failed = {f.solver: f for f in self.failures}
        rows = []
        for name in self.solvers or tuple(done):
            row: dict[str, Any] = {"instance": self.instance.name, "n": self.instance.n}
            if name in done:
                r = done[name]
                row |= {
                    "solver": name,
                    "status": str(r.status),
                    "objective": r.objective,
                    "mean_latency": r.schedule.mean_latency,
                    "makespan": r.schedule.makespan,
                    "runtime_s": r.runtime,
                    "lower_bound": self.lower_bound,
                    "gap": relative_gap(r.objective, self.lower_bound),
                    "reason": "",
                }
            else:
                f = failed[name]
                row |= {key: None for key, _ in _COLUMNS} | {
                    "solver": name,
                    "status": f.status,
                    "lower_bound": self.lower_bound,
                    "reason": f.reason,
                }
            row["best_proven"] = self.best_proven
            rows.append(row)
        return rows

    def best(self) -> Result | None:
        """The result with the least objective (first one on ties; ``None`` if no solver
        gave a schedule)."""
        return min(self.results, key=lambda r: r.objective, default=None)

    def _cells(self) -> list[list[str]]:
        def fmt(key: str, value: Any) -> str:
            if value is None:
                return "-"
            if key == "gap":
                return f"{100 * value:.2f}%"
            if key == "runtime_s":
                return f"{value:.3f}"
            if key in ("mean_latency", "lower_bound"):
                return f"{value:,.1f}"
            if isinstance(value, int):
                return f"{value:,}"
            return str(value)

        return [[fmt(key, row[key]) for key, _ in _COLUMNS] for row in self.records()]

    def to_text(self) -> str:
        """An aligned plain-text table, headed by the instance's name and size."""
        head = [title for _, title in _COLUMNS]
        cells = self._cells()
        widths = [max(len(x) for x in col) for col in zip(head, *cells, strict=True)]
        right = {i for i, (key, _) in enumerate(_COLUMNS) if key not in ("solver", "status")}

        def line(row: Sequence[str]) -> str:
            return "  ".join(
                x.rjust(w) if i in right else x.ljust(w)
                for i, (x, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()

        inst = self.instance
        title = f"{inst.name or 'instance'}: n = {inst.n}, M = {inst.kv_tokens:,} tokens"
        rule = "  ".join("-" * w for w in widths)
        return "\n".join([title, line(head), rule, *(line(r) for r in cells), *self._notes()])

    def _notes(self) -> list[str]:
        """Lines under the table: the best proven bound where it is higher, and why each
        failed solver gave no schedule."""
        notes = []
        proven = self.best_proven
        if proven is not None and (self.lower_bound is None or proven > self.lower_bound):
            notes.append(
                f"best proven bound {proven:,.1f} (from the solvers listed; gaps above are "
                "against the lower bound column)"
            )
        online = online_solvers(self.solvers or [r.solver for r in self.results])
        if online and self.lower_bound is not None:
            notes.append(
                f"{', '.join(online)}: online, seeing no output length before its request "
                "finishes; their gap is to the hindsight bound, the lower bound above on the "
                "instance with the true lengths, below every online schedule "
                "(proofs/hindsight.md)"
            )
        for f in self.failures:  # the reason names the solver where the solver wrote it
            said = f.reason if f.reason.startswith(f"{f.solver}:") else f"{f.solver}: {f.reason}"
            notes.append(f"{f.status}: {said}")
        return notes

    def to_markdown(self) -> str:
        head = [title for _, title in _COLUMNS]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        rows += ["| " + " | ".join(r) + " |" for r in self._cells()]
        notes = self._notes()
        return "\n".join([*rows, "", *notes] if notes else rows)

    def to_csv(self, handle: TextIO | None = None) -> str:
        """CSV of :meth:`records` (also written to ``handle`` if given)."""
        return rows_to_csv(self.records(), handle)

    def to_pandas(self) -> Any:
        """:meth:`records` as a pandas DataFrame (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas(self.records())


def online_solvers(names: Sequence[str]) -> list[str]:
    """The online algorithms among the solvers ``names``: those taking the option
    ``predictions`` (predicted output lengths, :mod:`schedlab.predictions`)."""
    return [name for name in names if "predictions" in get_solver(name).options]


def solver_names(solvers: str | Sequence[str] | None) -> list[str]:
    """``solvers`` (or :data:`DEFAULT_SOLVERS`; a string is one name) after checking every
    name is known and none is given twice (a row per solver)."""
    if isinstance(solvers, str):
        solvers = [solvers]
    names = list(DEFAULT_SOLVERS if solvers is None else solvers)
    if not names:
        raise InputError("solvers: none given")
    known = available_solvers()
    for name in names:
        if name not in known:
            raise UnknownNameError("solver", name, known)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InputError(f"solvers: {', '.join(twice)} given twice")
    return names


def compare(
    instance: Instance,
    solvers: str | Sequence[str] | None = None,
    *,
    time_limit: float | None = None,
    max_memory: int | None = None,
    seed: int = 0,
    bound: str | None = "best",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    executor: Executor | None = None,
) -> Comparison:
    """Solve ``instance`` with each solver and measure every gap to one lower bound.

    The bound is computed once (within ``time_limit``); each solver gets ``time_limit``
    of its own, and likewise ``max_memory`` bytes (``None``: a quarter of the memory of
    the machine a job runs on, :mod:`schedlab.budget`). Names and options are checked
    before anything runs. A solver that
    refuses the instance (a :class:`~schedlab.errors.SchedlabError`) is recorded as a
    :class:`Failure` and the others go on. ``options``: each solver's own options by
    solver name (``{"local-search": {"work": 5000}}``). The bound and each solver are
    jobs of :func:`compare_all`, run by ``executor`` (:class:`~schedlab.jobs.Executor`:
    where they run, a results file, a progress bar).
    """
    executor = executor_of("compare", executor)
    check_instance(instance, "compare")
    return compare_all(
        [instance],
        solvers,
        time_limit=time_limit,
        max_memory=max_memory,
        seed=seed,
        bound=bound,
        options=options,
        executor=executor,
    )[0]


def compare_all(
    instances: Sequence[Instance],
    solvers: str | Sequence[str] | None = None,
    *,
    time_limit: float | None = None,
    max_memory: int | None = None,
    seed: int = 0,
    bound: str | None = "best",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    executor: Executor | None = None,
) -> list[Comparison]:
    """:func:`compare` on every instance, as one grid of jobs (:mod:`schedlab.jobs`): per
    instance its bound and each solver, run by ``executor`` (as :func:`compare`) and,
    with a results file, resumable. Each solver runs without the bound
    and is certified against it afterwards (:func:`~schedlab.offline.solve.with_bound`,
    the same result as :func:`~schedlab.offline.solve.solve` gives with it), so the jobs
    do not wait for one another and the comparison is the same on every executor.
    """
    executor = executor_of("compare_all", executor)
    if not isinstance(instances, Sequence):
        raise InputTypeError(
            f"instances: expected a sequence of instances, got {type(instances).__name__}"
        )
    for k, instance in enumerate(instances):
        check_instance(instance, f"instances[{k}]")
    names = solver_names(solvers)
    own = solver_options(names, options)
    time_limit = check_time_limit(time_limit)
    # a job's parameters name a memory budget only when one is given, so that results
    # files written without one still match
    memory = {} if max_memory is None else {"max_memory": check_max_memory(max_memory)}
    check_seed(seed, "seed")
    _try_options(own, time_limit)
    jobs = []
    for instance in instances:
        data = instance_to_dict(instance)
        if bound is not None:
            params = {"instance": data, "method": bound, "time_limit": time_limit, **memory}
            jobs.append(Job("bound", params))
        for name in names:
            params = {"instance": data, "solver": name, "time_limit": time_limit, "seed": seed}
            jobs.append(Job("solve", {**params, **memory, "options": own[name]}))
    outcomes = iter(run_jobs(run_offline_job, jobs, executor, desc="compare"))
    comparisons = []
    for instance in instances:
        read = None if bound is None else next(outcomes)
        shared = None if read is None else _bound(read)
        found: list[Result] = []
        failures: list[Failure] = []
        for name in names:
            outcome = next(outcomes)
            if not outcome.ok:  # not a refusal: the solver crashed
                failures.append(Failure(name, "error", outcome.error or ""))
            elif outcome.resumed:
                back = _read_back(instance, name, outcome)
                if isinstance(back, Failure):
                    failures.append(back)
                else:
                    found.append(_certified(back, shared, read))
            elif "failure" in outcome.value:
                failures.append(Failure(name, outcome.value["failure"], outcome.value["reason"]))
            else:
                found.append(_certified(Result.from_dict(instance, outcome.value), shared, read))
        value = None if shared is None else shared.value
        comparisons.append(
            Comparison(instance, tuple(found), value, tuple(failures), tuple(names))
        )
    return comparisons


#: One request: every solver takes it, so an option it refuses here is refused for itself.
_ONE_REQUEST = Instance.from_arrays(2, [1], [1], name="option check")


def _try_options(options: Mapping[str, Mapping[str, Any]], time_limit: float | None) -> None:
    """Run each solver given options on a one-request instance, under the comparison's
    time limit (an option may need one: ``alns``'s ``work=None``), so that an
    option value it refuses (``work=-5``) stops the comparison before it starts,
    instead of reading as the solver refusing every instance. A prediction file (option
    ``predictions`` naming a ``.csv`` or ``.json`` file) names the requests of the
    instances compared, not this one's: it is left out here, and a request it misses
    makes each solver refuse that instance."""
    for name, own in options.items():
        own = {
            key: value
            for key, value in own.items()
            if not (key == "predictions" and str(value).endswith((".csv", ".json")))
        }
        if own:
            try:
                solve(_ONE_REQUEST, name, bound=None, time_limit=time_limit, **own)
            except SchedlabError as exc:
                raise InputError(f"{name}: options {dict(own)}: {exc}") from None


def _bound(outcome: Outcome) -> Bound:
    """The bound job's :class:`Bound`; one read back from a results file is checked to be
    a bound's JSON form with a finite value ``>= 0``."""
    if not outcome.ok:
        raise SchedlabError(f"lower bound: {outcome.error}")
    data = outcome.value
    try:
        found = Bound(
            data["value"], data["method"], data["status"], data["runtime_s"], data["stats"]
        )
    except (KeyError, TypeError) as exc:
        raise _unreadable(outcome, "lower bound", f"{type(exc).__name__}: {exc}") from None
    if outcome.resumed:
        fields_ = {"value": found.value, "runtime_s": found.runtime}
        for key, value in fields_.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise _unreadable(
                    outcome, "lower bound", f"{key}: expected a number, got {value!r}"
                )
            if not (math.isfinite(value) and value >= 0):
                raise _unreadable(
                    outcome, "lower bound", f"{key}: must be finite >= 0, got {value}"
                )
        if not (isinstance(found.method, str) and isinstance(found.stats, dict)):
            raise _unreadable(outcome, "lower bound", "method or stats of the wrong type")
    return found


def _unreadable(outcome: Outcome, what: str, why: str) -> FormatError:
    """The refusal of a value read back from a results file, naming its line."""
    return FormatError(
        f"{outcome.source}: not a true {what} ({why}); remove that line to run it again"
    )


def _read_back(instance: Instance, name: str, outcome: Outcome) -> Result | Failure:
    """A solver's outcome read back from a results file, checked as a computed one is:
    its schedule through the independent verifier, its objective recomputed from the
    starts; a line that fails is refused by file and line (an edited or foreign file
    would otherwise be shown as the solver's, even as ``OPTIMAL`` below a valid bound)."""
    data = outcome.value
    what = f"result of {name} on {instance.name or 'the instance'}"
    if isinstance(data, dict) and "failure" in data:
        failure, reason = data["failure"], data.get("reason")
        if failure not in ("refused", "error") or not isinstance(reason, str):
            raise _unreadable(outcome, what, f"failure {failure!r}")
        return Failure(name, failure, reason)
    try:
        result = Result.from_dict(instance, data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # ScheduleError too
        raise _unreadable(outcome, what, f"{type(exc).__name__}: {exc}") from None
    if result.solver != name:
        raise _unreadable(outcome, what, f"it names the solver {result.solver!r}")
    problems = verify(instance, result.starts)
    if problems:
        raise _unreadable(outcome, what, f"its schedule is infeasible: {problems[0]}")
    if result.objective != result.schedule.objective:
        raise _unreadable(
            outcome,
            what,
            f"objective {result.objective:,}, but its starts give {result.schedule.objective:,}",
        )
    if not (math.isfinite(result.runtime) and result.runtime >= 0):
        raise _unreadable(outcome, what, f"runtime_s {result.runtime}")
    own = result.lower_bound
    if own is not None and (isinstance(own, bool) or not isinstance(own, int | float)):
        raise _unreadable(outcome, what, f"lower_bound {own!r}")
    if result.status is Status.OPTIMAL and (
        own is None or result.objective > math.ceil(own - 1e-6)
    ):
        # solve() records a proven optimum with its objective as its bound
        raise _unreadable(outcome, what, "OPTIMAL without a bound that meets its objective")
    try:  # its own bound, checked against its objective
        return with_bound(result, None)
    except BoundError as exc:
        raise _unreadable(outcome, what, str(exc)) from None


def _certified(result: Result, bound: Bound | None, read: Outcome | None) -> Result:
    """:func:`with_bound`; a bound that a results file gave (``read``: the bound job's
    outcome, resumed), found above the verified objective, is refused by its line."""
    try:
        return with_bound(result, bound)
    except BoundError as exc:
        if read is None or not read.resumed:
            raise
        raise _unreadable(read, "lower bound", str(exc)) from None


def run_offline_job(job: Job) -> dict[str, Any]:
    """The runner of offline jobs (:mod:`schedlab.jobs`): kind ``bound`` gives a
    :class:`~schedlab.offline.bounds.Bound` as JSON, kind ``solve`` a
    :class:`~schedlab.offline.result.Result`'s :meth:`~Result.to_dict` (solved without a
    bound), or ``{"failure": "refused" | "error", "reason": ...}`` when the solver refuses
    the instance or its schedule fails the verifier."""
    p = job.params
    instance = instance_from_dict(p["instance"], f"job {job.key}")
    if job.kind == "bound":
        found = lower_bound(
            instance, p["method"], time_limit=p["time_limit"], max_memory=p.get("max_memory")
        )
        return {
            "value": found.value,
            "method": found.method,
            "status": found.status,
            "runtime_s": found.runtime,
            "stats": nan_to_null(found.stats),
        }
    if job.kind != "solve":
        raise SchedlabError(f"offline job: unknown kind {job.kind!r}")
    run = {
        "time_limit": p["time_limit"],
        "max_memory": p.get("max_memory"),
        "seed": p["seed"],
        "bound": None,
    }
    try:
        result = solve(instance, p["solver"], **run, **p["options"])
    except SolverError as exc:
        return {"failure": "error", "reason": str(exc)}
    except UnknownNameError:  # a solver registered in the caller only: not a refusal
        raise
    except SchedlabError as exc:
        return {"failure": "refused", "reason": str(exc)}
    return result.to_dict()


def solver_options(
    names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Each named solver's own options (empty where none are given), checked.

    Raises
    ------
    SchedlabError
        For options of a solver that is not named.
    UnknownOptionError
        For an option a solver does not take, or a value of the wrong type.
    """
    given = dict(options or {})
    stray = sorted(set(given) - set(names))
    if stray:
        raise InputError(
            f"options given for {', '.join(stray)}, which is not among the solvers "
            f"({', '.join(names)})"
        )
    return {name: check_options(name, get_solver(name).fn, given.get(name, {})) for name in names}
