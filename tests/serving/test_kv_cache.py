"""The KV block manager: allocation, LRU eviction, shared and cached blocks, conservation.

Hand-worked cases follow vLLM v1's rules as ``schedlab/serving/kv_cache.py`` cites them;
the hypothesis test checks the cache against an independent model that keeps every block
as vLLM's ``BlockPool`` does (a list of block objects with reference counts and hashes).
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
    kv.free(0, 40, computed=40, resumable=True)
    assert kv.free_blocks == 4 and kv.cached_blocks == 2
    # Re-admitted with its 40 tokens (+ 1 generated = 41): both full blocks hit, capped
    # at floor((41 - 1) / 16) = 2, none held by another request.
    assert kv.lookup(0, 41) == (2, 0)
    # With exactly 32 tokens the last token is recomputed: only one block can hit.
    assert kv.lookup(0, 32) == (1, 0)
    kv.reuse(0, 2)
    assert kv.free_blocks == 2 and kv.cached_blocks == 0 and kv.used_blocks == 2
    kv.check()


def test_a_finished_request_leaves_dead_blocks_that_count_when_evicted():
    # vLLM caches every full block, so a finished request's own blocks are evicted
    # (counted) when reused, though nobody can hit them.
    kv = KVCache(4, 16)
    kv.allocate(3)
    kv.free(5, 40, computed=40)
    assert kv.cached_blocks == 2 and kv.lookup(5, 41) == (0, 0)
    kv.allocate(4)
    assert kv.evicted == 2
    off = KVCache(4, 16, prefix_caching=False)
    off.allocate(2)
    off.free(5, 32, computed=32, resumable=True)
    assert off.cached_blocks == 0 and off.lookup(5, 33) == (0, 0)
    kv.check()


def test_eviction_takes_the_oldest_free_block_and_a_request_loses_its_tail_first():
    # 4 blocks: request 1 takes 2 (32 tokens), request 2 takes 2 (32 tokens). Request 1 is
    # preempted (its blocks go to the queue's back, last block first: [1.1, 1.0]), then
    # request 2 too ([1.1, 1.0, 2.1, 2.0]). Allocating one block evicts request 1's
    # *last* block; request 1 then reuses only its first, and request 2 both of its own.
    kv = KVCache(4, 16)
    kv.allocate(4)
    kv.free(1, 32, computed=32, resumable=True)
    kv.free(2, 32, computed=32, resumable=True)
    kv.allocate(1)
    assert kv.evicted == 1
    assert kv.lookup(1, 33) == (1, 0)
    assert kv.lookup(2, 33) == (2, 0)
    kv.allocate(2)  # evicts request 1's first block and request 2's last
    assert kv.lookup(1, 33) == (0, 0) and kv.lookup(2, 33) == (1, 0)
    assert kv.evicted == 3
    kv.check()


def test_never_used_blocks_are_taken_before_cached_ones():
    # Fresh blocks come first in the queue (vLLM's initial free queue is every block).
    kv = KVCache(6, 16)
    kv.allocate(2)
    kv.free(3, 32, computed=32, resumable=True)  # queue: 4 fresh, then 3.1, 3.0
    kv.allocate(4)
    assert kv.lookup(3, 33) == (2, 0) and kv.evicted == 0
    kv.allocate(1)
    assert kv.lookup(3, 33) == (1, 0) and kv.evicted == 1


def test_a_partial_last_block_and_uncomputed_tokens_are_not_cached():
    kv = KVCache(8, 16)
    kv.allocate(4)
    # 60 tokens held, of which 20 computed: only block 0 has content.
    kv.free(7, 60, computed=20, resumable=True)
    assert kv.cached_blocks == 1 and kv.free_blocks == 8
    kv.check()


def test_a_running_requests_shared_blocks_are_shared_and_freed_by_the_last_holder():
    # Request 0 allocates 3 blocks for 40 prompt tokens; its 2 full blocks are named
    # (shared names 7, 8) at allocation. Request 1 with the same prefix finds both while
    # request 0 runs: held by another, they cost no free block.
    kv = KVCache(6, 16)
    shared = [7, 8]
    kv.allocate(3)
    kv.name(0, 40, shared)
    assert kv.lookup(1, 41, shared) == (2, 2)
    kv.reuse(1, 2, shared)
    kv.allocate(1)  # its own third block
    assert kv.used_blocks == 4
    kv.free(0, 40, computed=40, shared=shared)  # the shared blocks stay held by 1
    assert kv.used_blocks == 3 and kv.free_blocks == 3
    kv.free(1, 40, computed=40, shared=shared)
    assert kv.free_blocks == 6 and kv.lookup(2, 41, shared) == (2, 0)
    kv.check()


def test_freeing_more_than_is_used_is_an_error():
    kv = KVCache(4, 16)
    kv.allocate(1)
    with pytest.raises(ServingError, match="frees 2 blocks"):
        kv.free(0, 17)


class _Block(dict):
    """A block: its ``key`` (``None``: no content) and ``refs``; equal only to itself."""

    __eq__ = object.__eq__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]


class _Pool:
    """vLLM's block pool as plainly as possible: block objects in a free list."""

    def __init__(self, total: int, size: int) -> None:
        self.size = size
        self.free: list[_Block] = [_Block(key=None, refs=0) for _ in range(total)]
        self.cached: dict[tuple, list[_Block]] = {}
        self.held: dict[int, list[_Block]] = {}
        self.evicted = 0

    def key(self, request, position, shared):
        if shared is not None and position < len(shared):
            return (shared[position], position)
        return (~request, position)

    def allocate(self, request, count):
        taken, self.free = self.free[:count], self.free[count:]
        for block in taken:
            if block["key"] is not None:
                self.cached[block["key"]].remove(block)
                self.evicted += 1
                block["key"] = None
            block["refs"] = 1
        self.held.setdefault(request, []).extend(taken)

    def name(self, request, tokens, shared):
        blocks = self.held[request]
        for position in range(min(tokens // self.size, len(shared or ()))):
            block = blocks[position]
            if block["key"] is None:
                block["key"] = self.key(request, position, shared)
                self.cached.setdefault(block["key"], []).append(block)

    def lookup(self, request, tokens, shared):
        count = held = 0
        while count < (tokens - 1) // self.size:
            same = self.cached.get(self.key(request, count, shared))
            if not same:
                break
            held += same[0]["refs"] > 0
            count += 1
        return count, held

    def reuse(self, request, count, shared):
        for position in range(count):
            block = self.cached[self.key(request, position, shared)][0]
            if block["refs"] == 0:
                self.free.remove(block)
            block["refs"] += 1
            self.held.setdefault(request, []).append(block)

    def release(self, request, computed, shared, resumable):
        blocks = self.held.pop(request)
        for position, block in enumerate(blocks):
            if block["key"] is None and position < computed // self.size:
                key = self.key(request, position, shared)
                if key[0] < 0 and not resumable:
                    key = ("dead", id(block))  # nobody can find it
                block["key"] = key
                self.cached.setdefault(key, []).append(block)
        for block in reversed(blocks):
            block["refs"] -= 1
            if block["refs"] == 0:
                self.free.append(block)


CHAINS = ([100, 101, 102, 103, 104, 105], [100, 101, 200, 201, 202, 203])


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_agrees_with_a_block_pool_model_and_conserves_blocks(data):
    size = 4
    total = data.draw(st.integers(4, 30))
    kv, pool = KVCache(total, size), _Pool(total, size)
    tokens: dict[int, int] = {}  # request -> KV tokens held
    shares = {
        r: data.draw(st.sampled_from([None, CHAINS[0][:4], CHAINS[1], CHAINS[0]]))
        for r in range(5)
    }
    for _ in range(data.draw(st.integers(1, 50))):
        request = data.draw(st.integers(0, 4))
        shared = shares[request]
        held = tokens.get(request)
        if held is None:  # admit it: take what is cached, then a chunk
            want = data.draw(st.integers(1, 30))
            hits, shared_hits = kv.lookup(request, want, shared)
            assert (hits, shared_hits) == pool.lookup(request, want, shared)
            chunk = data.draw(st.integers(1, want - hits * size))
            new = kv.blocks(hits * size + chunk) - hits
            if new + hits - shared_hits > kv.free_blocks:
                continue
            kv.reuse(request, hits, shared)
            pool.reuse(request, hits, shared)
            kv.allocate(new)
            pool.allocate(request, new)
            tokens[request] = hits * size + chunk
        elif data.draw(st.booleans()):  # it grows
            more = data.draw(st.integers(1, 12))
            new = kv.blocks(held + more) - kv.blocks(held)
            if new > kv.free_blocks:
                continue
            kv.allocate(new)
            pool.allocate(request, new)
            tokens[request] = held + more
        else:  # it is preempted or finishes
            computed = data.draw(st.integers(0, held))
            resumable = data.draw(st.booleans())
            kv.free(request, held, computed=computed, shared=shared, resumable=resumable)
            pool.release(request, computed, shared, resumable)
            del tokens[request]
            continue
        kv.name(request, tokens[request], shared)
        if shared is not None:
            pool.name(request, tokens[request], shared)
        kv.check()
        assert kv.free_blocks == len(pool.free)
        assert kv.evicted == pool.evicted
        for other in set(range(5)) - set(tokens):  # lookups are of waiting requests
            assert kv.lookup(other, 30, shares[other]) == pool.lookup(other, 30, shares[other])
        assert kv.cached_blocks == sum(b["key"] is not None for b in pool.free)
