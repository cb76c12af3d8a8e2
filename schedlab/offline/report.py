"""The comparison report: several solvers on a set of instances, against one bound each.

:func:`run_report` runs :func:`schedlab.offline.compare.compare` on each instance (files, folders
of ``*.json`` instance files, or :class:`~schedlab.offline.instance.Instance` objects) and
collects a :class:`Report`: per instance and solver the objective, the instance's lower
bound, the gap ``(objective - bound) / bound``, the runtime, and the reason a solver
gave no schedule. The report prints as text and
saves as CSV + Markdown (:meth:`Report.save`); its figure is drawn by
:func:`schedlab.plotting.plot_report`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from schedlab.errors import FormatError
from schedlab.jobs import Executor, executor_of
from schedlab.json_files import is_stdin
from schedlab.offline.compare import (
    Comparison,
    compare_all,
    solver_names,
    solver_options,
)
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.result import relative_gap
from schedlab.tables import rows_to_csv, to_pandas

__all__ = ["REPORT_FILES", "Report", "load_instances", "run_report"]

#: The files :meth:`Report.save` writes in its folder: the CSV and the Markdown table.
REPORT_FILES: tuple[str, str] = ("report.csv", "report.md")


def load_instances(
    items: Iterable[str | Path | Instance] | str | Path | Instance,
) -> list[Instance]:
    """Instances from objects, instance files (``-``: standard input), and folders (their
    ``*.json``, sorted).

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
        elif path.is_file() or is_stdin(item):
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
        return rows_to_csv(self.records(), handle)

    def to_pandas(self) -> Any:
        """:meth:`records` as a pandas DataFrame, one row per (instance, solver) (pandas
        is optional: :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas(self.records())

    def to_markdown(self) -> str:
        """One Markdown table per instance, then the best solver per instance."""
        parts = ["# schedlab comparison report", ""]
        for comp in self.comparisons:
            inst = comp.instance
            parts += [f"## {inst.name or 'instance'} (n = {inst.n}, M = {inst.kv_tokens:,})", ""]
            parts += [comp.to_markdown(), ""]
        parts += [
            "## Best per instance",
            "",
            "| instance | best solver | objective | gap |",
            "|---|---|---|---|",
        ]
        for comp in self.comparisons:
            best = comp.best()
            if best is None:
                parts.append(f"| {comp.instance.name} | (no solver gave a schedule) | - | - |")
                continue
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
        paths = {
            kind: folder / name
            for kind, name in zip(("csv", "markdown"), REPORT_FILES, strict=True)
        }
        paths["csv"].write_text(self.to_csv(), encoding="utf-8")
        paths["markdown"].write_text(self.to_markdown(), encoding="utf-8")
        return paths


def run_report(
    items: Iterable[str | Path | Instance] | str | Path | Instance,
    solvers: Sequence[str] | None = None,
    *,
    time_limit: float | None = None,
    max_memory: int | None = None,
    seed: int = 0,
    bound: str | None = "best",
    options: Mapping[str, Mapping[str, Any]] | None = None,
    out_dir: str | Path | None = None,
    executor: Executor | None = None,
) -> Report:
    """Compare ``solvers`` on every instance; optionally save the tables.

    Parameters
    ----------
    items
        Instances, instance files or folders of them (see :func:`load_instances`).
    solvers
        Solver names (default :data:`schedlab.offline.compare.DEFAULT_SOLVERS`).
    time_limit
        Seconds per solver run and for the bound of each instance.
    max_memory
        Memory budget in bytes of each solver run and bound (``None``: the default of
        :mod:`schedlab.budget`).
    seed
        Seed for every solver.
    bound
        Lower-bound method (``"best"``) or ``None``.
    options
        Each solver's own options, by solver name (see :func:`compare`).
    out_dir
        If given, ``report.csv`` and ``report.md`` are written there.
    executor
        Where the jobs (each instance's bound, each solver on it) run, the results file
        that makes the run resumable and the progress bar over them all
        (:class:`schedlab.jobs.Executor`); the report is the same on every executor but
        for the runtimes.
    """
    executor = executor_of("run_report", executor)
    solvers = solver_names(solvers)
    solver_options(solvers, options)  # checked before any instance is read
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    comparisons = compare_all(
        load_instances(items),
        solvers,
        time_limit=time_limit,
        max_memory=max_memory,
        seed=seed,
        bound=bound,
        options=options,
        executor=executor,
    )
    report = Report(tuple(comparisons))
    if out_dir is not None:
        report.save(out_dir)
    return report
