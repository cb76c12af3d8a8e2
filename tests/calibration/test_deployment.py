"""A recorded run's deployment: every setting from its records, and where it came from."""

from __future__ import annotations

import pytest

from schedlab.calibration.deployment import deployment_of
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.errors import FormatError
from schedlab.llm.interconnect import Link
from schedlab.llm.models import GIB
from tests.calibration.recorded import gpu_config, req, write_run

LIMITS = {"max_num_seqs": 8, "max_num_batched_tokens": 64}


def deployment(tmp_path, meta=None, config=None, **given):
    write_run(tmp_path, [req(1, 2, 0, 1, 2)], meta=meta, config=config)
    return deployment_of(read_recorded_run(tmp_path), **given)


def test_kv_capacity_by_vllms_formula(tmp_path):
    # (0.9 * 96 GiB - 2 * 8.03e9 - 1 GiB) / (2 * 32 layers * 8 heads * 128 dims * 2 bytes)
    # = 577,068 tokens = 36,066 blocks of 16 (rounded down), less vLLM's null block.
    d = deployment(tmp_path, {"engine_kwargs": LIMITS}, gpu_config(96))
    tokens = int((0.9 * 96 * GIB - 2 * 8.03e9 - GIB) // (2 * 32 * 8 * 128 * 2))
    assert d.engine.kv_capacity_tokens == (tokens // 16 - 1) * 16 == 36_065 * 16
    assert (d.engine.max_num_seqs, d.engine.max_num_batched_tokens) == (8, 64)
    assert d.hardware == "RTXPRO6000"
    assert any("vLLM's formula" in note and "96.0 GiB" in note for note in d.notes)
    # A GPU memory utilisation in the engine arguments changes it.
    meta = {"engine_kwargs": {**LIMITS, "gpu_memory_utilization": 0.5}}
    half = deployment(tmp_path, meta, gpu_config(96))
    tokens = int((0.5 * 96 * GIB - 2 * 8.03e9 - GIB) // (2 * 32 * 8 * 128 * 2))
    assert half.engine.kv_capacity_tokens == (tokens // 16 - 1) * 16
    assert "gpu_memory_utilization = 0.5 (meta.json)" in half.notes


def test_recorded_kv_cache_wins(tmp_path):
    cache = {"num_gpu_blocks": 2588, "block_size": 16, "enable_prefix_caching": False}
    d = deployment(tmp_path, {"engine_kwargs": LIMITS, "kv_cache": cache})
    assert d.engine.total_blocks == 2587 and d.engine.kv_capacity_tokens == 2587 * 16
    assert d.engine.prefix_caching is False
    assert "enable_prefix_caching = False (meta.json kv_cache)" in d.notes
    # No config.json is needed then; without either, the error says what is missing.
    with pytest.raises(FormatError, match=r"config\.json: no GPU memory recorded"):
        deployment(tmp_path / "bare", {"engine_kwargs": LIMITS})
    given = deployment(tmp_path / "bare", {"engine_kwargs": LIMITS}, kv_tokens=512)
    assert given.engine.kv_capacity_tokens == 512
    assert "KV capacity 512 tokens (given)" in given.notes


def test_limits_must_be_recorded_or_given(tmp_path):
    with pytest.raises(FormatError, match=r"engine_kwargs\.max_num_seqs: not recorded"):
        deployment(tmp_path, {}, gpu_config())
    d = deployment(tmp_path, {}, gpu_config(), max_num_seqs=4, max_num_batched_tokens=32)
    assert (d.engine.max_num_seqs, d.engine.max_num_batched_tokens) == (4, 32)
    assert "max_num_seqs = 4 (given)" in d.notes
    meta = {"engine_kwargs": {**LIMITS, "max_num_seqs": "8"}}
    with pytest.raises(FormatError, match=r"engine_kwargs\.max_num_seqs: expected int"):
        deployment(tmp_path, meta, gpu_config())
    with pytest.raises(FormatError, match="engine_kwargs: expected an object"):
        deployment(tmp_path, {"engine_kwargs": [1]}, gpu_config())


@pytest.mark.parametrize(
    ("version", "recorded", "expected", "source"),
    [
        ("0.19.0", None, True, "default of vLLM 0.19.0"),  # the default since 0.14.0
        ("0.14", None, True, "default of vLLM 0.14"),
        ("0.13.2", None, False, "default of vLLM 0.13.2"),
        (None, None, False, "default of vLLM (version not recorded)"),
        ("0.19.0", False, False, "meta.json"),
        ("0.10.0", True, True, "meta.json"),
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
    with pytest.raises(FormatError, match=r"engine_kwargs\.async_scheduling: expected bool"):
        deployment(tmp_path, meta, gpu_config())


def test_parallelism_and_link(tmp_path):
    config = gpu_config(link_bw=16, link_latency=20000)
    kwargs = {**LIMITS, "tensor_parallel_size": 2}
    d = deployment(tmp_path, {"engine_kwargs": kwargs, "model": "Qwen/Qwen3-32B"}, config)
    assert (d.tp, d.ep, d.replicas, d.lockstep) == (2, 1, 1, False)
    assert d.link == Link(16e9, 20e-6) and d.model == "Qwen/Qwen3-32B"
    # Data parallelism alone: independent replicas; with expert parallelism: lockstep,
    # experts over tp * dp GPUs.
    kwargs = {**LIMITS, "data_parallel_size": 2}
    d = deployment(tmp_path, {"engine_kwargs": kwargs}, config)
    assert (d.tp, d.ep, d.replicas, d.lockstep) == (1, 1, 2, False)
    kwargs["enable_expert_parallel"] = True
    d = deployment(tmp_path, {"engine_kwargs": kwargs}, config)
    assert (d.tp, d.ep, d.replicas, d.lockstep) == (1, 2, 2, True)
    assert deployment(tmp_path, {"engine_kwargs": LIMITS}, gpu_config()).link is None
    with pytest.raises(FormatError, match="link_bw, link_latency"):
        deployment(tmp_path, {"engine_kwargs": LIMITS}, gpu_config(link_bw="fast"))


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
