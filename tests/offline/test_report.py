"""The comparison report: tables, files, figure, and input errors."""

from __future__ import annotations

import csv
import io
import sys

import pytest

from schedlab.cli import main
from schedlab.errors import FormatError, SchedlabError
from schedlab.jobs import Executor
from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.report import load_instances, run_report
from schedlab.plotting import plot_report
from tests.conftest import INSTANCES

SOLVERS = ("fcfs", "sorted-f")


@pytest.fixture(scope="module")
def report():
    return run_report(
        [INSTANCES / "tiny-1.json", jaillet_instance(3, n=12)], SOLVERS, time_limit=5, seed=0
    )


def test_records_gap_and_bound(report) -> None:
    rows = list(csv.DictReader(io.StringIO(report.to_csv())))
    assert len(rows) == 2 * len(SOLVERS)
    assert [r["solver"] for r in rows[:2]] == list(SOLVERS)
    for row in report.records():
        assert row["objective"] >= row["lower_bound"] - 1e-6
        expected = (row["objective"] - row["lower_bound"]) / row["lower_bound"]
        assert row["gap"] == pytest.approx(max(expected, 0.0))
    tiny = [r for r in report.records() if r["instance"] == "tiny-1"]
    assert all(r["objective"] >= 80 for r in tiny)  # the proven optimum in its meta


def test_save_writes_csv_and_markdown(report, tmp_path) -> None:
    paths = report.save(tmp_path / "out")
    assert paths["csv"].read_text().startswith("instance,n,solver,status,objective")
    text = paths["markdown"].read_text()
    assert "## tiny-1" in text and "## Best per instance" in text


def test_run_report_with_out_dir_and_plot(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "fig.png"
    report = run_report(
        [INSTANCES / "tiny-2.json"], ["fcfs"], out_dir=tmp_path, executor=Executor(progress=True)
    )
    plot_report(report, png)
    assert (tmp_path / "report.csv").is_file()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # A new output folder may also hold the figure: it is created before the check.
    out = tmp_path / "new" / "dir"
    tiny = str(INSTANCES / "tiny-2.json")
    main(
        ["compare", tiny, "--solvers", "fcfs", "--output", str(out), "--plot", str(out / "f.svg")]
    )
    assert (out / "report.md").is_file() and (out / "f.svg").is_file()
    assert main(["compare", tiny, "--solvers", "fcfs", "--plot", str(tmp_path / "fig.txt")]) == 2
    assert "cannot write a figure" in capsys.readouterr().err


def test_plot_names_unknown_schedule(report, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    with pytest.raises(SchedlabError, match="no result"):
        plot_report(report, tmp_path / "x.png", schedule=("tiny-1", "cpsat"))


def test_plot_without_matplotlib(report, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(SchedlabError, match="matplotlib is not installed"):
        plot_report(report, tmp_path / "x.png")


def test_load_instances_errors(tmp_path) -> None:
    with pytest.raises(FormatError, match="no such file"):
        load_instances(tmp_path / "missing.json")
    with pytest.raises(FormatError, match=r"no \.json"):
        load_instances(tmp_path)
    assert len(load_instances(INSTANCES)) == len(list(INSTANCES.glob("*.json")))
