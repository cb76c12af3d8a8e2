r"""The paged KV cache of one engine: blocks, the free pool, the prefix cache, eviction.

The rules are vLLM v1's (release 0.19.0; paths below are in its source tree, under
``vllm/v1/core/``):

* **Blocks.** A request whose KV holds ``t`` tokens occupies :math:`\lceil t/b\rceil`
  blocks of ``b`` tokens (``block_size``, 16 by default). Allocating for ``n`` more tokens
  takes :math:`\lceil (t+n)/b\rceil - \lceil t/b\rceil` blocks and no more
  (``single_type_kv_cache_manager.py``, ``get_num_blocks_to_allocate``, lines 105–114):
  no look-ahead slot, no watermark.
* **The free pool is an LRU queue** (``kv_cache_utils.py``, ``FreeKVCacheBlockQueue``):
  allocation takes blocks from its front (``block_pool.py``, ``get_new_blocks``, lines
  320–350) and a block whose last holder lets it go joins its back (``free_blocks``,
  lines 409–423). A request frees its blocks *last block first*
  (``single_type_kv_cache_manager.py``, ``free``, lines 276–291), so its head blocks are
  evicted last. Initially every block is free and holds nothing.
* **Blocks are shared and reference-counted.** A block full of tokens the scheduler knows
  is *cached* (given its content's hash) when it is allocated, before it is computed
  (``kv_cache_manager.py``, ``allocate_slots`` → ``cache_blocks``, lines 416–425;
  ``block_pool.py``, ``cache_full_blocks``, lines 210–271). A request admitted later
  looks up the longest prefix of its blocks that is cached, whether the block is held by
  another request or free (``get_computed_blocks``, lines 176–216), capped at
  :math:`\lfloor (T-1)/b \rfloor` blocks for a sequence of ``T`` tokens because the last
  token is always recomputed. It takes each found block (``block_pool.py``, ``touch``,
  lines 392–407): the block's reference count goes up, and a free one leaves the free
  queue. Freeing lowers the count, and only a block nobody holds joins the queue.
  So a hit on a block another request holds costs no free block, and a hit on a free
  block costs one (``get_num_blocks_to_allocate``, lines 134–140).
* **Duplicates.** Two blocks may hold the same content (a request that computed a block
  before another's copy was cached): both are cached, and a lookup takes the one cached
  first (``block_pool.py``, ``get_cached_block``, lines 183–208).
* **Eviction.** A free cached block keeps its content until the queue's front reaches it
  for an allocation (``_maybe_evict_cached_block``, lines 352–390); free cached blocks
  count as free (``get_num_free_blocks``).
* **Admission gate** (``scheduler_reserve_full_isl``, on by default in 0.19.0,
  ``vllm/config/scheduler.py`` line 139; checked in ``sched/scheduler.py`` lines 732–744
  through ``kv_cache_manager.py``, ``can_fit_full_sequence``, lines 218–255): a waiting
  request is admitted only if the blocks of its whole current sequence, less the hits
  other requests hold, fit in the free blocks. It is a check, not a reservation.

Request traces carry no token ids, so a block's content is named, not hashed: block
:math:`j` of a request's prompt that lies inside a prompt sharing prefixes
(:mod:`schedlab.serving.prefix`) is keyed ``(h, j)``, its shared name :math:`h`; every
other block of request ``r`` is its own, keyed ``(~r, j)`` (negative, so never a shared
name). Only the request itself can hit its own blocks, and only after a preemption, so
they are named when they are freed (:meth:`KVCache.free`), with the same effect as
vLLM's naming at allocation; shared blocks are named at allocation
(:meth:`KVCache.name`), where another request can find them. The own blocks of a
finished request, which nobody can hit, are kept as *dead* cached blocks: they count as
evicted when the queue's front reaches them, as vLLM's do.

vLLM's block 0, which it keeps as a "null block" and never hands out (``block_pool.py``
lines 175–176), is the caller's to subtract from the capacity
(:mod:`schedlab.calibration.deployment` does).

Every operation is ``O(1)`` per block it moves or names; the queue keeps runs of
content-free blocks, and of dead cached blocks, as one entry.
"""

from __future__ import annotations

from collections import OrderedDict

from schedlab.arguments_check import MAX_COUNT, check_int, check_type
from schedlab.errors import ServingError

__all__ = ["KVCache"]

Key = tuple[int, int]


class _Block:
    """A cached block: its content's key, its holders, and its place in the free queue
    (``entry``, 0 while held)."""

    __slots__ = ("entry", "key", "refs")

    def __init__(self, key: Key, refs: int) -> None:
        self.key = key
        self.refs = refs
        self.entry = 0


#: A free queue entry: a cached block, or a run of ``n`` blocks: empty (``n > 0``) or dead
#: cached ones (``-n``).
_Entry = _Block | int


def _key(request: int, position: int, shared: list[int] | None) -> Key:
    """The cache key of block ``position`` of ``request`` (module docstring)."""
    if shared is not None and position < len(shared):
        return (shared[position], position)
    return (~request, position)


class KVCache:
    """Blocks of a paged KV cache: held, free, cached and shared (module docstring).

    Parameters
    ----------
    total_blocks
        Blocks the cache hands out.
    block_size
        Tokens per block.
    prefix_caching
        Whether full blocks are cached for later hits (vLLM's ``enable_prefix_caching``,
        on by default in v1).

    Raises
    ------
    InputTypeError, ServingError
        For counts that are not integers from 1 to ``2**40``, a ``prefix_caching`` that is
        no ``bool``.
    """

    def __init__(self, total_blocks: int, block_size: int, *, prefix_caching: bool = True) -> None:
        check_int(total_blocks, "KV cache: total_blocks", None, MAX_COUNT, error=ServingError)
        check_int(block_size, "KV cache: block_size", None, MAX_COUNT, error=ServingError)
        check_type(prefix_caching, (bool,), "KV cache: prefix_caching")
        if total_blocks < 1 or block_size < 1:
            raise ServingError(
                f"KV cache: need at least one block of at least one token, got {total_blocks} "
                f"blocks of {block_size}"
            )
        self.total_blocks = total_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._free = total_blocks
        # the free queue, oldest first: entry id -> a cached block, or a run
        self._queue: OrderedDict[int, _Entry] = OrderedDict({1: total_blocks})
        self._next_entry = 2
        # every cached block by key (free or held): the block, or for duplicates the
        # blocks in the order they were cached (as vLLM's BlockHashToBlockMap keeps them)
        self._cached: dict[Key, _Block | dict[_Block, None]] = {}
        # the cached blocks each request holds: its blocks 0, 1, ... in order
        self._held: dict[int, list[_Block]] = {}
        self._dead = 0  # dead cached blocks in the queue
        self.evicted = 0  # cached blocks whose content was lost to an allocation

    # -- counts ----------------------------------------------------------------------------
    @property
    def free_blocks(self) -> int:
        """Blocks free for allocation, cached ones included."""
        return self._free

    @property
    def used_blocks(self) -> int:
        """Blocks held by requests (a shared block counts once)."""
        return self.total_blocks - self._free

    @property
    def cached_blocks(self) -> int:
        """Free blocks that still hold content."""
        return sum(isinstance(e, _Block) for e in self._queue.values()) + self._dead

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` KV tokens: :math:`\\lceil t / b \\rceil`."""
        return -(-tokens // self.block_size)

    # -- allocation ------------------------------------------------------------------------
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
                run = abs(content)
                if run > count:
                    queue[entry] = content - count if content > 0 else content + count
                    if content < 0:
                        self._dead -= count
                        self.evicted += count
                    return
                if content < 0:
                    self._dead -= run
                    self.evicted += run
                count -= run
            else:
                if self._cached.get(content.key) is content:  # the common case, inline
                    del self._cached[content.key]
                else:
                    self._uncache(content)
                self.evicted += 1
                count -= 1
            del queue[entry]

    def name(self, request: int, tokens: int, shared: list[int] | None) -> None:
        """Cache the shared blocks of ``request`` that its first ``tokens`` tokens fill
        (allocated, not necessarily computed yet: vLLM caches at allocation)."""
        if shared is None or not self.prefix_caching:
            return
        held = self._held.setdefault(request, [])
        for position in range(len(held), min(tokens // self.block_size, len(shared))):
            block = _Block((shared[position], position), 1)
            self._cache(block)
            held.append(block)

    def unname(self, request: int, blocks: int) -> None:
        """Uncache the blocks of ``request`` from block ``blocks`` on, which only it holds
        (an allocation undone before it ran)."""
        held = self._held.get(request)
        if held is None:
            return
        for block in held[blocks:]:
            if block.refs != 1:
                raise ServingError(f"KV cache: request {request} unnames a shared block")
            self._uncache(block)
        del held[blocks:]

    def _cache(self, block: _Block) -> None:
        cached = self._cached
        found = cached.get(block.key)
        if found is None:
            cached[block.key] = block
        elif isinstance(found, _Block):
            cached[block.key] = {found: None, block: None}
        else:
            found[block] = None

    def _uncache(self, block: _Block) -> None:
        cached = self._cached
        found = cached[block.key]
        if found is block:
            del cached[block.key]
            return
        assert isinstance(found, dict)
        del found[block]
        if len(found) == 1:
            cached[block.key] = next(iter(found))

    def _first(self, key: Key) -> _Block | None:
        """The cached block a lookup of ``key`` takes: the first cached (``None``: none)."""
        found = self._cached.get(key)
        if found is None or isinstance(found, _Block):
            return found
        return next(iter(found))

    # -- the prefix cache ------------------------------------------------------------------
    def lookup(
        self, request: int, tokens: int, shared: list[int] | None = None
    ) -> tuple[int, int]:
        """The blocks of ``request`` (waiting: it holds none) an admission with ``tokens``
        tokens finds cached: the longest run of its blocks ``0, 1, ...`` (``shared``: the
        shared names of its first blocks), at most :math:`\\lfloor (T-1)/b \\rfloor`; and
        how many of them other requests hold (those cost no free block)."""
        cached = self._cached
        if not cached:
            return 0, 0
        cap = (tokens - 1) // self.block_size
        count = held = 0
        found: _Block | dict[_Block, None] | None
        if shared is not None:  # its shared names first (inline: this loop is hot)
            limit = min(cap, len(shared))
            while count < limit:
                found = cached.get((shared[count], count))
                if found is None:
                    return count, held
                if found.__class__ is not _Block:  # duplicates: the first cached
                    found = next(iter(found))  # type: ignore[arg-type]
                held += found.refs > 0
                count += 1
        own = ~request  # its own blocks: only it can hold them, and it holds none now
        while count < cap and (own, count) in cached:
            count += 1
        return count, held

    def reuse(self, request: int, count: int, shared: list[int] | None = None) -> None:
        """Take the first ``count`` cached blocks of ``request`` (found by :meth:`lookup`;
        the request holds none): each one's holders go up, and a free one leaves the
        queue."""
        held = self._held.setdefault(request, [])
        if held:
            raise ServingError(f"KV cache: request {request} takes cached blocks twice")
        for position in range(count):
            block = self._first(_key(request, position, shared))
            assert block is not None, "reuse follows lookup"
            if not block.refs:
                del self._queue[block.entry]
                block.entry = 0
                self._free -= 1
            block.refs += 1
            held.append(block)

    # -- freeing ---------------------------------------------------------------------------
    def free(
        self,
        request: int,
        tokens: int,
        *,
        computed: int = 0,
        shared: list[int] | None = None,
        resumable: bool = False,
    ) -> None:
        """Return the blocks of ``request``, which holds ``tokens`` KV tokens, last block
        first. Its full blocks of the first ``computed`` tokens keep their content (with
        prefix caching on): the cached blocks it holds are let go (those nobody else
        holds join the queue); the others are named now, its own ones reachable if it is
        ``resumable`` (preempted) and dead otherwise (module docstring)."""
        count = self.blocks(tokens)
        held = self._held.pop(request, [])
        full = min(computed, tokens) // self.block_size if self.prefix_caching else 0
        named = len(held)
        position = count - 1
        empty = count - max(full, named)  # the last blocks, without content
        if empty > 0:
            self._push(empty)
            position -= empty
        own_from = named if shared is None else max(named, len(shared))
        if not resumable and position >= own_from:  # its own blocks: nobody can hit them
            run = position - own_from + 1
            self._push(-run)
            self._dead += run
            position -= run
        cached, queue = self._cached, self._queue
        while position >= named:  # full blocks named now (inline: this loop is hot)
            key = _key(request, position, shared)
            block = _Block(key, 0)
            if key in cached:
                self._cache(block)
            else:
                cached[key] = block
            block.entry = entry = self._next_entry
            queue[entry] = block
            self._next_entry = entry + 1
            position -= 1
        still = 0  # of its cached blocks, those others hold
        for block in reversed(held):
            block.refs -= 1
            if block.refs:
                still += 1
            else:
                self._enqueue(block)
        self._free += count - still
        if self._free > self.total_blocks or named > count:
            raise ServingError(f"KV cache: request {request} frees {count} blocks, more than used")

    def _enqueue(self, block: _Block) -> None:
        block.entry = self._next_entry
        self._queue[self._next_entry] = block
        self._next_entry += 1

    def _push(self, run: int) -> None:
        """Append a run of empty (``run > 0``) or dead (``-run``) blocks to the queue."""
        last = next(reversed(self._queue), None)
        tail = None if last is None else self._queue[last]
        if isinstance(tail, int) and (tail > 0) == (run > 0):
            self._queue[last] = tail + run  # type: ignore[index]  # merge with the tail
        else:
            self._queue[self._next_entry] = run
            self._next_entry += 1

    def check(self) -> None:
        """Assert the pool's invariants (for tests): free blocks are exactly the queue's,
        and every cached block is in the queue or held."""
        counted = sum(1 if isinstance(c, _Block) else abs(c) for c in self._queue.values())
        assert counted == self._free, (counted, self._free)
        assert 0 <= self._free <= self.total_blocks
        for found in self._cached.values():
            for block in [found] if isinstance(found, _Block) else found:
                assert (block.refs == 0) == (self._queue.get(block.entry) is block), block.key
        dead = sum(-c for c in self._queue.values() if isinstance(c, int) and c < 0)
        assert dead == self._dead
