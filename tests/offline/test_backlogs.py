import numpy as np
import pytest

from schedlab.errors import InstanceError
from schedlab.llm.models import GIB, LLAMA_3_1_8B, kv_bytes_per_token
from schedlab.offline.backlogs import (
    DEFAULT_KV_TOKENS,
    jaillet_instance,
    mixed_backlog,
    sample_backlog,
)


def test_default_memory_is_its_stated_figure():
    # floor((0.9 * 24 GiB - 16.06 GB - 1 GiB) / 128 KiB), the round illustrative budget.
    assert kv_bytes_per_token(LLAMA_3_1_8B) == 131072
    assert int((0.9 * 24 * GIB - 8.03e9 * 2 - GIB) // 131072) == DEFAULT_KV_TOKENS == 46_227


def test_mixed_backlog_is_seeded_and_mixed():
    a = mixed_backlog(400, seed=3, long_fraction=0.25)
    b = mixed_backlog(400, seed=3, long_fraction=0.25)
    c = mixed_backlog(400, seed=4, long_fraction=0.25)
    assert a == b and a != c
    assert a.meta["n_long"] == 100 and a.kv_tokens == DEFAULT_KV_TOKENS
    assert (a.prompt + a.output <= a.kv_tokens).all() and (a.arrival == 0).all()


def test_redraw_keeps_requests_within_memory():
    inst = sample_backlog(300, kv_tokens=2000, source="sharegpt", seed=1)
    assert (inst.prompt + inst.output <= 2000).all()
    assert inst.meta["redrawn"] > 0  # ShareGPT has many requests above 2,000 tokens
    with pytest.raises(InstanceError, match="too small"):
        sample_backlog(10, kv_tokens=2, source="arxiv", seed=0)


def test_jaillet_protocol_ranges():
    for seed in range(30):
        inst = jaillet_instance(seed)
        assert 30 <= inst.kv_tokens <= 50 and 40 <= inst.n <= 60
        assert ((inst.prompt >= 1) & (inst.prompt <= 5)).all()
        assert ((inst.output >= 1) & (inst.output <= inst.kv_tokens - inst.prompt)).all()
        assert (inst.arrival == 0).all()
    assert jaillet_instance(5, n=7).n == 7
    assert jaillet_instance(5) == jaillet_instance(5)


def test_jaillet_shared_prompt_protocol():
    for seed in range(30):
        shared = jaillet_instance(seed, shared_prompt=True)
        own = jaillet_instance(seed)
        # the same M and n for a seed; one prompt s in 1..5 for all; o_i in 1..M - s
        assert (shared.kv_tokens, shared.n) == (own.kv_tokens, own.n)
        assert len(set(shared.prompt.tolist())) == 1 and 1 <= shared.prompt[0] <= 5
        assert ((shared.output >= 1) & (shared.output <= shared.kv_tokens - shared.prompt)).all()
        assert (shared.arrival == 0).all() and shared.meta["shared_prompt"] is True
    outputs = np.concatenate([jaillet_instance(s, shared_prompt=True).output for s in range(30)])
    assert outputs.min() == 1 and len(set(outputs.tolist())) > 30  # the whole range is drawn


def test_bad_parameters():
    with pytest.raises(InstanceError, match="long_fraction"):
        mixed_backlog(10, long_fraction=2)
    with pytest.raises(InstanceError, match="n: must be >= 1"):
        mixed_backlog(0)
    rng_draw = sample_backlog(50, source="azure-code", seed=2)
    assert np.median(rng_draw.output) < np.median(rng_draw.prompt)
