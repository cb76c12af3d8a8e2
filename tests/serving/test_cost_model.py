"""Cost models: the formulas by hand, JSON round trip, the kind registry, monotonicity."""

from __future__ import annotations

import json

import pytest

from schedlab.errors import (
    DataNotFoundError,
    FormatError,
    NonMonotoneCostModelError,
    RegistrationError,
    ServingError,
    UnknownNameError,
)
from schedlab.serving.cost_model import (
    COST_MODEL_KINDS,
    SLOWEAVE_DEFAULT,
    CostModel,
    LinearAttentionCostModel,
    check_monotone,
    cost_model_from_dict,
    cost_model_kinds,
    cost_model_names,
    get_cost_model,
    hardware_of,
    load_cost_model,
    register_cost_model_kind,
    require_monotone,
    save_cost_model,
    shipped_cost_models,
)

MS = 1e-3


@pytest.mark.parametrize(
    ("n", "chunks", "expected_ms"),
    [
        (0, [], 0.35),  # empty batch: base only
        (1, [], 0.35 + 0.90 + 0.055),
        (0, [(100, 0)], 0.35 + 0.40 + 0.6),
        (128, [(256, 0)], 0.35 + 0.90 + 7.04 + 0.40 + 1.536),
        # Two chunks count as their total c = 300; prior context costs nothing here.
        (10, [(100, 5000), (200, 0)], 0.35 + 0.90 + 0.55 + 0.40 + 1.8),
    ],
)
def test_sloweave_default_formula(n, chunks, expected_ms):
    # docs/design.md, "SLOWeave": T(n,c) = 0.35 + [n>0](0.90 + 0.055 n) + [c>0](0.40 + 0.006 c) ms.
    assert SLOWEAVE_DEFAULT.iteration_time(n, 12345, chunks) == pytest.approx(expected_ms * MS)


def test_linear_attention_terms():
    model = LinearAttentionCostModel(
        decode_per_kv_s=2.0, prefill_attention_s=1.0, decode_fixed_s=0.0
    )
    # Decode attention reads every cached token: 2 * 1000.
    assert model.iteration_time(3, 1000, []) == 2000.0
    # A chunk of 4 tokens on 10 cached ones: 4*10 + (1+2+3+4) = 50 query-key pairs.
    assert model.iteration_time(0, 0, [(4, 10)]) == 50.0
    assert isinstance(model, CostModel)


def test_json_round_trip(tmp_path):
    model = LinearAttentionCostModel(
        name="fit",
        base_s=1e-3,
        prefill_attention_s=2e-9,
        margin_s=3e-4,
        source="unit test",
        hardware="RTX4090",
    )
    path = tmp_path / "model.json"
    save_cost_model(model, path)
    data = json.loads(path.read_text())
    assert data["kind"] == "linear-attention" and data["margin_s"] == 3e-4
    assert load_cost_model(path) == model
    assert get_cost_model(str(path)) == model
    assert get_cost_model("sloweave-default") is SLOWEAVE_DEFAULT


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected a JSON object"),
        ({"coefficients": {}}, "kind: expected a string"),
        ({"kind": "linear-attention"}, "coefficients: expected an object"),
        ({"kind": "linear-attention", "coefficients": {"base": 1}}, "unknown name"),
        ({"kind": "linear-attention", "coefficients": {"base_s": "1"}}, "base_s: expected"),
        ({"kind": "linear-attention", "coefficients": {}, "margin_s": -1}, "margin_s"),
        ({"kind": "linear-attention", "coefficients": {"base_s": float("inf")}}, "finite"),
        # a misspelt margin ran with margin 0 without a word
        (
            {"kind": "linear-attention", "coefficients": {}, "margn_s": 1e-3},
            r"^m.json: unknown key\(s\) margn_s; known: coefficients, hardware, kind, margin_s",
        ),
    ],
)
def test_bad_json_names_the_place(data, message):
    with pytest.raises(FormatError, match=message) as info:
        cost_model_from_dict(data, "m.json")
    assert "m.json" in str(info.value)


def test_unknown_kind_and_name(tmp_path):
    with pytest.raises(UnknownNameError, match="linear-attention"):
        cost_model_from_dict({"kind": "magic"})
    with pytest.raises(UnknownNameError, match="sloweave-default"):
        get_cost_model("no-such-model")
    with pytest.raises(DataNotFoundError):
        load_cost_model(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FormatError, match=r"bad\.json:1"):
        load_cost_model(bad)


def test_registry_hook_plugs_in_a_new_kind(tmp_path):
    class Constant:
        name = "constant"
        margin_s = 0.0

        def __init__(self, seconds):
            self.seconds = seconds

        def iteration_time(self, n_decode, decode_kv, chunks):
            return self.seconds

        def to_dict(self):
            return {"kind": "test-constant", "name": self.name, "seconds": self.seconds}

    register_cost_model_kind("test-constant", lambda data, where: Constant(data["seconds"]))
    try:
        assert "test-constant" in cost_model_kinds()
        path = tmp_path / "c.json"
        save_cost_model(Constant(0.25), path)
        loaded = load_cost_model(path)
        assert loaded.iteration_time(5, 0, [(10, 0)]) == 0.25
        with pytest.raises(RegistrationError, match="'test-constant' is already registered"):
            register_cost_model_kind("test-constant", lambda data, where: Constant(1.0))
    finally:
        COST_MODEL_KINDS.unregister("test-constant")
    with pytest.raises(RegistrationError, match="cost model kind name '': cannot be registered"):
        register_cost_model_kind("", lambda data, where: Constant(1.0))


def test_monotone_models_pass():
    assert check_monotone(SLOWEAVE_DEFAULT) == []
    require_monotone(SLOWEAVE_DEFAULT)
    attention = LinearAttentionCostModel(
        base_s=1e-4, prefill_per_token_s=1e-6, prefill_attention_s=1e-10
    )
    assert check_monotone(attention, c_max=512) == []


def test_non_monotone_model_is_located_and_refused():
    # Negative attention coefficient: with prior 0, T(c) - T(c-1) = a - 1e-9 c for
    # a = 1.0005e-6, which turns negative first at c = 1001 (> 1000.5).
    model = LinearAttentionCostModel(
        name="wobbly", base_s=1.0, prefill_per_token_s=1.0005e-6, prefill_attention_s=-1e-9
    )
    problems = check_monotone(model, c_max=1200, priors=(0,), n_decodes=(0,), other_chunks=((),))
    assert problems and "T(c=1001)" in problems[0]
    with pytest.raises(NonMonotoneCostModelError, match="wobbly"):
        require_monotone(model, c_max=1200, user="test")


def test_non_positive_times_are_reported():
    model = LinearAttentionCostModel(name="negative", base_s=-1.0)
    assert "not positive" in check_monotone(model, c_max=4)[0]


def test_unhashable_model_is_checked_without_cache():
    class Listy:
        name = "listy"
        margin_s = 0.0
        __hash__ = None  # type: ignore[assignment]

        def iteration_time(self, n_decode, decode_kv, chunks):
            return 1.0 - sum(c for c, _ in chunks) * 1e-6

        def to_dict(self):
            return {}

    with pytest.raises(NonMonotoneCostModelError, match="listy"):
        require_monotone(Listy(), c_max=8)


def test_coefficients_validated():
    with pytest.raises(ServingError, match="margin_s: must be >= 0"):
        LinearAttentionCostModel(margin_s=-0.1)
    with pytest.raises(ServingError, match="base_s: expected a number"):
        LinearAttentionCostModel(base_s="1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("linear-attention", "5.5e-05", "coefficients.decode_per_seq_s: expected a number"),
        ("linear-attention", "1/3", "coefficients.decode_per_seq_s: expected a number"),
        ("linear-attention", True, "coefficients.decode_per_seq_s: expected a number"),
        ("linear-attention", "1e400", "decode_per_seq_s: must be finite"),
        ("profile-grid", "0.58", "extrapolation_us.decode_seq: expected a finite number"),
        ("profile-grid", "2*0.29", "extrapolation_us.decode_seq: expected a finite number"),
        ("profile-grid", False, "extrapolation_us.decode_seq: expected a finite number"),
        ("profile-grid", "1e400", "extrapolation_us.decode_seq: expected a finite number"),
    ],
)
def test_a_coefficient_that_is_no_finite_number_is_refused_by_file_and_key(
    tmp_path, kind, value, message
):
    # text, an expression or a bool ran as a number in a profile-grid model (issue 54)
    if kind == "linear-attention":
        data = SLOWEAVE_DEFAULT.to_dict()
        data["coefficients"]["decode_per_seq_s"] = value
    else:
        data = json.loads(shipped_cost_models()["rtxpro6000_llama-3.1-8b"].read_text())
        data["attention"]["extrapolation_us"]["decode_seq"] = value
    path = tmp_path / "model.json"
    text = json.dumps(data)
    path.write_text(text.replace('"1e400"', "1e400"))  # a JSON number Python reads as inf
    with pytest.raises(FormatError, match=rf"^{tmp_path}/model\.json: .*{message}"):
        load_cost_model(path)


def test_every_model_names_its_hardware():
    assert hardware_of(SLOWEAVE_DEFAULT) == "illustrative, no GPU"
    assert hardware_of(get_cost_model("rtx4090_llama-3.1-8b")) == "RTX4090"
    assert hardware_of(LinearAttentionCostModel()) == "hardware not stated"
    assert cost_model_names()[0] == "sloweave-default"
    assert "rtxpro6000_llama-3.1-8b" in cost_model_names()


@pytest.mark.parametrize(
    ("place", "key"),
    [((), "margn_s"), (("model",), "layer"), (("parallelism",), "tp_size")],
)
def test_a_calibrated_model_with_an_unknown_key_names_it(place, key):
    shipped = json.loads(shipped_cost_models()["rtx4090_llama-3.1-8b"].read_text())
    assert cost_model_from_dict(shipped, "m.json").name == "rtx4090_llama-3.1-8b"
    target = shipped
    for name in place:
        target = target[name]
    target[key] = 1
    where = "".join(f": {name}" for name in place)
    with pytest.raises(FormatError, match=rf"^m.json{where}: unknown key\(s\) {key}; known: "):
        cost_model_from_dict(shipped, "m.json")


def test_a_model_file_is_read_once_per_version(tmp_path):
    path = tmp_path / "m.json"
    save_cost_model(LinearAttentionCostModel(base_s=1e-3, name="first"), path)
    first = get_cost_model(str(path))
    assert get_cost_model(str(path)) is first  # parsed once, checked once
    assert get_cost_model(str(tmp_path / "." / "m.json")) is first  # one file, two spellings
    name = next(iter(shipped_cost_models()))
    assert get_cost_model(name) is get_cost_model(name)
    # a rewritten file is read again
    save_cost_model(LinearAttentionCostModel(base_s=2e-3, name="second, longer name"), path)
    second = get_cost_model(str(path))
    assert second is not first and second.name == "second, longer name"
