"""The cluster subcommand: one JSON object, a grid, the breakdown plot, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from schedlab.cli import main

BASE = ["cluster", "--workload", "chat", "--rate", "4", "--duration", "4s", "--tpot", "100ms"]


def test_json_has_the_headline_figures_and_a_breakdown_that_adds_up(capsys):
    assert main([*BASE, "--nodes", "1P1D", "--router", "deflect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("ttft_p95_s", "ttft_mean_s", "latency_mean_s", "attainment"):
        assert isinstance(data[key], float), key
    parts = data["breakdown"]
    assert set(parts) == {"queue", "prefill", "transfer", "first_decode"}
    assert all(set(v) >= {"mean", "p95"} for v in parts.values())
    assert sum(v["mean"] for v in parts.values()) == pytest.approx(data["ttft_mean_s"])
    assert data["cluster"] == "deflect@1P1D" and data["nodes"] == ["prefill", "decode"]


def test_a_grid_of_routers_and_rates_and_its_plot(capsys, tmp_path):
    plot = tmp_path / "breakdown.png"
    grid = BASE[:3] + BASE[5:]  # without --rate, which a grid of rates refuses beside it
    argv = [*grid, "--routers", "disaggregated,hybrid", "--rates", "2,4", "--plot", str(plot)]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["cluster"], r["rate_rps"]) for r in rows] == [
        ("disaggregated@2P2D", 2.0),
        ("hybrid@2P2D", 2.0),
        ("disaggregated@2P2D", 4.0),
        ("hybrid@2P2D", 4.0),
    ]
    assert plot.stat().st_size > 10_000
    assert main([*BASE, "--nodes", "2C", "--router", "round-robin"]) == 0
    table = capsys.readouterr().out
    assert "round-robin@2C" in table and "tail shares" in table


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "2X"], "--nodes: cannot read '2X'"),
        (["--nodes", "2P"], "needs both prefill (P) and decode (D)"),
        (["--router", "fastest"], "unknown router 'fastest'"),
        (["--nodes", "4C", "--router", "deflect"], "needs prefill and decode nodes"),
        (["--link", "25GB"], "--link"),
        (["--link", "fast"], "--link: cannot read link 'fast'"),
        (["--link", "25GB/s,3parsecs"], "unknown latency unit"),
        (["--rate", "-2"], "--rates/--rate"),
        (["--rates", "1,2"], "--rate and --rates: give one"),
        (["--plot", "out.txt"], "--plot: cannot write a figure"),
        (["--model", "gpt-9"], "unknown model 'gpt-9'"),
        (["--nodes", "1P1D", "--policy", "nope"], "--policy: does not apply"),
        (["--nodes", "1P1D", "--policy", "vllm"], "--policy: does not apply"),
        (["--nodes", "1P1D", "--decode-policy", "nope"], "unknown policy 'nope'"),
        (["--nodes", "1P1D", "--prefill-policy", "nope"], "unknown policy 'nope'"),
        (["--nodes", "2C", "--router", "p2c", "--policy", "nope"], "unknown policy 'nope'"),
        (["--nodes", "2C", "--router", "p2c", "--decode-policy", "vllm"], "does not apply"),
        (["--nodes", "2C", "--router", "p2c", "--link", "1GB/s,1us"], "--link: does not"),
        (["--nodes", "2C", "--router", "p2c", "--pipelined"], "--pipelined: does not"),
        (["--router", "deflect", "--decode-policy", "vllm"], "assume a SLOWeave policy"),
        # round-robin reads no node state, and no policy here reads predicted lengths
        (
            ["--nodes", "2C", "--router", "round-robin", "--prediction-cv", "0.5"],
            "--prediction-cv: no router or node policy of this run reads",
        ),
        (
            ["--nodes", "1P1D", "--router", "round-robin", "--prediction-cv", "0.5"],
            "--prediction-cv: no router",
        ),
        # one decode node: nothing to choose between by predicted sizes
        (["--nodes", "2P1D", "--prediction-cv", "0.5"], "--prediction-cv: no router"),
        (["--nodes", "1C", "--router", "p2c", "--prediction-cv", "0.5"], "--prediction-cv"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message):
    done = subprocess.run(
        [sys.executable, "-m", "schedlab", *BASE, *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "extra",
    [
        ["--nodes", "2C", "--router", "least-tokens"],  # counts predicted sizes
        ["--nodes", "2C", "--router", "round-robin", "--policy", "sloweave-kv"],
        ["--nodes", "2C", "--routers", "round-robin,p2c"],  # one reader in the grid
        ["--nodes", "1P1D", "--router", "deflect"],  # checks each predicted final size
        ["--nodes", "1P2D", "--router", "disaggregated"],
    ],
)
def test_prediction_error_is_taken_where_something_reads_it(capsys, extra):
    assert main([*BASE, *extra, "--prediction-cv", "0.5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
