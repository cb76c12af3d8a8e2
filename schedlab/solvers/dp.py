"""Exact dynamic programme over rounds for small instances (``n <= 10``).

State and recursion
-------------------
At the start of round ``t`` a state is ``(t', U, R)``: ``U`` the requests not yet started
(a bitmask), ``R`` the running ones with their ages ``t - p_i`` (``1 <= age < o_i``), and
``t' = min(t, max_i a_i)`` (time matters only while releases are pending). A decision
starts a set ``S`` of released requests of ``U`` such that the running set ``R ∪ S``
stays within ``M`` in every future round; this is necessary (later starts only add
load) and sufficient (starting nothing more lets them all finish). Writing the objective
as ``sum_t #{i : a_i <= t < C_i}``, each round costs the released, unfinished requests:

.. math:: V(t', U, R) = |R| + |\\{i \\in U : a_i \\le t\\}|
          + \\min_{S} V(\\min(t+1, a_{max}), U \\setminus S, R'),

with ``R'`` the aged ``R ∪ S`` without the requests that complete. ``V = 0`` when
``U = R = ∅``. The number of states is at most
``(a_max + 1) · sum_{R ⊆ [n]} 2^{n - |R|} prod_{i in R} (o_i - 1)``; memory reduces it
sharply (only running sets that fit count).

Search
------
The recursion is a shortest path over this acyclic state graph, solved by A*
(Hart, Nilsson & Raphael 1968) with an admissible estimate: running requests still need
``o_i - age`` rounds; the ``k``-th completion of the unstarted ones is bounded below by
the volume bound of :mod:`schedlab.bounds.volume` in the memory left free by the running
ones, by the ``k``-th smallest *earliest fit* ``e_i + o_i`` (the first offset at which
``i`` alone fits beside the running load), and, for the *tall* requests
(``2 (s_i + o_i) > M``), by a chain: two tall requests ending in rounds ``C_i <= C_j``
satisfy ``C_j - C_i >= min(o_j, s_i + o_i + s_j + o_j - M)`` (proofs/dp_rounds.md).
States whose estimate reaches the best rule's objective are pruned (only strictly
better schedules are sought; if none is left, the rule's schedule is optimal). Two
further rules keep the optimum reachable: identical requests start in index order, and
with nothing running a backlog never idles (shifting everything one round earlier stays
feasible). Stopped by ``time_limit`` it returns the warm start with status
``TIME_LIMIT`` and the least estimate on the open list as a valid lower bound.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from schedlab.errors import InstanceError
from schedlab.instance import Instance
from schedlab.result import SolverOutput, Status
from schedlab.solvers import register_solver
from schedlab.solvers.cpsat import best_rule_schedule

__all__ = ["MAX_DP_REQUESTS", "solve_dp"]

#: Largest instance the DP accepts by default (``max_requests=`` overrides it).
MAX_DP_REQUESTS = 12

Running = tuple[tuple[int, int], ...]
State = tuple[int, int, Running]


class _Model:
    """Instance data, memoised load profiles of running sets, and the estimate."""

    def __init__(self, instance: Instance) -> None:
        self.n = instance.n
        self.memory = instance.memory
        self.s = instance.prompt.tolist()
        self.o = instance.output.tolist()
        self.a = instance.arrival.tolist()
        self.amax = max(self.a)
        self.vol = instance.volume.tolist()
        # twin[j]: the identical requests before j (same s, o, a)
        self.twin = [
            [
                i
                for i in range(j)
                if (self.s[i], self.o[i], self.a[i]) == (self.s[j], self.o[j], self.a[j])
            ]
            for j in range(self.n)
        ]
        self.by_volume = sorted(range(self.n), key=lambda i: self.vol[i])
        # tall requests: peaks s_i + o_i above M / 2, so no two end in the same round
        peak = [s + o for s, o in zip(self.s, self.o, strict=True)]
        self.tall = {i for i in range(self.n) if 2 * peak[i] > self.memory}
        # gap[i][j]: least C_j - C_i when C_i <= C_j (see proofs/dp_rounds.md)
        self.gap = [
            [min(self.o[j], max(0, peak[i] + peak[j] - self.memory)) for j in range(self.n)]
            for i in range(self.n)
        ]
        self._profiles: dict[Running, list[int]] = {}
        self._rises: dict[Running, list[int]] = {}
        self._fits_at: dict[tuple[Running, int, int], int] = {}
        self._apart: dict[int, list[int]] = {}

    def profile(self, running: Running) -> list[int]:
        """Tokens held in rounds ``t, t+1, ...`` by ``running`` ((request, age) pairs)."""
        load = self._profiles.get(running)
        if load is None:
            load = [0] * max((self.o[i] - age for i, age in running), default=0)
            for i, age in running:
                base = self.s[i] + age + 1
                for d in range(self.o[i] - age):
                    load[d] += base + d
            self._profiles[running] = load
        return load

    def aged(self, running: Running) -> Running:
        """``running`` one round later, without the requests that complete."""
        aged = tuple((i, age + 1) for i, age in running if age + 1 < self.o[i])
        if aged not in self._profiles:
            self._profiles[aged] = self.profile(running)[1:]
        return aged

    def grown(self, running: Running, i: int) -> Running:
        """``running`` with request ``i`` started now (its profile derived from ``running``'s)."""
        grown = tuple(sorted((*running, (i, 0))))
        if grown not in self._profiles:
            load, base, o = self.profile(running), self.s[i] + 1, self.o[i]
            load = load + [0] * (o - len(load))
            self._profiles[grown] = [x + base + d for d, x in enumerate(load[:o])] + load[o:]
        return grown

    def rise(self, running: Running) -> list[int]:
        """``load[d] + d`` for the profile of ``running`` (memoised)."""
        rise = self._rises.get(running)
        if rise is None:
            rise = [x + d for d, x in enumerate(self.profile(running))]
            self._rises[running] = rise
        return rise

    def earliest_fit(self, i: int, e: int, running: Running) -> int:
        """Least offset ``e' >= e`` at which request ``i`` alone fits beside ``running``.

        Started ``e'`` rounds after ``t``, ``i`` holds ``s_i + d + 1`` in round
        ``t + e' + d``, so it fits iff ``load[e'+d] + e' + d <= M - s_i - 1 + e'`` for
        ``0 <= d < o_i``. Requests started later only add load, so no feasible schedule
        starts ``i`` earlier than ``t + e'``.
        """
        key = (running, i, e)
        found = self._fits_at.get(key)
        if found is None:
            rise, o, limit = self.rise(running), self.o[i], self.memory - self.s[i] - 1
            found = e
            while found < len(rise) and max(rise[found : found + o]) - found > limit:
                found += 1
            self._fits_at[key] = found
        return found

    def apart(self, tall: list[int]) -> list[int]:
        """Sorted ``min_{i != j} gap[i][j]`` over ``j`` in ``tall`` (memoised by set)."""
        key = sum(1 << i for i in tall)
        apart = self._apart.get(key)
        if apart is None:
            apart = sorted(min(self.gap[i][j] for i in tall if i != j) for j in tall)
            self._apart[key] = apart
        return apart

    def estimate(self, t: int, unstarted: int, running: Running) -> int:
        """Admissible lower bound on the cost of rounds ``t, t+1, ...``."""
        load = self.profile(running)
        total = sum(self.o[i] - age for i, age in running)
        if not unstarted:
            return total
        ends = {
            i: self.earliest_fit(i, max(self.a[i] - t, 0), running) + self.o[i]
            for i in range(self.n)
            if unstarted >> i & 1
        }
        tall = [i for i in ends if i in self.tall]
        if len(tall) < 2:
            bounds = sorted(ends.values())
        else:  # completions of tall requests lie apart (``gap``)
            apart = self.apart(tall)
            chain = sorted(ends[i] for i in tall)
            first, least = chain[0], apart[0]
            for k in range(1, len(chain)):
                first += apart[k - 1]
                chain[k] = max(chain[k], chain[k - 1] + least, first)
            bounds = sorted(chain + [ends[i] for i in ends if i not in self.tall])
        waits = sum(max(self.a[i] - t, 0) for i in range(self.n) if unstarted >> i & 1)
        area, d, room, k = 0, 0, 0, 0
        memory, length = self.memory, len(load)
        for i in self.by_volume:
            if not unstarted >> i & 1:
                continue
            area += self.vol[i]
            while room < area:  # least D with free(0) + ... + free(D-1) >= area
                room += memory - load[d] if d < length else memory
                d += 1
            total += max(d, bounds[k])
            k += 1
        return total - waits

    def choices(
        self, t: int, unstarted: int, running: Running
    ) -> Iterator[tuple[list[int], Running]]:
        """Every allowed start set ``S`` with the running set it leads to."""
        ready = [i for i in range(self.n) if unstarted >> i & 1 and self.a[i] <= t]

        def extend(
            pos: int, chosen: list[int], current: Running
        ) -> Iterator[tuple[list[int], Running]]:
            # ``current`` fits; a superset of a set that does not fit never fits
            if pos == len(ready):
                if not running and not chosen and ready and self.amax == 0:
                    return  # a backlog never idles with nothing running
                yield chosen, current
                return
            yield from extend(pos + 1, chosen, current)
            i = ready[pos]
            twins_started = all(not (unstarted >> j & 1) or j in chosen for j in self.twin[i])
            # ``i`` fits beside ``current`` iff load(d) + s_i + d + 1 <= M for d < o_i
            if twins_started and self.earliest_fit(i, 0, current) == 0:
                yield from extend(pos + 1, [*chosen, i], self.grown(current, i))

        yield from extend(0, [], running)


@register_solver("dp")
def solve_dp(
    instance: Instance,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    max_requests: int = MAX_DP_REQUESTS,
    **options: Any,
) -> SolverOutput:
    """Solve exactly by the dynamic programme over rounds (see module docs).

    Raises
    ------
    InstanceError
        If the instance has more than ``max_requests`` requests.
    """
    if options:
        raise TypeError(f"dp: unknown option(s) {', '.join(sorted(options))}")
    if instance.n > max_requests:
        raise InstanceError(
            f"dp: n = {instance.n} requests exceeds max_requests = {max_requests}; "
            "use cpsat or raise max_requests"
        )
    began = time.perf_counter()
    deadline = math.inf if time_limit is None else began + time_limit
    model = _Model(instance)
    warm, rule = best_rule_schedule(instance)
    upper = int((warm + instance.output - instance.arrival).sum())
    start: State = (0, (1 << model.n) - 1, ())
    best_g: dict[State, int] = {start: 0}
    estimates: dict[State, int] = {}
    parent: dict[State, tuple[State, tuple[int, ...]]] = {}
    counter = itertools.count()
    heap = [(model.estimate(0, start[1], ()), 0, next(counter), 0, start)]
    expanded = 0
    goal: State | None = None
    while heap:
        f, g, _, t, state = heapq.heappop(heap)
        if g > best_g[state]:
            continue
        if state[1] == 0 and not state[2]:
            goal = state
            break
        expanded += 1
        if time.perf_counter() > deadline:
            heapq.heappush(heap, (f, g, next(counter), t, state))
            break
        _, unstarted, running = state
        cost = len(running) + sum(
            1 for i in range(model.n) if unstarted >> i & 1 and model.a[i] <= t
        )
        for chosen, new in model.choices(t, unstarted, running):
            aged = model.aged(new)
            left = unstarted & ~sum(1 << i for i in chosen)
            nxt: State = (min(t + 1, model.amax), left, aged)
            g2 = g + cost
            if g2 >= best_g.get(nxt, math.inf):
                continue
            h = estimates.get(nxt)
            if h is None:
                h = estimates[nxt] = model.estimate(t + 1, left, aged)
            f2 = g2 + h
            if f2 >= upper:  # only strictly better schedules are sought
                continue
            best_g[nxt] = g2
            parent[nxt] = (state, tuple(chosen))
            heapq.heappush(heap, (f2, g2, next(counter), t + 1, nxt))
    stats = {
        "warm_start": rule,
        "warm_objective": upper,
        "expanded": expanded,
        "states": len(best_g),
    }
    if goal is not None:
        return SolverOutput(_starts(model, goal, parent, start), Status.OPTIMAL, None, stats)
    if not heap:  # everything better than the warm start was pruned: it is optimal
        return SolverOutput(warm, Status.OPTIMAL, float(upper), stats)
    return SolverOutput(warm, Status.TIME_LIMIT, float(min(upper, heap[0][0])), stats)


def _starts(
    model: _Model,
    goal: State,
    parent: dict[State, tuple[State, tuple[int, ...]]],
    start: State,
) -> np.ndarray:
    """Start rounds along the parent chain from ``start`` to ``goal``."""
    chain: list[tuple[int, ...]] = []
    state = goal
    while state != start:
        state, chosen = parent[state]
        chain.append(chosen)
    starts = np.zeros(model.n, dtype=np.int64)
    for t, chosen in enumerate(reversed(chain)):
        for i in chosen:
            starts[i] = t
    return starts
