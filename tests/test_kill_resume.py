"""``compare``, ``sweep`` and ``capacity`` grids killed at a random point and resumed.

Each grid runs on a local pool of two workers with ``--results FILE``. It is stopped
(SIGKILL, or SIGTERM) once a number of results drawn from a fixed seed is in the file,
then rerun with the same file. The resumed run's ``--json`` output must equal an
uninterrupted run's in every field but the wall-clock ones (:data:`TIMINGS`), the file
must hold each job once, and no process the killed command started may be left running.
(``tests/test_jobs.py`` kills a sweep half-way and checks that nothing is redone.)
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import INSTANCES, process_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

#: Fields that hold wall-clock time, or rates per wall-clock second.
TIMINGS = {"runtime_s", "seconds", "wall_s", "moves_per_s", "evaluations_per_s"}

TINY = [str(INSTANCES / f"tiny-{k}.json") for k in range(1, 4)]

#: Each grid: its command line (without ``--results``) and its number of jobs.
GRIDS: dict[str, tuple[list[str], int]] = {
    "compare": (
        [
            "compare",
            *TINY,
            "--solvers",
            "fcfs,sorted-f,local-search,alns",
            "--option",
            "local-search.work=2000",
            "--option",
            "alns.work=2000",
        ],
        3 * 5,  # a bound and four solvers an instance
    ),
    "sweep": (
        ["sweep", "--policies", "vllm,sloweave", "--rates", "2,4,6,8", "--duration", "10s"],
        8,
    ),
    "capacity": (
        ["capacity", "--policies", "vllm,sloweave", "--seeds", "0,1", "--duration", "5s"],
        4,
    ),
}

COMMON = ["--workers", "2", "--backend", "local", "--json", "--quiet"]


def _schedlab(argv: list[str], results: Path) -> list[str]:
    return [sys.executable, "-m", "schedlab", *argv, *COMMON, "--results", str(results)]


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _lines(results: Path) -> list[str]:
    return results.read_text().splitlines() if results.is_file() else []


def _descendants(pid: int) -> set[str]:
    found: set[str] = set()
    todo = [str(pid)]
    while todo:
        children = subprocess.run(["pgrep", "-P", todo.pop()], capture_output=True, text=True)
        new = set(children.stdout.split()) - found
        found |= new
        todo += new
    return found


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each grid's ``--json`` output run without interruption, without timings."""
    outputs = {}
    for grid, (argv, jobs) in GRIDS.items():
        results = tmp_path_factory.mktemp("whole") / f"{grid}.jsonl"
        done = subprocess.run(_schedlab(argv, results), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert len(_lines(results)) == jobs
        outputs[grid] = _without_timings(json.loads(done.stdout))
    return outputs


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("grid", sorted(GRIDS))
def test_a_grid_killed_at_a_random_point_resumes_to_the_same_results(
    tmp_path: Path, uninterrupted: dict[str, Any], grid: str, how: str
) -> None:
    argv, jobs = GRIDS[grid]
    results = tmp_path / f"{grid}.jsonl"
    # the point: after 1 to half the jobs are written (seeded, so CI is repeatable)
    after = random.Random(f"{grid} {how}").randint(1, jobs // 2)
    process = subprocess.Popen(
        _schedlab(argv, results),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    spawned: set[str] = set()
    deadline = time.monotonic() + 120
    while len(_lines(results)) < after and process.poll() is None:
        assert time.monotonic() < deadline, "no results written"
        spawned |= _descendants(process.pid)
        time.sleep(0.01)
    spawned |= _descendants(process.pid)
    written = len(_lines(results))
    assert process.poll() is None and written < jobs, "the grid ended before the kill"
    process.send_signal(getattr(signal, how))
    err = process.communicate(timeout=60)[1]
    if how == "SIGTERM":
        assert process.returncode == 130 and err.strip() == "schedlab: interrupted", err
    else:
        assert process.returncode == -signal.SIGKILL
    assert spawned, "the pool's workers were not seen"
    deadline = time.monotonic() + 15  # a worker checks for its parent every 0.5 s
    while any(process_alive(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in spawned if process_alive(p)], "orphan processes left"
    kept = len(_lines(results))
    assert kept >= after - 1  # a line cut short by SIGKILL is dropped and redone
    resumed = subprocess.run(_schedlab(argv, results), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert _without_timings(json.loads(resumed.stdout)) == uninterrupted[grid]
    records = [json.loads(line) for line in _lines(results)]
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)) == jobs, "each job once over both runs"
    assert all(r.get("error") is None for r in records)
