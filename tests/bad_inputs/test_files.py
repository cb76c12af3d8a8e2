"""Bad input files on the command line (issue 54, item 3, and the file cases measured).

Each case is a small file written here, run through :func:`schedlab.cli.main` as a user
would: exit code 2, exactly one line on stderr, ``schedlab: error: ...`` naming the file
(or the option) and the place, no traceback, and nothing written. Each first did
something else on main: an ``OverflowError`` traceback, or a run without a word.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from schedlab.cli import main
from schedlab.serving.cost_model import shipped_cost_models
from tests.calibration.timing_table import table_lines, write_table


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *names: str) -> str:
    """Run the command line; assert the one-line refusal holding each of ``names``."""
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("schedlab: error: "), err
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


#: A trace read by each command: (the command, its option naming the trace).
TRACE_COMMANDS = {
    "simulate": ["simulate", "--workload"],
    "cluster": ["cluster", "--workload"],
    "generate backlog": ["generate", "backlog", "-n", "3", "--source"],
}


#: The option each command writes a file with (cluster writes none but a plot).
_OUTPUT = {"simulate": ["--records"], "cluster": [], "generate backlog": ["-o"]}


def _trace_command(command: str, path: Path, out: Path) -> list[str]:
    """``command`` reading the trace ``path``, writing ``out`` where it writes a file."""
    extra = [*_OUTPUT[command], str(out)] if _OUTPUT[command] else []
    return [*TRACE_COMMANDS[command], str(path), *extra]


# --- 1. a Mooncake hash id beyond int64 (an OverflowError traceback before) ------------------


@pytest.mark.parametrize("command", sorted(TRACE_COMMANDS))
@pytest.mark.parametrize("hash_id", [2**63, 2**64 + 7])
def test_a_hash_id_beyond_int64_is_one_line(tmp_path, capsys, command, hash_id):
    row = {"timestamp": 0, "input_length": 600, "output_length": 4}
    path = _jsonl(
        tmp_path / "mc.jsonl", [{**row, "hash_ids": [1, 2]}, {**row, "hash_ids": [1, hash_id]}]
    )
    out = tmp_path / "out.json"
    line = _refused(_trace_command(command, path, out), capsys, f"{path}:2: hash_ids[1]")
    assert line.endswith(f"expected an integer from 0 to 9,223,372,036,854,775,807, got {hash_id}")
    assert not out.exists()


# --- 2. a Mooncake trace going back in time (an instance without a note before) ------------


@pytest.mark.parametrize("command", sorted(TRACE_COMMANDS))
def test_a_trace_going_back_in_time_is_one_line(tmp_path, capsys, command):
    rows = [{"timestamp": t, "input_length": 600, "output_length": 4} for t in (0, 100, 10)]
    path = _jsonl(tmp_path / "mc.jsonl", rows)
    out = tmp_path / "out.json"
    _refused(
        _trace_command(command, path, out),
        capsys,
        f"{path}:3: timestamp: 0.09 s before the request on the line before",
    )
    assert not out.exists()


# --- 3. a recorded vLLM run with impossible timestamps (replayed without a word before) ------

_REQUEST = {
    "input_toks": 100,
    "output_toks": 5,
    "arrival_time": 1000.0,
    "queued_ts": 10.0,
    "scheduled_ts": 10.01,
    "first_token_ts": 10.1,
    "last_token_ts": 10.5,
}
#: What replay needs beside a run without meta.json and config.json.
_ENGINE = ["--max-num-seqs", "8", "--max-num-batched-tokens", "512", "--kv-tokens", "100000"]


def _run(folder: Path, change: dict[str, float] | None = None) -> Path:
    folder.mkdir()
    rows = [{key: value + k for key, value in _REQUEST.items()} for k in range(3)]
    rows[1] = {**rows[1], **(change or {}), "input_toks": 100}
    _jsonl(folder / "requests.jsonl", rows)
    return folder


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arrival_time": -5.0}, "arrival_time: must be from 0 to 1e+10"),
        ({"arrival_time": 1e300}, "arrival_time: must be from 0 to 1e+10"),
        (
            {"scheduled_ts": 3.2, "queued_ts": 4.0, "first_token_ts": 5, "last_token_ts": 6},
            "timestamps out of order: scheduled_ts 3.2 before queued_ts 4.0",
        ),
        (
            {"scheduled_ts": 12.0},
            "timestamps out of order: first_token_ts 11.1 before scheduled_ts 12.0",
        ),
    ],
)
def test_a_recorded_run_with_impossible_times_is_one_line(tmp_path, capsys, change, message):
    run = _run(tmp_path / "run", change)
    _refused(["replay", str(run), *_ENGINE], capsys, f"{run / 'requests.jsonl'}:2: {message}")


# --- 4. a cost model whose coefficient is text or an expression (ran before) -----------------


def _linear(value: Any) -> dict[str, Any]:
    return {
        "kind": "linear-attention",
        "coefficients": {"base_s": 0.001, "decode_per_seq_s": value},
    }


def _profile_grid(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    data = json.loads(shipped_cost_models()["rtxpro6000_llama-3.1-8b"].read_text())
    inner = data
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "place"),
    [
        (_linear("5.5e-05"), "coefficients.decode_per_seq_s: expected a number, got '5.5e-05'"),
        (_linear("1/3"), "coefficients.decode_per_seq_s: expected a number, got '1/3'"),
        (_linear(True), "coefficients.decode_per_seq_s: expected a number, got True"),
        (
            _profile_grid(("attention", "extrapolation_us", "decode_seq"), "0.58"),
            "attention.extrapolation_us.decode_seq: expected a finite number, got '0.58'",
        ),
        (
            _profile_grid(("ops", "per_layer", "qkv_proj", "time_us_vs_tokens", "y", 3), "2*18"),
            "ops.per_layer.qkv_proj.time_us_vs_tokens.y[3]: expected a finite number, got '2*18'",
        ),
        (
            _profile_grid(("ops", "per_layer", "qkv_proj", "runs_per_layer"), True),
            "ops.per_layer.qkv_proj.runs_per_layer: expected a finite number, got True",
        ),
        (
            _profile_grid(("attention", "time_us", 7), [1.0]),
            "attention.time_us[7]: expected a finite number, got [1.0]",
        ),
        (
            _profile_grid(("skew", "buckets", 0, 5), "0.1"),
            "skew.buckets[0][5]: expected a finite number, got '0.1'",
        ),
        (
            _profile_grid(("skew", "buckets", 0, 5), 5.0),
            "skew: SkewTable: bucket [",
        ),
        (
            _profile_grid(("parallelism", "hidden"), "4096"),
            "parallelism.hidden: expected an integer from 0 to 262,144, got '4096'",
        ),
        (
            _profile_grid(("report", "margin_quantile"), "0.95"),
            "report.margin_quantile: expected a finite number, got '0.95'",
        ),
    ],
)
@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_cost_model_coefficient_that_is_no_number_is_one_line(
    tmp_path, capsys, data, place, command
):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data))
    argv = ["simulate", "--duration", "1s"]
    if command == "replay":
        argv = ["replay", str(_run(tmp_path / "run")), *_ENGINE]
    _refused([*argv, "--cost-model", str(path)], capsys, f"{path}: {place}")


# --- 5. --link without latency, empty, or out of physical range (ran before) -----------------

_LINKS = [
    ("25GB/s", "--link: '25GB/s' gives no latency"),
    ("", "--link: empty"),
    ("1e-30GB/s,1us", "--link: bandwidth must be from 1 MB/s to 10 TB/s"),
    ("1e9TB/s,1us", "--link: bandwidth must be from 1 MB/s to 10 TB/s"),
    ("25GB/s,1e9s", "--link: latency must be at most 1 s"),
    ("54GB/s,1e400us", "--link: latency must be a finite number >= 0, got inf"),
]


@pytest.mark.parametrize(("link", "message"), _LINKS)
def test_a_replay_link_out_of_range_is_one_line(tmp_path, capsys, link, message):
    run = _run(tmp_path / "run")
    _refused(["replay", str(run), *_ENGINE, "--tp", "2", "--link", link], capsys, message)


@pytest.mark.parametrize(("link", "message"), _LINKS)
def test_a_cluster_link_out_of_range_is_one_line(capsys, link, message):
    _refused(["cluster", "--nodes", "1P1D", "--duration", "1s", "--link", link], capsys, message)


# --- 6. a timing table with absurd counts or a grid with a hole (a profile written before) ---


def _line(prefix: str) -> int:
    """The line of the file (from 1, the header's) of the table row starting with ``prefix``."""
    return next(k for k, line in enumerate(table_lines(), 1) if line.startswith(prefix))


def _mutated(old: str, new: str | None) -> list[str]:
    """The table with its row starting with ``old`` starting with ``new`` (``None``: gone)."""
    lines = table_lines()
    k = _line(old) - 1
    if new is None:
        del lines[k]
    else:
        lines[k] = new + lines[k][len(old) :]
    return lines


_TOKENS = f":{_line('dense,qkv_proj,8,')}: tokens: must be"
_KV = f":{_line('attention,,,,0,0,1,16,')}: kv_decode: must be"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            _mutated("dense,qkv_proj,8,", "dense,qkv_proj,1000000000000000,"),
            f"{_TOKENS} at most 1e+08, got '1000000000000000'",
        ),
        (_mutated("dense,qkv_proj,8,", "dense,qkv_proj,1e15,"), f"{_TOKENS} at most 1e+08"),
        (_mutated("dense,qkv_proj,8,", "dense,qkv_proj,-8,"), f"{_TOKENS} >= 0, got '-8'"),
        (
            _mutated("attention,,,,0,0,1,16,", "attention,,,,0,0,1,1e15,"),
            f"{_KV} at most 1e+08, got '1e15'",
        ),
        (
            _mutated("attention,,,,16,16,2,32,", None),
            ": tp1: the attention rows hold no complete grid (attention profile: a hole in the "
            "grid at prefill_chunk 16, kv_prefill 16, n_decode 2, kv_decode 32",
        ),
    ],
)
def test_a_timing_table_with_absurd_counts_or_a_hole_is_one_line(tmp_path, capsys, lines, message):
    table = write_table(tmp_path / "mine.csv", lines)
    out = tmp_path / "profile"
    argv = ["profile", "import", str(table), "-o", str(out)]
    argv += ["--model", "meta-llama/Llama-3.1-8B", "--hardware", "G"]
    _refused(argv, capsys, f"{table}{message}")
    assert not out.exists()


def test_the_tables_and_runs_here_are_valid_unchanged(tmp_path, capsys):
    """The files above differ from valid ones by their one bad value."""
    table = write_table(tmp_path / "mine.csv")
    out = tmp_path / "profile"
    argv = ["profile", "import", str(table), "-o", str(out), "--model", "meta-llama/Llama-3.1-8B"]
    assert main([*argv, "--hardware", "G"]) == 0 and (out / "meta.yaml").is_file()
    replay = ["replay", str(_run(tmp_path / "run")), *_ENGINE, "--cost-model", "sloweave-default"]
    assert main(replay) == 0
    model = tmp_path / "tp2.json"  # the imported profile's model, on two GPUs
    assert main(["calibrate", str(out), "-o", str(model)]) == 0
    data = json.loads(model.read_text())
    data["parallelism"].update(tp=2, hidden=4096)
    model.write_text(json.dumps(data))
    link = ["--cost-model", str(model), "--tp", "2", "--link", "25GB/s,0us"]
    assert main([*replay[:-2], *link]) == 0
    capsys.readouterr()
