import csv
import io
import json
import subprocess
import sys

import pytest

from schedlab import read_instance
from schedlab.cli import main
from schedlab.offline.bounds import BEST_WORK, BOUNDS
from tests.conftest import INSTANCES

DEFAULT = str(INSTANCES / "mixed-n50.json")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_solve_json(capsys):
    code, out, _ = run(capsys, "solve", DEFAULT, "--solver", "svf", "--json", "--seed", "2")
    assert code == 0
    data = json.loads(out)
    assert data["solver"] == "svf" and data["status"] in ("FEASIBLE", "OPTIMAL")
    for key in ("objective", "lower_bound", "gap", "runtime_s"):
        assert isinstance(data[key], int | float)
    assert len(data["starts"]) == 50


def test_solve_text(capsys):
    code, out, _ = run(capsys, "solve", DEFAULT, "--time-limit", "5")
    assert code == 0 and "objective" in out and "lower bound" in out


@pytest.mark.parametrize("quiet", ["--json", "--quiet"])
def test_solve_and_bound_progress_only_on_request(capsys, terminal_stderr, quiet):
    chosen = [m.name for m in BOUNDS.entries().values() if m.chosen_for(read_instance(DEFAULT))]
    steps = {"solve": len(chosen) + 1, "bound": len(chosen)}  # the solver, then each method
    for command, label in (("solve", "solve"), ("bound", "lower bound")):
        assert main([command, DEFAULT]) == 0
        shown = terminal_stderr.getvalue()
        # the bar's last frame counts every step and names the last method run
        assert f"{label}: 100%" in shown and f"{steps[command]}/{steps[command]}" in shown
        assert chosen[-1] in shown
        if command == "solve":
            assert "mc-sf" in shown  # the default solver was named while it ran
            # the total counts the bound's methods from the first frame (it grew from 1/1)
            assert "1/1 " not in shown and f"0/{steps[command]}" in shown
        capsys.readouterr()
        terminal_stderr.seek(0)
        terminal_stderr.truncate(0)
        assert main([command, DEFAULT, quiet]) == 0
        assert terminal_stderr.getvalue() == ""
        out = capsys.readouterr().out
        assert ("lower bound" in out) if quiet == "--quiet" else json.loads(out)


def test_compare_json_and_text(capsys, terminal_stderr):
    # on a terminal: --json prints results only, the table comes with a progress bar
    code, out, _ = run(capsys, "compare", DEFAULT, "--solvers", "fcfs,mc-sf", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["solver"] for r in rows] == ["fcfs", "mc-sf"]
    assert all("gap" in r and "stats" in r and "starts" not in r for r in rows)
    code, out, _ = run(capsys, "compare", DEFAULT, "--solvers", "fcfs", "--json", "--starts")
    (row,) = json.loads(out)
    assert len(row["starts"]) == read_instance(DEFAULT).n
    assert terminal_stderr.getvalue() == ""
    code, out, _ = run(capsys, "compare", DEFAULT, "--time-limit", "2")
    assert code == 0 and "local-search" in out and "gap" in out
    assert "8/8" in terminal_stderr.getvalue()  # the bound and 7 solvers


def test_compare_a_folder(capsys, tmp_path):
    for name in ("tiny-1.json", "tiny-2.json"):
        (tmp_path / name).write_text((INSTANCES / name).read_text())
    code, out, _ = run(capsys, "compare", str(tmp_path), "--solvers", "sof", "--json")
    assert code == 0 and len(json.loads(out)) == 2


def test_verify_feasible_and_infeasible(capsys, tmp_path):
    code, out, _ = run(capsys, "solve", DEFAULT, "--json")
    good = tmp_path / "good.json"
    good.write_text(out)
    code, out, _ = run(capsys, "verify", DEFAULT, str(good))
    assert code == 0 and out.startswith("FEASIBLE")
    starts = json.loads(good.read_text())["starts"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([0] * len(starts)))  # everything in round 0: memory overflows
    code, out, _ = run(capsys, "verify", DEFAULT, str(bad))
    assert code == 1 and out.startswith("INFEASIBLE") and "memory" in out
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([{"request": 0, "start": 0}]))
    code, out, _ = run(capsys, "verify", DEFAULT, str(pairs))
    assert code == 1 and "49 request(s) not scheduled" in out


def test_bound_names_the_methods_out_of_reach_of_its_work_budget(capsys):
    code, out, _ = run(capsys, "bound", DEFAULT, "--work", "1e5", "--quiet")
    assert code == 0 and out.endswith("out of reach: completion-spacing)\n")
    code, out, _ = run(capsys, "bound", DEFAULT, "--quiet")  # the default budget reaches it
    assert code == 0 and "(completion-spacing, proven" in out and "out of reach" not in out


def test_generate(capsys, tmp_path):
    path = tmp_path / "g.json"
    code, _, err = run(capsys, "generate", "mixed", "-n", "30", "--seed", "4", "-o", str(path))
    assert code == 0 and "n = 30" in err
    code, out, _ = run(capsys, "generate", "jaillet", "--seed", "1")
    data = json.loads(out)
    assert code == 0 and 40 <= len(data["requests"]) <= 60
    code, out, _ = run(capsys, "generate", "backlog", "--source", "arxiv", "-n", "5")
    assert code == 0 and len(json.loads(out)["requests"]) == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["solve", "missing.json"], "missing.json: no such instance file"),
        (["solve", DEFAULT, "--solver", "nope"], "unknown solver 'nope'"),
        (["compare", DEFAULT, "--solvers", "fcfs,nope"], "unknown solver 'nope'"),
        (["generate", "backlog", "--source", "nope"], "unknown length table 'nope'"),
        (["bound", DEFAULT, "--method", "nope"], "unknown bound 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("schedlab: error: ") and message in err


def test_more_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00bad")
    cases = [
        (
            ["generate", "jaillet", "--kv-tokens", "40"],
            "--kv-tokens: does not apply to generate jaillet",
        ),
        (["generate", "backlog", "--long-fraction", "0.3"], "--long-fraction: does not apply"),
        (["solve", str(binary)], "bin.json: not UTF-8 text"),
        (["verify", DEFAULT, str(binary)], "bin.json: not UTF-8 text"),
        (["generate", "backlog", "--source", str(binary)], "bin.json: not UTF-8 text"),
        (["simulate", "--rate", "1", "--cost-model", str(binary)], "bin.json: not UTF-8 text"),
        (
            ["compare", DEFAULT, "--solvers", "fcfs", "--plot", str(tmp_path / "f.txt")],
            "cannot write a figure as 'f.txt'",
        ),
        (["sweep", "--rates", "1", "--plot", str(tmp_path / "no" / "a.png")], "does not exist"),
    ]
    for argv, message in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "", argv
        assert err.count("\n") == 1 and message in err, (argv, err)


def test_negative_seed_is_an_argparse_error(capsys):
    for argv in (["solve", DEFAULT, "--seed", "-1"], ["simulate", "--rate", "1", "--seed", "-1"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert "expected a non-negative integer" in capsys.readouterr().err


def test_verify_accepts_pairs_as_lists(capsys, tmp_path):
    code, out, _ = run(capsys, "solve", DEFAULT, "--json", "--no-bound")
    starts = json.loads(out)["starts"]
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([[i, p] for i, p in enumerate(starts)]))
    code, out, _ = run(capsys, "verify", DEFAULT, str(pairs))
    assert code == 0 and out.startswith("FEASIBLE")


def test_compare_json_measures_every_row_against_one_bound(capsys):
    tiny = str(INSTANCES / "tiny-2.json")  # its best bound (60) is below the optimum (67)
    code, out, _ = run(capsys, "compare", tiny, "--solvers", "fcfs,brute-force", "--json")
    rows = {r["solver"]: r for r in json.loads(out)}
    optimum = read_instance(tiny).meta["optimum"]
    # brute-force proves the optimum: labelled beside the bound, not mixed into the gaps
    assert code == 0 and rows["fcfs"]["lower_bound"] == rows["brute-force"]["lower_bound"]
    bound = rows["fcfs"]["lower_bound"]
    assert bound < optimum == rows["fcfs"]["best_proven"]
    assert rows["fcfs"]["gap"] == pytest.approx((rows["fcfs"]["objective"] - bound) / bound)
    code, out, _ = run(capsys, "compare", tiny, "--solvers", "fcfs", "--json")
    assert json.loads(out)[0]["gap"] == rows["fcfs"]["gap"]


def test_compare_records_a_refusal_and_finishes(capsys, tmp_path):
    code, out, _ = run(
        capsys, "compare", DEFAULT, "--solvers", "dp,fcfs", "--quiet", "--output", str(tmp_path)
    )
    assert code == 0 and "refused: dp: n = 50 requests exceeds max_requests = 12" in out
    rows = list(csv.DictReader((tmp_path / "report.csv").open()))
    assert [(r["solver"], r["status"]) for r in rows] == [("dp", "refused"), ("fcfs", "FEASIBLE")]
    assert "max_requests" in rows[0]["reason"]


def test_solver_options_on_the_command_line(capsys):
    tiny = str(INSTANCES / "tiny-1.json")
    argv = ["solve", tiny, "--solver", "local-search", "--option", "work=40", "--json"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and json.loads(out)["stats"]["moves"] == 40
    argv = ["compare", tiny, "--solvers", "dp,fcfs", "--option", "dp.max_requests=3", "--quiet"]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "refused: dp: n = 7 requests exceeds max_requests = 3" in out


def test_schedule_csv_round_trip(capsys, tmp_path):
    tiny, other = str(INSTANCES / "tiny-1.json"), str(INSTANCES / "tiny-2.json")
    path = tmp_path / "s.csv"
    code, _, _ = run(capsys, "solve", tiny, "--solver", "mc-sf", "--schedule-csv", str(path))
    rows = list(csv.DictReader(path.open()))
    inst = read_instance(tiny)
    assert code == 0 and [int(r["request"]) for r in rows] == list(range(inst.n))
    for r, request in zip(rows, inst.requests, strict=True):
        assert int(r["completion"]) == int(r["start"]) + request.output
        assert (int(r["prompt"]), int(r["output"])) == (request.prompt, request.output)
    code, out, _ = run(capsys, "verify", tiny, str(path))
    assert code == 0 and out.startswith("FEASIBLE")
    code, _, err = run(capsys, "verify", other, str(path))
    assert code == 2 and "schedule of another instance" in err
    path.write_text(path.read_text().replace("\n0,,", "\n0,,99999", 1))
    code, out, _ = run(capsys, "verify", tiny, str(path))
    assert code == 2  # the completion column no longer matches the changed start


def test_malformed_files(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"format": "schedlab-instance/1", "memory": 10, "requests": [{"prompt": 1, "output": 0}]}'
    )
    code, _, err = run(capsys, "solve", str(bad))
    assert code == 2 and "requests[0].output: must be >= 1, got 0" in err
    bad.write_text("{not json")
    code, _, err = run(capsys, "compare", str(bad))
    assert code == 2 and "invalid JSON" in err
    starts = tmp_path / "s.json"
    starts.write_text('{"start": []}')
    code, _, err = run(capsys, "verify", DEFAULT, str(starts))
    assert code == 2 and "expected a list of starts" in err


def test_bad_time_limit_is_one_line_naming_the_option(capsys):
    code, _, err = run(capsys, "solve", DEFAULT, "--time-limit", "-3")
    assert code == 2
    message = "--time-limit: duration must be positive and finite, got '-3'"
    assert err.strip() == f"schedlab: error: {message}"


def test_time_limit_takes_a_unit(capsys):
    code, out, _ = run(capsys, "solve", DEFAULT, "--time-limit", "5s", "--json")
    assert code == 0 and json.loads(out)["status"]


def test_python_dash_m_works_and_prints_no_traceback():
    ok = subprocess.run(
        [sys.executable, "-m", "schedlab", "solve", DEFAULT, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["solver"] == "mc-sf"
    bad = subprocess.run(
        [sys.executable, "-m", "schedlab", "solve", "nope.json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_schedule_csv_must_be_a_csv_and_not_the_instance(capsys, tmp_path):
    copy = tmp_path / "tiny.json"
    copy.write_text((INSTANCES / "tiny-1.json").read_text())
    code, _, err = run(capsys, "solve", str(copy), "--schedule-csv", str(tmp_path / "s.txt"))
    assert code == 2 and "must end in .csv" in err
    same = tmp_path / "tiny.csv"
    same.write_text("x")
    code, _, err = run(capsys, "solve", str(same), "--schedule-csv", str(same))
    assert code == 2 and same.read_text() == "x"


def test_schedule_csv_reader_names_what_is_wrong(capsys, tmp_path):
    tiny = str(INSTANCES / "tiny-1.json")
    path = tmp_path / "s.csv"
    run(capsys, "solve", tiny, "--schedule-csv", str(path))
    good = path.read_text()
    path.write_text("\ufeff" + good, encoding="utf-8")  # as Excel saves it
    code, out, _ = run(capsys, "verify", tiny, str(path))
    assert code == 0 and out.startswith("FEASIBLE")
    path.write_text(good.replace("request,id,start", "request,start,start", 1))
    code, _, err = run(capsys, "verify", tiny, str(path))
    assert code == 2 and "column(s) start given twice" in err
    lines = good.splitlines()
    fields = lines[1].split(",")
    fields[2] = str(int(fields[2]) + 1)  # the start moved, the completion not
    path.write_text("\n".join([lines[0], ",".join(fields), *lines[2:]]) + "\n")
    code, _, err = run(capsys, "verify", tiny, str(path))
    assert code == 2 and "is not start + output" in err and "edited" in err
    path.write_text(lines[0] + "\n0,," + "9" * 200_000 + ",1,1,1\n")
    code, _, err = run(capsys, "verify", tiny, str(path))
    assert code == 2 and err.count("\n") == 1 and "not a CSV file" in err


def test_compare_refuses_an_option_value_before_running(capsys):
    argv = ["compare", DEFAULT, "--solvers", "fcfs,local-search", "--quiet"]
    code, out, err = run(capsys, *argv, "--option", "local-search.work=-5")
    assert code == 2 and out == "" and "local-search: options {'work': -5}" in err


def test_generate_does_not_overwrite_its_source(tmp_path, capsys):
    source = tmp_path / "lengths.csv"
    source.write_text("num_prefill_tokens,num_decode_tokens\n5,2\n7,3\n")
    argv = ["generate", "backlog", "-n", "3", "--source", str(source), "-o", str(source)]
    assert main(argv) == 2
    assert "is the input --source" in capsys.readouterr().err
    assert source.read_text().startswith("num_prefill_tokens")


@pytest.mark.parametrize("command", ["solve", "compare", "bound"])
@pytest.mark.parametrize("size", ["4X", "0", "-1G", "lots", ""])
def test_bad_max_memory_is_one_line(capsys, command, size):
    with pytest.raises(SystemExit) as exit_:
        main([command, DEFAULT, f"--max-memory={size}"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-memory" in err


def test_max_memory_reaches_solver_bound_and_compare(capsys):
    tiny = str(INSTANCES / "tiny-1.json")
    # sorted-f's exact programme on the shipped mixed n = 50 needs some 60 MB
    argv = ["solve", DEFAULT, "--solver", "sorted-f", "--option", "method=exact"]
    code, out, err = run(capsys, *argv, "--no-bound", "--max-memory", "1M")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("schedlab: error: sorted-f: the exact programme's tables")
    code, out, _ = run(capsys, *argv, "--no-bound", "--max-memory", "1G")
    assert code == 0 and "objective" in out
    code, out, err = run(capsys, "bound", DEFAULT, "--method", "lp", "--max-memory", "64K")
    assert code == 2 and err.startswith("schedlab: error: lp: time-indexed LP: arrays over")
    code, out, _ = run(capsys, "bound", tiny, "--max-memory", "64K", "--json")
    assert code == 0 and json.loads(out)["stats"]["skipped"]  # best goes on without them
    code, out, _ = run(
        capsys, "compare", DEFAULT, "--solvers", "mc-sf,sorted-f", "--option",
        "sorted-f.method=exact", "--max-memory", "1M", "--backend", "serial", "--json",
    )  # fmt: skip
    assert code == 0
    rows = {row["solver"]: row for row in json.loads(out)}
    assert "memory budget" in rows["sorted-f"]["reason"] and "objective" in rows["mc-sf"]


def test_generate_names_the_kv_budget_kv_tokens(capsys):
    code, out, err = run(capsys, "generate", "mixed", "-n", "3", "--kv-tokens", "5000")
    assert code == 0 and err == "" and json.loads(out)["kv_tokens"] == 5000
    assert "memory" not in json.loads(out)


def test_the_names_renamed_before_1_0_are_refused(capsys):
    # no alias outlives a rename before 1.0 (CHANGELOG): the old spelling is an error
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "mixed", "-n", "3", "--memory", "5000"])
    assert exit_.value.code == 2 and "unrecognized arguments: --memory" in capsys.readouterr().err
    tiny = str(INSTANCES / "tiny-1.json")
    code, _, err = run(
        capsys, "solve", tiny, "--solver", "local-search", "--option", "max_moves=4"
    )
    assert code == 2 and "max_moves" in err and "work" in err and len(err.splitlines()) == 1


def test_solvers_lists_each_solver_with_its_options(capsys):
    from schedlab.offline.solvers import available_solvers

    code, out, _ = run(capsys, "solvers")
    assert code == 0
    assert "local-search\n  strategy: str = 'late'\n  width: int = 5\n" in out
    assert "  work: int or None = 60000\n" in out and "max_moves" not in out
    assert "dp (exact)\n  max_requests: int = 12\n" in out
    assert "sorted-lp\n  (no options)" in out
    code, out, _ = run(capsys, "solvers", "--json")
    listed = json.loads(out)
    assert [s["name"] for s in listed] == available_solvers()
    (alns,) = [s for s in listed if s["name"] == "alns"]
    assert alns["exact"] is False
    assert alns["options"][0] == {
        "name": "work",
        "types": ["int", "str", "None"],
        "default": "auto",
    }
    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    shown = capsys.readouterr().out
    assert "solver options" in shown and "lp-search\n  repair_width: int = 64\n" in shown


def test_solvers_as_csv_has_a_row_per_option(capsys):
    code, out, _ = run(capsys, "solvers", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows[0].keys() == {"solver", "exact", "option", "types", "default"}
    (row,) = [r for r in rows if (r["solver"], r["option"]) == ("local-search", "work")]
    assert row == {**row, "types": "int or None", "default": "60000", "exact": "False"}


def test_bound_help_gives_bests_own_work_budget(capsys):
    with pytest.raises(SystemExit):
        main(["bound", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"(default {BEST_WORK:.0e})".replace("e+0", "e") in shown
