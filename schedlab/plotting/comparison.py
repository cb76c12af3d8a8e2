"""The figure of a comparison report (:class:`~schedlab.offline.report.Report`).

:func:`plot_report` composes three kinds of panel, each drawn by its own function:

* :func:`plot_gaps` — the gap of every solver on every instance (a dot plot: instances
  are unrelated, so no line joins them; log scale);
* :func:`plot_memory` — for one schedule, the memory held in every round against ``M``;
* :func:`plot_gantt` — a Gantt chart of its requests (one bar per request from its start
  to its completion, requests sorted by start).

The schedule panels come in one column per instance (each its best schedule), or for
the one schedule chosen; a report of more than :data:`MAX_SCHEDULE_COLUMNS` instances
shows the gaps alone unless a schedule is chosen.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import SchedlabError
from schedlab.offline.compare import Comparison
from schedlab.offline.instance import Instance
from schedlab.offline.report import Report
from schedlab.offline.result import Result, relative_gap
from schedlab.plotting.figures import pyplot, reference_line, save_figure

__all__ = ["MAX_SCHEDULE_COLUMNS", "plot_gantt", "plot_gaps", "plot_memory", "plot_report"]

MAX_SCHEDULE_COLUMNS = 4
"""The most instances whose schedules :func:`plot_report` draws side by side."""


def plot_report(
    report: Report, path: str | Path, *, schedule: str | tuple[str, str] | None = None
) -> Path:
    """Draw the report's figure (module docs) and save it to ``path``.

    Parameters
    ----------
    schedule
        The schedule to draw: an instance's name (its best result) or ``(instance name,
        solver)``. Default: the best result of every instance, one column each, when the
        report has at most :data:`MAX_SCHEDULE_COLUMNS` instances with a schedule, and
        no schedule panel otherwise.

    Raises
    ------
    SchedlabError
        If matplotlib is missing or ``schedule`` names no result of the report.
    """
    picked = _pick(report, schedule)
    columns = max(1, len(picked))
    fig = pyplot().figure(figsize=(max(10.0, 4.2 * columns), 10 if picked else 4.5))
    fig.set_layout_engine("constrained")
    if not picked:
        plot_gaps(report, fig.add_subplot())
        return save_figure(fig, path)
    grid = fig.add_gridspec(3, columns, height_ratios=[1.1, 0.8, 1.2])
    plot_gaps(report, fig.add_subplot(grid[0, :]))
    for k, (comp, result) in enumerate(picked):
        memory_ax = fig.add_subplot(grid[1, k])
        plot_memory(comp.instance, result, memory_ax)
        plot_gantt(comp.instance, result, fig.add_subplot(grid[2, k], sharex=memory_ax))
    return save_figure(fig, path)


def _pick(
    report: Report, schedule: str | tuple[str, str] | None
) -> list[tuple[Comparison, Result]]:
    """The ``(comparison, result)`` pairs whose schedules are drawn (see plot_report)."""
    if schedule is None:
        best = [(comp, comp.best()) for comp in report.comparisons]
        found = [(comp, result) for comp, result in best if result is not None]
        return found if len(found) <= MAX_SCHEDULE_COLUMNS else []
    name, solver = (schedule, None) if isinstance(schedule, str) else schedule
    for comp in report.comparisons:
        if comp.instance.name == name:
            if solver is None:
                result = comp.best()
                if result is None:
                    raise SchedlabError(f"plot: no solver gave a schedule on {name!r}")
                return [(comp, result)]
            for result in comp.results:
                if result.solver == solver:
                    return [(comp, result)]
    raise SchedlabError(
        f"plot: no result for instance {name!r}"
        + ("" if solver is None else f" and solver {solver!r}")
    )


def plot_gaps(report: Report, ax: Any = None) -> Any:
    """Gap of every solver to each instance's lower bound, one column of dots an instance.

    The solvers' dots sit side by side within an instance's column, in the legend's
    order; a missing dot means the solver gave no schedule there.
    """
    ax = ax if ax is not None else pyplot().figure().gca()
    from matplotlib.ticker import LogFormatter  # matplotlib is there: ax is drawn by it

    names = [c.instance.name or f"#{k}" for k, c in enumerate(report.comparisons)]
    solvers = list(dict.fromkeys(r.solver for c in report.comparisons for r in c.results))
    x = np.arange(len(names))
    floor = 1e-4  # a zero gap is drawn at 0.01% on the log axis
    markers = "osD^v<>pXh*"
    width = 0.7 / max(1, len(solvers))
    for k, solver in enumerate(solvers):
        gaps = []
        for comp in report.comparisons:
            match = [r for r in comp.results if r.solver == solver]
            gap = relative_gap(match[0].objective, comp.lower_bound) if match else None
            gaps.append(math.nan if gap is None else 100 * max(gap, floor))
        ax.plot(
            x + (k - (len(solvers) - 1) / 2) * width,
            gaps,
            linestyle="none",
            marker=markers[k % len(markers)],
            color=f"C{k % 10}",
            label=solver,
        )
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(LogFormatter())  # plain numbers: 10, 1, 0.01
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    ax.set_xticks(x, names, rotation=20, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_xticks(x[:-1] + 0.5, minor=True)  # the columns of unrelated instances, apart
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylabel("gap to the instance's lower bound (%)")
    ax.set_title("Gap per solver on each instance (0% drawn at 0.01%)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.grid(True, axis="x", which="minor", color="lightgrey")
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), title="solver")
    return ax


def plot_memory(instance: Instance, result: Result, ax: Any = None) -> Any:
    """KV tokens held in every round by ``result``'s schedule, against ``M``."""
    ax = ax if ax is not None else pyplot().figure().gca()
    rounds, held = result.schedule.load_points()  # exact, in O(n) however late the rounds
    ax.plot(rounds, held, lw=0.8, color="tab:blue", label="KV tokens held")
    ax.set_ylim(0, 1.15 * max(instance.kv_tokens, max(held, default=0)))
    reference_line(ax, instance.kv_tokens, f"M = {instance.kv_tokens:,}", color="tab:red", ls="--")
    ax.set_ylabel("tokens")
    ax.set_title(
        f"{instance.name}: {result.solver} schedule\nobjective {result.objective:,}, "
        f"utilisation {100 * result.schedule.utilisation:.1f}%",
        fontsize=10,
    )
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, alpha=0.3)
    return ax


def plot_gantt(instance: Instance, result: Result, ax: Any = None) -> Any:
    """Each request of ``result``'s schedule as a bar from its start to its completion."""
    ax = ax if ax is not None else pyplot().figure().gca()
    starts = result.schedule.starts
    rows = np.argsort(starts, kind="stable")
    y = np.empty(instance.n)
    y[rows] = np.arange(instance.n)
    ax.hlines(
        y,
        starts,
        result.schedule.completion,
        lw=max(0.5, min(4.0, 300 / instance.n)),
        color="tab:green",
    )
    ax.set_xlabel("round")
    ax.set_ylabel("request (by start)")
    ax.set_title("Gantt: each request from start to completion", fontsize=10)
    ax.invert_yaxis()
    ax.grid(True, alpha=0.3)
    return ax
