"""``schedlab export``: the exact time-indexed model, readable back by HiGHS."""

from __future__ import annotations

from pathlib import Path

import highspy
import pytest

from schedlab.errors import FormatError, HorizonError, SchedlabError
from schedlab.offline.bounds.time_indexed import MAX_HORIZON
from schedlab.offline.export import (
    MAX_NONZEROS,
    NONZEROS_CEILING,
    export_model,
    model_nonzeros,
    time_indexed_model,
)
from schedlab.offline.instance import Instance
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


def test_a_model_too_large_is_refused_before_it_is_built(tmp_path: Path) -> None:
    # mixed-n50's model has 68.7 million nonzeros (a 1.14 GB LP file, 5½ minutes)
    inst = read_instance(INSTANCES / "mixed-n50.json")
    with pytest.raises(SchedlabError, match="68,714,961 nonzeros"):
        export_model(inst, tmp_path / "m.lp")
    assert not (tmp_path / "m.lp").exists()
    small = read_instance(INSTANCES / "tiny-1.json")
    problem = time_indexed_model(small)
    counted = sum(len(c.items()) for c in problem.constraints.values())
    assert model_nonzeros(small) == counted
    with pytest.raises(SchedlabError, match="over the limit of 1,000"):
        export_model(small, tmp_path / "t.lp", max_nonzeros=1000)


def test_format_and_suffix_must_agree(tmp_path: Path) -> None:
    small = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(FormatError, match="says 'lp'"):
        export_model(small, tmp_path / "t.lp", "mps")


def test_cli_default_limit_is_the_library_one() -> None:
    from schedlab.cli import build_parser

    args = build_parser().parse_args(["export", "x.json", "-o", "x.lp"])
    assert args.max_nonzeros == MAX_NONZEROS


def test_a_horizon_or_a_limit_beyond_what_fits_is_refused(tmp_path: Path) -> None:
    late = Instance.from_arrays(10, [1], [1], [MAX_HORIZON])  # few nonzeros, long horizon
    with pytest.raises(HorizonError, match=r"^export: the horizon is 5,000,001 rounds"):
        export_model(late, tmp_path / "late.lp")
    small = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(SchedlabError, match=r"^export: max_nonzeros = 150,000,001 is above"):
        export_model(small, tmp_path / "t.lp", max_nonzeros=NONZEROS_CEILING + 1)
