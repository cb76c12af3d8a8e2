"""``schedlab verify`` of a file that is no schedule at all: one line and exit code 2; of
a schedule that does not fit its instance: the violations and exit code 1 (issue 54,
case 6)."""

from __future__ import annotations

import json

import pytest

from schedlab.cli import main
from tests.conftest import INSTANCES

TINY = str(INSTANCES / "tiny-1.json")  # 7 requests; optimal starts below
STARTS = [0, 5, 0, 10, 19, 15, 0]


@pytest.mark.parametrize(
    ("content", "place"),
    [
        (["a", *STARTS[1:]], "starts[0]"),
        ([0.0, *STARTS[1:]], "starts[0]"),
        ([True, *STARTS[1:]], "starts[0]"),
        ([*STARTS[:6], None], "starts[6]"),
        ([[0, 1, 2], *STARTS[1:]], "starts[0]"),
        ({"starts": [[0, "x"], *[[i, p] for i, p in enumerate(STARTS)][1:]]}, "starts[0][1]"),
        ([{"request": 0.5, "start": 0}], "starts[0].request"),
        ([{"request": 0, "start": [1]}], "starts[0].start"),
        ("a string", "starts"),
        (7, "starts"),
    ],
)
def test_a_json_file_that_is_no_schedule(tmp_path, capsys, content, place):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(content))
    assert main(["verify", TINY, str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"schedlab: error: {path}: {place}")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("request,start\n0,abc\n", ":2: start: expected an integer"),
        ("request,start\n0,1.0\n", ":2: start: expected an integer"),
        ("request,start\nx,1\n", ":2: request: expected an integer"),
        ("request,start,prompt\n0,1,\u00bd\n", ":2: prompt: expected an integer"),
    ],
)
def test_a_csv_file_that_is_no_schedule(tmp_path, capsys, rows, message):
    path = tmp_path / "s.csv"
    path.write_text(rows)
    assert main(["verify", TINY, str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{path}{message}" in lines[0]


@pytest.mark.parametrize(
    ("starts", "violation"),
    [
        ([*STARTS[:6], 99, 0], "unknown request"),  # one entry too many: request 7
        ([[0, 0], [0, 5]], "scheduled more than once"),
        ([0] * 7, "memory"),
    ],
)
def test_a_schedule_that_does_not_fit_is_exit_1(tmp_path, capsys, starts, violation):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(starts))
    assert main(["verify", TINY, str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("INFEASIBLE") and violation in out


def test_a_feasible_schedule_is_exit_0(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"starts": STARTS}))
    assert main(["verify", TINY, str(path)]) == 0
    assert capsys.readouterr().out.startswith("FEASIBLE: objective 80")
