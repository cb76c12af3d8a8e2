import csv
import io
import json

import pytest

from schedlab import compare, read_instance
from schedlab.errors import FormatError, SchedlabError, UnknownNameError, UnknownOptionError
from schedlab.jobs import Executor
from schedlab.offline.compare import DEFAULT_SOLVERS
from schedlab.offline.verify import verify
from tests.conftest import INSTANCES


def test_compare_table_on_the_default_instance():
    inst = read_instance(INSTANCES / "mixed-n50.json")
    table = compare(inst, time_limit=2)
    assert [r.solver for r in table.results] == list(DEFAULT_SOLVERS)
    for result in table.results:
        assert verify(inst, result.starts) == []
    assert table.lower_bound is not None
    assert all(table.lower_bound <= r.objective for r in table.results)
    text = table.to_text()
    assert text.splitlines()[0].startswith("mixed-n50: n = 50")
    for column in ("objective", "mean latency", "makespan", "runtime s", "lower bound", "gap"):
        assert column in text
    assert table.best().objective == min(r.objective for r in table.results)
    rows = list(csv.DictReader(io.StringIO(table.to_csv())))
    assert [r["solver"] for r in rows] == list(DEFAULT_SOLVERS)
    assert table.to_markdown().count("\n") == len(DEFAULT_SOLVERS) + 1


def test_a_rows_gap_does_not_depend_on_the_other_solvers():
    inst = read_instance(INSTANCES / "tiny-2.json")  # best bound 60, optimum 67
    alone = compare(inst, ["fcfs"])
    with_exact = compare(inst, ["fcfs", "brute-force"])
    # one bound per instance: brute-force's proven optimum does not move fcfs's gap ...
    assert alone.lower_bound == with_exact.lower_bound < inst.meta["optimum"]
    rows = {r["solver"]: r for r in with_exact.records()}
    assert rows["fcfs"]["gap"] == alone.records()[0]["gap"]
    fcfs = rows["fcfs"]["objective"]
    assert rows["fcfs"]["gap"] == pytest.approx((fcfs - alone.lower_bound) / alone.lower_bound)
    # ... it is reported beside it, labelled
    assert with_exact.best_proven == inst.meta["optimum"] == rows["fcfs"]["best_proven"]
    assert alone.best_proven == alone.lower_bound
    assert "best proven bound 67.0" in with_exact.to_text()
    assert "best proven" not in alone.to_text()


def test_a_refusal_is_recorded_in_its_cell_and_the_rest_runs():
    inst = read_instance(INSTANCES / "mixed-n50.json")
    table = compare(inst, ["dp", "fcfs", "brute-force"])
    assert [r.solver for r in table.results] == ["fcfs"]
    rows = table.records()
    assert [(r["solver"], r["status"]) for r in rows] == [
        ("dp", "refused"),
        ("fcfs", "FEASIBLE"),
        ("brute-force", "refused"),
    ]
    assert "max_requests = 12" in rows[0]["reason"] and rows[0]["objective"] is None
    assert rows[1]["reason"] == "" and rows[1]["gap"] is not None
    text = table.to_text()
    assert "refused: dp: n = 50 requests exceeds max_requests = 12" in text
    assert list(csv.DictReader(io.StringIO(table.to_csv())))[2]["status"] == "refused"


def test_every_solver_refusing_leaves_no_best():
    inst = read_instance(INSTANCES / "mixed-n50.json")
    table = compare(inst, ["dp"])
    assert table.best() is None and table.results == ()


def test_solver_options_are_checked_and_applied():
    inst = read_instance(INSTANCES / "tiny-1.json")
    table = compare(inst, ["dp", "fcfs"], options={"dp": {"max_requests": 3}})
    assert [f.solver for f in table.failures] == ["dp"]
    with pytest.raises(SchedlabError, match="not among the solvers"):
        compare(inst, ["fcfs"], options={"dp": {"max_requests": 3}})
    with pytest.raises(UnknownOptionError, match="unknown option"):
        compare(inst, ["dp"], options={"dp": {"width": 3}})  # a search's, not dp's
    with pytest.raises(SchedlabError, match="option max_requests: expected int"):
        compare(inst, ["dp"], options={"dp": {"max_requests": "many"}})


def test_options_that_need_the_time_limit_are_tried_under_it():
    # alns governed by time (work=None) needs a time limit; the up-front trial of
    # the options runs under the comparison's, and a bad value is still refused up front
    inst = read_instance(INSTANCES / "tiny-2.json")
    by_time = {"alns": {"work": None, "idle": None}}
    table = compare(inst, ["alns"], time_limit=0.5, options=by_time, bound=None)
    assert not table.failures
    assert verify(inst, table.results[0].starts) == []
    with pytest.raises(SchedlabError, match="set time_limit or work"):
        compare(inst, ["alns"], options=by_time, bound=None)


def test_names_are_checked_before_anything_runs():
    inst = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(UnknownNameError, match="unknown solver 'fsfc'"):
        compare(inst, ["fcfs", "fsfc"])


def test_a_solver_named_twice_is_refused():
    inst = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(SchedlabError, match="solvers: fcfs given twice"):
        compare(inst, ["fcfs", "svf", "fcfs"])


def test_one_solver_may_be_named_alone_but_not_none() -> None:
    inst = read_instance(INSTANCES / "tiny-1.json")
    assert [r.solver for r in compare(inst, "fcfs").results] == ["fcfs"]
    with pytest.raises(SchedlabError, match=r"^solvers: none given$"):
        compare(inst, [])
    with pytest.raises(SchedlabError, match=r"^compare: expected an Instance, got list$"):
        compare([inst, inst])  # type: ignore[arg-type]


def _forge(results, solver, edit):
    """Rewrite ``solver``'s line of the results file with ``edit(value)``; its number."""
    lines = results.read_text().splitlines()
    for number, line in enumerate(lines, start=1):
        row = json.loads(line)
        if row["kind"] == "solve" and row["params"]["solver"] == solver:
            edit(row["value"])
            lines[number - 1] = json.dumps(row)
            results.write_text("\n".join(lines) + "\n")
            return number
    raise AssertionError(f"no line of {solver}")


def test_a_resumed_comparison_equals_the_computed_one(tmp_path):
    inst = read_instance(INSTANCES / "tiny-2.json")
    results = tmp_path / "r.jsonl"
    first = compare(inst, ["fcfs", "brute-force"], executor=Executor(results=results))
    again = compare(inst, ["fcfs", "brute-force"], executor=Executor(results=results))
    strip = [{k: v for k, v in r.items() if k != "runtime_s"} for r in first.records()]
    assert [{k: v for k, v in r.items() if k != "runtime_s"} for r in again.records()] == strip
    assert [r.status for r in again.results] == [r.status for r in first.results]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        # the forgery: objective 1, every start at round 0 (infeasible)
        (lambda v: v.update(objective=1, starts=[0] * len(v["starts"])), "is infeasible"),
        (lambda v: v.update(objective=v["objective"] - 1), r"but its starts give"),
        (lambda v: v.update(status="OPTIMAL"), "OPTIMAL without a bound that meets"),
        (lambda v: v.update(lower_bound=1e9), r"own lower bound is 1e\+09, above the objective"),
        (lambda v: v.update(starts="all"), "ScheduleError"),
        (lambda v: v.pop("objective"), "KeyError"),
        (lambda v: v.update(solver="brute-force"), "it names the solver 'brute-force'"),
    ],
)
def test_a_forged_result_read_back_is_refused_by_line(tmp_path, edit, why):
    inst = read_instance(INSTANCES / "tiny-2.json")
    results = tmp_path / "r.jsonl"
    compare(inst, ["fcfs"], executor=Executor(results=results))
    number = _forge(results, "fcfs", edit)
    with pytest.raises(
        FormatError, match=rf"^{results}:{number}: not a true result of fcfs on tiny-2 .*{why}"
    ):
        compare(inst, ["fcfs"], executor=Executor(results=results))


def test_a_forged_bound_read_back_is_refused_by_line(tmp_path):
    inst = read_instance(INSTANCES / "tiny-2.json")
    results = tmp_path / "r.jsonl"
    compare(inst, ["fcfs"], executor=Executor(results=results))
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    # the lines come in the order the jobs finished
    (at,) = [k for k, row in enumerate(lines) if row["kind"] == "bound"]
    for value, why in ((1e12, "above the objective"), (-5, "must be finite >= 0")):
        lines[at]["value"]["value"] = value
        results.write_text("".join(json.dumps(row) + "\n" for row in lines))
        place = f"{results}:{at + 1}"
        with pytest.raises(FormatError, match=rf"^{place}: not a true lower bound .*{why}"):
            compare(inst, ["fcfs"], executor=Executor(results=results))
