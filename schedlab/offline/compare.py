"""Run several solvers on one instance and tabulate them against the best bound."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from schedlab.budget import check_time_limit
from schedlab.errors import UnknownNameError
from schedlab.offline.bounds import Bound, lower_bound
from schedlab.offline.instance import Instance
from schedlab.offline.result import Result, relative_gap
from schedlab.offline.solve import available_solvers, solve
from schedlab.progress import Progress, progress_for

__all__ = ["DEFAULT_SOLVERS", "Comparison", "compare", "records_to_csv", "solver_names"]

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
class Comparison:
    """Results of several solvers on one instance, with the best lower bound.

    ``gap`` of every row is measured against :attr:`lower_bound`, the largest valid
    bound known (the bound method's and any solver's own).
    """

    instance: Instance
    results: tuple[Result, ...]
    lower_bound: float | None

    def records(self) -> list[dict[str, Any]]:
        """One plain dict a solver, with the table's columns."""
        rows = []
        for r in self.results:
            rows.append(
                {
                    "instance": self.instance.name,
                    "n": self.instance.n,
                    "solver": r.solver,
                    "status": str(r.status),
                    "objective": r.objective,
                    "mean_latency": r.schedule.mean_latency,
                    "makespan": r.schedule.makespan,
                    "runtime_s": r.runtime,
                    "lower_bound": self.lower_bound,
                    "gap": relative_gap(r.objective, self.lower_bound),
                }
            )
        return rows

    def best(self) -> Result:
        """The result with the least objective (first one on ties)."""
        return min(self.results, key=lambda r: r.objective)

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
        title = f"{inst.name or 'instance'}: n = {inst.n}, M = {inst.memory:,} tokens"
        rule = "  ".join("-" * w for w in widths)
        return "\n".join([title, line(head), rule, *(line(r) for r in cells)])

    def to_markdown(self) -> str:
        head = [title for _, title in _COLUMNS]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        rows += ["| " + " | ".join(r) + " |" for r in self._cells()]
        return "\n".join(rows)

    def to_csv(self, handle: TextIO | None = None) -> str:
        """CSV of :meth:`records` (also written to ``handle`` if given)."""
        return records_to_csv(self.records(), handle)


def records_to_csv(records: Sequence[dict[str, Any]], handle: TextIO | None = None) -> str:
    """Records with equal keys as CSV text (also written to ``handle`` if given)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(records[0]))
    writer.writeheader()
    writer.writerows(records)
    if handle is not None:
        handle.write(buffer.getvalue())
    return buffer.getvalue()


def solver_names(solvers: Sequence[str] | None) -> list[str]:
    """``solvers`` (or :data:`DEFAULT_SOLVERS`) after checking every name is known."""
    names = list(DEFAULT_SOLVERS if solvers is None else solvers)
    known = available_solvers()
    for name in names:
        if name not in known:
            raise UnknownNameError("solver", name, known)
    return names


def compare(
    instance: Instance,
    solvers: Sequence[str] | None = None,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    bound: str | None = "best",
    progress: bool | Progress = False,
) -> Comparison:
    """Solve ``instance`` with each solver and measure every gap to one best bound.

    The bound is computed once (within ``time_limit``); each solver gets ``time_limit``
    of its own. Names are checked before anything runs. ``progress``: show a bar on
    standard error (:mod:`schedlab.progress`), or step the caller's.
    """
    names = solver_names(solvers)
    time_limit = check_time_limit(time_limit)
    shared: Bound | None = None
    steps = len(names) + (bound is not None)
    with progress_for(progress, instance.name or "compare", steps) as bar:
        if bound is not None:
            bar.doing(f"lower bound ({bound})")
            shared = lower_bound(instance, bound, time_limit=time_limit)
            bar.step()
        results = []
        for name in names:
            bar.doing(name)
            results.append(solve(instance, name, time_limit=time_limit, seed=seed, bound=shared))
            bar.step()
    proven = [r.lower_bound for r in results if r.lower_bound is not None]
    best = max(proven) if proven else None
    return Comparison(instance, tuple(results), best)
