"""The engine's KV capacity defaults to the cost model's GPU deployment
(:func:`schedlab.serving.engine_config.engine_for`, :class:`Scenario`, the CLI)."""

from __future__ import annotations

import json

import pytest

from schedlab.cli import main
from schedlab.serving.cost_model import get_cost_model
from schedlab.serving.engine_config import EngineConfig, engine_for
from schedlab.serving.scenario import Scenario

RTX = "rtx4090_llama-3.1-8b"


def test_engine_for_a_calibrated_model():
    model = get_cost_model(RTX)
    engine, note = engine_for(model, max_num_batched_tokens=2048)
    tokens, _ = model.deployment.kv_tokens(2048, 256)  # type: ignore[attr-defined]
    assert engine.kv_tokens == tokens < 50_000 and "RTX4090" in note
    assert engine.max_num_batched_tokens == 2048
    given, note = engine_for(model, kv_tokens=4096)
    assert given.kv_tokens == 4096 and note == "KV capacity 4,096 tokens (given)"
    illustrative, note = engine_for(get_cost_model("sloweave-default"))
    assert illustrative == EngineConfig() and "literal default" in note


def test_scenario_default_engine_is_the_cost_models():
    scenario = Scenario(cost_model=RTX)
    assert scenario.engine == engine_for(get_cost_model(RTX))[0]
    assert "memory profiling" in scenario.kv_source
    assert scenario.with_(seed=3).engine == scenario.engine
    assert scenario.with_(seed=3).kv_source == scenario.kv_source
    # A new cost model makes the engine again; an explicit engine wins.
    assert scenario.with_(cost_model="sloweave-default").engine == EngineConfig()
    explicit = Scenario(cost_model=RTX, engine=EngineConfig(kv_tokens=8192))
    assert explicit.engine.kv_tokens == 8192 and "given" in explicit.kv_source
    assert explicit.with_(cost_model="sloweave-default").engine.kv_tokens == 8192
    assert Scenario.from_dict(scenario.to_dict()) == scenario
    assert Scenario().engine == EngineConfig()


ARGS = ["--cost-model", RTX, "--duration", "4s", "--workload", "chat"]


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--rate", "2", "--policy", "vllm"],
        ["capacity", "--max-rate", "2", "--start-rate", "1", "--tolerance", "0.5", "--quiet"],
        ["sweep", "--rates", "1", "--policies", "vllm", "--quiet"],
        ["cluster", "--nodes", "2C", "--router", "round-robin", "--rate", "2"],
    ],
)
def test_the_commands_say_where_the_kv_capacity_came_from(capsys, command):
    expected = engine_for(get_cost_model(RTX))[0].kv_tokens
    assert main([*command, *ARGS]) == 0
    err = capsys.readouterr().err
    assert f"schedlab: KV capacity {expected:,} tokens at most: vLLM 0.19's memory" in err
    assert "not known better than that band" in err
    assert main([*command, *ARGS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data[0] if isinstance(data, list) else data
    assert first["kv_capacity"]["tokens"] == expected
    assert "RTX4090" in first["kv_capacity"]["source"]
    assert main([*command, *ARGS, "--json", "--kv-tokens", "100000"]) == 0
    data = json.loads(capsys.readouterr().out)
    first = data[0] if isinstance(data, list) else data
    assert first["kv_capacity"] == {
        "tokens": 100_000,
        "source": "KV capacity 100,000 tokens (given)",
    }


def test_simulate_peak_kv_is_the_cards(capsys):
    assert (
        main(["simulate", "--cost-model", RTX, "--policy", "vllm", "--rate", "8", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["peak_kv_tokens"] <= data["kv_capacity"]["tokens"] < 50_000


def test_the_illustrative_model_says_so(capsys):
    assert main(["simulate", "--rate", "2", "--duration", "2s"]) == 0
    err = capsys.readouterr().err
    assert "KV capacity 262,144 tokens: the illustrative engine's literal default" in err


def test_limits_that_leave_no_kv_room(capsys):
    args = ["simulate", "--cost-model", RTX, "--max-num-batched-tokens", "400000"]
    assert main([*args, "--max-num-seqs", "4096"]) == 2
    err = capsys.readouterr().err
    assert "leaves no room for the KV cache" in err and len(err.strip().splitlines()) == 1
