"""``schedlab export``: the exact time-indexed model, readable back by HiGHS."""

from __future__ import annotations

from pathlib import Path

import highspy
import pytest

from schedlab.errors import FormatError
from schedlab.offline.export import export_model, time_indexed_model
from schedlab.offline.instance_io import read_instance
from tests.conftest import INSTANCES


@pytest.mark.parametrize("fmt", ["lp", "mps"])
def test_exported_model_solves_to_the_proven_optimum(tmp_path: Path, fmt: str) -> None:
    # tiny-3 has a proven optimum (instances/tiny-3.json meta, by brute force)
    inst = read_instance(INSTANCES / "tiny-3.json")
    path = export_model(inst, tmp_path / f"model.{fmt}")
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.readModel(str(path))
    highs.run()
    assert highs.getInfo().objective_function_value == pytest.approx(inst.meta["optimum"])


def test_model_has_one_assignment_row_per_request() -> None:
    inst = read_instance(INSTANCES / "tiny-1.json")
    problem = time_indexed_model(inst)
    names = [name for name in problem.constraints if name.startswith("start_")]
    assert len(names) == inst.n


def test_unknown_format_is_rejected(tmp_path: Path) -> None:
    inst = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(FormatError, match="export format"):
        export_model(inst, tmp_path / "model.txt")
