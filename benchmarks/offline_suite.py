"""All offline solvers on the shipped mixed backlogs and Jaillet instances.

Run: ``python benchmarks/offline_suite.py [--time-limit 10] [--out benchmarks/out]``.
Writes ``report.csv``, ``report.md`` and ``offline_suite.png`` (gap per solver across
instances; memory and Gantt of the best schedule of the largest backlog) into ``--out``
and prints the tables. Instances come from ``instances/`` (``mixed-n*.json``,
``jaillet-*.json``); missing mixed backlogs are generated with
``schedlab.offline.backlogs.mixed_backlog(n, seed=0)``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from schedlab import read_instance
from schedlab.jobs import Executor
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.instance import Instance
from schedlab.offline.report import run_report
from schedlab.plotting.comparison import plot_report

ROOT = Path(__file__).resolve().parents[1]
SOLVERS = (
    "fcfs",
    "total-size",
    "svf",
    "mc-sf",
    "mc-sf-backfill",
    "sorted-f-seq",
    "sorted-f",
    "local-search",
    "sorted-lp",
    "lp-swap",
    "lp-search",
    "receding-horizon",
)


def suite() -> list[Instance]:
    found = []
    for path in sorted((ROOT / "instances").glob("jaillet-*.json")):
        found.append(read_instance(path))
    for n in (50, 200, 1000):
        path = ROOT / "instances" / f"mixed-n{n}.json"
        found.append(read_instance(path) if path.is_file() else mixed_backlog(n, seed=0))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    parser.add_argument("--solvers", nargs="+", default=list(SOLVERS))
    args = parser.parse_args()
    report = run_report(
        suite(),
        args.solvers,
        time_limit=args.time_limit,
        seed=0,
        out_dir=args.out,
        executor=Executor(progress=True),
    )
    plot_report(report, args.out / "offline_suite.png")
    print(report.to_text())
    print()
    for comp in report.comparisons:
        best = comp.best()
        fcfs = [r for r in comp.results if r.solver == "fcfs"]
        sf = [r for r in comp.results if r.solver == "sorted-f"]
        extra = (
            f", FCFS / sorted-f = {fcfs[0].objective / sf[0].objective:.3f}" if fcfs and sf else ""
        )
        print(f"{comp.instance.name}: best {best.solver} gap {100 * (best.gap or 0):.2f}%{extra}")


if __name__ == "__main__":
    main()
