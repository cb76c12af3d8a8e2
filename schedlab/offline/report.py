"""The comparison report: several solvers on a set of instances, against the best bound.

:func:`run_report` runs :func:`schedlab.offline.compare.compare` on each instance (files, folders
of ``*.json`` instance files, or :class:`~schedlab.offline.instance.Instance` objects) and
collects a :class:`Report`: per instance and solver the objective, the best lower bound,
the gap ``(objective - bound) / bound`` and the runtime. The report prints as text,
saves as CSV + Markdown (:meth:`Report.save`) and draws a figure (:func:`plot_report`):

* top: gap per solver across instances (one line per solver, log scale);
* bottom: for one schedule (by default the best of the last instance), the memory held
  in every round against ``M``, and a Gantt chart of the requests (one bar per request
  from its start to its completion, requests sorted by start).

matplotlib is imported only when plotting (``pip install 'schedlab[plot]'``); without
it, plotting raises :class:`~schedlab.errors.SchedlabError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from schedlab.errors import FormatError, SchedlabError
from schedlab.offline.compare import Comparison, compare, records_to_csv, solver_names
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.result import Result, relative_gap
from schedlab.plotting import check_figure_path, pyplot

__all__ = ["Report", "load_instances", "plot_report", "run_report"]


def load_instances(
    items: Iterable[str | Path | Instance] | str | Path | Instance,
) -> list[Instance]:
    """Instances from objects, instance files, and folders (their ``*.json``, sorted).

    Raises
    ------
    FormatError
        If a path does not exist, a folder holds no ``.json`` file, or a file is not an
        instance (the message names the file).
    """
    if isinstance(items, str | Path | Instance):
        items = [items]
    instances: list[Instance] = []
    for item in items:
        if isinstance(item, Instance):
            instances.append(item)
            continue
        path = Path(item)
        if path.is_dir():
            files = sorted(path.glob("*.json"))
            if not files:
                raise FormatError(f"{path}: folder holds no .json instance file")
            instances.extend(read_instance(f) for f in files)
        elif path.is_file():
            instances.append(read_instance(path))
        else:
            raise FormatError(f"{path}: no such file or folder")
    if not instances:
        raise FormatError("report: no instances given")
    return instances


@dataclass(frozen=True)
class Report:
    """Comparisons of the same solvers on several instances."""

    comparisons: tuple[Comparison, ...]

    def records(self) -> list[dict[str, Any]]:
        """One dict per (instance, solver): the columns of the CSV."""
        return [row for comp in self.comparisons for row in comp.records()]

    def to_csv(self, handle: TextIO | None = None) -> str:
        """The records as CSV (also written to ``handle`` if given)."""
        return records_to_csv(self.records(), handle)

    def to_markdown(self) -> str:
        """One Markdown table per instance, then the best solver per instance."""
        parts = ["# schedlab comparison report", ""]
        for comp in self.comparisons:
            inst = comp.instance
            parts += [f"## {inst.name or 'instance'} (n = {inst.n}, M = {inst.memory:,})", ""]
            parts += [comp.to_markdown(), ""]
        parts += [
            "## Best per instance",
            "",
            "| instance | best solver | objective | gap |",
            "|---|---|---|---|",
        ]
        for comp in self.comparisons:
            best = comp.best()
            gap = relative_gap(best.objective, comp.lower_bound)
            shown = "-" if gap is None else f"{100 * gap:.2f}%"
            parts.append(
                f"| {comp.instance.name} | {best.solver} | {best.objective:,} | {shown} |"
            )
        return "\n".join(parts) + "\n"

    def to_text(self) -> str:
        """The plain-text tables of every comparison."""
        return "\n\n".join(comp.to_text() for comp in self.comparisons)

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``report.csv`` and ``report.md`` into ``out_dir`` (created if needed)."""
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"csv": folder / "report.csv", "markdown": folder / "report.md"}
        paths["csv"].write_text(self.to_csv(), encoding="utf-8")
        paths["markdown"].write_text(self.to_markdown(), encoding="utf-8")
        return paths


def run_report(
    items: Iterable[str | Path | Instance] | str | Path | Instance,
    solvers: Sequence[str] | None = None,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    bound: str | None = "best",
    out_dir: str | Path | None = None,
    plot: str | Path | None = None,
    progress: TextIO | None = None,
) -> Report:
    """Compare ``solvers`` on every instance; optionally save the tables and the figure.

    Parameters
    ----------
    items
        Instances, instance files or folders of them (see :func:`load_instances`).
    solvers
        Solver names (default :data:`schedlab.offline.compare.DEFAULT_SOLVERS`).
    time_limit
        Seconds per solver run and for the bound of each instance.
    seed
        Seed for every solver.
    bound
        Lower-bound method (``"best"``) or ``None``.
    out_dir
        If given, ``report.csv`` and ``report.md`` are written there.
    plot
        If given, the figure is saved to this path (PNG, PDF, SVG by suffix).
    progress
        Receives one line per instance and per solver (e.g. ``sys.stderr``).
    """
    solvers = solver_names(solvers)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    if plot is not None:
        check_figure_path(plot, "plot")
    instances = load_instances(items)
    comparisons = []
    for k, instance in enumerate(instances, start=1):
        if progress is not None:
            print(
                f"({k}/{len(instances)}) {instance.name or 'instance'}: n = {instance.n}",
                file=progress,
                flush=True,
            )
        comparisons.append(
            compare(
                instance, solvers, time_limit=time_limit, seed=seed, bound=bound, progress=progress
            )
        )
    report = Report(tuple(comparisons))
    if out_dir is not None:
        report.save(out_dir)
    if plot is not None:
        plot_report(report, plot)
    return report


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
    _draw_gaps(fig.add_subplot(grid[0]), report)
    memory_ax = fig.add_subplot(grid[1])
    _draw_memory(memory_ax, comp.instance, result)
    _draw_gantt(fig.add_subplot(grid[2], sharex=memory_ax), comp.instance, result)
    out = Path(path)
    fig.savefig(out, dpi=110)
    pyplot().close(fig)
    return out


def _pick(report: Report, schedule: tuple[str, str] | None) -> tuple[Comparison, Result]:
    if schedule is None:
        comp = report.comparisons[-1]
        return comp, comp.best()
    name, solver = schedule
    for comp in report.comparisons:
        if comp.instance.name == name:
            for result in comp.results:
                if result.solver == solver:
                    return comp, result
    raise SchedlabError(f"plot: no result for instance {name!r} and solver {solver!r}")


def _draw_gaps(ax: Any, report: Report) -> None:
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
    ax.set_ylabel("gap to best lower bound (%)")
    ax.set_title("Gap per solver across instances (0% drawn at 0.01%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=min(len(solvers), 6))


def _draw_memory(ax: Any, instance: Instance, result: Result) -> None:
    profile = result.schedule.memory_profile
    ax.plot(np.arange(len(profile)), profile, lw=0.8, color="tab:blue", label="KV tokens held")
    ax.axhline(instance.memory, color="tab:red", ls="--", lw=1, label=f"M = {instance.memory:,}")
    ax.set_ylabel("tokens")
    ax.set_title(
        f"{instance.name}: {result.solver} schedule, objective {result.objective:,}, "
        f"utilisation {100 * result.schedule.utilisation:.1f}%"
    )
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, alpha=0.3)


def _draw_gantt(ax: Any, instance: Instance, result: Result) -> None:
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
