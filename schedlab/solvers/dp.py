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
``o_i - age`` rounds, and the unstarted ones obey the volume bound of
:mod:`schedlab.bounds.volume` in the memory left free by the running ones. States whose
estimate exceeds the best rule's objective are pruned. Two further rules keep the
optimum reachable: identical requests start in index order, and with nothing running a
backlog never idles (shifting everything one round earlier stays feasible). Stopped by
``time_limit`` it returns the warm start with status ``TIME_LIMIT`` and the least
estimate on the open list as a valid lower bound.
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
        self.by_output = sorted(range(self.n), key=lambda i: self.o[i])
        self._profiles: dict[Running, list[int]] = {}

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

    def fits(self, running: Running) -> bool:
        return max(self.profile(running), default=0) <= self.memory

    def estimate(self, t: int, unstarted: int, running: Running, load: list[int]) -> int:
        """Admissible lower bound on the cost of rounds ``t, t+1, ...``.

        ``load`` is the profile of ``running`` from round ``t`` on.
        """
        total = sum(self.o[i] - age for i, age in running)
        if not unstarted:
            return total
        if t >= self.amax:
            ends = [self.o[i] for i in self.by_output if unstarted >> i & 1]
            waits = 0
        else:
            ends = sorted(
                max(self.a[i] - t, 0) + self.o[i] for i in range(self.n) if unstarted >> i & 1
            )
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
            total += max(d, ends[k])
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
            if all(not (unstarted >> j & 1) or j in chosen for j in self.twin[i]):
                grown = tuple(sorted((*current, (i, 0))))
                if self.fits(grown):
                    yield from extend(pos + 1, [*chosen, i], grown)

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
    parent: dict[State, tuple[State, tuple[int, ...]]] = {}
    counter = itertools.count()
    heap = [(model.estimate(0, start[1], (), []), 0, next(counter), 0, start)]
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
            aged = tuple((i, age + 1) for i, age in new if age + 1 < model.o[i])
            left = unstarted & ~sum(1 << i for i in chosen)
            nxt: State = (min(t + 1, model.amax), left, aged)
            g2 = g + cost
            if g2 >= best_g.get(nxt, math.inf):
                continue
            f2 = g2 + model.estimate(t + 1, left, aged, model.profile(new)[1:])
            if f2 > upper:
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
