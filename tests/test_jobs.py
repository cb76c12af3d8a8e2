"""The task layer (``schedlab/jobs.py``): the same outcomes on every executor, failures
recorded, dead workers retried, runs resumable from the results file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from schedlab.errors import SchedlabError
from schedlab.jobs import ATTEMPTS, DEFAULT_BACKEND, Executor, Job, ResultsFile, run_jobs
from tests.conftest import INSTANCES, process_alive


def _pool_of_two(backend: str) -> Executor:
    """``backend`` with two workers where it takes a number of workers."""
    return Executor(backend, workers=None if backend == "serial" else 2)


def square(job: Job) -> int:
    """A runner: squares ``x``; raises for ``boom``; for ``die``, kills its own process the
    first ``die`` times it runs (counted in files under ``marks``)."""
    params = job.params
    if params.get("boom"):
        raise ValueError(f"boom {params['x']}")
    if params.get("die"):
        marks = Path(params["marks"])
        runs = len(list(marks.glob(f"{params['x']}-*")))
        (marks / f"{params['x']}-{runs}").touch()
        if runs < params["die"]:
            os._exit(9)
    return params["x"] ** 2


def test_a_job_s_key_depends_on_its_content_only():
    assert Job("a", {"x": 1, "y": [2]}).key == Job("a", {"y": [2], "x": 1}).key
    assert Job("a", {"x": 1}).key != Job("a", {"x": 2}).key != Job("b", {"x": 2}).key


@pytest.mark.parametrize("backend", ["serial", "local"])
def test_outcomes_in_job_order_with_errors_recorded(backend):
    jobs = [Job("sq", {"x": x, "boom": x == 3}) for x in range(7)]
    outcomes = run_jobs(square, jobs, _pool_of_two(backend))
    assert [o.job for o in outcomes] == jobs
    assert [o.value for o in outcomes] == [0, 1, 4, None, 16, 25, 36]
    assert [o.ok for o in outcomes] == [True] * 3 + [False] + [True] * 3
    assert outcomes[3].error == "ValueError: boom 3"


def test_a_worker_that_dies_is_retried_and_nobody_else_is_blamed(tmp_path):
    # job 2 kills its process once (then succeeds), job 4 every time it runs
    jobs = [
        Job("sq", {"x": x, "die": {2: 1, 4: 99}.get(x, 0), "marks": str(tmp_path)})
        for x in range(6)
    ]
    outcomes = run_jobs(square, jobs, executor=Executor(backend="local", workers=2))
    assert [o.value for o in outcomes] == [0, 1, 4, 9, None, 25]
    assert outcomes[4].error.startswith("WorkerDied")
    assert len(list(tmp_path.glob("4-*"))) in (ATTEMPTS, ATTEMPTS + 1)  # alone: ATTEMPTS
    assert len(list(tmp_path.glob("2-*"))) == 2


def test_one_worker_still_keeps_a_dying_job_out_of_the_caller(tmp_path):
    jobs = [
        Job("sq", {"x": x, "die": 99 if x == 1 else 0, "marks": str(tmp_path)}) for x in range(3)
    ]
    outcomes = run_jobs(square, jobs, executor=Executor(backend="local", workers=1))
    assert [o.value for o in outcomes] == [0, None, 4]
    assert outcomes[1].error.startswith("WorkerDied")


def test_numpy_values_are_json(tmp_path):
    results = tmp_path / "r.jsonl"
    job = Job("sq", {"x": np.int64(3), "scale": np.float64(1.0)})
    assert job.key == Job("sq", {"x": 3, "scale": 1.0}).key
    assert (
        run_jobs(square, [job], executor=Executor(backend="serial", results=results))[0].value == 9
    )


def test_a_file_that_is_not_a_results_file_is_refused_untouched(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, no newline")
    with pytest.raises(SchedlabError, match="not a results file"):
        run_jobs(square, [Job("sq", {"x": 1})], executor=Executor(backend="serial", results=notes))
    assert notes.read_text() == "my notes, no newline"
    notes.write_text('{"a": 1}\n')
    with pytest.raises(SchedlabError, match=r"notes\.txt:1: not a line of a results file"):
        run_jobs(square, [Job("sq", {"x": 1})], executor=Executor(backend="serial", results=notes))
    with pytest.raises(SchedlabError, match="no folder"):
        run_jobs(
            square, [], executor=Executor(backend="serial", results=tmp_path / "none" / "r.jsonl")
        )


def test_the_results_file_makes_a_rerun_skip_finished_jobs(tmp_path):
    results = tmp_path / "r.jsonl"
    jobs = [Job("sq", {"x": x, "boom": x == 1}) for x in range(3)]
    run_jobs(square, jobs, executor=Executor(backend="serial", results=results))
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(r["params"]["x"], r["value"], r["error"]) for r in lines] == [
        (0, 0, None),
        (1, None, "ValueError: boom 1"),
        (2, 4, None),
    ]
    # the same grid and one job more: the finished ones are read back, the failed one
    # runs again (and fails again), the new one runs
    outcomes = run_jobs(
        square, [*jobs, Job("sq", {"x": 3})], executor=Executor(backend="serial", results=results)
    )
    assert [o.resumed for o in outcomes] == [True, False, True, False]
    assert [o.value for o in outcomes] == [0, None, 4, 9]
    assert len(results.read_text().splitlines()) == 5  # two more lines, nothing redone


def test_a_line_cut_short_by_a_kill_is_run_again(tmp_path):
    results = tmp_path / "r.jsonl"
    run_jobs(square, [Job("sq", {"x": 5})], executor=Executor(backend="serial", results=results))
    whole = results.read_text()
    results.write_text(whole + '{"key": "abc", "val')
    assert list(ResultsFile(results).done().values()) == [25]
    assert results.read_text() == whole  # the next line will not be glued to it
    results.write_text('{"key": "abc", "val\n' + whole)
    with pytest.raises(SchedlabError, match=r"r\.jsonl:1:16: invalid JSON"):
        ResultsFile(results).done()  # a broken line inside is not a kill's: refused


def test_bad_executor_settings_are_refused():
    with pytest.raises(SchedlabError, match=r"^backend: expected one of serial, local, ray"):
        Executor(backend="cloud")
    with pytest.raises(SchedlabError, match=r"^workers: must be an integer >= 1, got 0$"):
        Executor(workers=0)
    with pytest.raises(SchedlabError, match=r"^workers: must be an integer >= 1, got True"):
        Executor(workers=True)
    with pytest.raises(SchedlabError, match=r"^workers: not with backend serial"):
        Executor("serial", workers=2)
    with pytest.raises(SchedlabError, match=r"^address: only with backend ray$"):
        Executor("local", address="auto")
    with pytest.raises(TypeError, match=r"^results: expected a file path, got 3$"):
        Executor(results=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^progress: expected true, false or a Progress"):
        Executor(progress="yes")  # type: ignore[arg-type]


def test_one_default_backend():
    assert Executor().backend == DEFAULT_BACKEND == "local"


def test_an_executor_must_be_one():
    jobs = [Job("sq", {"x": 1})]
    with pytest.raises(TypeError, match=r"^run_jobs: executor: expected an Executor, got str$"):
        run_jobs(square, jobs, "serial")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument 'backend'"):
        run_jobs(square, jobs, backend="serial")  # type: ignore[call-arg]


def _schedlab(*argv: str) -> list[str]:
    return [sys.executable, "-m", "schedlab", *argv]


def test_a_sweep_killed_half_way_completes_on_rerun_without_redoing(tmp_path):
    results = tmp_path / "sweep.jsonl"
    grid = ["--policies", "vllm,fixed:256", "--rates", "2,4,6,8", "--duration", "40s"]
    rest = ["--workers", "1", "--quiet", "--results", str(results), "--json"]
    argv = _schedlab("sweep", *grid, *rest)
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if results.is_file() and len(results.read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    process.kill()
    process.communicate()
    finished = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert 2 <= len(finished) < 8, "kill the run half-way"
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    keys = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 8  # each job ran once over both runs
    assert keys[: len(finished)] == finished
    rerun = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert json.loads(rerun.stdout) == json.loads(done.stdout)  # all from the file now
    assert len(results.read_text().splitlines()) == 8


@pytest.mark.parametrize("address", ["closed", "nonsense", "ray://"])
def test_an_unreachable_ray_address_is_refused_at_once(address):
    pytest.importorskip("ray", reason="Ray is an optional extra: schedlab[ray]")
    if address == "closed":  # a port nothing listens on: bound, then let go
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{probe.getsockname()[1]}"
    grid = ["--policies", "vllm", "--rates", "2", "--duration", "10s", "--quiet"]
    began = time.monotonic()
    done = subprocess.run(
        _schedlab("sweep", *grid, "--backend", "ray", "--address", address),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"schedlab: error: --address {address}: ")
    assert len(done.stderr.splitlines()) == 1
    assert time.monotonic() - began < 60  # ray.init alone waits minutes for such a head


def test_ray_own_address_words_are_left_to_ray():
    from schedlab.jobs import _check_reachable

    for word in ("auto", "local"):  # Ray resolves these itself; nothing to connect to
        assert _check_reachable(word) is None


# --- Ray: a local instance started by the test ------------------------------------------


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance of two CPUs for the module's Ray tests."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: schedlab[ray]")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _no_timings(rows):
    """``rows`` without their wall times (the only fields an executor may change)."""
    drop = {"runtime_s", "seconds", "wall_s", "moves_per_s"}
    if isinstance(rows, dict):
        return {k: _no_timings(v) for k, v in rows.items() if k not in drop}
    if isinstance(rows, list):
        return [_no_timings(v) for v in rows]
    return rows


def test_ray_runs_the_grid_with_failures_and_retries(ray_instance, tmp_path):
    jobs = [
        Job("sq", {"x": x, "boom": x == 1, "die": 1 if x == 2 else 0, "marks": str(tmp_path)})
        for x in range(4)
    ]
    outcomes = run_jobs(square, jobs, executor=Executor(backend="ray"))
    assert [o.value for o in outcomes] == [0, None, 4, 9]
    assert outcomes[1].error == "ValueError: boom 1"


def test_sweep_and_compare_are_the_same_on_every_executor(ray_instance, tmp_path):
    from schedlab.offline.instance_io import read_instance
    from schedlab.offline.report import run_report
    from schedlab.serving.capacity import sweep
    from schedlab.serving.scenario import Scenario

    def sweep_rows(backend: str):
        base = Scenario(seed=3)
        points = sweep(
            "chat",
            ["vllm", "sloweave"],
            [4.0, 9.0],
            base,
            duration_s=10.0,
            executor=_pool_of_two(backend),
        )
        return [p.row() for p in points]

    def compare_rows(backend: str):
        instances = [read_instance(INSTANCES / "tiny-1.json"), INSTANCES / "jaillet-s1.json"]
        report = run_report(
            instances, ["fcfs", "dp", "local-search"], executor=_pool_of_two(backend)
        )
        rows = [r for c in report.comparisons for r in c.records()]
        starts = [r.starts.tolist() for c in report.comparisons for r in c.results]
        stats = [r.stats for c in report.comparisons for r in c.results]
        return _no_timings(rows), starts, _no_timings(stats)

    for rows in (sweep_rows, compare_rows):
        serial = rows("serial")
        assert rows("local") == serial
        assert rows("ray") == serial


def _descendants(pid: int) -> set[str]:
    found: set[str] = set()
    todo = [str(pid)]
    while todo:
        children = subprocess.run(["pgrep", "-P", todo.pop()], capture_output=True, text=True)
        new = set(children.stdout.split()) - found
        found |= new
        todo += new
    return found


def _runs_a_job(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"ray::_attempt" in handle.read()
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_ray_sweep_stopped_by_sigterm_leaves_nothing_behind(tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: schedlab[ray]")
    grid = ["--workload", "mixed", "--policies", "sloweave,vllm", "--rates", "20,25"]
    process = subprocess.Popen(
        _schedlab("sweep", *grid, "--duration", "5000s", "--quiet", "--backend", "ray"),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    spawned: set[str] = set()
    deadline = time.monotonic() + 240  # Ray's start-up takes long on a loaded machine
    while not any(_runs_a_job(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.5)  # Ray's daemons start, then its workers take the jobs
        spawned |= _descendants(process.pid)
    assert any(_runs_a_job(p) for p in spawned), "Ray did not start the jobs"
    time.sleep(2.0)
    spawned |= _descendants(process.pid)
    process.send_signal(signal.SIGTERM)
    err = process.communicate(timeout=60)[1]
    assert process.returncode == 130 and err.strip() == "schedlab: interrupted"
    deadline = time.monotonic() + 20
    while any(process_alive(p) for p in spawned) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in spawned if process_alive(p)]
