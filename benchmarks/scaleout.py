"""Scale-out: jobs per second of each executor of ``schedlab.jobs``, speed-up over serial,
and the overhead each adds per job.

Two grids, each run ``--repeats`` times per executor (medians reported):

* ``sweep``: the grid ``schedlab sweep`` runs, ``--policies`` x ``--rates`` simulations
  of ``chat`` over a ``--duration`` window (``schedlab.serving.capacity.run_serving_job``;
  about a second of work each);
* ``empty``: ``--empty`` jobs that return at once, so that the wall time per job is the
  executor's own overhead (shipping the job and its outcome, scheduling).

Executors: ``serial`` (this process), ``local`` (a process pool of ``--workers``, all
cores by default: 2 here) and, when Ray is installed, ``ray`` on a local instance of as
many CPUs (started before the timings; its start-up is reported apart). Every executor's
outcomes are checked equal to serial's (timings aside) before any figure is printed.

Usage: python benchmarks/scaleout.py [--repeats R] [--workers W] [--duration S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from schedlab.jobs import Executor, Job, run_jobs
from schedlab.serving.capacity import run_serving_job
from schedlab.serving.scenario import Scenario


def empty(job: Job) -> int:
    """A job with no work: its wall time is the executor's overhead."""
    return int(job.params["i"])


def _sweep_jobs(policies: list[str], rates: list[float], duration_s: float) -> list[Job]:
    base = Scenario()
    return [
        Job(
            "simulate",
            {
                "workload": "chat",
                "scenario": base.with_(policy=p).to_dict(),
                "rate": r,
                "duration_s": duration_s,
                "data_dir": None,
            },
        )
        for p in policies
        for r in rates
    ]


def _time(
    runner: Any, jobs: list[Job], backend: str, workers: int, repeats: int
) -> tuple[float, list[Any]]:
    walls: list[float] = []
    values: list[Any] | None = None
    for _ in range(repeats):
        began = time.perf_counter()
        outcomes = run_jobs(runner, jobs, executor=Executor(backend=backend, workers=workers))
        walls.append(time.perf_counter() - began)
        got = [o.value for o in outcomes]
        assert all(o.ok for o in outcomes), [o.error for o in outcomes if not o.ok][:1]
        assert values is None or got == values
        values = got
    assert values is not None
    return statistics.median(walls), values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--duration", type=float, default=120.0, help="window of each job, s")
    parser.add_argument("--empty", type=int, default=200, help="jobs of the empty grid")
    args = parser.parse_args()

    backends = ["serial", "local"]
    try:
        import ray
    except ImportError:
        print("ray: not installed (pip install 'schedlab[ray]'); its rows are left out")
    else:
        began = time.perf_counter()
        ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
        took = time.perf_counter() - began
        print(f"ray: local instance of {args.workers} CPUs started in {took:.1f} s (not counted)")
        backends.append("ray")

    policies = ["vllm", "sarathi", "sloweave", "fixed:512"]
    grids = {
        "sweep": (run_serving_job, _sweep_jobs(policies, [5.0, 10.0, 15.0, 20.0], args.duration)),
        "empty": (empty, [Job("empty", {"i": i}) for i in range(args.empty)]),
    }
    print(f"machine: {os.cpu_count()} cores; workers {args.workers}; medians of {args.repeats}")
    head = ("grid", "backend", "jobs", "wall s", "jobs/s", "speed-up", "ms/job")
    print(f"{head[0]:<7}{head[1]:<8}" + "".join(f"{h:>9}" for h in head[2:]))
    for name, (runner, jobs) in grids.items():
        serial_wall, serial_values = None, None
        for backend in backends:
            wall, values = _time(runner, jobs, backend, args.workers, args.repeats)
            if serial_values is None:
                serial_wall, serial_values = wall, values
            elif values != serial_values:
                raise SystemExit(f"{backend}: outcomes differ from serial's on {name}")
            assert serial_wall is not None
            print(
                f"{name:<7}{backend:<8}{len(jobs):>9}{wall:>9.2f}{len(jobs) / wall:>9.1f}"
                f"{serial_wall / wall:>9.2f}x{1e3 * wall / len(jobs):>9.2f}"
            )
    print("ms/job on the empty grid is each executor's overhead per job.")


if __name__ == "__main__":
    main()
