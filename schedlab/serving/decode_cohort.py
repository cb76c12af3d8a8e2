r"""The running decodes of one engine, advanced together in ``O(1)`` an iteration.

Every running decode emits one token an iteration, so its KV follows from when it joined:
a request that completes its prefill in iteration :math:`i` holding :math:`t` KV tokens
attends :math:`t - i + j` tokens at decode iteration :math:`j \ge i + 1`. Its *offset*
:math:`d = t - i` fixes that for good, and the cohort keeps their count :math:`n` and
sum :math:`\sum d`, so iteration :math:`j`'s decodes attend :math:`\sum d + n j` tokens.
A decode needs a new block at iteration :math:`j` when it computes token
:math:`d + j - 1` at a block boundary, i.e. when :math:`(d - 1) \bmod B = -j \bmod B`
(:math:`B` tokens a block); grouping the decodes by :math:`(d - 1) \bmod B`, their
*bucket*, gives the blocks iteration :math:`j` needs as one count. For cost models that
read the longest and shortest decode's KV
(:func:`~schedlab.serving.cost_model.uses_decode_spread`) the largest and smallest offsets
are kept in heaps with lazy deletion.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from schedlab.serving.cost_model import BatchShape, Chunk
from schedlab.serving.request_state import RequestState

__all__ = ["DecodeCohort"]


class DecodeCohort:
    """An engine's running decodes (module docstring).

    Parameters
    ----------
    block_size
        Tokens a KV block, :math:`B`.
    spread
        Whether to keep the longest and shortest decode's KV (:meth:`extremes`).
    """

    __slots__ = ("_high", "_live", "_low", "block_size", "buckets", "kv_sum", "n", "spread")

    def __init__(self, block_size: int, spread: bool) -> None:
        self.block_size = block_size
        self.spread = spread
        self.n = 0
        self.kv_sum = 0  # sum of the offsets
        # decodes by (offset - 1) mod B: buckets[-i % B] need a new block at iteration i
        self.buckets = [0] * block_size
        self._high: list[int] = []  # negated offsets, lazily deleted
        self._low: list[int] = []  # offsets, lazily deleted
        self._live: dict[int, int] = {}  # offset -> decodes holding it

    def join(self, req: RequestState, i: int) -> None:
        """``req`` decodes from iteration ``i + 1`` on, holding ``req.target`` KV tokens
        after iteration ``i`` (sets its ``kv_offset`` and ``bucket``)."""
        offset = req.kv_offset = req.target - i
        req.bucket = (offset - 1) % self.block_size
        self.buckets[req.bucket] += 1
        self.n += 1
        self.kv_sum += offset
        if self.spread:
            self._live[offset] = self._live.get(offset, 0) + 1
            heapq.heappush(self._high, -offset)
            heapq.heappush(self._low, offset)

    def leave(self, req: RequestState) -> None:
        """``req`` decodes no more (it finished or was preempted)."""
        self.n -= 1
        self.kv_sum -= req.kv_offset
        self.buckets[req.bucket] -= 1
        req.decoding = False
        if self.spread:
            left = self._live[req.kv_offset] - 1
            if left:
                self._live[req.kv_offset] = left
            else:
                del self._live[req.kv_offset]

    def kv(self, i: int) -> int:
        """KV tokens the decodes attend at iteration ``i``, in total."""
        return self.kv_sum + self.n * i

    def extremes(self, i: int) -> tuple[int, int]:
        """KV tokens of the longest and shortest decode at iteration ``i`` (some decode
        runs, and ``spread`` is on)."""
        live, high, low = self._live, self._high, self._low
        while -high[0] not in live:
            heapq.heappop(high)
        while low[0] not in live:
            heapq.heappop(low)
        return i - high[0], i + low[0]

    def shape(self, i: int, chunks: Sequence[Chunk] = ()) -> BatchShape:
        """The batch of iteration ``i``: its decodes, with the longest and shortest KV
        when ``spread`` is on, and ``chunks``."""
        n = self.n
        if self.spread and n:
            kv_max, kv_min = self.extremes(i)
            return BatchShape(n, self.kv_sum + n * i, tuple(chunks), kv_max, kv_min)
        return BatchShape(n, self.kv_sum + n * i, tuple(chunks))
