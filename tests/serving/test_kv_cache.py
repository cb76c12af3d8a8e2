"""The KV block manager: allocation, LRU eviction, prefix-cache hits, conservation.

Hand-worked cases follow vLLM v1's rules as ``schedlab/serving/kv_cache.py`` cites them;
the hypothesis test checks conservation and the cache's invariants against an
independent model of the free queue (a plain list of blocks).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import ServingError
from schedlab.serving.kv_cache import KVCache


def test_blocks_and_counts():
    kv = KVCache(10, 16)
    assert [kv.blocks(t) for t in (0, 1, 16, 17, 32)] == [0, 1, 1, 2, 2]
    kv.allocate(3)
    assert (kv.free_blocks, kv.used_blocks, kv.cached_blocks) == (7, 3, 0)
    with pytest.raises(ServingError, match="8 blocks asked for, 7 free"):
        kv.allocate(8)
    kv.check()


def test_a_preempted_request_keeps_its_full_blocks_cached():
    # Request 0 holds 40 tokens: blocks 0 and 1 are full, block 2 holds 8 tokens.
    kv = KVCache(4, 16)
    kv.allocate(3)
    kv.free(0, 40, keep=True)
    assert kv.free_blocks == 4 and kv.cached_blocks == 2
    # Re-admitted with its 40 tokens (+ 1 generated = 41): both full blocks hit, capped
    # at floor((41 - 1) / 16) = 2.
    assert kv.cached_prefix(0, 41) == 2
    # With exactly 32 tokens the last token is recomputed: only one block can hit.
    assert kv.cached_prefix(0, 32) == 1
    kv.reuse(0, 2)
    assert kv.free_blocks == 2 and kv.cached_blocks == 0 and kv.used_blocks == 2
    kv.check()


def test_a_finished_request_caches_nothing_and_without_prefix_caching_nothing_stays():
    kv = KVCache(4, 16)
    kv.allocate(2)
    kv.free(5, 32, keep=False)
    assert kv.cached_blocks == 0
    off = KVCache(4, 16, prefix_caching=False)
    off.allocate(2)
    off.free(5, 32, keep=True)
    assert off.cached_blocks == 0 and off.cached_prefix(5, 33) == 0


def test_eviction_takes_the_oldest_free_block_and_a_request_loses_its_tail_first():
    # 4 blocks: request 1 takes 2 (32 tokens), request 2 takes 2 (32 tokens). Request 1 is
    # preempted (its blocks go to the queue's back, last block first: [1.1, 1.0]), then
    # request 2 too ([1.1, 1.0, 2.1, 2.0]). Allocating one block evicts request 1's
    # *last* block; request 1 then reuses only its first, and request 2 both of its own.
    kv = KVCache(4, 16)
    kv.allocate(4)
    kv.free(1, 32, keep=True)
    kv.free(2, 32, keep=True)
    kv.allocate(1)
    assert kv.evicted == 1
    assert kv.cached_prefix(1, 33) == 1
    assert kv.cached_prefix(2, 33) == 2
    kv.allocate(2)  # evicts request 1's first block and request 2's last
    assert kv.cached_prefix(1, 33) == 0 and kv.cached_prefix(2, 33) == 1
    assert kv.evicted == 3
    kv.check()


def test_never_used_blocks_are_taken_before_cached_ones():
    # Fresh blocks come first in the queue (vLLM's initial free queue is every block).
    kv = KVCache(6, 16)
    kv.allocate(2)
    kv.free(3, 32, keep=True)  # queue: 4 fresh, then 3.1, 3.0
    kv.allocate(4)
    assert kv.cached_prefix(3, 33) == 2 and kv.evicted == 0
    kv.allocate(1)
    assert kv.cached_prefix(3, 33) == 1 and kv.evicted == 1


def test_a_partial_last_block_and_uncomputed_tokens_are_not_cached():
    kv = KVCache(8, 16)
    kv.allocate(4)
    # 60 tokens held, of which 20 computed: only block 0 has content.
    kv.free(7, 60, keep=True, computed=20)
    assert kv.cached_blocks == 1 and kv.free_blocks == 8
    kv.check()


def test_freeing_more_than_is_used_is_an_error():
    kv = KVCache(4, 16)
    kv.allocate(1)
    with pytest.raises(ServingError, match="frees 2 blocks"):
        kv.free(0, 17, keep=False)


class _Model:
    """An independent free queue: a list of blocks, each ``None`` or a request's key."""

    def __init__(self, total: int) -> None:
        self.queue: list[tuple[int, int] | None] = [None] * total
        self.held: dict[int, int] = {}  # request -> blocks held

    def allocate(self, request: int, count: int) -> None:
        del self.queue[:count]
        self.held[request] = self.held.get(request, 0) + count

    def free(self, request: int, tokens_full: int, blocks: int, keep: bool) -> None:
        self.held[request] -= blocks
        full = tokens_full if keep else 0
        tail = [None] * (blocks - full) + [(request, p) for p in range(full - 1, -1, -1)]
        # the same content cached twice: the older copy is kept as an empty block
        self.queue = [None if entry in tail else entry for entry in self.queue]
        self.queue.extend(tail)

    def prefix(self, request: int, cap: int) -> int:
        count = 0
        while count < cap and (request, count) in self.queue:
            count += 1
        return count

    def reuse(self, request: int, count: int) -> None:
        for position in range(count):
            self.queue.remove((request, position))
        self.held[request] = self.held.get(request, 0) + count


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_agrees_with_a_list_model_and_conserves_blocks(data):
    size = 4
    total = data.draw(st.integers(4, 24))
    kv, model = KVCache(total, size), _Model(total)
    tokens: dict[int, int] = {}  # request -> KV tokens held
    for _ in range(data.draw(st.integers(1, 40))):
        action = data.draw(st.sampled_from(["grow", "free", "resume"]))
        request = data.draw(st.integers(0, 4))
        held = tokens.get(request, 0)
        if action == "grow":
            more = data.draw(st.integers(1, 12))
            need = kv.blocks(held + more) - kv.blocks(held)
            if need > kv.free_blocks:
                continue
            kv.allocate(need)
            model.allocate(request, need)
            tokens[request] = held + more
        elif action == "free" and held:
            keep = data.draw(st.booleans())
            kv.free(request, held, keep=keep)
            model.free(request, held // size, kv.blocks(held), keep)
            tokens[request] = 0
        elif action == "resume" and not held:
            total_tokens = data.draw(st.integers(1, 30))
            cap = (total_tokens - 1) // size
            hits = kv.cached_prefix(request, total_tokens)
            assert hits == model.prefix(request, cap)
            kv.reuse(request, hits)
            model.reuse(request, hits)
            tokens[request] = hits * size
        kv.check()
        assert kv.used_blocks == sum(kv.blocks(t) for t in tokens.values())
        assert kv.free_blocks == len(model.queue)
        assert kv.cached_blocks == sum(entry is not None for entry in model.queue)
