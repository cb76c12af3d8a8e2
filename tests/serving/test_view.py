"""The view's block arithmetic and admission gate (``schedlab/serving/view.py``), by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.view import admissible, chunk_blocks, max_chunk

CONFIG = EngineConfig(kv_tokens=1000, block_size=16)


@dataclass
class Req:
    target: int
    done: int = 0
    admitted: bool = True
    index: int = 0
    prompt: int = 0
    held_hits: int = 0


@pytest.mark.parametrize(
    ("done", "target", "chunk", "blocks"),
    [
        (0, 100, 16, 1),  # 16 tokens: one block
        (0, 16, 16, 1),  # completing takes no slot for the token it samples (vLLM)
        (10, 100, 6, 0),  # fills the partly used block
        (10, 100, 7, 1),
    ],
)
def test_chunk_blocks_of_an_admitted_request(done, target, chunk, blocks):
    assert chunk_blocks(CONFIG, Req(target, done), chunk) == blocks


def test_a_waiting_request_takes_back_its_cached_blocks():
    # 32 tokens cached (2 blocks in the free pool) + a chunk of 10: 3 blocks from free.
    assert chunk_blocks(CONFIG, Req(100, 32, admitted=False), 10) == 3
    # one of the two cached blocks is held by a running request: shared, not taken
    shared = Req(100, 32, admitted=False, held_hits=1)
    assert chunk_blocks(CONFIG, shared, 10) == 2
    assert max_chunk(CONFIG, shared, 2) == 3 * 16 - 32


@pytest.mark.parametrize(
    ("done", "target", "free", "fit"),
    [
        (0, 100, 0, 0),
        (0, 100, 2, 32),
        (0, 32, 2, 32),
        (0, 31, 2, 31),
        (10, 100, 0, 6),  # the rest of the partly used block
        (10, 20, 1, 10),
    ],
)
def test_max_chunk(done, target, free, fit):
    req = Req(target, done)
    assert max_chunk(CONFIG, req, free) == fit
    if fit:
        assert chunk_blocks(CONFIG, req, fit) <= free
    if fit < target - done:
        assert chunk_blocks(CONFIG, req, fit + 1) > free


def test_the_gate_wants_the_whole_sequence_of_a_waiting_request():
    waiting = Req(100, admitted=False)  # 7 blocks
    assert not admissible(CONFIG, waiting, 6) and admissible(CONFIG, waiting, 7)
    assert admissible(CONFIG, Req(100), 0)  # admitted requests pass
    off = EngineConfig(kv_tokens=1000, reserve_full_prompt=False)
    assert admissible(off, waiting, 0)
    # cached blocks running requests hold are not taken from the free ones
    sharing = Req(100, 64, admitted=False, held_hits=3)
    assert not admissible(CONFIG, sharing, 3) and admissible(CONFIG, sharing, 4)
