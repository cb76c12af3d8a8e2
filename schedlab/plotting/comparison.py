"""The figure of a comparison report (:class:`~schedlab.offline.report.Report`).

:func:`plot_report` composes three panels, each drawn by its own function:

* :func:`plot_gaps` — gap per solver across instances (one line per solver, log scale);
* :func:`plot_memory` — for one schedule (by default the best of the last instance), the
  memory held in every round against ``M``;
* :func:`plot_gantt` — a Gantt chart of its requests (one bar per request from its start
  to its completion, requests sorted by start).
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
from schedlab.plotting.figures import pyplot, save_figure

__all__ = ["plot_gantt", "plot_gaps", "plot_memory", "plot_report"]


def plot_report(
    report: Report, path: str | Path, *, schedule: tuple[str, str] | None = None
) -> Path:
    """Draw the report's figure (module docs) and save it to ``path``.

    Parameters
    ----------
    schedule
        ``(instance name, solver)`` of the schedule to draw; default the best result of
        the last instance.

    Raises
    ------
    SchedlabError
        If matplotlib is missing or ``schedule`` names no result of the report.
    """
    comp, result = _pick(report, schedule)
    fig = pyplot().figure(figsize=(12, 10), layout="constrained")
    grid = fig.add_gridspec(3, 1, height_ratios=[1.1, 0.8, 1.2])
    plot_gaps(report, fig.add_subplot(grid[0]))
    memory_ax = fig.add_subplot(grid[1])
    plot_memory(comp.instance, result, memory_ax)
    plot_gantt(comp.instance, result, fig.add_subplot(grid[2], sharex=memory_ax))
    return save_figure(fig, path)


def _pick(report: Report, schedule: tuple[str, str] | None) -> tuple[Comparison, Result]:
    if schedule is None:
        for comp in reversed(report.comparisons):  # the last instance a solver scheduled
            best = comp.best()
            if best is not None:
                return comp, best
        raise SchedlabError("plot: no solver gave a schedule on any instance")
    name, solver = schedule
    for comp in report.comparisons:
        if comp.instance.name == name:
            for result in comp.results:
                if result.solver == solver:
                    return comp, result
    raise SchedlabError(f"plot: no result for instance {name!r} and solver {solver!r}")


def plot_gaps(report: Report, ax: Any = None) -> Any:
    """Gap of every solver to each instance's lower bound across the report's instances."""
    ax = ax if ax is not None else pyplot().figure().gca()
    names = [c.instance.name or f"#{k}" for k, c in enumerate(report.comparisons)]
    solvers = list(dict.fromkeys(r.solver for c in report.comparisons for r in c.results))
    x = np.arange(len(names))
    floor = 1e-4  # a zero gap is drawn at 0.01% on the log axis
    markers = "osD^v<>pXh*"
    colours = [f"C{k % 10}" for k in range(len(solvers))]
    for k, solver in enumerate(solvers):
        gaps = []
        for comp in report.comparisons:
            match = [r for r in comp.results if r.solver == solver]
            gap = relative_gap(match[0].objective, comp.lower_bound) if match else None
            gaps.append(math.nan if gap is None else 100 * max(gap, floor))
        ax.plot(x, gaps, marker=markers[k % len(markers)], color=colours[k], label=solver)
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("gap to the instance's lower bound (%)")
    ax.set_title("Gap per solver across instances (0% drawn at 0.01%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=min(len(solvers), 6))
    return ax


def plot_memory(instance: Instance, result: Result, ax: Any = None) -> Any:
    """KV tokens held in every round by ``result``'s schedule, against ``M``."""
    ax = ax if ax is not None else pyplot().figure().gca()
    rounds, held = result.schedule.load_points()  # exact, in O(n) however late the rounds
    ax.plot(rounds, held, lw=0.8, color="tab:blue", label="KV tokens held")
    ax.axhline(instance.memory, color="tab:red", ls="--", lw=1, label=f"M = {instance.memory:,}")
    ax.set_ylabel("tokens")
    ax.set_title(
        f"{instance.name}: {result.solver} schedule, objective {result.objective:,}, "
        f"utilisation {100 * result.schedule.utilisation:.1f}%"
    )
    ax.legend(fontsize=8, loc="lower right")
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
    ax.set_title("Gantt: each request from start to completion")
    ax.invert_yaxis()
    ax.grid(True, alpha=0.3)
    return ax
