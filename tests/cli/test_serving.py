"""The simulate / capacity / sweep subcommands, through a local argparse parser."""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import json
import subprocess
import sys

import pytest

from schedlab.cli import capacity, serving
from schedlab.cli import main as cli_main
from schedlab.cli.durations import parse_duration
from schedlab.errors import SchedlabError, UnknownNameError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="schedlab")
    commands = parser.add_subparsers(dest="command", required=True)
    serving.register(commands)
    capacity.register(commands)
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("25ms", 0.025),
        ("5s", 5.0),
        ("2min", 120.0),
        ("2m", 120.0),
        ("150us", 1.5e-4),
        (" 1e-2 s", 0.01),
        ("1h", 3600.0),
        ("10", 10.0),  # a bare number is seconds, as for --time-limit
        ("10.5", 10.5),
        ("0.025", 0.025),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["abc", "-5s", "0", "0s", "5 parsecs", "ms", "", "1e999", "5d"])
def test_parse_duration_errors_name_the_flag(text):
    with pytest.raises(SchedlabError, match="--tpot"):
        parse_duration(text, "--tpot")


def test_zero_and_a_maximum():
    assert parse_duration("0", "--margin", allow_zero=True) == 0.0
    assert parse_duration("2m", "--time-limit", maximum=120) == 120.0
    with pytest.raises(SchedlabError, match="--time-limit: at most"):
        parse_duration("121", "--time-limit", maximum=120)


def test_every_duration_option_reads_bare_seconds(capsys):
    assert main([*SIM[:6], "20", "--tpot", "0.025", "--ttft", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slo"] == {"ttft_s": 5.0, "tpot_s": 0.025, "kind": "every-token"}


SIM = [
    "simulate",
    "--workload",
    "chat",
    "--rate",
    "3",
    "--duration",
    "20s",
    "--tpot",
    "25ms",
    "--ttft",
    "5s",
    "--policy",
    "sloweave",
]


def test_simulate_json_and_records(capsys, tmp_path):
    records = tmp_path / "r.jsonl"
    assert main([*SIM, "--json", "--records", str(records)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "sloweave:4096" and out["workload"] == "chat"
    assert out["slo"] == {"ttft_s": 5.0, "tpot_s": 0.025, "kind": "every-token"}
    assert 0.0 <= out["attainment"] <= 1.0
    lines = records.read_text().splitlines()
    assert len(lines) == out["n_requests"] > 0
    assert {"ttft_s", "tpot_s", "latency_s"} <= set(json.loads(lines[0]))


def test_simulate_text(capsys):
    assert main(SIM) == 0
    out = capsys.readouterr().out
    assert "attainment" in out and "ttft" in out and "p99" in out


def test_capacity_json(capsys):
    argv = [
        "capacity",
        "--workload",
        "chat",
        "--policy",
        "vllm",
        "--tpot",
        "25ms",
        "--ttft",
        "5s",
        "--duration",
        "20s",
        "--tolerance",
        "0.1",
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"policy", "workload", "tpot_s", "ttft_s", "capacity_rps"} <= set(out)
    assert out["tpot_s"] == 0.025 and out["capacity_rps"] > 0
    assert out["tpot_slo"] == "every-token"  # the default kind, named
    # the spelling; a looser kind never has less capacity than every-token
    assert main([*argv, "--tpot-slo", "every-token"]) == 0
    assert json.loads(capsys.readouterr().out) == out
    assert main([*argv, "--tpot-slo", "mean"]) == 0
    mean = json.loads(capsys.readouterr().out)
    assert mean["tpot_slo"] == "mean" and mean["capacity_rps"] >= out["capacity_rps"]


def test_simulate_names_the_kind_and_the_system_tbt(capsys):
    assert main([*SIM, "--tpot-slo", "p99"]) == 0
    out = capsys.readouterr().out
    assert "TPOT (p99) <= 25 ms" in out and "P99 time between tokens" in out


@pytest.mark.parametrize("quiet", ["--json", "--quiet"])
def test_capacity_progress_only_on_request(capsys, terminal_stderr, quiet):
    argv = [
        "capacity",
        "--workload",
        "chat",
        "--policy",
        "vllm",
        "--duration",
        "10s",
        "--tolerance",
        "0.2",
    ]
    assert main(argv) == 0
    shown = terminal_stderr.getvalue()
    assert "capacity of vllm" in shown and "attainment" in shown
    capsys.readouterr()
    terminal_stderr.seek(0)
    terminal_stderr.truncate(0)
    assert main([*argv, quiet]) == 0
    assert terminal_stderr.getvalue() == ""
    if quiet == "--json":
        assert json.loads(capsys.readouterr().out)["capacity_rps"] > 0


def test_headroom_text_and_json(capsys):
    assert main(["headroom", "--workload", "mixed", "--tpot", "10ms"]) == 0
    out = capsys.readouterr().out
    assert "lambda* (SLOWeave) = 24.05 req/s" in out and "C* = 593 tokens" in out
    assert main(["headroom", "--workload", "long", "--tpot", "25ms", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rate_star_rps"] == pytest.approx(29.63, abs=0.01)
    assert [row["chunk"] for row in data["fixed"]] == [64, 128, 256, 512, 1024, 2048]


def test_headroom_reads_a_trace_of_any_span(capsys, tmp_path):
    # only the lengths count; a month of timestamps is beyond a simulated window's cap
    trace = tmp_path / "month.jsonl"
    rows = [(0, 500, 40), (1_300_000_000, 900, 60), (2_500_000_000, 700, 20)]  # ms
    trace.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": {p}, "output_length": {o}}}\n'
            for t, p, o in rows
        )
    )
    assert main(["headroom", "--workload", str(trace), "--json"]) == 0
    load = json.loads(capsys.readouterr().out)["load"]
    assert load["n_requests"] == 3 and load["mean_prompt"] == 700


def test_headroom_refuses_a_calibrated_model():
    with pytest.raises(SchedlabError, match="not a linear-attention model"):
        main(["headroom", "--cost-model", "rtx4090_llama-3.1-8b"])


def test_sweep_table_csv_plot(capsys, tmp_path, terminal_stderr):
    pytest.importorskip("matplotlib")
    plot, results = tmp_path / "s.png", tmp_path / "s.jsonl"
    argv = [
        "sweep",
        "--workload",
        "chat",
        "--policies",
        "vllm,fixed:128",
        "--rates",
        "2,6",
        "--duration",
        "10s",
        "--workers",
        "1",
        "--results",
        str(results),
    ]
    assert main([*argv, "--plot", str(plot)]) == 0
    captured = capsys.readouterr()
    assert "sweep" in terminal_stderr.getvalue() and "4/4" in terminal_stderr.getvalue()
    assert "fixed:128" in captured.out and "attain" in captured.out
    assert plot.stat().st_size > 1000
    assert main([*argv, "--format", "csv"]) == 0  # the same points, resumed: one table
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["policy"], float(r["rate_rps"])) for r in rows] == [
        ("vllm", 2.0),
        ("vllm", 6.0),
        ("fixed:128", 2.0),
        ("fixed:128", 6.0),
    ]


def test_sweep_plot_without_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = [
        "sweep",
        "--rates",
        "2",
        "--policies",
        "vllm",
        "--duration",
        "5s",
        "--workers",
        "1",
        "--quiet",
        "--plot",
        str(tmp_path / "p.png"),
    ]
    with pytest.raises(SchedlabError, match="matplotlib is not installed"):
        main(argv)


@pytest.mark.parametrize(
    ("extra", "error", "message"),
    [
        (["--tpot", "25xs"], SchedlabError, "--tpot"),
        (["--rate", "fast"], SchedlabError, "--rate"),
        (["--policy", "magic"], UnknownNameError, "sloweave"),
        (["--workload", "nowhere"], UnknownNameError, "mixed"),
        (["--cost-model", "nowhere"], UnknownNameError, "sloweave-default"),
        (["--max-num-batched-tokens", "200"], SchedlabError, "engine.max_num_batched_tokens"),
        (["--prediction-cv", "-1"], SchedlabError, "prediction_cv"),
        (["--margin", "1e9s"], SchedlabError, "--margin: must be >= 0 and below the TPOT"),
        (["--margin", "25ms"], SchedlabError, "--margin"),
    ],
)
def test_bad_input_raises_schedlab_errors(extra, error, message):
    with pytest.raises(error, match=message):
        main([*SIM, *extra])


def test_outputs_are_checked_against_what_names_resolve_to(tmp_path, monkeypatch, capsys):
    # a named trace under the data directory is the file it names
    traces = tmp_path / "data" / "traces"
    traces.mkdir(parents=True)
    azure = traces / "AzureLLMInferenceTrace_code.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,48,4\n")
    argv = ["simulate", "--workload", "azure-code", "--data-dir", str(tmp_path / "data")]
    assert cli_main([*argv, "--records", str(azure)]) == 2  # the check runs in the CLI's main
    assert "is the input --workload azure-code" in capsys.readouterr().err
    # a built-in name is no file, even beside a file of that name
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chat").write_text("")
    assert cli_main([*SIM, "--records", "chat", "--json"]) == 0
    assert capsys.readouterr().out and (tmp_path / "chat").read_text()


def test_a_tpot_below_one_lone_decode_is_noted(capsys):
    # sloweave-default: a decode of one token alone takes 1.305 ms
    assert main([*SIM, "--tpot", "1ms", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["attainment"] < 0.5
    assert "one decode alone takes 1.3 ms" in captured.err and "above the TPOT" in captured.err
    assert main([*SIM, "--json"]) == 0
    assert "note" not in capsys.readouterr().err


def test_simulate_and_headroom_check_a_margin_alike():
    # one check, naming the flag, for both commands
    for command in (SIM, ["headroom", "--tpot", "25ms"]):
        with pytest.raises(SchedlabError, match="--margin: must be >= 0 and below the TPOT"):
            main([*command, "--margin", "1e9s"])


def test_a_tolerance_below_the_finest_is_one_line(capsys, monkeypatch):
    # The command bisected for ever; it is now refused before any rate runs.
    from schedlab.cli import main as schedlab

    capacity_module = importlib.import_module("schedlab.serving.capacity")
    monkeypatch.setattr(capacity_module, "probe", None)
    argv = ["capacity", "--duration", "5s", "--quiet", "--tolerance", "1e-300", "--json"]
    assert schedlab(argv) == 2
    err = capsys.readouterr().err
    assert "--tolerance: must be at least 1e-06" in err and len(err.splitlines()) == 1


def test_cli_module_imports_no_heavy_libraries():
    code = (
        "import sys, schedlab.cli.serving, schedlab.cli.capacity; "
        "print(sorted(m for m in ('scipy', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_replay_sweep_is_titled_by_its_workload_not_one_rate(capsys, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(
            f'{{"timestamp": {1000 * k}, "input_length": 50, "output_length": 4}}\n'
            for k in range(12)
        )
    )
    argv = ["sweep", "--workload", str(trace), "--policies", "vllm", "--rates", "1,2"]
    main([*argv, "--duration", "20s", "--workers", "1", "--quiet"])
    title = capsys.readouterr().out.splitlines()[0]
    # the name asked for, not the first point's rescaled stream ("... x0.5 to 1 req/s")
    assert title.startswith(f"{trace}, cost model sloweave-default (illustrative, no GPU)")
    assert "timestamps" not in title


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--policy", "vllm", "--margin", "1ms"], "--margin: read only by sloweave"),
        (
            ["simulate", "--policy", "sloweave", "--prediction-cv", "0.5"],
            "--prediction-cv: read only by sloweave-kv and sloweave-kv-amax and "
            "sloweave-kv-amin; policy sloweave",
        ),
        (
            ["simulate", "--policy", "vllm", "--predictions", "lognormal:0.5"],
            "--predictions: read only by sloweave-kv",
        ),
        (
            ["capacity", "--policies", "vllm,sarathi", "--predictions", "perfect,lognormal:1"],
            "--predictions: read only by sloweave-kv",
        ),
        (
            ["capacity", "--policies", "vllm,sarathi", "--prediction-cv", "0.5"],
            "policies vllm, sarathi would not change",
        ),
        (
            ["sweep", "--policies", "vllm,fixed:256", "--rates", "1", "--prediction-cv", "0.2"],
            "--prediction-cv: read only by sloweave-kv",
        ),
    ],
)
def test_an_option_no_policy_of_the_run_reads_is_refused(argv, message):
    with pytest.raises(SchedlabError, match=message):
        main(argv)


def test_an_option_some_policy_of_the_run_reads_is_kept(capsys):
    # one reader in the grid is enough
    from schedlab.serving.policy_registry import get_policy

    assert not get_policy("fixed:512").reads_margin and get_policy("sloweave:2048").reads_margin
    argv = ["sweep", "--policies", "vllm,sloweave-kv", "--rates", "1", "--duration", "5s"]
    assert main([*argv, "--prediction-cv", "0.2", "--json", "--quiet"]) == 0
    with_cv = json.loads(capsys.readouterr().out)
    assert main([*argv, "--json", "--quiet"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert len(with_cv) == len(exact) == 2
    assert main([*SIM, "--policy", "sloweave", "--margin", "1ms", "--json"]) == 0


def test_a_run_whose_queue_grows_says_so(capsys):
    # the calibrated model serves chat at about 2 req/s: at 30 the queue grows all along
    heavy = ["simulate", "--workload", "chat", "--duration", "10s", "--cost-model"]
    heavy += ["rtxpro6000_llama-3.1-8b", "--json", "--rate"]
    assert cli_main([*heavy, "30"]) == 0
    note = capsys.readouterr().err
    assert "schedlab: note: simulate: the requests of the window's last fifth found" in note
    assert "schedlab capacity" in note
    assert cli_main([*heavy, "0.5"]) == 0
    assert "last fifth" not in capsys.readouterr().err


def test_simulate_writes_a_timeline_of_its_iterations(capsys, tmp_path):
    path = tmp_path / "trace.json"
    argv = ["simulate", "--workload", "chat", "--rate", "4", "--duration", "5s", "--json"]
    assert cli_main([*argv, "--timeline", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    events = json.loads(path.read_text())["traceEvents"]
    steps = [e for e in events if e["ph"] == "X"]
    assert len(steps) == summary["iterations"]
    assert all(e["dur"] > 0 and e["pid"] == 0 for e in steps)
    assert [e["ts"] for e in steps] == sorted(e["ts"] for e in steps)
    assert sum(e["args"]["prefill_tokens"] for e in steps) >= summary["n_requests"]
    assert {e["name"] for e in events if e["ph"] == "C"} == {"requests", "KV blocks"}


def test_one_output_at_most_goes_to_standard_output(capsys):
    argv = ["simulate", "--duration", "2s", "--timeline", "-", "--records", "-"]
    assert cli_main(argv) == 2
    assert "only one of them may go to standard output" in capsys.readouterr().err
