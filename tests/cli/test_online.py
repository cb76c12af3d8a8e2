"""The online algorithms on the command line: ``--predictions``, runs in ``--json``,
``compare`` rows against the hindsight bound, and bad predictions refused in one line."""

from __future__ import annotations

import json

import pytest

from schedlab import read_instance
from schedlab.cli import main
from schedlab.offline.online.runs import verify_runs
from tests.conftest import INSTANCES

FILE = str(INSTANCES / "mixed-n50.json")
ONLINE = ("a-min", "a-max", "mc-sf-predicted", "fcfs-preempt")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _check_runs(instance, runs, starts):
    """Every request's runs in order, the last one complete and starting at ``starts``."""
    assert len(runs) == instance.n == len(starts)
    for i, request in enumerate(runs):
        assert request[-1] == [starts[i], int(instance.output[i])]
        assert all(rounds < instance.output[i] for _, rounds in request[:-1])
    assert verify_runs(instance, [[tuple(run) for run in request] for request in runs]) == []


@pytest.mark.parametrize("solver", ONLINE)
def test_solve_an_online_algorithm_with_predictions(capsys, solver):
    instance = read_instance(FILE)
    argv = ["solve", FILE, "--solver", solver, "--predictions", "interval:0.25:3", "--json"]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    data = json.loads(out)
    assert data["stats"]["predictions"] == "interval:0.25:3" and "runs" not in data["stats"]
    _check_runs(instance, data["runs"], data["starts"])
    evicted = sum(len(request) - 1 for request in data["runs"])
    assert evicted == data["stats"]["evictions"]
    # the gap is to the hindsight bound: the best lower bound with the true lengths
    code, out, _ = run(capsys, "bound", FILE, "--json")
    assert data["lower_bound"] == pytest.approx(json.loads(out)["value"])
    assert data["objective"] >= data["lower_bound"]
    # the same spec and seed give the same runs; another seed other intervals
    again = json.loads(run(capsys, *argv)[1])
    assert again["runs"] == data["runs"]


def test_a_min_evicts_at_small_alpha_and_says_so(capsys):
    code, out, _ = run(
        capsys, "solve", FILE, "--solver", "a-min", "--predictions", "interval:0.1:1", "--quiet"
    )
    assert code == 0 and "evictions" in out and "interval:0.1:1" in out
    code, out, _ = run(capsys, "solve", FILE, "--solver", "a-min", "--quiet")
    assert code == 0 and "(predictions perfect;" in out  # the default


def test_offline_solvers_print_one_run_a_request(capsys):
    instance = read_instance(FILE)
    code, out, _ = run(capsys, "solve", FILE, "--solver", "mc-sf", "--json", "--no-bound")
    data = json.loads(out)
    assert code == 0 and all(len(request) == 1 for request in data["runs"])
    _check_runs(instance, data["runs"], data["starts"])


def test_compare_rows_for_online_algorithms(capsys):
    instance = read_instance(FILE)
    solvers = "mc-sf,a-min,a-max,fcfs-preempt"
    argv = ["compare", FILE, "--solvers", solvers, "--predictions", "interval:0.5:2"]
    code, out, _ = run(capsys, *argv, "--json", "--starts")
    rows = json.loads(out)
    assert code == 0 and [r["solver"] for r in rows] == solvers.split(",")
    bounds = {r["lower_bound"] for r in rows}
    assert len(bounds) == 1  # one bound, the hindsight bound, for every row
    for row in rows:
        assert row["gap"] == pytest.approx(
            (row["objective"] - row["lower_bound"]) / row["lower_bound"]
        )
        _check_runs(instance, row["runs"], row["starts"])
        assert "runs" not in row["stats"]
        if row["solver"] != "mc-sf":
            assert row["stats"]["predictions"] == "interval:0.5:2"
    # the same rows as solve gives each online algorithm alone
    solo = json.loads(
        run(
            capsys, "solve", FILE, "--solver", "a-min", "--predictions", "interval:0.5:2", "--json"
        )[1]
    )
    assert rows[1]["objective"] == solo["objective"] and rows[1]["runs"] == solo["runs"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "a-min, a-max, fcfs-preempt: online" in out and "hindsight bound" in out
    code, out, _ = run(capsys, "compare", FILE, "--solvers", "a-min", "--json")
    assert code == 0 and "runs" not in json.loads(out)[0]  # runs only with --starts


def _one_line_error(capsys, argv, message):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--predictions", "interval:0"], "--predictions: alpha must be in (0, 1], got 0"),
        (["--predictions", "interval:1.5:3"], "--predictions: alpha must be in (0, 1], got 1.5"),
        (["--predictions", "interval:-0.5"], "alpha must be in (0, 1]"),
        (["--predictions", "oracle"], "unknown prediction model 'oracle'"),
        (["--predictions", "lognormal:-1"], "CV must be in"),
        (["--predictions", "interval:0.5", "--option", "predictions=perfect"], "give it once"),
    ],
)
def test_bad_prediction_specs_are_refused(capsys, extra, message):
    _one_line_error(capsys, ["solve", FILE, "--solver", "a-min", *extra], message)


def test_predictions_for_an_offline_solver_are_refused(capsys):
    for argv in (
        ["solve", FILE, "--solver", "mc-sf", "--predictions", "interval:0.5"],
        ["compare", FILE, "--solvers", "fcfs,svf", "--predictions", "perfect"],
    ):
        _one_line_error(capsys, argv, "takes no predictions; the online solvers do: a-max")


def _prediction_file(tmp_path, rows, suffix=".csv"):
    path = tmp_path / f"predictions{suffix}"
    path.write_text("id,lower,upper\n" + "".join(f"{i},{lo},{hi}\n" for i, lo, hi in rows))
    return str(path)


def test_bad_prediction_files_are_refused(capsys, tmp_path):
    instance = read_instance(FILE)
    good = [(i, o, o) for i, o in enumerate(instance.output.tolist())]
    cases = [
        ([*good[:-1], (99, 1, 2)], "line 51: unknown request id '99'"),
        ([*good[:-1], (49, 5, 2)], "line 51: interval [5, 2] must have 1 <= lower <= upper"),
        ([*good[:-1], (49, 0, 2)], "line 51: interval [0, 2] must have 1 <= lower <= upper"),
        (good[:-1], "1 request(s) without a prediction: 49"),
    ]
    for rows, message in cases:
        path = _prediction_file(tmp_path, rows)
        _one_line_error(
            capsys, ["solve", FILE, "--solver", "a-min", "--predictions", path], message
        )
    # a JSON file that declares its intervals exact must contain the true lengths
    o = int(instance.output[0])
    entries = [{"id": str(i), "lower": lo, "upper": hi} for i, lo, hi in good]
    entries[0] = {"id": "0", "lower": o + 1, "upper": o + 5}
    path = tmp_path / "exact.json"
    path.write_text(json.dumps({"predictions": entries, "exact": True}))
    _one_line_error(
        capsys,
        ["solve", FILE, "--solver", "a-min", "--predictions", str(path)],
        f"request 0: interval [{o + 1}, {o + 5}] excludes the true length {o}",
    )
    bad = _prediction_file(tmp_path, [*good[:-1], (99, 1, 2)])
    _one_line_error(
        capsys,
        ["compare", FILE, "--solvers", "mc-sf,a-min", "--predictions", bad],
        "line 51: unknown request id '99'",
    )


def test_a_prediction_file_drives_the_online_solvers(capsys, tmp_path):
    instance = read_instance(FILE)
    # intervals [o/2, 2o] around every true length, by request id
    rows = [(i, max(1, o // 2), 2 * o) for i, o in enumerate(instance.output.tolist())]
    path = _prediction_file(tmp_path, rows)
    code, out, _ = run(capsys, "solve", FILE, "--solver", "a-min", "--predictions", path, "--json")
    data = json.loads(out)
    assert code == 0 and data["stats"]["predictions"] == path
    _check_runs(instance, data["runs"], data["starts"])
    argv = ["compare", FILE, "--solvers", "mc-sf,a-min", "--predictions", path, "--json"]
    code, out, _ = run(capsys, *argv)
    rows_ = json.loads(out)
    assert code == 0 and rows_[1]["objective"] == data["objective"]
