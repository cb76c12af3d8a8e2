"""vLLM 0.19's KV-cache sizing (:mod:`schedlab.llm.models`), the GPU table and the GPU
deployment a calibrated cost model carries."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import FormatError, InstanceError, UnknownNameError
from schedlab.llm.gpu_deployment import GpuDeployment
from schedlab.llm.gpus import find_gpu, get_gpu
from schedlab.llm.models import (
    GIB,
    LLAMA_3_1_8B,
    NON_TORCH_MEASURED_BYTES,
    get_model_shape,
    kv_budget,
    kv_bytes_per_token,
    kv_token_capacity,
    profile_peak_bytes,
)

QWEN_MOE = get_model_shape("qwen3-30b-a3b")


def test_profile_peak_by_hand():
    # 2048 tokens, 256 rows, bf16, Llama-3.1-8B on a GPU of 128 SMs.
    forward, sampler = profile_peak_bytes(LLAMA_3_1_8B, 2048, 256, sms=128)
    assert forward == 2 * 2048 * 4096 * 2 + 3 * 2048 * 14_336 * 2
    rows_buffer = 128  # min(next power of 2 of min(256, 128), 128)
    assert sampler == (2048 + 512) * 4096 * 2 + 256 * 128_256 * 14 + 4 * rows_buffer * 128_256
    # An unknown SM count takes the buffer's rows as the sampled rows, rounded up to a
    # power of two; tensor parallelism divides the MLP's width only.
    assert profile_peak_bytes(LLAMA_3_1_8B, 2048, 200)[1] == pytest.approx(
        (2048 + 400) * 4096 * 2 + 200 * 128_256 * 14 + 4 * 256 * 128_256
    )
    assert profile_peak_bytes(LLAMA_3_1_8B, 2048, 256, tp=2)[0] == (
        2 * 2048 * 4096 * 2 + 3 * 2048 * 7168 * 2
    )
    # The expert block: router logits, shared gate/up-down buffer, activation, output.
    forward, _ = profile_peak_bytes(QWEN_MOE, 1024, 64)
    block = 1024 * 2 * (128 + 8 * max(2 * 768, 2048) + 8 * 768 + 2048)
    attention = 1024 * (32 + 8) * 128 * 2 + 1024 * 32 * 128 * 2
    assert forward == 2 * 1024 * 2048 * 2 + max(block, attention)


def test_budget_terms_by_hand():
    budget = kv_budget(
        LLAMA_3_1_8B, 25_250_627_584, max_num_batched_tokens=2048, max_num_seqs=256, sms=128
    )
    assert budget.requested == math.ceil(0.9 * 25_250_627_584)
    assert budget.weights == 8.03e9 * 2 + 131_072 * 128 * 4
    assert budget.peak == budget.sampler_peak > budget.forward_peak
    available = budget.requested - budget.weights - budget.sampler_peak
    assert budget.available == available and budget.non_torch == 0
    assert budget.tokens == int(available // 131_072)
    assert budget.blocks(16) == int(available // (16 * 131_072)) == budget.tokens // 16


def test_kv_token_capacity_and_its_errors():
    assert (
        kv_token_capacity(LLAMA_3_1_8B, 24 * GIB)
        == kv_budget(LLAMA_3_1_8B, 24 * GIB, max_num_batched_tokens=2048, max_num_seqs=256).tokens
    )
    # An explicit reserve stands for P + N.
    reserved = kv_token_capacity(LLAMA_3_1_8B, 24 * GIB, reserve_bytes=GIB)
    weights = 8.03e9 * 2 + 131_072 * 128 * 4
    assert reserved == int((math.ceil(0.9 * 24 * GIB) - weights - GIB) // 131_072)
    assert kv_token_capacity(LLAMA_3_1_8B, 24 * GIB, kv_dtype_bytes=1) > 2 * reserved
    with pytest.raises(InstanceError, match="leaves no room"):
        kv_token_capacity(LLAMA_3_1_8B, 16 * GIB)
    with pytest.raises(InstanceError, match="leaves no room"):
        kv_token_capacity(LLAMA_3_1_8B, 24 * GIB, reserve_bytes=7 * GIB)
    with pytest.raises(InstanceError, match="utilization"):
        kv_token_capacity(LLAMA_3_1_8B, 80 * GIB, utilization=1.5)
    with pytest.raises(InstanceError, match="gpu_bytes"):
        kv_token_capacity(LLAMA_3_1_8B, math.inf)
    for bad in ({"tp": 0}, {"max_num_seqs": 0}, {"sms": 0}):
        with pytest.raises(InstanceError, match=f"{next(iter(bad))}: must be >= 1"):
            kv_token_capacity(LLAMA_3_1_8B, 80 * GIB, **bad)


@settings(max_examples=60, deadline=None)
@given(
    gib=st.integers(40, 200),
    more=st.integers(1, 64),
    u=st.floats(0.6, 0.95),
    tokens=st.integers(1, 16_384),
    seqs=st.integers(1, 1024),
    tp=st.sampled_from([1, 2, 4, 8]),
)
def test_more_memory_more_tokens_more_load_fewer(gib, more, u, tokens, seqs, tp):
    def capacity(memory: float, utilization: float, batch: int, rows: int) -> int:
        return kv_budget(
            LLAMA_3_1_8B,
            memory * GIB,
            utilization,
            max_num_batched_tokens=batch,
            max_num_seqs=rows,
            tp=tp,
        ).tokens

    base = capacity(gib, u, tokens, seqs)
    assert capacity(gib + more, u, tokens, seqs) >= base
    assert capacity(gib, min(1.0, u + 0.04), tokens, seqs) >= base
    assert capacity(gib, u, tokens + 512, seqs) <= base
    assert capacity(gib, u, tokens, seqs + 64) <= base


def test_gpu_table():
    assert find_gpu("RTX4090") is find_gpu("NVIDIA GeForce RTX 4090") is get_gpu("rtx-4090")
    assert get_gpu("RTX4090").memory_bytes == 25_250_627_584
    assert "meta.json" in get_gpu("RTX4090").source
    pro = get_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert pro.memory_bytes == 96 * GIB and pro.sms == 188 and "datasheet" in pro.source
    assert find_gpu("TPU v5e") is None
    with pytest.raises(UnknownNameError, match="RTX4090"):
        get_gpu("TPU v5e")


def deployment(**changes) -> GpuDeployment:
    return GpuDeployment(
        **{
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "RTX4090",
            "gpu_memory_bytes": 25_250_627_584,
            "memory_source": "test",
            "sms": 128,
            **changes,
        }
    )


def test_gpu_deployment_kv_tokens_and_json():
    d = deployment()
    tokens, note = d.kv_tokens(2048, 256)
    blocks = d.budget(2048, 256).blocks(16)
    assert tokens == (blocks - 1) * 16
    assert f"{blocks:,} blocks of 16" in note and "RTX4090" in note
    assert d.kv_tokens(2048, 256, 32)[0] == (d.budget(2048, 256).blocks(32) - 1) * 32
    assert GpuDeployment.from_dict(d.to_dict(), "here") == d
    assert GpuDeployment.from_dict({**d.to_dict(), "sms": None}, "here").sms is None


def test_the_capacity_is_a_band_from_the_evidence_on_memory_outside_pytorch():
    d = deployment()
    low, high = d.kv_band(2048, 256)
    assert high == d.kv_tokens(2048, 256)[0]
    with_n = d.budget(2048, 256, NON_TORCH_MEASURED_BYTES).blocks(16)
    assert low == (with_n - 1) * 16 < high
    note = d.kv_tokens(2048, 256)[1]
    assert "at most" in note and f"{low:,} tokens with the 594 MiB measured" in note
    # a GPU too small for the measured N: the low end is one block
    tiny = GpuDeployment(LLAMA_3_1_8B.name, "tiny", int(17.9 * GIB), "given")
    assert tiny.kv_band(2048, 256)[0] == 16


def test_the_measured_memory_outside_pytorch_is_the_runs(data_dir):
    """NON_TORCH_MEASURED_BYTES: the RTX 4090 run's recorded blocks against the formula at
    its recorded memory, derived again here (docs/kv-capacity.md)."""
    import json

    meta = json.loads(
        (data_dir / "validation" / "vllm-0.19.0_RTX4090_Llama-3.1-8B" / "meta.json").read_text()
    )
    budget = kv_budget(
        LLAMA_3_1_8B,
        meta["hardware"]["device_total_memory_bytes"],
        0.9,
        max_num_batched_tokens=2048,
        max_num_seqs=256,
        sms=get_gpu("RTX4090").sms,
    )
    recorded = meta["kv_cache"]["num_gpu_blocks"]
    block = 16 * kv_bytes_per_token(LLAMA_3_1_8B)
    assert (budget.blocks(16) - recorded) * block == NON_TORCH_MEASURED_BYTES


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpu_memory_bytes": 0}, r"here: gpu_memory_bytes: expected an integer from 1 to"),
        ({"tp": 1.5}, r"here: tp: expected an integer from 1 to 1,024, got 1\.5"),
        ({"sms": True}, r"here: sms: expected an integer from 1 to 65,536, got True"),
        # beyond the float range: an OverflowError in the KV sizing before (issue 54)
        ({"gpu_memory_bytes": 10**400}, r"here: gpu_memory_bytes: expected an integer from 1"),
        ({"block_size": 10**30}, r"here: block_size: expected an integer from 1 to 65,536"),
        ({"gpu_memory_utilization": 1.2}, r"gpu_memory_utilization: expected a number"),
        ({"model": 7}, r"here: model: expected a string"),
        ({"gpus": 2}, r"here: unknown key 'gpus'"),
    ],
)
def test_gpu_deployment_json_errors(change, message):
    with pytest.raises(FormatError, match=message):
        GpuDeployment.from_dict({**deployment().to_dict(), **change}, "here")
    data = deployment().to_dict()
    del data["memory_source"]
    with pytest.raises(FormatError, match="missing 'memory_source'"):
        GpuDeployment.from_dict(data, "here")
    with pytest.raises(FormatError, match="expected an object"):
        GpuDeployment.from_dict([1], "here")
