"""The calibrated cost model: composition, monotonicity, JSON round trip, provenance."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.calibration import shipped_model_path
from schedlab.calibration.fit import calibrate
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.skew import SkewTable
from schedlab.errors import FormatError, UnknownNameError
from schedlab.serving.cost_model import (
    check_monotone,
    cost_model_from_dict,
    load_cost_model,
    require_monotone,
    save_cost_model,
)

from .conftest import SKEW_ALPHA, attention_us


@pytest.fixture(scope="module")
def synthetic_model(tmp_path_factory):
    from .conftest import write_profile

    root = write_profile(tmp_path_factory.mktemp("model") / "p")
    return calibrate(root, "meta-llama/Llama-3.1-8B")[0]


@pytest.fixture(scope="module", params=["RTXPRO6000", "RTX4090"])
def shipped(request):
    """Each shipped model (both are fits of Llama-3.1-8B profiles)."""
    model = load_cost_model(shipped_model_path(f"{request.param.lower()}_llama-3.1-8b"))
    assert isinstance(model, ProfileCostModel) and model.hardware == request.param
    return model


@pytest.fixture
def shipped_profile(shipped, data_dir):
    """The shared profile the shipped model was fitted on."""
    path = data_dir / "profiles" / "llmservingsim" / shipped.hardware / shipped.model / "bf16"
    if not path.is_dir():
        pytest.skip(f"{path} is not present")
    return path


def test_composition_by_hand(synthetic_model):
    # 2 decodes holding 64 tokens (32 each) and one chunk (16, 16): N = 18 tokens, S = 3.
    # Every synthetic dense op is 10 + 0.5 N us: 8 runs per layer (layernorm twice) x 32
    # layers plus embedding and final norm = 258 op runs; head ops are 100 + S each.
    # Attention is exact on the grid point (16, 16, 2, 32), times 32 layers.
    dense = 258 * (10 + 0.5 * 18)
    head = 2 * (100 + 3)
    attention = 32 * attention_us(16, 16, 2, 32)
    t = synthetic_model.iteration_time(2, 64, [(16, 16)])
    assert t == pytest.approx((dense + head + attention) * 1e-6)


def test_skew_correction_by_hand(synthetic_model):
    # Same batch, longest decode at 48 KV (mean 32): the attention term becomes
    # A(mean) + alpha (A(max) - A(mean)). The synthetic attention is linear in k with slope
    # 0.01 n per token, so A(16, 16, 2, 48) - A(16, 16, 2, 32) = 0.01 * 2 * 16 = 0.32 us
    # per layer, exact under multilinear interpolation between the grid KVs 32 and 64.
    assert synthetic_model.skew.default == SKEW_ALPHA and synthetic_model.decode_spread
    plain = synthetic_model.iteration_time(2, 64, [(16, 16)])
    skewed = synthetic_model.iteration_time(2, 64, [(16, 16)], decode_kv_max=48)
    assert skewed - plain == pytest.approx(32 * SKEW_ALPHA * 0.32 * 1e-6)
    # Equal decodes (max = mean), one decode, or an unknown maximum: no correction.
    assert synthetic_model.iteration_time(2, 64, [(16, 16)], decode_kv_max=32) == plain
    one = synthetic_model.iteration_time(1, 32, [])
    assert synthetic_model.iteration_time(1, 32, [], decode_kv_max=32) == one
    assert synthetic_model.iteration_time(2, 64, [(16, 16)], decode_kv_max=None) == plain


def test_profiles_without_skew_fit_get_no_correction(synthetic_model):
    data = synthetic_model.to_dict()
    del data["skew"]  # a model file written before the correction existed
    old = cost_model_from_dict(data, "here")
    assert old.skew is None and not old.decode_spread
    batch = (2, 64, [(16, 16)])
    assert old.iteration_time(*batch, decode_kv_max=60) == old.iteration_time(*batch)
    data["skew"] = {"alpha": 1.5}
    with pytest.raises(FormatError, match="here"):
        cost_model_from_dict(data, "here")


def test_shipped_model_passes_the_serving_monotonicity_check(shipped):
    assert check_monotone(shipped) == []
    require_monotone(shipped, user="test")  # does not raise


@settings(max_examples=120, deadline=None)
@given(
    n=st.integers(0, 300),
    kv_each=st.integers(0, 20000),
    chunks=st.lists(st.tuples(st.integers(1, 4096), st.integers(0, 30000)), max_size=3),
    which=st.integers(0, 2),
    grow=st.integers(1, 4096),
)
def test_shipped_model_non_decreasing_in_every_chunk(shipped, n, kv_each, chunks, which, grow):
    assert_chunk_monotone(
        lambda batch: shipped.iteration_time(n, n * kv_each, batch), chunks, which, grow
    )


def assert_chunk_monotone(time_of, chunks, which, grow):
    """Growing chunk ``which`` by ``grow`` tokens, or adding a chunk of ``grow``, never
    makes ``time_of(chunks)`` cheaper."""
    base = time_of(chunks)
    assert base > 0
    if chunks:
        j = which % len(chunks)
        assert time_of([(c + grow if i == j else c, p) for i, (c, p) in enumerate(chunks)]) >= base
    assert time_of([*chunks, (grow, 0)]) >= base


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(2, 300),
    kv_each=st.integers(1, 8000),
    spread=st.integers(0, 12000),
    low=st.floats(0.0, 1.0),
    chunks=st.lists(st.tuples(st.integers(1, 4096), st.integers(0, 30000)), max_size=3),
    which=st.integers(0, 2),
    grow=st.integers(1, 4096),
)
def test_pooled_skew_keeps_chunk_monotonicity(
    shipped, n, kv_each, spread, low, chunks, which, grow
):
    # proofs/calibrated_monotone.md, Lemma 8: a pooled alpha keeps the chunk monotonicity
    # (the per-bucket table need not; the proof's "What is not claimed").
    pooled = dataclasses.replace(shipped, skew=SkewTable(shipped.skew.default))
    kv, longest = n * kv_each, kv_each + spread
    least = int(low * kv_each)

    def t(batch):
        return pooled.iteration_time(n, kv, batch, decode_kv_max=longest, decode_kv_min=least)

    assert t(chunks) >= pooled.iteration_time(n, kv, chunks)  # the correction only adds
    assert_chunk_monotone(t, chunks, which, grow)


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from([("qwen3", 2), ("qwen3_moe", 1), ("qwen3_moe", 2)]),
    ep=st.sampled_from([1, 2]),
    n=st.integers(0, 256),
    kv_each=st.integers(0, 16000),
    chunks=st.lists(st.tuples(st.integers(1, 2048), st.integers(0, 16000)), max_size=3),
    which=st.integers(0, 2),
    grow=st.integers(1, 2048),
)
def test_qwen_models_non_decreasing_in_every_chunk(
    qwen_models, key, ep, n, kv_each, chunks, which, grow
):
    # proofs/calibrated_monotone.md, Lemmas 6 and 7: the expert block (with and without
    # expert parallelism) and the tensor-parallel collectives keep the monotonicity.
    model = qwen_models[key][0]
    if model.experts is not None:
        model = model.deployed(ep=ep)
    assert_chunk_monotone(
        lambda batch: model.iteration_time(n, n * kv_each, batch), chunks, which, grow
    )


def test_round_trip(tmp_path, synthetic_model):
    path = tmp_path / "m.json"
    save_cost_model(synthetic_model, path)
    again = load_cost_model(path)
    for batch in [(0, 0, [(100, 0)]), (3, 300, []), (2, 64, [(16, 16), (40, 8)])]:
        assert again.iteration_time(*batch) == synthetic_model.iteration_time(*batch)
    assert again.to_dict() == json.loads(path.read_text())
    assert again.margin_s == synthetic_model.margin_s
    assert again.skew == synthetic_model.skew and again.skew.default == SKEW_ALPHA
    assert again.iteration_time(2, 64, [], decode_kv_max=60) == synthetic_model.iteration_time(
        2, 64, [], decode_kv_max=60
    )


def test_loader_errors_name_the_place(synthetic_model):
    data = synthetic_model.to_dict()
    del data["model"]
    with pytest.raises(FormatError, match="here: missing 'model'"):
        cost_model_from_dict(data, "here")
    data = synthetic_model.to_dict()
    data["ops"]["per_layer"]["qkv_proj"]["time_us_vs_tokens"]["y"] = [3, 2]
    with pytest.raises(FormatError, match="here"):
        cost_model_from_dict(data, "here")
    data = synthetic_model.to_dict()
    data["margin_s"] = -1.0
    with pytest.raises(FormatError, match="margin_s"):
        cost_model_from_dict(data, "here")


def _set(data, path, value):
    inner = data
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    return data


#: Numbers of a profile-grid model's JSON form written as text, an expression, a bool, a
#: list or null: each ran before, read by ``float`` (issue 54); now refused by key path.
_NOT_NUMBERS = [
    (("margin_s",), "0.002", "here: margin_s: expected a finite number, got '0.002'"),
    (("ops", "per_layer", "qkv_proj", "runs_per_layer"), True, "qkv_proj.runs_per_layer: exp"),
    (("ops", "per_layer", "qkv_proj", "time_us_vs_tokens", "x", 0), "1", r"tokens\.x\[0\]: "),
    (("ops", "per_layer", "qkv_proj", "time_us_vs_tokens", "tail_slope"), "1/3", "tail_slope"),
    (("ops", "per_sequence", "lm_head", "time_us_vs_sequences", "y", 1), None, r"y\[1\]: exp"),
    (("attention", "axes", "n_decode", 1), True, r"attention\.axes\.n_decode\[1\]: expected"),
    (("attention", "time_us", 3), [1.0], r"attention\.time_us\[3\]: expected a finite"),
    (("attention", "extrapolation_us", "const"), "7.5", r"extrapolation_us\.const: expected"),
    (("skew", "alpha_default"), "0.04", r"skew\.alpha_default: expected a finite number"),
    (("skew", "axes", "n_bins", 1), True, r"skew\.axes\.n_bins\[1\]: expected a finite number"),
    (("skew", "axes", "n_labels", 0), 2, r"skew\.axes\.n_labels\[0\]: expected a label"),
    (("parallelism", "tp"), True, r"here: parallelism\.tp: expected an integer from 1"),
    (("parallelism", "hidden"), 4096.0, r"parallelism\.hidden: expected an integer from 0"),
    (("parallelism", "dtype_bytes"), 2**70, r"parallelism\.dtype_bytes: expected an integer"),
    (("parallelism", "ep"), "1", r"parallelism\.ep: expected an integer from 1 to 4,096"),
    (("report", "margin_quantile"), "0.95", r"report\.margin_quantile: expected a finite"),
    (("sources",), [{"file": 1, "sha256": "x"}], r"sources\[0\]: file: expected text"),
]


@pytest.mark.parametrize(("path", "value", "message"), _NOT_NUMBERS)
def test_a_value_that_is_no_number_is_refused_by_key_path(synthetic_model, path, value, message):
    data = _set(json.loads(json.dumps(synthetic_model.to_dict())), path, value)  # a copy
    with pytest.raises(FormatError, match=message):
        cost_model_from_dict(data, "here")


def test_a_null_report_figure_and_no_sources_are_read():
    data = json.loads(shipped_model_path("rtxpro6000_llama-3.1-8b").read_text())
    data["report"]["iteration_p90_pct"] = None
    model = cost_model_from_dict(data, "here")
    assert isinstance(model, ProfileCostModel) and model.report["iteration_p90_pct"] is None


def test_shipped_model_records_sources_and_license(shipped):
    data = shipped.to_dict()
    assert "MIT" in data["license"] and "LLMServingSim" in data["license"]
    assert [s["file"] for s in data["sources"]] == [
        "meta.yaml",
        "tp1/dense.csv",
        "tp1/attention.csv",
        "tp1/per_sequence.csv",
        "tp1/skew_fit.csv",
        "tp1/skew.csv",
    ]
    with pytest.raises(UnknownNameError):
        shipped_model_path("nope")


def test_shipped_model_hashes_match_the_shared_files(shipped, shipped_profile):
    for source in shipped.sources:
        digest = hashlib.sha256((shipped_profile / source.name).read_bytes()).hexdigest()
        assert source.sha256 == digest, source.name


def _same_up_to_rounding(fitted, shipped, where="model") -> None:
    """Equal, floats to 1e-12 relative: the fits' least squares round differently across
    numpy / scipy builds (with scipy 1.17.1 and numpy 2.4.6 the lm_head tail slope came
    out 3.7900729166666673 against the shipped 3.7900729166666687)."""
    if isinstance(shipped, dict):
        assert isinstance(fitted, dict) and fitted.keys() == shipped.keys(), where
        for key in shipped:
            _same_up_to_rounding(fitted[key], shipped[key], f"{where}/{key}")
    elif isinstance(shipped, list):
        assert isinstance(fitted, list) and len(fitted) == len(shipped), where
        for k, (a, b) in enumerate(zip(fitted, shipped, strict=True)):
            _same_up_to_rounding(a, b, f"{where}[{k}]")
    elif isinstance(shipped, float):
        assert fitted == pytest.approx(shipped, rel=1e-12, abs=0), where
    else:
        assert fitted == shipped, where


def test_shipped_model_is_reproduced_by_calibrate(shipped, shipped_profile):
    model, _ = calibrate(shipped_profile, "meta-llama/Llama-3.1-8B")
    _same_up_to_rounding(model.to_dict(), shipped.to_dict())
