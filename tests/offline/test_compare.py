import csv
import io

import pytest

from schedlab import compare, read_instance
from schedlab.errors import UnknownNameError
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


def test_gap_is_measured_against_the_best_bound_of_all_rows():
    inst = read_instance(INSTANCES / "tiny-1.json")
    table = compare(inst, ["fcfs", "brute-force"])
    # brute-force proves the optimum, which becomes the bound for every row.
    assert table.lower_bound == inst.meta["optimum"]
    records = {r["solver"]: r for r in table.records()}
    assert records["brute-force"]["gap"] == 0
    fcfs = records["fcfs"]["objective"]
    assert records["fcfs"]["gap"] == pytest.approx((fcfs - table.lower_bound) / table.lower_bound)


def test_names_are_checked_before_anything_runs():
    inst = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(UnknownNameError, match="unknown solver 'fsfc'"):
        compare(inst, ["fcfs", "fsfc"])
