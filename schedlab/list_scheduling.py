"""The list-scheduling engine: a priority order in, a feasible schedule out.

The engine jumps from event to event (releases and completions), never stepping
through idle rounds. At an event round ``t`` it admits waiting, released requests in
priority order; a request is admitted only if memory stays within ``M`` in *every*
future round.

Admission test
--------------
Let ``A`` be the running requests and ``w_j = s_j - p_j + 1``; in round ``tau`` they hold
``L(tau) = sum_{j in A, C_j > tau} (w_j + tau)`` tokens. A candidate ``k`` started at
``t`` holds ``s_k + tau - t + 1`` tokens in rounds ``t .. t + o_k - 1``, so it fits iff

.. math:: s_k \\le S_t(o_k) := M - 1 + t - \\max_{t \\le \\tau \\le t + o_k - 1} h(\\tau),
          \\qquad h(\\tau) = L(\\tau) + \\tau .

Between two completions ``h`` strictly increases, so the maximum is attained at a round
``C_j - 1`` just before some running request leaves, or at ``t + o_k - 1``: the test
needs the load only at the future completion rounds, as in Jaillet et al.
(arXiv 2502.07115). ``S_t`` is non-increasing in ``o``, which lets the backfilling scan
prune whole groups of waiting requests (see :class:`_WaitingTree`).

Modes
-----
``backfill=False`` (strict order): admit the highest-priority released request while it
fits; the first that does not fit blocks all others until the next event. Cost
``O(n log n + E |A|)`` for ``E`` events and ``|A|`` running requests.
``backfill=True``: scan all released requests in priority order and admit every one
that fits (a greedy list scheduler). A min-tree over priority positions skips groups
that cannot fit; the worst case is ``O(n)`` candidates per event.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate
from math import inf

import numpy as np

from schedlab.errors import ScheduleError
from schedlab.instance import Instance

__all__ = ["check_order", "list_schedule"]


def check_order(order: Sequence[int] | np.ndarray, n: int) -> list[int]:
    """Return ``order`` as a list if it is a permutation of ``0..n-1``.

    Raises
    ------
    ScheduleError
        If it is not.
    """
    items = [int(x) for x in np.asarray(order).ravel().tolist()]
    if len(items) != n or sorted(items) != list(range(n)):
        raise ScheduleError(f"order: expected a permutation of 0..{n - 1}, got {len(items)} items")
    return items


class _Running:
    """The running requests, sorted by completion, and the staircase ``S_t(o)``."""

    def __init__(self, memory: int) -> None:
        self.memory = memory
        self.completion: list[int] = []  # sorted ascending
        self.weight: list[int] = []  # w_j = s_j - p_j + 1, same order
        self.total_weight = 0
        self._stale = True
        self._suffix: list[int] = []
        self._prefix_max: list[int] = []

    def __len__(self) -> int:
        return len(self.completion)

    def load(self, t: int) -> int:
        """Tokens held in round ``t`` (all running requests have ``C_j > t``)."""
        return self.total_weight + t * len(self.completion)

    def add(self, start: int, prompt: int, output: int) -> None:
        done = start + output
        pos = bisect_right(self.completion, done)
        self.completion.insert(pos, done)
        self.weight.insert(pos, prompt - start + 1)
        self.total_weight += prompt - start + 1
        self._stale = True

    def finish_until(self, t: int) -> None:
        """Drop the requests that completed by round ``t`` (``C_j <= t``)."""
        k = bisect_right(self.completion, t)
        if k:
            self.total_weight -= sum(self.weight[:k])
            del self.completion[:k]
            del self.weight[:k]
            self._stale = True

    def _rebuild(self) -> None:
        # h(C_j - 1) with suffix sums over the requests from j on. Within a group of
        # equal completions only the group's first index counts every request still
        # running in round C_j - 1; the later ones undercount, are dominated by it, and
        # so leave the prefix maximum unchanged.
        m = len(self.completion)
        suffix = [*reversed([0, *accumulate(reversed(self.weight))])]
        peaks = [suffix[j] + (c - 1) * (m - j + 1) for j, c in enumerate(self.completion)]
        self._suffix = suffix
        self._prefix_max = list(accumulate(peaks, max))
        self._stale = False

    def slack(self, t: int, output: int) -> float:
        """``S_t(o)``: the largest prompt that a request of output ``o`` may have."""
        if self._stale:
            self._rebuild()
        completion = self.completion
        end = t + output - 1
        q = bisect_right(completion, end)
        h_end = self._suffix[q] + end * (len(completion) - q + 1)
        q_crit = bisect_right(completion, t + output)
        peak = max(self._prefix_max[q_crit - 1], h_end) if q_crit else h_end
        return self.memory - 1 + t - peak


class _WaitingTree:
    """Released, waiting requests by priority position, in a min-tree.

    Each node keeps the least prompt and least output of its live leaves. A node can
    hold a request that fits only if ``min_s <= S_t(min_o)`` (``S_t`` is
    non-increasing), so the leftmost fitting request is found by a left-first descent
    that skips every other subtree.
    """

    def __init__(self, size: int) -> None:
        width = 1
        while width < size:
            width *= 2
        self.width = width
        self.min_s = [inf] * (2 * width)
        self.min_o = [inf] * (2 * width)
        self.count = 0

    def put(self, pos: int, prompt: float, output: float) -> None:
        node = pos + self.width
        self.count += 1 if prompt != inf else -1
        self.min_s[node], self.min_o[node] = prompt, output
        node //= 2
        while node:
            left, right = 2 * node, 2 * node + 1
            self.min_s[node] = min(self.min_s[left], self.min_s[right])
            self.min_o[node] = min(self.min_o[left], self.min_o[right])
            node //= 2

    def leftmost_fit(self, start: int, free: int, slack: Callable[[int], float]) -> int:
        """Leftmost leaf ``>= start`` that may fit, or ``-1``.

        A subtree is skipped if its least prompt exceeds ``free - 1`` (the room in the
        current round, checked first because it is cheap) or ``slack(min_o)``.
        """
        stack = [(1, 0)]  # (node, first leaf position under it)
        while stack:
            node, lo = stack.pop()
            span = self.width >> (node.bit_length() - 1)
            least = self.min_s[node]
            if lo + span <= start or least >= free or least > slack(int(self.min_o[node])):
                continue
            if node >= self.width:
                return lo
            stack.append((2 * node + 1, lo + span // 2))
            stack.append((2 * node, lo))
        return -1


def list_schedule(
    instance: Instance, order: Sequence[int] | np.ndarray, *, backfill: bool = False
) -> np.ndarray:
    """Turn a priority order into a feasible schedule by event-driven list scheduling.

    Parameters
    ----------
    instance
        The instance.
    order
        A permutation of ``0..n-1``; earlier means higher priority.
    backfill
        ``False``: strict order (the first released request that does not fit blocks
        the rest until the next event). ``True``: every released request that fits is
        admitted, in priority order.

    Returns
    -------
    numpy.ndarray
        ``starts[i]``, the start round of request ``i``.
    """
    n = instance.n
    order = check_order(order, n)
    prompt = instance.prompt.tolist()
    output = instance.output.tolist()
    arrival = instance.arrival.tolist()
    rank = [0] * n
    for position, i in enumerate(order):
        rank[i] = position
    releases = sorted(range(n), key=lambda i: (arrival[i], rank[i]))
    running = _Running(instance.memory)
    starts = [-1] * n
    heap: list[int] = []  # strict mode: priority positions of released, waiting requests
    tree = _WaitingTree(n) if backfill else None
    next_release = 0
    placed = 0
    t = arrival[releases[0]]
    while placed < n:
        while next_release < n and arrival[releases[next_release]] <= t:
            i = releases[next_release]
            if tree is None:
                heapq.heappush(heap, rank[i])
            else:
                tree.put(rank[i], prompt[i], output[i])
            next_release += 1
        running.finish_until(t)
        free = instance.memory - running.load(t)
        if tree is None:
            while heap:
                i = order[heap[0]]
                if prompt[i] + 1 > free or prompt[i] > running.slack(t, output[i]):
                    break
                heapq.heappop(heap)
                starts[i] = t
                running.add(t, prompt[i], output[i])
                free -= prompt[i] + 1
                placed += 1
        else:
            position = 0
            while tree.count:
                position = tree.leftmost_fit(
                    position,
                    free,
                    lambda o, t=t: running.slack(t, o),  # type: ignore[misc]
                )
                if position < 0:
                    break
                i = order[position]
                if prompt[i] <= running.slack(t, output[i]):
                    starts[i] = t
                    running.add(t, prompt[i], output[i])
                    free -= prompt[i] + 1
                    tree.put(position, inf, inf)
                    placed += 1
                else:
                    position += 1
        pending = arrival[releases[next_release]] if next_release < n else inf
        ending = running.completion[0] if len(running) else inf
        t = int(min(pending, ending))
    return np.array(starts, dtype=np.int64)
