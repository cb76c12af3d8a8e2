import csv
import io

import pytest

from schedlab import compare, read_instance
from schedlab.errors import SchedlabError, UnknownNameError, UnknownOptionError
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
        compare(inst, ["dp"], options={"dp": {"max_moves": 3}})
    with pytest.raises(SchedlabError, match="option max_requests: expected int"):
        compare(inst, ["dp"], options={"dp": {"max_requests": "many"}})


def test_options_that_need_the_time_limit_are_tried_under_it():
    # alns governed by time (evaluations=None) needs a time limit; the up-front trial of
    # the options runs under the comparison's, and a bad value is still refused up front
    inst = read_instance(INSTANCES / "tiny-2.json")
    by_time = {"alns": {"evaluations": None, "idle": None}}
    table = compare(inst, ["alns"], time_limit=0.5, options=by_time, bound=None)
    assert not table.failures
    assert verify(inst, table.results[0].starts) == []
    with pytest.raises(SchedlabError, match="set time_limit or evaluations"):
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
