"""The habits every command shares (issue 39): ``--format text|json|csv``, ``-`` for
standard input and output, one ``wrote FILE`` line on stderr per file written, and the
old output spellings still working."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

from schedlab.cli import main
from tests.conftest import INSTANCES

TINY = str(INSTANCES / "tiny-2.json")
SERVE = ["--duration", "5", "--workload", "chat"]


def run(capsys, *argv, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _numbers_plain(rows: list[dict[str, str]]) -> None:
    """Every cell that looks numeric reads as a float: no thousands separators, no unit."""
    for row in rows:
        for key, cell in row.items():
            if cell and cell[0].isdigit() and key not in ("cluster", "policy", "workload"):
                float(cell)  # raises on "1,234" or "25 ms"


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", TINY, "--quiet"],
        ["compare", TINY, "--solvers", "fcfs,svf", "--quiet"],
        ["bound", TINY, "--quiet"],
        ["simulate", *SERVE, "--rate", "2"],
        ["capacity", *SERVE, "--max-rate", "2", "--quiet"],
        ["headroom", "--workload", "chat"],
        [
            "sweep",
            *SERVE,
            "--policies",
            "vllm",
            "--rates",
            "1,2",
            "--quiet",
            "--backend",
            "serial",
        ],
        ["cluster", *SERVE, "--nodes", "1P1D", "--rate", "2"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_table_command_prints_plain_csv(capsys, argv):
    code, out, _ = run(capsys, *argv, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows, out
    _numbers_plain(rows)
    header = out.splitlines()[0]
    assert " " not in header  # column names carry units as suffixes, e.g. ttft_p50_s
    code, json_out, _ = run(capsys, *argv, "--format", "json")
    assert code == 0 and json.loads(json_out)


def test_json_is_format_json(capsys):
    assert run(capsys, "bound", TINY, "--json", "--quiet")[1].startswith("{")
    _, text, _ = run(capsys, "bound", TINY, "--format", "text", "--quiet")
    assert "lower bound" in text


def test_the_simulate_csv_carries_the_summary(capsys):
    code, out, _ = run(capsys, "simulate", *SERVE, "--rate", "2", "--format", "csv")
    assert code == 0
    (row,) = csv.DictReader(io.StringIO(out))
    _, js, _ = run(capsys, "simulate", *SERVE, "--rate", "2", "--format", "json")
    data = json.loads(js)
    assert int(row["n_requests"]) == data["n_requests"]
    assert float(row["ttft_p99_s"]) == pytest.approx(data["ttft"]["p99"])
    assert int(row["kv_tokens"]) == data["kv_capacity"]["tokens"]


def test_solve_reads_stdin_and_writes_the_schedule_to_stdout(capsys, monkeypatch):
    data = Path(TINY).read_bytes()
    code, out, err = run(
        capsys, "solve", "-", "--schedule-csv", "-", stdin=data, monkeypatch=monkeypatch
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))  # stdout holds the schedule alone
    assert list(rows[0]) == ["request", "id", "start", "completion", "prompt", "output"]
    assert "objective" in err and "wrote" not in err  # the table went to stderr


def test_generate_to_stdout_and_to_a_file_says_what_it_wrote(capsys, tmp_path):
    code, out, err = run(capsys, "generate", "mixed", "-n", "4", "-o", "-")
    assert code == 0 and len(json.loads(out)["requests"]) == 4 and err == ""
    target = tmp_path / "i.json"
    code, out, err = run(capsys, "generate", "mixed", "-n", "4", "-o", str(target))
    assert code == 0 and out == ""
    assert err.splitlines() == [f"wrote {target}: n = 4, M = 46,227"]


def test_one_wrote_line_per_file(capsys, tmp_path):
    folder = tmp_path / "report"
    code, _, err = run(capsys, "compare", TINY, "--solvers", "fcfs", "--quiet", "-o", str(folder))
    assert code == 0
    assert err.splitlines() == [f"wrote {folder / 'report.csv'}", f"wrote {folder / 'report.md'}"]
    schedule = tmp_path / "s.csv"
    code, _, err = run(capsys, "solve", TINY, "--quiet", "--schedule-csv", str(schedule))
    assert code == 0 and err.splitlines() == [f"wrote {schedule}"]
    log = tmp_path / "grid.jsonl"
    argv = [
        "sweep",
        *SERVE,
        "--policies",
        "vllm",
        "--rates",
        "1",
        "--quiet",
        "--backend",
        "serial",
    ]
    code, _, err = run(capsys, *argv, "--results", str(log))
    assert code == 0 and [line for line in err.splitlines() if "wrote" in line] == [f"wrote {log}"]
    records = tmp_path / "r.jsonl"
    code, _, err = run(capsys, "simulate", *SERVE, "--rate", "2", "--records", str(records))
    lines = records.read_text().splitlines()
    assert code == 0 and f"wrote {records}: {len(lines)} requests" in err.splitlines()


def test_records_to_stdout_move_the_table_to_stderr(capsys):
    code, out, err = run(capsys, "simulate", *SERVE, "--rate", "2", "--records", "-")
    assert code == 0
    assert all("ttft_s" in json.loads(line) for line in out.splitlines())
    assert "attainment" in err


def test_export_to_stdout_needs_a_format(capsys):
    code, out, _ = run(capsys, "export", TINY, "-o", "-", "--format", "lp")
    assert code == 0 and "Minimize" in out
    code, _, err = run(capsys, "export", TINY, "-o", "-")
    assert code == 2 and err.strip() == (
        "schedlab: error: --output -: give --format lp or mps (no file suffix to tell)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compare", TINY, "--plot", "-"], "--plot -: a figure is written to a file"),
        (["compare", TINY, "-o", "-"], "--output -: the report is a folder of two files"),
        (["compare", TINY, "--results", "-"], "--results -: a grid's log is read back"),
    ],
)
def test_outputs_that_cannot_be_stdout_are_refused(capsys, argv, message):
    code, out, err = run(capsys, *argv, "--quiet")
    assert code == 2 and out == ""
    assert err.startswith(f"schedlab: error: {message}") and err.count("\n") == 1


def test_a_trace_from_stdin(capsys, monkeypatch):
    trace = b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + b"".join(
        f"2023-11-16 18:17:{k:02d}.0,{100 + k},{5 + k}\n".encode() for k in range(20)
    )
    code, out, _ = run(
        capsys,
        "simulate",
        "--workload",
        "-",
        "--format",
        "json",
        stdin=trace,
        monkeypatch=monkeypatch,
    )
    data = json.loads(out)
    assert code == 0 and data["workload"] == "stdin" and data["n_requests"] == 20
    code, out, _ = run(
        capsys,
        "generate",
        "backlog",
        "--source",
        "-",
        "-n",
        "3",
        stdin=trace,
        monkeypatch=monkeypatch,
    )
    assert code == 0
    lengths = {(r["prompt"], r["output"]) for r in json.loads(out)["requests"]}
    assert lengths <= {(100 + k, 5 + k) for k in range(20)}


@pytest.mark.parametrize("command", ["headroom", "simulate"])
def test_a_bare_tpot_of_a_second_or_more_is_refused_as_a_slip(capsys, command):
    base = [command, "--workload", "chat", "--format", "json"]
    if command == "simulate":
        base += ["--duration", "1s"]
    code, out, err = run(capsys, *base, "--tpot", "25")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("schedlab: error: --tpot 25: a bare number is seconds, ")
    assert "write 25ms for milliseconds, or 25s if seconds are meant" in err
    code, _, err = run(capsys, *base, "--tpot", "0.025")
    assert code == 0 and "--tpot" not in err
    # a unit written is taken as meant (with the SLO's note on a second or more a token)
    code, _, err = run(capsys, *base, "--tpot", "2s")
    assert code == 0 and "error" not in err
    if command == "simulate":
        assert "schedlab: note: slo.tpot_s: 2 s per token" in err


def test_a_ttft_below_the_tpot_is_noted(capsys):
    argv = ["simulate", "--duration", "1s", "--ttft", "1ms", "--tpot", "25ms"]
    code, _, err = run(capsys, *argv, "--format", "json")
    assert code == 0
    assert "schedlab: note: slo.ttft_s: 0.001 s is below tpot_s 0.025 s" in err
