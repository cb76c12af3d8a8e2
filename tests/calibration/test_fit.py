"""calibrate(): held-out report, margin, and refusals."""

from __future__ import annotations

import math

import pytest

from schedlab.calibration import layouts
from schedlab.calibration.fit import calibrate
from schedlab.calibration.profiles import read_llmservingsim_profile
from schedlab.calibration.skew import SkewTable
from schedlab.errors import CalibrationError, UnknownNameError
from schedlab.llm import models as model_shapes
from schedlab.llm.models import ModelShape, get_model_shape, register_model_shape


def test_report_on_a_synthetic_profile(synthetic_profile):
    model, report = calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")
    assert model.layers == 32 and model.profiled_layers == 1
    # Linear ops are fitted exactly by isotonic regression + interpolation: a held-out
    # point between two training points of a straight line has zero error.
    assert report.ops["qkv_proj"].n == 2 and report.ops["qkv_proj"].worst_pct == pytest.approx(0)
    # Three attention rows are off the declared grid; one (8 decodes) is beyond it.
    assert report.attention_interpolation.n == 2
    assert report.attention_extrapolation.n == 1
    assert report.iteration.n == 3
    assert report.margin_s >= 0 and model.margin_s == report.margin_s
    assert "iteration" in report.to_text()
    assert not math.isnan(report.to_dict()["iteration"]["median_pct"])


def test_wrong_model_name_is_refused(synthetic_profile):
    with pytest.raises(CalibrationError, match="not 'meta-llama/Llama-2-7b-hf'"):
        calibrate(synthetic_profile, "meta-llama/Llama-2-7b-hf")


def test_unknown_ops_and_architecture_are_refused(synthetic_profile):
    dense = synthetic_profile / "tp1" / "dense.csv"
    dense.write_text(dense.read_text() + "mystery_op,1,2\n")
    with pytest.raises(CalibrationError, match="mystery_op"):
        calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")
    meta = synthetic_profile / "meta.yaml"
    meta.write_text(meta.read_text().replace("architecture: llama", "architecture: mamba"))
    with pytest.raises(CalibrationError, match="mamba"):
        calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")


def test_bad_parameters(synthetic_profile):
    with pytest.raises(CalibrationError, match="margin_quantile"):
        calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B", margin_quantile=1.5)
    with pytest.raises(CalibrationError, match="holdout_every"):
        calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B", holdout_every=1)


def test_model_shapes_are_extensible(monkeypatch):
    monkeypatch.setattr(model_shapes, "MODEL_SHAPES", dict(model_shapes.MODEL_SHAPES))
    monkeypatch.setattr(model_shapes, "_ALIASES", dict(model_shapes._ALIASES))
    assert get_model_shape("llama2-70b").layers == 80
    assert get_model_shape("BLOOM-176B").kv_heads == 112
    shape = ModelShape("acme/Tiny-1B", 4, 8, 2, 64, 512, 1e9)
    register_model_shape(shape, ("tiny",))
    assert get_model_shape("tiny") is shape
    with pytest.raises(UnknownNameError, match="unknown model 'nope'"):
        get_model_shape("nope")


def test_real_profile_report(real_profile):
    _, report = calibrate(real_profile, "meta-llama/Llama-3.1-8B")
    # The declared doubling grid has 9 x 12 x 9 x 11 cells; 8,632 rows lie on it.
    assert report.attention_grid_rows == 8632 and report.attention_rows == 19364
    assert report.iteration.n == 19364 - 8632


def test_skew_alpha_comes_from_meta_yaml(synthetic_profile):
    from .conftest import SKEW_ALPHA

    assert calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")[0].skew.default == SKEW_ALPHA
    meta = synthetic_profile / "meta.yaml"
    text = meta.read_text()
    meta.write_text(text.replace("alpha_default: 0.25", "alpha_default: 2.5"))
    with pytest.raises(CalibrationError, match=r"skew_fit\.per_tp\.1\.alpha_default"):
        calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")
    meta.write_text(text.replace("enabled: true", "enabled: false"))
    assert calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")[0].skew is None


def test_shipped_profile_skew_table(real_profile):
    # The shared RTX PRO 6000 profile has skew.csv: the table is our own fit of its rows
    # (the per-bucket one: the least held-out error there), not the profiler's
    # skew_fit.csv (alpha_default 0.0543, 3,982 buckets).
    model, report = calibrate(real_profile, "meta-llama/Llama-3.1-8B")
    profile = read_llmservingsim_profile(real_profile)
    assert report.skew_choice == "bucket" and profile.skew_samples is not None
    assert model.skew == SkewTable.fit(profile.skew_samples, model.skew.axes)
    assert model.skew.default != 0.0543
    assert all(0 <= a <= 1 for a in model.skew.buckets.values())


def test_an_architecture_can_be_registered(synthetic_profile, monkeypatch):
    monkeypatch.setattr(layouts, "LAYOUTS", dict(layouts.LAYOUTS))
    llama = calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")[0]
    meta = synthetic_profile / "meta.yaml"
    meta.write_text(meta.read_text().replace("architecture: llama", "architecture: llama-x"))
    with pytest.raises(CalibrationError, match="'llama-x' has no op layout; known: llama"):
        calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")
    # llama's ops with a second qkv_proj per layer: for 2 decodes (N = 2 tokens) that adds
    # 32 layers x (10 + 0.5 N) us = 352 us (the synthetic dense op times).
    ops = {**layouts.LAYOUTS["llama"].per_layer, "qkv_proj": 2}
    layouts.register_layout("llama-x", layouts.OpLayout(ops))
    twice = calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")[0]
    extra = twice.iteration_time(2, 64, []) - llama.iteration_time(2, 64, [])
    assert extra == pytest.approx(352e-6)
    with pytest.raises(CalibrationError, match="calls per layer must be >= 0"):
        layouts.OpLayout({"qkv_proj": -1})


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_moe"])
@pytest.mark.parametrize("tp", [1, 2])
def test_qwen_profiles_calibrate_with_a_report(qwen_models, arch, tp):
    model, report = qwen_models[(arch, tp)]
    assert model.parallelism.tp == tp and model.hardware == "RTXPRO6000"
    assert model.name.endswith("_tp2") == (tp == 2)
    # Per-layer ops include the q/k norms (qwen3) and, for qwen3_moe, the expert block.
    runs = {op: count for op, count, _ in model.layer_ops}
    assert runs["qk_norm"] == 2 and runs["layernorm"] == 2
    assert (model.experts is not None) == (arch == "qwen3_moe")
    assert ("gate_up_proj" in runs) == (arch == "qwen3")
    assert report.iteration.n > 10_000
    assert report.iteration.median_pct < 5 and report.iteration.p90_pct < 10
    if arch == "qwen3_moe":
        # The held-out expert counts are interpolated within 15% (worst) and 5% (mean).
        assert report.experts is not None and report.experts.n > 0
        assert report.experts.mape_pct < 5 and report.experts.worst_pct < 15
        if tp == 2:  # the tp2 folder has no moe.csv: tp1's, split over the ranks
            assert "tp1/moe.csv" in [s.name for s in model.sources]
            assert any("split over the 2 ranks" in note for note in report.notes)
    text = report.to_text()
    assert "iteration" in text and ("expert block" in text) == (arch == "qwen3_moe")


def test_every_other_level_is_held_out_when_no_row_lies_between_levels(tmp_path):
    # Without the off-grid rows every attention row is on the grid: the report holds out
    # every other level instead (chunks 32, decodes 2, KV and context 32 here) and
    # interpolates them from a grid of the rest; the model itself uses every level.
    from .conftest import write_profile

    root = write_profile(tmp_path / "p", extra_rows=False)
    model, report = calibrate(root, "meta-llama/Llama-3.1-8B")
    assert model.attention.chunks == (0.0, 16.0, 32.0, 64.0)
    assert model.attention.decodes == (0.0, 1.0, 2.0, 4.0)
    # Held out: every row with a chunk, context, decode count or KV at a dropped level:
    # mixed rows 3*4*3*3 - 2*3*2*2 = 84, prefill-only 3*4 - 2*3 = 6, decode-only 3*3 - 2*2 = 5.
    assert report.attention_interpolation.n == 84 + 6 + 5
    assert report.attention_extrapolation.n == 0
    assert report.iteration.n == report.attention_interpolation.n
    assert any("every other level" in note for note in report.notes)


def test_the_report_as_rows_and_a_data_frame(synthetic_profile):
    pytest.importorskip("pandas")
    _, report = calibrate(synthetic_profile, "meta-llama/Llama-3.1-8B")
    rows = report.rows()
    labels = [row["held_out_set"] for row in rows]
    assert "op qkv_proj" in labels and "iteration" in labels
    table = report.to_text().splitlines()[1 : 1 + len(rows)]  # the text table, row by row
    assert all(line.startswith(label) for line, label in zip(table, labels, strict=True))
    (iteration,) = [row for row in rows if row["held_out_set"] == "iteration"]
    assert iteration["n"] == report.iteration.n == 3
    assert iteration["median_pct"] == report.iteration.median_pct
    assert list(report.to_pandas()["held_out_set"]) == labels
