"""The list-scheduling engine: a priority order in, a feasible schedule out.

Semantics (as in Jaillet et al., arXiv 2502.07115): in every round ``t`` the waiting,
released requests are considered in priority order, and a request is started only if
memory then stays within ``M`` in *every* future round. The engine produces exactly
that schedule but jumps from event to event instead of stepping through rounds.

Admission test
--------------
Let ``A`` be the running requests and ``w_j = s_j - p_j + 1``; in round ``tau`` they hold
``L(tau) = sum_{j in A, C_j > tau} (w_j + tau)`` tokens. A candidate ``k`` started at
``t`` holds ``s_k + tau - t + 1`` tokens in rounds ``t .. t + o_k - 1``, so it fits iff

.. math:: s_k \\le S_t(o_k) := M - 1 + t - \\max_{t \\le \\tau \\le t + o_k - 1} h(\\tau),
          \\qquad h(\\tau) = L(\\tau) + \\tau .

Between two completions ``h`` strictly increases, so the maximum is attained at a round
``C_j - 1`` just before a running request leaves, or at ``t + o_k - 1``: the test needs
the load only at the future completion rounds. ``S_t`` is non-increasing in ``o``.

Events
------
Admissions change only at completions, releases, and at rounds where a blocked
request's slack has grown enough: while ``A`` is fixed, ``S_{t+1}(o) <= S_t(o) + 1``
(``h`` rises by at least one a round), so a request with deficit
``d = s_k - S_t(o_k) > 0`` cannot fit before ``t + d``. :meth:`_Running.earliest_fit`
jumps by the deficit until the request fits or the next completion comes; it never
skips a round in which the request would fit.

Modes
-----
``backfill=False`` (strict order): admit the highest-priority released request while it
fits; it blocks all others until it starts, so the engine only asks for the head's first
fit before the next release (:meth:`_Running.first_fit`). ``backfill=True``: every
released request that fits starts, in priority order (a greedy list scheduler); a
min-tree over priority positions skips groups of waiting requests that cannot fit.

Resumable strict decoding
-------------------------
On a backlog the strict schedule is built request by request, each at its first fit no
earlier than its predecessor's start, so the starts of a priority prefix do not depend
on the rest. :class:`StrictDecoder` exposes this: :meth:`StrictDecoder.place` one
request at a time, :meth:`StrictDecoder.state` to save a :class:`DecoderState`,
:meth:`StrictDecoder.restore` to continue it with another suffix. States compare up to
a shift in time (:meth:`DecoderState.same_running`), under which decoding is invariant:
local search (:mod:`schedlab.offline.solvers.local_search`) uses it to stop re-decoding where a
changed order's run meets the old one.

Engines
-------
This module is the reference implementation. :func:`list_schedule` runs, by default
(``engine="compiled"``), the numba kernels of :mod:`schedlab.offline.compiled_decoder`,
which implement the same procedure on flat ``int64`` arrays (about 50 times faster; the
incremental evaluator of local search uses its resumable strict kernel);
``engine="python"`` selects the code here. :class:`StrictDecoder` is pure Python.
numba loads, and the kernels compile (or load from its cache), on the first compiled
decode, not with the package.
``tests/offline/test_compiled_decoder.py`` checks that the two engines agree schedule
for schedule.

Proof of all of this: ``proofs/list_scheduling.md``.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from math import inf
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError, InstanceError, ScheduleError
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import total_latency

__all__ = [
    "ENGINES",
    "DecoderState",
    "RunningSet",
    "StrictDecoder",
    "check_order",
    "decode_best",
    "list_schedule",
    "order_array",
]

#: Implementations of :func:`list_schedule`: the numba kernels of
#: :mod:`schedlab.offline.compiled_decoder` (default) and this module's reference.
ENGINES: tuple[str, ...] = ("compiled", "python")


def order_array(order: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """Return ``order`` as an ``int64`` array if it is a permutation of ``0..n-1``.

    Raises
    ------
    ScheduleError
        If it is not (also for non-integral entries).
    """
    array = np.asarray(order).ravel()
    integral = array.dtype.kind in "iu" or (
        array.dtype.kind == "f" and bool(np.all(array == np.round(array)))
    )
    if (
        not integral
        or len(array) != n
        or not np.array_equal(np.sort(array.astype(np.int64)), np.arange(n))
    ):
        raise ScheduleError(f"order: expected a permutation of 0..{n - 1}, got {len(array)} items")
    return array.astype(np.int64)


def check_order(order: Sequence[int] | np.ndarray, n: int) -> list[int]:
    """``order`` as a list if it is a permutation of ``0..n-1`` (:func:`order_array`)."""
    return [int(x) for x in order_array(order, n).tolist()]


class _Running:
    """The running requests, sorted by ``(C_j, w_j)``, and the slack ``S_t(o)``.

    Kept up to date at each change: ``suffix[j]``, the weight of requests ``j..`` and
    ``peaks[j] = suffix[j] + (C_j - 1)(m - j + 1)``, which is ``h(C_j - 1)`` for the
    first request of each group of equal completions (the others undercount and are
    dominated by it). Dropping completed requests (a prefix) leaves both unchanged for
    the rest; starting one adds its weight and one token a round to the entries before
    it, ``O(m)`` list operations.
    """

    def __init__(self, memory: int) -> None:
        self.kv_tokens = memory
        self.completion: list[int] = []  # ascending
        self.weight: list[int] = []  # w_j = s_j - p_j + 1, same order
        self._suffix = [0]
        self._peaks: list[int] = []
        self._prefix_max: list[int] | None = []  # running maxima of peaks; None: stale
        self._memo: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self.completion)

    @property
    def total_weight(self) -> int:
        return self._suffix[0]

    def next_completion(self) -> float:
        return self.completion[0] if self.completion else inf

    def load(self, t: int) -> int:
        """Tokens held in round ``t`` (all running requests have ``C_j > t``)."""
        return self._suffix[0] + t * len(self.completion)

    def add(self, start: int, prompt: int, output: int) -> None:
        """Start a request in round ``start`` (no running request completes by then)."""
        done, weight = start + output, prompt - start + 1
        completion, suffix = self.completion, self._suffix
        pos = bisect_right(completion, done)
        while pos and completion[pos - 1] == done and self.weight[pos - 1] > weight:
            pos -= 1
        head = [
            p + weight + c - 1 for p, c in zip(self._peaks[:pos], completion[:pos], strict=True)
        ]
        head.append(suffix[pos] + weight + (done - 1) * (len(completion) - pos + 2))
        self._peaks[:pos] = head
        suffix[: pos + 1] = [x + weight for x in suffix[: pos + 1]]
        suffix.insert(pos + 1, suffix[pos] - weight)
        completion.insert(pos, done)
        self.weight.insert(pos, weight)
        self._prefix_max = None
        self._memo.clear()

    def finish_until(self, t: int) -> None:
        """Drop the requests that completed by round ``t`` (``C_j <= t``)."""
        k = bisect_right(self.completion, t)
        if k:
            del self.completion[:k], self.weight[:k], self._suffix[:k], self._peaks[:k]
            self._prefix_max = None

    def restore(self, completion: list[int], weight: list[int]) -> None:
        """Replace the running set (sorted by ``(C_j, w_j)``)."""
        m = len(completion)
        self.completion, self.weight = completion, weight
        self._suffix = suffix = [*reversed([0, *accumulate(reversed(weight))])]
        self._peaks = [suffix[j] + (c - 1) * (m - j + 1) for j, c in enumerate(completion)]
        self._prefix_max = None
        self._memo.clear()

    def slack(self, t: int, output: int) -> int:
        """``S_t(o)``: the largest prompt a request of output ``o`` may have to start at ``t``.

        Valid for any ``t`` before the next completion. Memoised until the next start:
        dropping completed requests does not change ``S_t`` for the rounds to come.
        """
        memo = self._memo.get((t, output))
        if memo is not None:
            return memo
        completion = self.completion
        end = t + output - 1
        q = bisect_right(completion, end)
        peak = self._suffix[q] + end * (len(completion) - q + 1)  # h(t + o - 1)
        q_crit = bisect_right(completion, t + output)
        if q_crit:
            if self._prefix_max is None:
                self._prefix_max = list(accumulate(self._peaks, max))
            peak = max(peak, self._prefix_max[q_crit - 1])
        value = self._memo[t, output] = self.kv_tokens - 1 + t - peak
        return value

    def earliest_fit(self, t: int, prompt: int, output: int, until: float) -> float:
        """First round in ``[t, until)`` where the request fits, else ``inf``.

        ``until`` must not exceed the next completion. Jumps by the deficit, which is
        safe because the slack grows by at most one a round while no request leaves.
        """
        while t < until:
            deficit = prompt - self.slack(t, output)
            if deficit <= 0:
                return t
            t += deficit
        return inf

    def first_fit(self, t: int, prompt: int, output: int, until: float = inf) -> float:
        """First round in ``[t, until)`` where the request fits, else ``inf``.

        Unlike :meth:`earliest_fit` it passes completions, dropping the requests that
        leave; afterwards every running request has ``C_j`` beyond the round returned
        (or beyond the last completion passed).
        """
        self.finish_until(t)
        while True:
            nxt = min(self.next_completion(), until)
            fit = self.earliest_fit(t, prompt, output, nxt)
            if fit < inf or nxt >= until:
                return fit
            t = int(nxt)
            self.finish_until(t)


#: The running set and its slack ``S_t(o)``, for callers outside the decoder: the online
#: policies of :mod:`schedlab.offline.online.policies` admit by the same test with
#: estimated completions.
RunningSet = _Running


class _WaitingTree:
    """Released, waiting requests by priority position, in a min-tree.

    Each node keeps the least prompt and least output of its live leaves. A node can
    hold a request that fits only if ``min_s <= S_t(min_o)`` (``S_t`` is
    non-increasing) and ``min_s`` is below the memory free in the current round, so
    searches descend left-first and skip every subtree that fails either test.
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
        """Set leaf ``pos`` (``inf`` removes it) and update its ancestors."""
        node = pos + self.width
        self.count += 1 if prompt != inf else -1
        self.min_s[node], self.min_o[node] = prompt, output
        node //= 2
        while node:
            left, right = 2 * node, 2 * node + 1
            least_s = min(self.min_s[left], self.min_s[right])
            least_o = min(self.min_o[left], self.min_o[right])
            if self.min_s[node] == least_s and self.min_o[node] == least_o:
                break  # nothing above changes either
            self.min_s[node], self.min_o[node] = least_s, least_o
            node //= 2

    def search(self, engine: _Engine) -> Iterator[int]:
        """Leaf positions, left to right, that may hold a request fitting by the engine's
        ``wake`` round: least prompt below ``engine.free`` and at most
        ``S_t(least output) + engine.margin``. Both are read as the search goes on and
        may only tighten meanwhile.
        """
        running, t = engine.running, engine.t
        min_s, min_o = self.min_s, self.min_o
        stack = [(1, 0)]  # (node, first leaf position under it)
        while stack:
            node, lo = stack.pop()
            least = min_s[node]
            if least >= engine.free or least > running.slack(t, int(min_o[node])) + engine.margin:
                continue
            if node >= self.width:
                yield lo
                continue
            half = self.width >> node.bit_length()
            stack.append((2 * node + 1, lo + half))
            stack.append((2 * node, lo))


def list_schedule(
    instance: Instance,
    order: Sequence[int] | np.ndarray,
    *,
    backfill: bool = False,
    engine: str = "compiled",
) -> np.ndarray:
    """Turn a priority order into a feasible schedule by event-driven list scheduling.

    Parameters
    ----------
    instance
        The instance.
    order
        A permutation of ``0..n-1``; earlier means higher priority.
    backfill
        ``False``: strict order (the highest-priority released request that does not
        fit blocks the rest until it does). ``True``: every released request that fits
        is started, in priority order.
    engine
        ``"compiled"``: the numba kernels of :mod:`schedlab.offline.compiled_decoder`;
        ``"python"``: the reference implementation in this module. Both give the same
        schedule (``tests/offline/test_compiled_decoder.py``).

    Returns
    -------
    numpy.ndarray
        ``starts[i]``, the start round of request ``i``: the schedule that considering
        every round in turn would give (see the module docs).

    Raises
    ------
    ScheduleError
        If ``order`` is not a permutation.
    InputError
        On an unknown engine.
    """
    if engine not in ENGINES:
        raise InputError(f"engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    array = order_array(order, instance.n)
    if engine == "compiled":  # numba loads here, on the first compiled decode
        from schedlab.offline import compiled_decoder

        return compiled_decoder.schedule(
            instance.prompt,
            instance.output,
            instance.arrival,
            instance.kv_tokens,
            array,
            backfill=backfill,
        )
    items = [int(x) for x in array.tolist()]
    if backfill:
        return _Engine(instance, items).run()
    return _strict_schedule(instance, items)


def _strict_schedule(instance: Instance, order: list[int]) -> np.ndarray:
    """Strict mode: the head of the released waiting requests starts at its first fit,
    unless a release comes first (it may bring a new head)."""
    n = instance.n
    prompt, output = instance.prompt.tolist(), instance.output.tolist()
    arrival = instance.arrival.tolist()
    rank = [0] * n
    for position, i in enumerate(order):
        rank[i] = position
    releases = sorted(range(n), key=lambda i: (arrival[i], rank[i]))
    running = _Running(instance.kv_tokens)
    starts = [-1] * n
    heap: list[int] = []  # priority positions of released, waiting requests
    released = 0
    t = arrival[releases[0]]
    while released < n or heap:
        while released < n and arrival[releases[released]] <= t:
            heapq.heappush(heap, rank[releases[released]])
            released += 1
        pending = arrival[releases[released]] if released < n else inf
        if heap:
            head = order[heap[0]]
            fit = running.first_fit(t, prompt[head], output[head], pending)
            if fit < inf:
                t = starts[head] = int(fit)
                running.add(t, prompt[head], output[head])
                heapq.heappop(heap)
                continue
        t = int(pending)
    return np.array(starts, dtype=np.int64)


@dataclass(frozen=True)
class DecoderState:
    """A snapshot of :class:`StrictDecoder` between two placements.

    Attributes
    ----------
    round
        ``t``, the start round of the request placed last (0 before the first).
    remaining
        ``C_j - t`` of each running request (``C_j > t``), ascending; ties by ``held``.
    held
        ``w_j + t = s_j + t - p_j + 1``, the tokens request ``j`` holds in round ``t``,
        in the same order.

    Two states with equal ``remaining`` and ``held`` differ only by a shift of
    ``delta`` rounds; the decoder is invariant under shifts in time (a backlog has no
    releases, and ``S_{t+delta}`` of the shifted running set equals ``S_t``), so from
    them the same requests are placed ``delta`` rounds apart. :meth:`same_running`
    tests exactly this.
    """

    round: int
    remaining: tuple[int, ...]
    held: tuple[int, ...]

    def same_running(self, other: DecoderState) -> bool:
        """Whether ``other`` is this state shifted in time (see the class docs)."""
        return self.remaining == other.remaining and self.held == other.held

    def shifted(self, delta: int) -> DecoderState:
        """This state ``delta`` rounds later."""
        return DecoderState(self.round + delta, self.remaining, self.held)


class StrictDecoder:
    """Strict-order list scheduling of a backlog, one request at a time, resumable.

    On a backlog (every ``a_i = 0``) the strict engine starts the requests in priority
    order, each in the first round ``t >= `` its predecessor's start in which it fits
    beside the requests started before it (:func:`list_schedule` with
    ``backfill=False`` gives the same starts). So the starts of a priority prefix do
    not depend on the rest of the order, and decoding can be paused after any
    request, saved as a :class:`DecoderState`, and resumed with any continuation.

    Parameters
    ----------
    instance
        A backlog.

    Raises
    ------
    InstanceError
        If some request has a release round above 0.
    """

    def __init__(self, instance: Instance) -> None:
        if instance.n and int(instance.arrival.max()) != 0:
            raise InstanceError("StrictDecoder: needs a backlog (every release round 0)")
        self.kv_tokens = instance.kv_tokens
        self.n = instance.n
        self._prompt = instance.prompt.tolist()
        self._output = instance.output.tolist()
        self._running = _Running(instance.kv_tokens)
        self._round = 0

    def place(self, i: int) -> int:
        """Start request ``i`` next in the order; return its start round."""
        s, o = self._prompt[i], self._output[i]
        t = self._round = int(self._running.first_fit(self._round, s, o))
        self._running.add(t, s, o)
        return t

    def state(self) -> DecoderState:
        """The current state (running requests that complete by its round are dropped)."""
        t = self._round
        running = self._running
        running.finish_until(t)
        return DecoderState(
            t, tuple([c - t for c in running.completion]), tuple([w + t for w in running.weight])
        )

    def restore(self, state: DecoderState) -> None:
        """Continue from ``state`` (taken from any decoder of the same instance)."""
        t = self._round = state.round
        self._running = _Running(self.kv_tokens)
        self._running.restore([r + t for r in state.remaining], [h - t for h in state.held])

    def reset(self) -> None:
        """Start again from round 0 with nothing running."""
        self._running = _Running(self.kv_tokens)
        self._round = 0


class _Engine:
    """State of one backfilling run; :meth:`run` visits the event rounds."""

    def __init__(self, instance: Instance, order: list[int]) -> None:
        n = instance.n
        self.kv_tokens = instance.kv_tokens
        self.order = order
        self.prompt = instance.prompt.tolist()
        self.output = instance.output.tolist()
        self.arrival = instance.arrival.tolist()
        self.rank = [0] * n
        for position, i in enumerate(order):
            self.rank[i] = position
        self.releases = sorted(range(n), key=lambda i: (self.arrival[i], self.rank[i]))
        self.running = _Running(instance.kv_tokens)
        self.starts = [-1] * n
        self.tree = _WaitingTree(n)
        self.t = 0
        self.free = 0
        self.pending: float = inf  # next release round
        self.wake: float = inf  # next round with an event
        self.margin: float = 0  # searches: how far the slack may still grow

    def run(self) -> np.ndarray:
        n = len(self.starts)
        tree = self.tree
        next_release = 0
        self.t = self.arrival[self.releases[0]]
        while next_release < n or tree.count:
            while next_release < n and self.arrival[self.releases[next_release]] <= self.t:
                i = self.releases[next_release]
                tree.put(self.rank[i], self.prompt[i], self.output[i])
                next_release += 1
            self.running.finish_until(self.t)
            self.free = self.kv_tokens - self.running.load(self.t)
            self.pending = self.arrival[self.releases[next_release]] if next_release < n else inf
            self._round(tree)
            self.t = int(self.wake) if self.wake < inf else self.t
        return np.array(self.starts, dtype=np.int64)

    def _fits_now(self, i: int) -> bool:
        return self.prompt[i] < self.free and self.prompt[i] <= self.running.slack(
            self.t, self.output[i]
        )

    def _start(self, i: int) -> None:
        self.starts[i] = self.t
        self.running.add(self.t, self.prompt[i], self.output[i])
        self.free -= self.prompt[i] + 1

    def _earliest_later_fit(self, i: int) -> None:
        """Move the wake-up round to where request ``i`` would fit, if that is sooner."""
        later = self.running.earliest_fit(self.t + 1, self.prompt[i], self.output[i], self.wake)
        if later < self.wake:
            self.wake = later
            self.margin = later - self.t - 1

    def _round(self, tree: _WaitingTree) -> None:
        # Admissions only tighten the search's test, so one left-to-right pass suffices.
        self.margin = 0
        for position in tree.search(self):
            if self._fits_now(self.order[position]):
                self._start(self.order[position])
                tree.put(position, inf, inf)
        # wake at the next release or completion (admissions may have moved the latter)
        self.wake = min(self.pending, self.running.next_completion())
        # A request that fits in a round t' < wake has a deficit of at most t' - t now;
        # with wake = t + 1 there is no such round.
        self.margin = self.wake - self.t - 1
        if self.margin > 0:
            for position in tree.search(self):
                self._earliest_later_fit(self.order[position])


def decode_best(
    instance: Instance,
    order: Sequence[int] | np.ndarray,
    others: dict[str, np.ndarray] | None = None,
    *,
    budget: Budget = UNLIMITED,
    strict: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Decode ``order`` strictly and with backfilling; keep the better schedule.

    ``strict`` is ``order``'s strict decode when the caller already has it.
    ``others`` (name -> start rounds) join the comparison. Once ``budget``'s cap has
    passed the backfilling decode is left out (it costs more than the strict one,
    ``benchmarks/list_scheduling_speed.py --backfill``). Returns the chosen starts and
    ``{"objectives": {name: total latency}, "chosen": name}``.
    """
    decodes = {"strict": list_schedule(instance, order) if strict is None else strict}
    if not budget.expired():
        decodes["backfill"] = list_schedule(instance, order, backfill=True)
    decodes.update(others or {})
    objectives = {name: total_latency(instance, starts) for name, starts in decodes.items()}
    chosen = min(objectives, key=lambda name: objectives[name])
    return decodes[chosen], {"objectives": objectives, "chosen": chosen}
