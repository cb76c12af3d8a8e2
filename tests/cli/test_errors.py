"""Errors on the command line: one line on stderr, exit 2, never a usage block or a
traceback; errors that cross a process boundary intact."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import schedlab.errors as errors
from schedlab.errors import SchedlabError, UnknownNameError, UnknownOptionError
from schedlab.jobs import Executor
from schedlab.serving.capacity import sweep
from tests.conftest import INSTANCES, process_alive

TINY = str(INSTANCES / "tiny-1.json")


def _schedlab(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedlab", *argv], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--max-num-seqs"], "expected one argument"),
        (["simulate", "--tpot-slo", "p95"], "invalid choice: 'p95'"),
        (["solve", TINY, "--time-limit", "-1"], "--time-limit"),
        (["solve", TINY, "--time-limit", "1e308"], "--time-limit: at most 1e+09 seconds"),
        (["solve", TINY, "--time-limit", "10 parsecs"], "--time-limit: cannot read duration"),
        (
            ["solve", TINY, "--solver", "lp-search", "--option", "history=1000000000"],
            "history must be <= 10,000,000",
        ),
        (["compare", TINY, "--solvers", "fcfs,,svf"], "empty items"),
        (["compare", TINY, "--backend", "serial", "--workers", "3"], "not with --backend serial"),
        (["compare", TINY, "--address", "auto"], "--address: only with --backend ray"),
        (["sweep", "--rates", "1", "--backend", "cloud"], "invalid choice: 'cloud'"),
        (["generate", "mixed", "--kv-tokens", "0"], "expected an integer >= 1, got '0'"),
        (["bound", TINY, "--work", "0"], "argument --work: expected a finite number > 0"),
        (["bound", TINY, "--work", "nan"], "argument --work: expected a finite number > 0"),
        (["sweep", "--policies", "vllm,vllm", "--rates", "1"], "vllm given twice"),
        (["simulate", "--tpot", "0"], "--tpot: duration must be positive"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["simulate", "--rate", "1e9", "--duration", "1s"], "exceed the limit of 2,000,000"),
        (["simulate", "--rate", "1e-9", "--duration", "1s"], "no request arrives"),
        (["simulate", "--max-num-seqs", "0"], "expected an integer >= 1, got '0'"),
        (["generate", "mixed", "-n", "0"], "expected an integer >= 1, got '0'"),
        (["simulate", "--block-size", "7"], "vLLM takes 1, 8, 16, 32, 64, 128, 256"),
        (["solve", TINY, "--option", "work"], "expected KEY=VALUE"),
        (["solve", TINY, "--option", "x=1"], "unknown option(s) x"),
        (["compare", TINY, "--option", "work=1"], "SOLVER.KEY=VALUE"),
        # a single option beside its grid was dropped without a word
        (["capacity", "--policy", "vllm", "--policies", "sloweave"], "--policy and --policies"),
        (["capacity", "--seed", "7", "--seeds", "1"], "--seed and --seeds: give one"),
        (["cluster", "--rate", "1", "--rates", "2"], "--rate and --rates: give one"),
        (["cluster", "--router", "x", "--routers", "disaggregated"], "--router and --routers"),
        # Ray's own wait for an unreachable head is minutes; ours is at most 10 s
        (
            ["sweep", "--rates", "1", "--backend", "ray", "--address", "x"],
            "expected 'auto', 'local' or HOST:PORT",
        ),
        (["simulate", "--duration", "5e18s", "--rate", "1.5e-17"], "beyond the 1,000,000 s"),
        # a negative value with a unit reaches its check (argparse took it for an option)
        (["simulate", "--json", "--duration", "-10s"], "--duration: duration must be positive"),
        (["simulate", "--rate", "-1e3"], "--rate: must be a positive number, got '-1e3'"),
        (["compare", TINY, "--json", "-5s"], "argument --json: ignored explicit argument"),
        # a misspelt policy is reported before an option it would not read
        (["simulate", "--policy", "vllm:3", "--margin", "1ms"], "takes no ':' argument"),
    ],
)
def test_option_errors_are_one_line(argv, message):
    done = _schedlab(*argv)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert lines[0].startswith("schedlab")


def test_negative_values_are_attached_up_to_a_double_dash():
    from schedlab.cli import _attach_negative_values

    argv = ["--x", "-1s", "--y", "-1", "--z=-3s", "--w", "--v", "-4ms", "--", "--a", "-1.json"]
    assert _attach_negative_values(argv) == [
        "--x=-1s",
        "--y",
        "-1",
        "--z=-3s",
        "--w",
        "--v=-4ms",
        "--",
        "--a",
        "-1.json",
    ]


def test_every_error_class_survives_pickling():
    # a worker process sends errors back pickled; one that cannot be rebuilt used to
    # turn "unknown policy" into BrokenProcessPool
    samples = [
        UnknownNameError("policy", "magic", ["vllm", "sloweave"]),
        UnknownOptionError("dp", ["x"], ["max_requests"]),
    ]
    for name in dir(errors):
        kind = getattr(errors, name)
        if (
            isinstance(kind, type)
            and issubclass(kind, SchedlabError)
            and kind not in (UnknownNameError, UnknownOptionError)
        ):
            samples.append(kind("a message"))
    for error in samples:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error)


def test_sweep_refuses_an_unknown_policy_before_the_workers_start():
    with pytest.raises(UnknownNameError, match="magic"):
        sweep("chat", ["vllm", "magic"], [1.0], duration_s=5.0, executor=Executor(workers=2))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT to the group", "SIGKILL"])
def test_a_stopped_sweep_leaves_no_worker_behind(how):
    grid = ["--workload", "mixed", "--policies", "sloweave,vllm", "--rates", "20,25"]
    rest = ["--duration", "600s", "--quiet", "--workers", "2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "schedlab", "sweep", *grid, *rest],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a terminal's foreground job
    )
    workers: list[str] = []
    deadline = time.monotonic() + 30
    while len(workers) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True)
        workers = children.stdout.decode().split()
    assert len(workers) == 2, "the sweep did not start its workers"
    time.sleep(1.0)  # both busy with a 600 s simulation
    if how == "SIGTERM":
        process.send_signal(signal.SIGTERM)
    elif how == "SIGKILL":
        process.kill()
    else:
        os.killpg(process.pid, signal.SIGINT)
    err = process.communicate(timeout=30)[1]
    if how != "SIGKILL":
        assert process.returncode == 130 and err.strip() == "schedlab: interrupted"
    deadline = time.monotonic() + 10  # a worker checks for its parent every 0.5 s
    while any(process_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(process_alive(w) for w in workers)


def test_cpsat_stops_at_sigterm_and_ctrl_c(tmp_path):
    # n = 20 (Jaillet's protocol): far from proven within the test's seconds
    from schedlab.offline.backlogs import jaillet_instance
    from schedlab.offline.instance_io import write_instance

    path = tmp_path / "hard.json"
    write_instance(jaillet_instance(3, n=20), path)
    # compile the kernels first (a clean clone has no numba cache): a signal during the
    # compile is held until it ends (schedlab.interrupts), past this test's 5 s
    warm = [sys.executable, "-m", "schedlab", "solve", str(path), "--solver", "fcfs"]
    subprocess.run([*warm, "--no-bound"], capture_output=True, check=True, timeout=300)
    for sig in (signal.SIGTERM, signal.SIGINT):
        argv = ["solve", str(path), "--solver", "cpsat", "--no-bound"]
        process = subprocess.Popen(
            [sys.executable, "-m", "schedlab", *argv], stderr=subprocess.PIPE, text=True
        )
        time.sleep(6.0)  # into CP-SAT's search, past the warm start and the posted bound
        began = time.monotonic()
        process.send_signal(sig)
        err = process.communicate(timeout=30)[1]
        assert process.returncode == 130 and err.strip() == "schedlab: interrupted", sig
        assert time.monotonic() - began < 5.0


def _one_error_line(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("schedlab: error: ") and message in lines[0], lines[0]


def _instance(path):  # type: ignore[no-untyped-def]
    path.write_bytes((INSTANCES / "tiny-1.json").read_bytes())
    return path


def test_an_output_naming_an_input_is_refused_and_the_input_kept(tmp_path):
    lp = _instance(tmp_path / "inst.lp")  # an instance named .lp
    _one_error_line(_schedlab("export", str(lp), "-o", str(lp)), "is the input FILE")
    png = _instance(tmp_path / "inst.png")
    done = _schedlab("compare", str(png), "--solvers", "fcfs", "--plot", str(png), "--quiet")
    _one_error_line(done, f"--plot {png}: is the input PATH {png};")
    inst = _instance(tmp_path / "inst.json")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.csv").symlink_to(inst)  # through a link
    done = _schedlab("compare", str(inst), "--solvers", "fcfs", "--output", str(tmp_path / "out"))
    _one_error_line(done, "(report.csv): is the input PATH")
    done = _schedlab("solve", str(inst), "--schedule-csv", str(tmp_path / "out" / "report.csv"))
    _one_error_line(done, "--schedule-csv")
    done = _schedlab("compare", str(inst), "--solvers", "fcfs", "--results", str(inst))
    _one_error_line(done, "--results")
    for path in (lp, png, inst):
        assert path.read_bytes() == (INSTANCES / "tiny-1.json").read_bytes()


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
@pytest.mark.parametrize("command", ["solve", "bound", "compare"])
def test_standard_input_is_read_for_a_dash_and_dev_stdin(name, command):
    text = (INSTANCES / "tiny-1.json").read_text()
    done = subprocess.run(  # a pipe: /dev/stdin is no regular file
        [sys.executable, "-m", "schedlab", command, name, "--quiet", "--json"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_a_misspelt_key_of_a_cost_model_or_request_is_named(tmp_path):
    model = json.loads(
        (
            Path(errors.__file__).parent / "data" / "cost_models" / "rtx4090_llama-3.1-8b.json"
        ).read_text()
    )
    model["margn_s"] = model.pop("margin_s")
    path = tmp_path / "cm.json"
    path.write_text(json.dumps(model))
    _one_error_line(_schedlab("simulate", "--cost-model", str(path)), "unknown key(s) margn_s")
    inst = json.loads((INSTANCES / "tiny-1.json").read_text())
    inst["requests"][0]["outptu"] = inst["requests"][0].pop("output")
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(inst))
    _one_error_line(_schedlab("solve", str(path)), "requests[0]: unknown key(s) outptu")


def test_forged_results_lines_are_refused_on_resume(tmp_path):
    results = tmp_path / "r.jsonl"
    grid = ["compare", TINY, "--solvers", "fcfs", "--results", str(results), "--quiet"]
    assert _schedlab(*grid).returncode == 0
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    k = next(k for k, line in enumerate(lines) if line["kind"] == "solve")
    # the forgery: objective 1 with every start at round 0 (infeasible)
    lines[k]["value"] |= {"objective": 1, "starts": [0] * len(lines[k]["value"]["starts"])}
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    _one_error_line(_schedlab(*grid), f"{results}:{k + 1}: not a true result of fcfs")
    sweep_file = tmp_path / "s.jsonl"
    points = ["sweep", "--policies", "vllm", "--rates", "2", "--duration", "5s", "--quiet"]
    assert _schedlab(*points, "--results", str(sweep_file)).returncode == 0
    line = json.loads(sweep_file.read_text())
    line["value"]["attainment"] = 9.99  # was printed as it was
    sweep_file.write_text(json.dumps(line) + "\n")
    done = _schedlab(*points, "--results", str(sweep_file))
    _one_error_line(done, "attainment: must be in [0, 1], got 9.99")


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for k in range(1, 10):
        prev, name = chr(ord("a") + k - 1), chr(ord("a") + k)
        levels.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]")
    (tmp_path / "meta.yaml").write_text("\n".join(levels) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schedlab",
            "calibrate",
            str(tmp_path),
            "-o",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,  # it hung until killed at 120 s
    )
    _one_error_line(done, "meta.yaml:2: alias *a")


def test_a_recorded_run_out_of_order_is_sorted_with_a_note(tmp_path):
    from tests.calibration.recorded import req, write_run

    write_run(tmp_path, [req(10, 5, 100.0, 100.5, 102.5), req(7, 3, 99.0, 99.2, 100.2)])
    done = _schedlab("replay", str(tmp_path), "--json")  # refused after: no engine recorded
    assert "Traceback" not in done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("schedlab: note:")]
    assert len(notes) == 1 and "read sorted by arrival" in notes[0], done.stderr


def test_a_mooncake_trace_with_contradicting_hash_ids_is_one_line(tmp_path):
    path = tmp_path / "mc.jsonl"
    row = {"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [0, 1, 2]}
    path.write_text(json.dumps(row) + "\n")
    for command in ("simulate", "cluster"):
        done = _schedlab(command, "--workload", str(path))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert "mc.jsonl:1: hash_ids: 3 block ids for input_length 600" in lines[0]


def test_folder_mistakes_say_where_the_right_folder_is(tmp_path):
    # a tree of profiles (hardware / vendor / model / dtype, each with tp1/) and of runs
    profiles = tmp_path / "profiles"
    for model in ("vendor/model-a/bf16", "vendor/model-b/bf16"):
        (profiles / "GPU" / model / "tp1").mkdir(parents=True)
        (profiles / "GPU" / model / "meta.yaml").write_text("model: m\n")
    runs = tmp_path / "runs"
    for run in ("run-1", "run-2"):
        (runs / run).mkdir(parents=True)
        (runs / run / "requests.jsonl").write_text("")
    out = str(tmp_path / "m.json")
    cases = [
        (
            ["calibrate", str(profiles / "GPU"), "-o", out],
            f"{profiles / 'GPU'}: no meta.yaml, so no profile folder; profile folders below "
            f"it: {profiles / 'GPU/vendor/model-a/bf16'}, {profiles / 'GPU/vendor/model-b/bf16'}",
        ),
        (
            ["calibrate", str(profiles / "GPU/vendor/model-a/bf16/tp1"), "-o", out],
            f"a tensor-parallel folder of the profile {profiles / 'GPU/vendor/model-a/bf16'}; "
            "give that folder (with --tp 1)",
        ),
        (
            ["calibrate", str(runs), "-o", out],
            f"{runs}: no meta.yaml, so no profile folder (nor any below it)",
        ),
        (
            ["replay", str(runs)],
            f"{runs}: no requests.jsonl in this run directory; runs below it: "
            f"{runs / 'run-1'}, {runs / 'run-2'}",
        ),
        (
            ["generate", "backlog", "--source", str(tmp_path / "none.csv")],
            f"--source {tmp_path / 'none.csv'}: no such trace file",
        ),
    ]
    for argv, message in cases:
        done = _schedlab(*argv)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (argv, done.stderr)
        assert message in done.stderr, (argv, done.stderr)


def test_an_unreadable_folder_below_leaves_the_hint_to_the_others(tmp_path, monkeypatch):
    # as a user without permission would find it (the tests may run as root)
    from pathlib import Path

    from schedlab.calibration.profiles import read_meta_yaml
    from schedlab.errors import DataNotFoundError

    (tmp_path / "locked").mkdir()
    (tmp_path / "model" / "tp1").mkdir(parents=True)
    (tmp_path / "model" / "meta.yaml").write_text("model: m\n")
    is_file = Path.is_file

    def guarded(path: Path) -> bool:
        if "locked" in path.parts:
            raise PermissionError(13, "Permission denied", str(path))
        return is_file(path)

    monkeypatch.setattr(Path, "is_file", guarded)
    with pytest.raises(DataNotFoundError, match=r"profile folders below it: .*model$"):
        read_meta_yaml(tmp_path / "meta.yaml")
    with pytest.raises(DataNotFoundError, match=r"missing: no such folder$"):
        read_meta_yaml(tmp_path / "missing" / "meta.yaml")
