"""The mixture-of-experts block: expected active experts, the monotone table, the real one."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab.calibration.experts import ExpertTable, expected_experts
from schedlab.calibration.profiles import MoERows, read_llmservingsim_profile
from schedlab.errors import FormatError

QWEN_MOE = ("profiles", "llmservingsim", "RTXPRO6000", "Qwen", "Qwen3-30B-A3B-Instruct-2507")


def test_expected_experts_by_hand():
    # One token activates exactly k experts; two tokens E (1 - (1 - k/E)^2).
    assert expected_experts(1, 128, 8) == pytest.approx(8)
    assert expected_experts(2, 128, 8) == pytest.approx(128 * (1 - (120 / 128) ** 2))
    assert expected_experts(0, 128, 8) == 0.0
    # Never more than min(E, k T); close to E for a large batch.
    for tokens in (1, 3, 16, 100, 2048):
        assert expected_experts(tokens, 128, 8) <= min(128, 8 * tokens) + 1e-9
    assert expected_experts(2048, 128, 8) == pytest.approx(128)


def test_expected_experts_matches_uniform_routing():
    # Route T tokens, each to k distinct experts of E uniformly at random, and count the
    # distinct experts hit; the mean over 4,000 seeded batches is within 1% of the formula.
    rng = np.random.default_rng(7)
    experts, k, batches = 128, 8, 4000
    for tokens in (2, 10, 40):
        # k distinct experts per token: the first k of a random permutation of E.
        picks = np.argsort(rng.random((batches, tokens, experts)), axis=2)[:, :, :k]
        hit = np.zeros((batches, experts), dtype=bool)
        np.put_along_axis(hit, picks.reshape(batches, -1), True, axis=1)
        measured = hit.sum(axis=1).mean()
        assert measured == pytest.approx(expected_experts(tokens, experts, k), rel=0.01)


def table_rows():
    # Rows of 1, 2, 4 tokens on 8..min(16, 8 T) experts; the 2-token row is noisy (its
    # 16-expert time is below its 8-expert one) and the 4-token row below the 2-token one.
    data = [
        (1, 8, 10.0),
        (2, 8, 14.0),
        (2, 16, 12.0),
        (4, 8, 13.0),
        (4, 16, 20.0),
    ]
    tokens, activated, time_us = (np.array(c, dtype=float) for c in zip(*data, strict=True))
    return MoERows(tokens, activated, time_us)


def test_fit_makes_the_grid_monotone():
    table = ExpertTable.fit(table_rows(), experts=16, top_k=8)
    # Isotonic along A: the 2-token row (14, 12) becomes (13, 13); a running maximum along
    # T: the 4-token row is at least the 2-token one, 13 at 8 experts.
    assert table.rows[1] == ((8.0, 16.0), (13.0, 13.0))
    assert table.rows[2] == ((8.0, 16.0), (13.0, 20.0))
    # Interpolation: 3 tokens on 12 experts, halfway in both: rows at 12 give 13 and 16.5.
    assert table.time_us(3, 12) == pytest.approx((13 + 16.5) / 2)
    # Beyond the last row the per-token slope of the last two rows (at 16: (20 - 13) / 2).
    assert table.time_us(8, 16) == pytest.approx(20 + 3.5 * 4)
    with pytest.raises(ValueError, match="must increase"):
        ExpertTable(16, 8, (1.0, 2.0), (((8.0,), (10.0,)), ((8.0, 16.0), (14.0, 12.0))))


def test_expert_parallel_share():
    # With ep GPUs a GPU times T / ep tokens on its share of the expected experts.
    table = ExpertTable.fit(table_rows(), experts=16, top_k=8)
    tokens = 4
    local = expected_experts(tokens, 16, 8) / 2
    assert table(tokens, ep=2) == pytest.approx(table.time_us(2, local))
    assert table(0) == 0.0


def test_round_trip_and_errors():
    table = ExpertTable.fit(table_rows(), experts=16, top_k=8)
    assert ExpertTable.from_dict(table.to_dict(), "x") == table
    with pytest.raises(FormatError, match=r"model\.json: experts"):
        ExpertTable.from_dict({"experts": 16}, "model.json: experts")
    with pytest.raises(FormatError, match="expected an object"):
        ExpertTable.from_dict([], "x")


def test_block_time_non_decreasing_in_tokens(data_dir):
    # proofs/calibrated_monotone.md, Lemma 6, on the real Qwen3-30B-A3B table.
    root = data_dir.joinpath(*QWEN_MOE) / "bf16"
    profile = read_llmservingsim_profile(root)
    table = ExpertTable.fit(profile.moe, experts=128, top_k=8)
    for ep in (1, 2, 4):
        times = np.array([table(t, ep) for t in range(1, 8193)])
        assert np.all(np.diff(times) >= -1e-9), ep
