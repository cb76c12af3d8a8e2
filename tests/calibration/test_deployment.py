"""A recorded run's deployment: every setting from its records, and where it came from."""

from __future__ import annotations

import json
import math

import pytest

from schedlab.calibration.deployment import MAX_TENSOR_PARALLEL, check_modelled, deployment_of
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.errors import FormatError
from schedlab.llm.interconnect import Link
from schedlab.llm.link_evidence import PUBLISHED_LINKS, LinkEvidence
from schedlab.llm.models import GIB
from schedlab.serving.scenario import MAX_REPLICAS
from tests.calibration.recorded import gpu_config, req, write_run

LIMITS = {"max_num_seqs": 8, "max_num_batched_tokens": 64}


def deployment(tmp_path, meta=None, config=None, **given):
    write_run(tmp_path, [req(1, 2, 0, 1, 2)], meta=meta, config=config)
    return deployment_of(read_recorded_run(tmp_path), **given)


def expected_blocks(utilization: float, gib: int = 96, element: int = 2) -> int:
    """vLLM 0.19's sizing by hand for Llama-3.1-8B on ``gib`` GiB (an RTXPRO6000 by its
    name: 188 SMs) with the engine limits of ``LIMITS`` (64 batched tokens, 8 sequences)
    and KV elements of ``element`` bytes."""
    requested = math.ceil(utilization * gib * GIB)
    weights = 8.03e9 * 2 + 131_072 * 128 * 4  # bf16 weights, float32 rotary cache
    forward = 2 * 64 * 4096 * 2 + 3 * 64 * 14_336 * 2  # residual + MLP (beats attention)
    sampler = (64 + 2 * 8) * 4096 * 2 + 8 * 128_256 * (2 + 12) + 4 * 8 * 128_256
    available = requested - weights - max(forward, sampler)
    return int(available // (16 * 2 * 32 * 8 * 128 * element))


def test_kv_capacity_by_vllms_formula(tmp_path):
    d = deployment(tmp_path, {"engine_kwargs": LIMITS}, gpu_config(96))
    assert expected_blocks(0.9) == 36_537
    assert d.engine.kv_tokens == (36_537 - 1) * 16
    assert (d.engine.max_num_seqs, d.engine.max_num_batched_tokens) == (8, 64)
    assert d.hardware == "RTXPRO6000"
    assert any("memory profiling" in note and "96.00 GiB" in note for note in d.notes)
    # A GPU memory utilisation in the engine arguments changes it.
    meta = {"engine_kwargs": {**LIMITS, "gpu_memory_utilization": 0.5}}
    half = deployment(tmp_path, meta, gpu_config(96))
    assert half.engine.kv_tokens == (expected_blocks(0.5) - 1) * 16
    assert (
        "gpu_memory_utilization = 0.5 (meta.json engine_kwargs.gpu_memory_utilization)"
        in half.notes
    )


def test_recorded_kv_cache_wins(tmp_path):
    cache = {"num_gpu_blocks": 2588, "block_size": 16, "enable_prefix_caching": False}
    d = deployment(tmp_path, {"engine_kwargs": LIMITS, "kv_cache": cache})
    assert d.engine.total_blocks == 2587 and d.engine.kv_tokens == 2587 * 16
    assert d.engine.prefix_caching is False
    assert "enable_prefix_caching = False (meta.json kv_cache.enable_prefix_caching)" in d.notes
    # No config.json is needed then; without either, the error says what is missing.
    with pytest.raises(FormatError, match=r"config\.json: no GPU memory recorded"):
        deployment(tmp_path / "bare", {"engine_kwargs": LIMITS})
    given = deployment(tmp_path / "bare", {"engine_kwargs": LIMITS}, kv_tokens=512)
    assert given.engine.kv_tokens == 512
    assert "KV capacity 512 tokens (given)" in given.notes


def test_limits_must_be_recorded_or_given(tmp_path):
    with pytest.raises(
        FormatError, match=r"meta\.json: max_num_seqs is not recorded: give it explicitly"
    ):
        deployment(tmp_path, {}, gpu_config())
    d = deployment(tmp_path, {}, gpu_config(), max_num_seqs=4, max_num_batched_tokens=32)
    assert (d.engine.max_num_seqs, d.engine.max_num_batched_tokens) == (4, 32)
    assert "max_num_seqs = 4 (given)" in d.notes
    meta = {"engine_kwargs": {**LIMITS, "max_num_seqs": "8"}}
    with pytest.raises(
        FormatError, match=r"engine_kwargs\.max_num_seqs: expected an integer from 1 to 1e\+08"
    ):
        deployment(tmp_path, meta, gpu_config())
    with pytest.raises(FormatError, match="engine_kwargs: expected an object"):
        deployment(tmp_path, {"engine_kwargs": [1]}, gpu_config())


@pytest.mark.parametrize(
    ("version", "recorded", "expected", "source"),
    [
        ("0.19.0", None, True, "default of vLLM 0.19.0"),  # the default since 0.14.0
        ("0.14", None, True, "default of vLLM 0.14"),
        ("0.13.2", None, False, "default of vLLM 0.13.2"),
        (None, None, True, "the default since vLLM 0.14.0; the run records no version"),
        ("0.19.0", False, False, "meta.json engine_kwargs.async_scheduling"),
        ("0.10.0", True, True, "meta.json engine_kwargs.async_scheduling"),
    ],
)
def test_async_scheduling(tmp_path, version, recorded, expected, source):
    meta = {"engine_kwargs": dict(LIMITS)}
    if version is not None:
        meta["vllm_version"] = version
    if recorded is not None:
        meta["engine_kwargs"]["async_scheduling"] = recorded
    d = deployment(tmp_path, meta, gpu_config())
    assert d.engine.async_scheduling is expected
    notes = [n for n in d.notes if n.startswith("async_scheduling")]
    assert notes == [f"async_scheduling = {expected} ({source})"]  # one note, its source


def test_async_scheduling_given_and_malformed(tmp_path):
    meta = {"vllm_version": "0.19.0", "engine_kwargs": LIMITS}
    d = deployment(tmp_path, meta, gpu_config(), async_scheduling=False)
    assert d.engine.async_scheduling is False
    assert [n for n in d.notes if n.startswith("async")] == ["async_scheduling = False (given)"]
    meta = {"engine_kwargs": {**LIMITS, "async_scheduling": 1}}
    with pytest.raises(
        FormatError, match=r"engine_kwargs\.async_scheduling: expected true or false, got 1"
    ):
        deployment(tmp_path, meta, gpu_config())


def test_parallelism_and_link(tmp_path):
    # config.json's link figures are LLMServingSim's network setting: never read as a link.
    config = gpu_config(link_bw=16, link_latency=20000)
    kwargs = {**LIMITS, "tensor_parallel_size": 2}
    d = deployment(tmp_path, {"engine_kwargs": kwargs, "model": "Qwen/Qwen3-32B"}, config)
    assert (d.tp, d.ep, d.replicas, d.lockstep) == (2, 1, 1, False)
    assert d.link.link != Link(16e9, 20e-6) and d.model == "Qwen/Qwen3-32B"
    assert any("link_bw/link_latency not read" in n for n in d.notes)
    assert d.link.link == PUBLISHED_LINKS["RTXPRO6000"].link
    assert d.link.kind == "published" and d.link.ends is not None
    assert "voipmonitor/rtx6kpro" in d.link.note  # said where the link is chosen
    # A GPU with no published link: the assumption is named.
    config["nodes"][0]["instances"][0]["hardware"] = "H20"
    d = deployment(tmp_path, {"engine_kwargs": kwargs}, config)
    assert d.link.kind == "assumed" and d.link.note.startswith(
        "link ASSUMED: no measurement for H20"
    )
    measured = LinkEvidence(Link(50e9, 4e-6), "measured", "link given")
    d = deployment(tmp_path, {"engine_kwargs": kwargs}, config, link=measured)
    assert d.link == measured
    # Data parallelism alone: independent replicas; with expert parallelism: lockstep,
    # experts over tp * dp GPUs.
    kwargs = {**LIMITS, "data_parallel_size": 2}
    d = deployment(tmp_path, {"engine_kwargs": kwargs}, config)
    assert (d.tp, d.ep, d.replicas, d.lockstep) == (1, 1, 2, False)
    kwargs["enable_expert_parallel"] = True
    d = deployment(tmp_path, {"engine_kwargs": kwargs}, config)
    assert (d.tp, d.ep, d.replicas, d.lockstep) == (1, 2, 2, True)
    # One GPU an engine, no lockstep: no collective, no link.
    assert deployment(tmp_path, {"engine_kwargs": LIMITS}, config).link is None


def test_reserve_full_prompt_from_the_resolved_config(tmp_path):
    scheduler = {"scheduler_reserve_full_isl": False}
    meta = {"engine_kwargs": LIMITS, "resolved_config": {"scheduler_config": scheduler}}
    assert deployment(tmp_path, meta, gpu_config()).engine.reserve_full_prompt is False
    scheduler["scheduler_reserve_full_isl"] = "no"
    with pytest.raises(FormatError, match="scheduler_reserve_full_isl: expected true or false"):
        deployment(tmp_path, meta, gpu_config())


def test_the_shared_runs(data_dir):
    runs = {p.name: p for p in (data_dir / "validation").iterdir() if p.is_dir()}
    pro = deployment_of(read_recorded_run(runs["vllm-0.19.0_RTXPRO6000_Llama-3.1-8B"]))
    assert (pro.engine.max_num_seqs, pro.engine.max_num_batched_tokens) == (128, 2048)
    assert pro.engine.async_scheduling and pro.engine.prefix_caching
    assert pro.hardware == "RTXPRO6000" and pro.model == "meta-llama/Llama-3.1-8B"
    small = deployment_of(read_recorded_run(runs["vllm-0.19.0_RTX4090_Llama-3.1-8B"]))
    assert small.engine.total_blocks == 2587  # recorded: 2,588 GPU blocks
    assert small.engine.max_num_seqs == 256 and small.hardware == "RTX4090"


def test_the_resolved_config_is_what_ran(tmp_path):
    # resolved_config (what vLLM ran with) wins over the engine arguments and kv_cache.
    resolved = {
        "scheduler_config": {"async_scheduling": False, "max_num_seqs": 6},
        "cache_config": {"block_size": 32, "enable_prefix_caching": False},
        "parallel_config": {"tensor_parallel_size": 1},
    }
    meta = {"vllm_version": "0.19.0", "engine_kwargs": LIMITS, "resolved_config": resolved}
    d = deployment(tmp_path, meta, gpu_config())
    assert d.engine.async_scheduling is False and d.engine.max_num_seqs == 6
    assert d.engine.block_size == 32 and d.engine.prefix_caching is False
    assert "block_size = 32 (meta.json resolved_config.cache_config.block_size)" in d.notes
    assert d.engine.kv_tokens % 32 == 0


def test_an_fp8_kv_cache_holds_twice_the_tokens(tmp_path):
    plain = deployment(tmp_path, {"engine_kwargs": LIMITS}, gpu_config(24))
    meta = {"engine_kwargs": {**LIMITS, "kv_cache_dtype": "fp8"}}
    fp8 = deployment(tmp_path, meta, gpu_config(24))
    # 64 KiB per token at one byte an element.
    assert fp8.engine.kv_tokens == (expected_blocks(0.9, 24, 1) - 1) * 16
    assert fp8.engine.total_blocks >= 2 * plain.engine.total_blocks
    meta["engine_kwargs"]["kv_cache_dtype"] = "int3"
    with pytest.raises(FormatError, match="kv_cache_dtype 'int3': not one of auto"):
        deployment(tmp_path, meta, gpu_config(24))


@pytest.mark.parametrize(
    ("meta", "config", "message"),
    [
        (
            {"kv_cache": {"num_gpu_blocks": 2588.0}},
            None,
            r"kv_cache\.num_gpu_blocks: expected an integer >= 2",
        ),
        (
            {"kv_cache": {"num_gpu_blocks": "2588"}},
            None,
            r"kv_cache\.num_gpu_blocks: expected an integer",
        ),
        (
            {"kv_cache": {"block_size": "abc"}},
            "gpu",
            r"kv_cache\.block_size: expected an integer from 1 to 1e\+08, got 'abc'",
        ),
        (  # beyond what any engine holds (reached the KV sizing before, issue 54)
            {"engine_kwargs": {**LIMITS, "max_num_batched_tokens": 10**30}},
            "gpu",
            r"max_num_batched_tokens: expected an integer from 1 to 1e\+08, got 10{30}",
        ),
        (
            {"engine_kwargs": {"tensor_parallel_size": 0}},
            "gpu",
            "tensor_parallel_size: expected an integer from 1 to 128, got 0",
        ),
        (
            {"engine_kwargs": {"data_parallel_size": -2}},
            "gpu",
            "data_parallel_size: expected an integer from 1 to 1024",
        ),
        (  # a billion engines would exhaust memory
            {"resolved_config": {"parallel_config": {"data_parallel_size": 10**9}}},
            "gpu",
            r"meta\.json: resolved_config\.parallel_config\.data_parallel_size: expected an "
            "integer from 1 to 1024, got 1000000000$",
        ),
        (
            {"engine_kwargs": {"data_parallel_size": 1025}},
            "gpu",
            r"engine_kwargs\.data_parallel_size: expected an integer from 1 to 1024, got 1025",
        ),
        (
            {"engine_kwargs": {"tensor_parallel_size": 129}},
            "gpu",
            r"engine_kwargs\.tensor_parallel_size: expected an integer from 1 to 128, got 129",
        ),
        ({"resolved_config": [1]}, "gpu", r"meta\.json: resolved_config: expected an object"),
        (
            {"resolved_config": {"scheduler_config": "x"}},
            "gpu",
            r"resolved_config\.scheduler_config: expected an object",
        ),
        (
            {"hardware": {"device_total_memory_bytes": -1}},
            "gpu",
            "device_total_memory_bytes: expected a positive number",
        ),
        ({}, {"nodes": [{"instances": None}]}, "no GPU memory recorded"),
        (
            {},
            {"nodes": [{"instances": [{"npu_mem": {"mem_size": "big"}}]}]},
            r"npu_mem\.mem_size: expected a positive number of GiB",
        ),
    ],
)
def test_malformed_records_are_refused_by_name(tmp_path, meta, config, message):
    meta = {**meta, "engine_kwargs": {**LIMITS, **meta.get("engine_kwargs", {})}}
    config = gpu_config() if config == "gpu" else config
    with pytest.raises(FormatError, match=message):
        deployment(tmp_path, meta, config)


def test_parallel_degrees_given_are_capped(tmp_path):
    meta = {"engine_kwargs": LIMITS}
    config = gpu_config()
    assert deployment(tmp_path, meta, config, dp=MAX_REPLICAS).replicas == MAX_REPLICAS
    assert deployment(tmp_path, meta, config, tp=MAX_TENSOR_PARALLEL).tp == MAX_TENSOR_PARALLEL
    with pytest.raises(FormatError, match="data_parallel_size: expected an integer from 1 to"):
        deployment(tmp_path, meta, config, dp=10**9)
    with pytest.raises(FormatError, match="tensor_parallel_size: expected an integer from 1 to"):
        deployment(tmp_path, meta, config, tp=MAX_TENSOR_PARALLEL + 1)


def test_a_bench_result_needs_its_limits_given(tmp_path):
    # A vllm bench serve result records no engine: the error says so, naming the file.
    data = {
        "input_lens": [5],
        "output_lens": [2],
        "start_times": [1.0],
        "ttfts": [0.1],
        "itls": [[0.1]],
    }
    (tmp_path / "bench.json").write_text(json.dumps(data))
    run = read_recorded_run(tmp_path / "bench.json")
    with pytest.raises(
        FormatError, match=r"bench\.json \(no meta\.json beside it\): max_num_seqs"
    ):
        deployment_of(run)
    d = deployment_of(run, max_num_seqs=8, max_num_batched_tokens=64, kv_tokens=1024)
    assert d.engine.async_scheduling is True  # no version recorded: vLLM's default since 0.14


def test_an_estimated_capacity_carries_its_band(tmp_path):
    d = deployment(tmp_path, {"engine_kwargs": LIMITS}, gpu_config(96))
    assert d.kv_band is not None
    low, high = d.kv_band
    assert high == d.engine.kv_tokens and low < high
    assert any("at most" in note and f"{low:,} tokens" in note for note in d.notes)
    cache = {"num_gpu_blocks": 2588, "block_size": 16}
    assert deployment(tmp_path, {"engine_kwargs": LIMITS, "kv_cache": cache}).kv_band is None
    assert deployment(tmp_path, {"engine_kwargs": LIMITS}, kv_tokens=512).kv_band is None


@pytest.mark.parametrize(
    ("meta", "key"),
    [
        (
            {"engine_kwargs": {**LIMITS, "speculative_config": {"method": "ngram"}}},
            "engine_kwargs.speculative_config",
        ),
        ({"engine_kwargs": {**LIMITS, "enable_lora": True}}, "engine_kwargs.enable_lora"),
        (
            {"engine_kwargs": {**LIMITS, "kv_cache_dtype": "fp8_e4m3"}},
            "engine_kwargs.kv_cache_dtype",
        ),
        (
            {
                "engine_kwargs": LIMITS,
                "resolved_config": {"scheduler_config": {"enable_chunked_prefill": False}},
            },
            "resolved_config.scheduler_config.enable_chunked_prefill",
        ),
        ({"engine_kwargs": LIMITS, "vllm_version": "0.6.3"}, "vllm_version '0.6.3'"),
        (
            {
                "engine_kwargs": LIMITS,
                "resolved_config": {"scheduler_config": {"scheduler_cls": "my.Scheduler"}},
            },
            "resolved_config.scheduler_config.scheduler_cls",
        ),
    ],
)
def test_a_setting_the_simulator_does_not_model_is_refused_or_noted(tmp_path, meta, key):
    d = deployment(tmp_path, meta, gpu_config(96))
    with pytest.raises(FormatError, match="not modelled; --allow-mismatch") as caught:
        check_modelled(d, allow=False, where="run")
    assert key in str(caught.value) and len(str(caught.value).splitlines()) == 1
    assert any(key in line for line in check_modelled(d, allow=True))
    plain = deployment(
        tmp_path, {"engine_kwargs": LIMITS, "vllm_version": "0.19.1"}, gpu_config(96)
    )
    assert plain.unmodelled == () and check_modelled(plain, allow=False) == []


def test_every_recorded_place_of_a_setting_is_checked(tmp_path):
    # the resolved configuration gives max_num_seqs; a malformed engine argument is
    # still refused, not silently passed over
    meta = {
        "engine_kwargs": {**LIMITS, "max_num_seqs": "many"},
        "resolved_config": {"scheduler_config": {"max_num_seqs": 8}},
    }
    with pytest.raises(FormatError, match=r"engine_kwargs\.max_num_seqs: expected an integer"):
        deployment(tmp_path, meta, gpu_config(96))


def test_what_vllm_ignores_is_not_refused_and_what_is_malformed_is(tmp_path):
    # max_loras without enable_lora changes nothing in vLLM; the default scheduler class
    # as a resolved configuration records it is vLLM's own
    meta = {
        "engine_kwargs": {**LIMITS, "max_loras": 4},
        "resolved_config": {
            "scheduler_config": {"scheduler_cls": "vllm.v1.core.sched.scheduler.Scheduler"}
        },
    }
    assert deployment(tmp_path, meta, gpu_config(96)).unmodelled == ()
    for change, message in (
        ({"engine_kwargs": {**LIMITS, "enable_chunked_prefill": "true"}}, "true or false"),
        ({"engine_kwargs": LIMITS, "vllm_version": 19}, "vllm_version: expected a release"),
    ):
        with pytest.raises(FormatError, match=message):
            deployment(tmp_path, change, gpu_config(96))
