r"""The paged KV cache of one engine: blocks, the free pool, the prefix cache, eviction.

The rules are vLLM v1's (release 0.19.0; paths below are in its source tree):

* **Blocks.** A request whose KV holds ``t`` tokens occupies :math:`\lceil t/b\rceil`
  blocks of ``b`` tokens (``block_size``, 16 by default). Allocating for ``n`` more tokens
  takes :math:`\lceil (t+n)/b\rceil - \lceil t/b\rceil` blocks and no more
  (``vllm/v1/core/single_type_kv_cache_manager.py``, ``get_num_blocks_to_allocate``,
  lines 105–114): no look-ahead slot, no watermark.
* **The free pool is an LRU queue** (``vllm/v1/core/kv_cache_utils.py``,
  ``FreeKVCacheBlockQueue``, lines 158–178): allocation takes blocks from its front
  (``block_pool.py``, ``get_new_blocks``, lines 320–350) and a freed block goes to its
  back (``free_blocks``, lines 409–423). A request frees its blocks *last block first*
  (``single_type_kv_cache_manager.py``, ``free``, lines 276–291), so its head blocks are
  evicted last. Initially every block is free and holds nothing.
* **Prefix cache.** A *full* block keeps its content (its hash) when freed, until it is
  popped for another allocation (``block_pool.py``, ``_maybe_evict_cached_block``,
  lines 352–390). Such blocks still count as free (``get_num_free_blocks``, lines
  479–485). A request that is admitted again after a preemption looks up its own blocks:
  the longest prefix of its full blocks still cached is reused without recomputation,
  capped at :math:`\lfloor (T-1)/b \rfloor` blocks for a sequence of ``T`` tokens because the
  last token is always recomputed (``kv_cache_manager.py``, ``get_computed_blocks``,
  lines 176–216). Reusing them takes them out of the free pool (``touch``, lines
  392–407), so they cost free blocks like new ones (``single_type_kv_cache_manager.py``,
  lines 134–140): prefix hits save compute, not capacity.
* **Admission gate** (``scheduler_reserve_full_isl``, on by default in 0.19.0,
  ``vllm/config/scheduler.py`` line 139; checked in ``vllm/v1/core/sched/scheduler.py``
  lines 732–744 through ``kv_cache_manager.py``, ``can_fit_full_sequence``, lines
  218–255): a waiting request is admitted only if its whole current sequence (prompt,
  plus the tokens it generated before a preemption) fits in the free blocks, prefix hits
  included. It is a check, not a reservation: only the scheduled chunk is allocated.

Request traces carry no token ids, so a block's content is named, not hashed: block
:math:`j` of a request's prompt that shares a prefix with other requests
(:mod:`schedlab.serving.prefix`) is keyed ``(h, j)``, its shared name :math:`h`; every
other block of request ``r`` is its own, keyed ``(~r, j)`` (negative, so never a shared
name). Without shared prefixes only a preempted request can hit, and only on its own
blocks, so the blocks of a finished request are freed without keys (nobody could hit
them); with them, a finished request's full prompt blocks stay cached. Not modelled: a
hit on blocks another running request holds (vLLM shares those by reference count,
``block_pool.py``, ``touch``); here only free cached blocks are found, so a request that
arrives while another with its prefix is still running computes the prefix again.

vLLM's block 0, which it keeps as a "null block" and never hands out (``block_pool.py``
lines 175–176), is the caller's to subtract from the capacity
(:mod:`schedlab.calibration.deployment` does).

Every operation is ``O(1)`` per block it moves; the pool keeps runs of content-free
blocks as one entry.
"""

from __future__ import annotations

from collections import OrderedDict

from schedlab.errors import ServingError

__all__ = ["KVCache"]

#: The content of a free block: a cached block's key, or ``int`` for a run of empty ones.
_Entry = tuple[int, int] | int


def _key(request: int, position: int, shared: list[int] | None) -> tuple[int, int]:
    """The cache key of block ``position`` of ``request`` (module docstring)."""
    if shared is not None and position < len(shared):
        return (shared[position], position)
    return (~request, position)


class KVCache:
    """Blocks of a paged KV cache: held, free, and cached (module docstring).

    Parameters
    ----------
    total_blocks
        Blocks the cache hands out.
    block_size
        Tokens per block.
    prefix_caching
        Whether freed full blocks keep their content for a later hit (vLLM's
        ``enable_prefix_caching``, on by default in v1).
    """

    def __init__(self, total_blocks: int, block_size: int, *, prefix_caching: bool = True) -> None:
        if total_blocks < 1 or block_size < 1:
            raise ServingError(
                f"KV cache: need at least one block of at least one token, got {total_blocks} "
                f"blocks of {block_size}"
            )
        self.total_blocks = total_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._free = total_blocks
        # the free queue, oldest first: entry id -> a cached block's key, or a count of
        # empty blocks; and where each cached block sits in it
        self._queue: OrderedDict[int, _Entry] = OrderedDict()
        self._where: dict[tuple[int, int], int] = {}
        self._next_entry = 1
        self._queue[0] = total_blocks
        self.evicted = 0  # cached blocks whose content was lost to an allocation

    # -- counts ----------------------------------------------------------------------------
    @property
    def free_blocks(self) -> int:
        """Blocks free for allocation, cached ones included."""
        return self._free

    @property
    def used_blocks(self) -> int:
        """Blocks held by requests."""
        return self.total_blocks - self._free

    @property
    def cached_blocks(self) -> int:
        """Free blocks that still hold a request's content."""
        return len(self._where)

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` KV tokens: :math:`\\lceil t / b \\rceil`."""
        return -(-tokens // self.block_size)

    # -- allocation and freeing ------------------------------------------------------------
    def allocate(self, count: int) -> None:
        """Take ``count`` blocks from the front of the free queue, evicting what they cached.

        Raises
        ------
        ServingError
            If fewer than ``count`` blocks are free (callers check first).
        """
        if count > self._free:
            raise ServingError(f"KV cache: {count} blocks asked for, {self._free} free")
        self._free -= count
        queue = self._queue
        while count:
            entry, content = next(iter(queue.items()))
            if isinstance(content, int):
                if content > count:
                    queue[entry] = content - count
                    return
                count -= content
            else:
                del self._where[content]
                self.evicted += 1
                count -= 1
            del queue[entry]

    def free(
        self,
        request: int,
        tokens: int,
        *,
        keep: bool,
        computed: int | None = None,
        shared: list[int] | None = None,
    ) -> None:
        """Return the blocks of ``request``, which holds ``tokens`` KV tokens, last block
        first; with ``keep`` (and prefix caching on) its full blocks of computed content
        (the first ``computed`` tokens, default all) stay cached under their keys
        (module docstring; ``shared``: the shared names of its first blocks)."""
        held = self.blocks(tokens)
        if held > self.used_blocks:
            raise ServingError(f"KV cache: request {request} frees {held} blocks, more than used")
        self._free += held
        valid = tokens if computed is None else min(computed, tokens)
        full = valid // self.block_size if keep and self.prefix_caching else 0
        if held > full:  # the partial last block, or every block without content
            self._push(held - full)
        own = ~request
        for position in range(full - 1, -1, -1):
            key = (own, position) if shared is None else _key(request, position, shared)
            older = self._where.get(key)
            if older is not None:  # the same content cached twice: keep the newer copy
                self._queue[older] = 1
            self._where[key] = self._next_entry
            self._queue[self._next_entry] = key
            self._next_entry += 1

    def _push(self, count: int) -> None:
        last = next(reversed(self._queue), None)
        tail = None if last is None else self._queue[last]
        if last is not None and isinstance(tail, int):
            self._queue[last] = tail + count  # merge with a trailing run
        else:
            self._queue[self._next_entry] = count
            self._next_entry += 1

    # -- the prefix cache ------------------------------------------------------------------
    def cached_prefix(self, request: int, tokens: int, shared: list[int] | None = None) -> int:
        """Blocks of ``request`` a (re)admission with ``tokens`` tokens reuses: the longest
        run of its blocks ``0, 1, ...`` still cached (``shared``: the shared names of its
        first blocks), at most :math:`\\lfloor (T-1)/b \\rfloor`."""
        if not self._where:
            return 0
        cap = (tokens - 1) // self.block_size
        where = self._where
        count = 0
        if shared is None:  # the common case, without a call per block
            own = ~request
            while count < cap and (own, count) in where:
                count += 1
            return count
        while count < cap and _key(request, count, shared) in where:
            count += 1
        return count

    def reuse(self, request: int, count: int, shared: list[int] | None = None) -> None:
        """Take the first ``count`` cached blocks of ``request`` out of the free queue: the
        request holds them again. (Blocks of it cached beyond a gap stay cached: a block's
        content depends only on the tokens up to it, which a request never changes.)"""
        own = ~request
        for position in range(count):
            key = (own, position) if shared is None else _key(request, position, shared)
            del self._queue[self._where.pop(key)]
        self._free -= count

    def check(self) -> None:
        """Assert the pool's invariants (for tests): free blocks are exactly the queue's."""
        counted = sum(c if isinstance(c, int) else 1 for c in self._queue.values())
        assert counted == self._free, (counted, self._free)
        assert all(isinstance(self._queue[e], tuple) for e in self._where.values())
        assert 0 <= self._free <= self.total_blocks
