"""Result tables as CSV and as pandas DataFrames (:mod:`schedlab.tables`)."""

from __future__ import annotations

import csv
import io
import math
import sys

import pytest

from schedlab.errors import SchedlabError
from schedlab.jobs import Executor
from schedlab.tables import rows_to_csv, to_pandas

pandas = pytest.importorskip("pandas")


def test_csv_has_plain_numbers_and_empty_missing_cells():
    rows = [
        {"policy": "vllm", "rate_rps": 1234.5, "n": 12345, "p99_s": math.nan, "note": None},
        {"policy": "sloweave", "rate_rps": 2.0, "n": 7, "p99_s": 0.025, "note": "x"},
    ]
    text = rows_to_csv(rows)
    assert text.splitlines()[0] == "policy,rate_rps,n,p99_s,note"
    assert text.splitlines()[1] == "vllm,1234.5,12345,,"
    back = list(csv.DictReader(io.StringIO(text)))
    assert back[1] == {
        "policy": "sloweave",
        "rate_rps": "2.0",
        "n": "7",
        "p99_s": "0.025",
        "note": "x",
    }
    handle = io.StringIO()
    assert rows_to_csv(rows, handle) == handle.getvalue() == text
    assert rows_to_csv([]) == ""


def test_to_pandas_keeps_the_column_order():
    frame = to_pandas([{"b": 1, "a": 2.5}, {"b": 3, "a": None}])
    assert list(frame.columns) == ["b", "a"]
    assert frame["b"].tolist() == [1, 3]
    assert frame["a"].isna().tolist() == [False, True]


def test_without_pandas_one_line_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(SchedlabError, match="pip install pandas") as error:
        to_pandas([{"a": 1}])
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def run():
    from schedlab.serving.simulator import simulate

    return simulate("chat", rate=2.0, duration_s=10.0)


def test_a_simulation_summary_and_its_records(run):
    summary = run.summary.to_pandas()
    assert len(summary) == 1
    assert summary.loc[0, "n_requests"] == run.summary.n_requests
    assert summary.loc[0, "ttft_p50_s"] == pytest.approx(run.summary.ttft.p50)
    records = run.to_pandas()
    assert len(records) == len(run.records) > 0
    assert records["ttft_s"].tolist() == pytest.approx([r.ttft_s for r in run.records])


def test_sweep_points_and_capacity():
    from schedlab.serving.capacity import capacity, sweep

    points = sweep("chat", ["vllm"], [1.0, 2.0], duration_s=5.0, executor=Executor("serial"))
    frame = to_pandas([p.row() for p in points])
    assert frame["rate_rps"].tolist() == [1.0, 2.0]
    assert points[0].to_pandas().loc[0, "attainment"] == pytest.approx(
        points[0].row()["attainment"]
    )
    found = capacity("chat", duration_s=5.0, max_rps=2.0, progress=False)
    row = found.to_pandas().iloc[0]
    assert row["capacity_rps"] == found.capacity_rps and row["runs"] == len(found.probes)


def test_a_cluster_result():
    from schedlab.serving.cluster import Cluster, parse_nodes, simulate_cluster

    result = simulate_cluster(
        "chat", Cluster(parse_nodes("2C"), "round-robin"), rate=2.0, duration_s=5.0
    )
    frame = result.to_pandas()
    assert frame.loc[0, "cluster"] == result.label
    assert frame.loc[0, "queue_mean_s"] == pytest.approx(result.breakdown["queue"].mean)


def test_an_offline_report():
    from schedlab.offline.backlogs import mixed_backlog
    from schedlab.offline.report import run_report

    report = run_report(
        [mixed_backlog(8, 20_000, 0.5, 0)], ["fcfs", "svf"], executor=Executor("serial")
    )
    frame = report.to_pandas()
    assert frame["solver"].tolist() == ["fcfs", "svf"]
    assert frame["objective"].tolist() == [r["objective"] for r in report.records()]
    assert report.comparisons[0].to_pandas().equals(frame)


def test_fluid_headroom():
    from schedlab.serving.cost_model import get_cost_model
    from schedlab.serving.fluid import FluidLoad, headroom

    result = headroom(
        get_cost_model("sloweave-default"), FluidLoad.of([500, 1000], [100, 200]), 0.05
    )
    frame = result.to_pandas()
    assert frame["chunk"].tolist() == [row.chunk for row in result.fixed]
    assert frame["rate_star_ratio"].tolist() == pytest.approx(
        [result.ratio(r.chunk) for r in result.fixed]
    )
