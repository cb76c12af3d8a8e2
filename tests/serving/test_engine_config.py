"""Paged-KV arithmetic of EngineConfig, by hand."""

from __future__ import annotations

import pytest

from schedlab.serving.engine_config import EngineConfig

CONFIG = EngineConfig(kv_capacity_tokens=1000, block_size=16)


def test_blocks():
    assert CONFIG.total_blocks == 62  # floor(1000 / 16)
    assert [CONFIG.blocks(t) for t in (0, 1, 16, 17, 32)] == [0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("done", "target", "chunk", "blocks"),
    [
        (0, 100, 16, 1),  # 16 tokens: one block
        (0, 16, 16, 2),  # completes: 16 + the first output token = 17 tokens
        (10, 100, 6, 0),  # fills the partly used block
        (10, 100, 7, 1),
    ],
)
def test_chunk_blocks(done, target, chunk, blocks):
    assert CONFIG.chunk_blocks(done, target, chunk) == blocks


@pytest.mark.parametrize(
    ("done", "target", "free", "fit"),
    [
        (0, 100, 0, 0),
        (0, 100, 2, 32),
        (0, 32, 2, 31),  # 32 would complete and need a 33rd slot
        (0, 31, 2, 31),
        (10, 100, 0, 6),  # the rest of the partly used block
        (10, 20, 1, 10),
    ],
)
def test_max_chunk(done, target, free, fit):
    assert CONFIG.max_chunk(done, target, free) == fit
    if fit:
        assert CONFIG.chunk_blocks(done, target, fit) <= free
    if fit < target - done:
        assert CONFIG.chunk_blocks(done, target, fit + 1) > free
