r"""Exact dynamic programme over rounds for small instances.

It accepts at most :data:`MAX_DP_REQUESTS` ``= 12`` requests unless ``max_requests=``
says otherwise: the search is exponential in ``n`` (the state count below, and up to
``2^n - n - 1`` subset searches), so the cap is a guard, not a guarantee. ``n = 10`` is
proven in seconds (figures in ``proofs/dp_rounds.md``); ``n = 12`` is still accepted so
that it can be tried under a time limit, which returns a verified schedule and a valid
lower bound; beyond that, use ``cpsat``. It also refuses instances spanning more than
:data:`MAX_DP_ROUNDS` rounds (``a_max + sum_i o_i``, ``max_rounds=`` overrides it): every
state is one round, and the load profiles kept for the running sets are up to
``max_i o_i`` long, so time and memory grow about as the square of the outputs.

State and recursion
-------------------
At the start of round ``t`` a state is ``(t', U, R, spare, due)``: ``U`` the requests not
yet started (a bitmask), ``R`` the running ones with their ages ``t - p_i``
(``1 <= age < o_i``), ``t' = min(t, a_max + 1)`` with ``a_max = max_i a_i``, and two small
integers of the *left-shift rule* below. Time matters through the releases and through
that rule, which asks which requests were released before ``t`` and by ``t - 1``; from
``t = a_max + 1`` on every request was, so the costs and the allowed moves no longer
depend on ``t``. A decision starts a set ``S`` of released requests of ``U`` such that
the running set ``R ∪ S`` stays within ``M`` in every future round; this is necessary
(later starts only add load) and sufficient (starting nothing more lets them all
finish). Writing the objective as ``sum_t #{i : a_i <= t < C_i}``, each round costs the
released, unfinished requests:

.. math:: V(t', U, R) = |R| + |\{i \in U : a_i \le t\}|
          + \min_{S} V(\min(t+1, a_{max} + 1), U \setminus S, R'),

with ``R'`` the aged ``R ∪ S`` without the requests that complete. ``V = 0`` when
``U = R = ∅``. The number of ``(t', U, R)`` is at most
``(a_max + 2) · sum_{R ⊆ [n]} 2^{n - |R|} prod_{i in R} (o_i - 1)``; memory reduces it
sharply (only running sets that fit count). ``spare`` takes at most ``1 + #{s_i}``
values and ``due`` at most ``max o_i``.

Rules that keep an optimal schedule reachable (proofs/dp_rounds.md)
--------------------------------------------------------------------
Identical requests start in index order; with nothing running a backlog never idles;
and the *left-shift rule*: in an optimal schedule no request can start one round earlier
with all others fixed (that is feasible iff ``i`` fits in round ``p_i - 1`` and no round
of ``p_i .. C_i - 2`` is full, and it saves one). So a request that fitted in round
``t - 1`` (``spare``: that round's free memory, rounded down to the distinct
``s_i + 1``) may start at ``t`` only if some round of ``t .. t + o_i - 2`` is full
(exactly ``M`` tokens); ``due`` is the number of rounds left to the earliest such
pending deadline, and a state whose deadline passes unmet is dropped.

Search and estimate
-------------------
The recursion is a shortest path over this acyclic state graph, solved by A*
(Hart, Nilsson & Raphael 1968) with an admissible estimate: running requests still need
``o_i - age`` rounds; the ``k``-th completion of the unstarted ones is bounded below by
the volume bound of :mod:`schedlab.offline.bounds.volume` in the memory left free by the running
ones, by the ``k``-th smallest *earliest fit* ``e_i + o_i`` (the first offset at which
``i`` alone fits beside the running load), and, for the *tall* requests
(``2 (s_i + o_i) > M``), by a chain: two tall requests ending in rounds ``C_i <= C_j``
satisfy ``C_j - C_i >= min(o_j, s_i + o_i + s_j + o_j - M)``. When a state reaches the
top of the open list this estimate is raised (lazily) by the *subset optima*
``W(X)``, the optimal objective of the requests ``X`` alone as a backlog (releases
dropped): with ``B = min_{i in U} e_i``, the unstarted requests cost at least
``|U| B + W(U)``, and, for the running requests ``R_tau`` of age at most ``tau``, at
least ``W(R_tau ∪ U) - sum_{R_tau} (o_i - age_i) - tau (|R_tau| + |U|)`` (both by
shifting a schedule in time and dropping the other requests). ``W`` of a strict subset
is found by the same search on the sub-instance (memoised by mask; recursion depth
``<= n``), stopped after ``SUBSET_BUDGET`` expansions with its valid lower bound.
States whose estimate reaches the best rule's objective are pruned (only strictly
better schedules are sought; if none is left, the rule's schedule is optimal). Stopped
by ``time_limit``, ``work`` or the memory budget it returns the warm start with
status ``TIME_LIMIT``, ``WORK_LIMIT`` or ``MEMORY_LIMIT`` and the least estimate on the
open list as a valid lower bound.

Work and memory
---------------
The work budget counts expansions of the main search, :data:`DEFAULT_EXPANSIONS` by
default (about a minute on the instances that need it: the subset searches run besides
it). Memory goes to the states (their entries in the open list, the costs, parents and
estimates kept by state) and above all to the load profiles of the running sets, lists
up to ``max_i o_i`` long. The search counts both as it makes them (:class:`_Account`:
:data:`STATE_BYTES` a state, :data:`CELL_BYTES` a profile entry), the subset searches'
while they run, and once the count passes the memory budget
(:class:`~schedlab.budget.Budget`'s ``max_memory``) it stops as the work budget stops
it, with ``stats["stopped_by"] = "memory"``. The count is deterministic, so that stop is
as reproducible as the work budget's.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError, InstanceError
from schedlab.offline.instance import Instance
from schedlab.offline.priority import best_rule_schedule
from schedlab.offline.result import SolverOutput, Status
from schedlab.offline.solvers.contract import integer_option

__all__ = [
    "CELL_BYTES",
    "DEFAULT_EXPANSIONS",
    "MAX_DP_REQUESTS",
    "MAX_DP_ROUNDS",
    "MAX_START_SETS",
    "STATE_BYTES",
    "solve_dp",
]

#: Largest instance the DP accepts by default (``max_requests=`` overrides it).
MAX_DP_REQUESTS = 12

#: Most rounds an instance may span by default, ``a_max + sum_i o_i`` (the end of the
#: schedule that runs the requests one at a time after the last release; ``max_rounds=``
#: overrides it). Five times 4,096, so that ``receding-horizon``'s default windows of five
#: requests from the shipped length tables (outputs up to 4,056) are all accepted. Near it
#: a backlog whose requests cannot overlap is the costliest shape (``docs/design.md``,
#: "Decision record", gives its time and memory).
MAX_DP_ROUNDS = 5 * 4_096

#: The most start sets one state may have (every subset of the ready requests that fits
#: is one, with the running set it leads to: up to tens of kilobytes with long outputs),
#: so that one expansion cannot take the machine's memory; :func:`solve_dp` refuses the
#: instance instead. The 4,096 subsets of 12 requests stay far below it.
MAX_START_SETS = 20_000

#: Expansions of the main search by default (``work=``): sized to end within
#: about a minute where the search does not end sooner.
DEFAULT_EXPANSIONS = 30_000

#: Bytes counted for a state kept by the search: its key and entries in the open list
#: and in the costs, parents and estimates kept by state (module docs, "Work and memory").
STATE_BYTES = 1_200

#: Bytes counted for an entry of a kept load profile: a list slot and an integer object.
CELL_BYTES = 40

Running = tuple[tuple[int, int], ...]
#: ``(min(t, a_max + 1), U, R, spare, due)``: see the module docs.
State = tuple[int, int, Running, int, int]
#: ``due`` when no saturated round is owed.
_NO_DUE = 1 << 30
#: Expansions allowed to the search for one subset optimum; past it, its bound is used.
#: Read when a :class:`_SubsetOptima` is made (its ``budget=None``), so changing it takes effect.
SUBSET_BUDGET = 100


class _Account:
    """The bytes a search holds by its count (module docs), shared by the main search and
    the subset searches; :attr:`over` once they pass ``limit``."""

    __slots__ = ("held", "limit")

    def __init__(self, limit: float) -> None:
        self.held = 0
        self.limit = limit

    @property
    def over(self) -> bool:
        """Whether the bytes held pass the limit."""
        return self.held > self.limit


class _Model:
    """Instance data, memoised load profiles of running sets, and the estimate.

    ``subsets`` (optional) holds the optima of the backlog sub-instances of the original
    instance; ``ids[i]`` is the original index of this instance's request ``i``.
    ``account`` counts the bytes of what it keeps (and its searches' states); ``held`` is
    its own share of that count.
    """

    def __init__(
        self,
        instance: Instance,
        subsets: _SubsetOptima | None = None,
        ids: list[int] | None = None,
        account: _Account | None = None,
    ) -> None:
        self.account = _Account(math.inf) if account is None else account
        self.held = 0
        self.instance = instance
        self.n = instance.n
        self.everyone = (1 << self.n) - 1
        self.subsets = subsets
        self.ids = list(range(self.n)) if ids is None else ids
        self._global: dict[int, int] = {}
        self.kv_tokens = instance.kv_tokens
        self.s = instance.prompt.tolist()
        self.o = instance.output.tolist()
        self.a = instance.arrival.tolist()
        self.amax = max(self.a)
        #: first round from which the moves no longer depend on ``t`` (see :meth:`clock`)
        self.settled = self.amax + 1
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
        self.tall = {i for i in range(self.n) if 2 * peak[i] > self.kv_tokens}
        # gap[i][j]: least C_j - C_i when C_i <= C_j (see proofs/dp_rounds.md)
        self.gap = [
            [min(self.o[j], max(0, peak[i] + peak[j] - self.kv_tokens)) for j in range(self.n)]
            for i in range(self.n)
        ]
        self._profiles: dict[Running, list[int]] = {}
        self._rises: dict[Running, list[int]] = {}
        self._fits_at: dict[tuple[Running, int, int], int] = {}
        self._apart: dict[int, list[int]] = {}
        # estimates by (t', U, R): base, and refined by the subset optima
        self.estimates: dict[tuple[int, int, Running], int] = {}
        self.refinements: dict[tuple[int, int, Running], int] = {}

    def count(self, size: int) -> None:
        """Add ``size`` bytes to this model's and its account's count."""
        self.held += size
        self.account.held += size

    def release(self) -> None:
        """Take this model's count off its account (its searches are over)."""
        self.account.held -= self.held
        self.held = 0

    def clock(self, t: int) -> int:
        """``t' = min(t, a_max + 1)``, the part of round ``t`` a state keeps.

        From ``t = a_max + 1`` on every request was released before ``t`` and by ``t - 1``,
        so the costs, the left-shift test ``a_i < t`` and the requests over which
        :meth:`spare` was taken are the same for every such ``t`` (proofs/dp_rounds.md).
        """
        return min(t, self.settled)

    def global_mask(self, mask: int) -> int:
        """``mask`` in the original instance's indices (memoised)."""
        found = self._global.get(mask)
        if found is None:
            found = sum(1 << self.ids[i] for i in range(self.n) if mask >> i & 1)
            self._global[mask] = found
        return found

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
            self.count(CELL_BYTES * len(load))
        return load

    def aged(self, running: Running) -> Running:
        """``running`` one round later, without the requests that complete."""
        aged = tuple((i, age + 1) for i, age in running if age + 1 < self.o[i])
        if aged not in self._profiles:
            self._profiles[aged] = self.profile(running)[1:]
            self.count(CELL_BYTES * len(self._profiles[aged]))
        return aged

    def grown(self, running: Running, i: int) -> Running:
        """``running`` with request ``i`` started now (its profile derived from ``running``'s)."""
        grown = tuple(sorted((*running, (i, 0))))
        if grown not in self._profiles:
            load, base, o = self.profile(running), self.s[i] + 1, self.o[i]
            load = load + [0] * (o - len(load))
            self._profiles[grown] = [x + base + d for d, x in enumerate(load[:o])] + load[o:]
            self.count(CELL_BYTES * len(self._profiles[grown]))
        return grown

    def rise(self, running: Running) -> list[int]:
        """``load[d] + d`` for the profile of ``running`` (memoised)."""
        rise = self._rises.get(running)
        if rise is None:
            rise = [x + d for d, x in enumerate(self.profile(running))]
            self._rises[running] = rise
            self.count(CELL_BYTES * len(rise))
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
            rise, o, limit = self.rise(running), self.o[i], self.kv_tokens - self.s[i] - 1
            found = e
            while found < len(rise):
                window = rise[found : found + o]
                top = max(window)
                if top - found <= limit:
                    break
                # every offset in (found, x] still covers round x, so needs top - limit
                x = found + window.index(top)
                found = max(found + 1, min(x + 1, top - limit))
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
        memory, length = self.kv_tokens, len(load)
        part = 0
        for i in self.by_volume:
            if not unstarted >> i & 1:
                continue
            area += self.vol[i]
            while room < area:  # least D with free(0) + ... + free(D-1) >= area
                room += memory - load[d] if d < length else memory
                d += 1
            part += max(d, bounds[k])
            k += 1
        return total + part - waits

    def refined(self, t: int, unstarted: int, running: Running, base: int) -> int:
        """``base`` raised by the subset optima ``W`` (``base`` without ``subsets``).

        With ``rest_i = o_i - age_i`` on ``R``, ``B = min_{i in U} e_i`` (earliest fit) and
        ``R_tau`` the running requests of age ``<= tau``, the cost from the state is at least

        .. math:: \\sum_R rest_i + |U| B + W(U) - waits, \\qquad
                  \\sum_{R \\setminus R_\\tau} rest_i + W(R_\\tau \\cup U)
                  - \\tau (|R_\\tau| + |U|) - waits

        (proofs/dp_rounds.md); sets equal to this instance's own request set are skipped.
        """
        if self.subsets is None or not unstarted:
            return base
        members = [i for i in range(self.n) if unstarted >> i & 1]
        waits = sum(max(self.a[i] - t, 0) for i in members)
        rest = [self.o[i] - age for i, age in running]
        best = base
        if unstarted != self.everyone:
            shift = min(self.earliest_fit(i, max(self.a[i] - t, 0), running) for i in members)
            value = self.subsets.value(self.global_mask(unstarted))
            best = max(best, sum(rest) + len(members) * shift + value - waits)
        by_age = sorted(range(len(running)), key=lambda k: running[k][1])
        mask, out = unstarted, sum(rest)
        for pos, k in enumerate(by_age):
            i, age = running[k]
            mask |= 1 << i
            out -= rest[k]
            if pos + 1 < len(by_age) and running[by_age[pos + 1]][1] == age:
                continue
            if mask == self.everyone:
                break
            value = self.subsets.value(self.global_mask(mask))
            best = max(best, out + value - age * (pos + 1 + len(members)) - waits)
        return best

    def spare(self, t: int, unstarted: int, free: int) -> int:
        """``free`` rounded down to the largest ``s_i + 1 <= free`` over ``i`` in ``U`` released
        by round ``t`` (0 if none): all that matters of round ``t``'s free memory."""
        return max(
            (
                self.s[i] + 1
                for i in range(self.n)
                if unstarted >> i & 1 and self.a[i] <= t and self.s[i] < free
            ),
            default=0,
        )

    def choices(
        self, t: int, unstarted: int, running: Running, spare: int
    ) -> list[tuple[list[int], Running]]:
        """Every allowed start set ``S`` with the running set it leads to.

        A request of one round that fitted in round ``t - 1`` (``s_i + 1 <= spare``, released
        by then) is not started now: one round earlier is strictly better and feasible.
        """
        ready = [
            i
            for i in range(self.n)
            if unstarted >> i & 1
            and self.a[i] <= t
            and not (self.o[i] == 1 and self.a[i] < t and self.s[i] < spare)
        ]

        # extended one request at a time; a superset of a set that does not fit never fits
        sets: list[tuple[list[int], Running]] = [([], running)]
        for i in ready:
            limit, o, twins = self.kv_tokens - self.s[i], self.o[i], self.twin[i]
            for chosen, current in list(sets):
                if (
                    all(not (unstarted >> j & 1) or j in chosen for j in twins)
                    and max(self.rise(current)[:o], default=0) < limit
                ):  # ``i`` fits iff load(d) + s_i + d + 1 <= M for d < o_i
                    sets.append(([*chosen, i], self.grown(current, i)))
                    if len(sets) > MAX_START_SETS:
                        raise InputError(
                            f"dp: a state has more than {MAX_START_SETS:,} start sets "
                            f"({len(ready)} requests ready at once, many fitting together): "
                            "too many for dp, whose memory would run out; use cpsat"
                        )
        if not running and ready and self.amax == 0:
            sets.pop(0)  # a backlog never idles with nothing running
        return sets


class _SubsetOptima:
    """``W(X)``: the optimal objective of the requests ``X`` alone as a backlog (releases
    dropped), by mask of the original indices, each found on demand by the same search on
    the sub-instance; a search stopped by ``budget`` expansions (``None``: the module's
    :data:`SUBSET_BUDGET` as it is now) or by ``deadline`` leaves its valid lower bound
    instead (proofs/dp_rounds.md)."""

    def __init__(
        self,
        instance: Instance,
        deadline: float,
        budget: float | None = None,
        account: _Account | None = None,
    ) -> None:
        self.instance = instance
        self.deadline = deadline
        self.account = _Account(math.inf) if account is None else account
        self.budget = SUBSET_BUDGET if budget is None else budget
        self.values: dict[int, int] = {}
        self.searches = 0

    def value(self, mask: int) -> int:
        """``W(mask)`` or a lower bound on it (memoised)."""
        found = self.values.get(mask)
        if found is None:
            members = [i for i in range(self.instance.n) if mask >> i & 1]
            output = self.instance.output[members]
            if len(members) == 1:
                found = int(output[0])
            else:
                prompt = self.instance.prompt[members]
                sub = Instance.from_arrays(self.instance.kv_tokens, prompt, output)
                self.searches += 1
                model = _Model(sub, self, members, self.account)
                found = _Search(model, self.deadline).run(self.budget).bound
                model.release()  # its states and profiles are dropped with it
            self.values[mask] = found
        return found


class _Search:
    """A* from the empty schedule to the goal ``U = R = ∅`` (see module docs)."""

    def __init__(self, model: _Model, deadline: float) -> None:
        self.model = model
        self.deadline = deadline
        self.warm, self.rule, self.upper = _warm_start(model.instance)
        self.start: State = (0, model.everyone, (), 0, _NO_DUE)
        self.parent: dict[State, tuple[State, tuple[int, ...]]] = {}
        self.goal: State | None = None
        self.bound = self.upper
        self.expanded = 0
        self.stopped: str | None = None
        self.best_g: dict[State, int] = {self.start: 0}
        self.counter = itertools.count()
        # entries (g + h, g, tie-break, t, state)
        self.heap: list[tuple[int, int, int, int, State]] = [
            (model.estimate(0, model.everyone, ()), 0, next(self.counter), 0, self.start)
        ]

    def run(self, budget: float = math.inf) -> _Search:
        """Search on for at most ``budget`` more expansions (or to the deadline, or until
        the model's account passes its limit); sets ``goal`` (a strictly better schedule,
        optimal) or ``stopped`` (``"work"``, ``"time_limit"`` or ``"memory"``) and
        ``bound``."""
        model, upper, heap, best_g, counter = (
            self.model,
            self.upper,
            self.heap,
            self.best_g,
            self.counter,
        )
        estimates: dict[tuple[int, int, Running], int] = model.estimates
        refined: dict[tuple[int, int, Running], int] = model.refinements
        limit = self.expanded + budget
        account = model.account
        self.stopped = None
        while heap:
            f, g, _, t, state = heapq.heappop(heap)
            if g > best_g[state]:
                continue
            key = state[:3]
            h = refined.get(key)
            if h is None:  # refine lazily, only for states that reach the top of the heap
                h = refined[key] = model.refined(t, state[1], state[2], f - g)
            if g + h > f:
                if g + h < upper:
                    heapq.heappush(heap, (g + h, g, next(counter), t, state))
                continue
            if state[1] == 0 and not state[2]:
                self.goal, self.bound = state, g
                break
            stop = (
                "time_limit"
                if time.perf_counter() > self.deadline
                else "work"
                if self.expanded >= limit
                else "memory"
                if account.over
                else None
            )
            if stop is not None:
                heapq.heappush(heap, (f, g, next(counter), t, state))
                self.stopped, self.bound = stop, min(upper, f)
                break
            self.expanded += 1
            _, unstarted, running, spare, due = state
            cost = len(running) + sum(
                1 for i in range(model.n) if unstarted >> i & 1 and model.a[i] <= t
            )
            for chosen, new in model.choices(t, unstarted, running, spare):
                free = model.kv_tokens - (model.profile(new)[0] if new else 0)
                due2 = due
                for i in chosen:  # started although it fitted in round t - 1: see module docs
                    if model.a[i] < t and model.s[i] < spare:
                        due2 = min(due2, model.o[i] - 2)
                if free == 0:
                    due2 = _NO_DUE
                elif due2 == 0:
                    continue
                elif due2 != _NO_DUE:
                    due2 -= 1
                aged = model.aged(new)
                left = unstarted & ~sum(1 << i for i in chosen)
                key = (model.clock(t + 1), left, aged)
                nxt: State = (*key, model.spare(t, left, free), due2)
                g2 = g + cost
                if g2 >= best_g.get(nxt, math.inf):
                    continue
                h = refined.get(key, estimates.get(key))
                if h is None:
                    h = estimates[key] = model.estimate(t + 1, left, aged)
                f2 = g2 + h
                if f2 >= upper:  # only strictly better schedules are sought
                    continue
                best_g[nxt] = g2
                self.parent[nxt] = (state, tuple(chosen))
                heapq.heappush(heap, (f2, g2, next(counter), t + 1, nxt))
                model.count(STATE_BYTES)
        if self.goal is None and not heap:  # nothing beats the warm start: it is optimal
            self.bound = upper
        return self

    def starts(self) -> np.ndarray:
        """The best schedule found: along the parent chain to ``goal``, else the warm start."""
        if self.goal is None:
            return self.warm
        chain: list[tuple[int, ...]] = []
        state = self.goal
        while state != self.start:
            state, chosen = self.parent[state]
            chain.append(chosen)
        starts = np.zeros(self.model.n, dtype=np.int64)
        for t, chosen in enumerate(reversed(chain)):
            for i in chosen:
                starts[i] = t
        return starts


def _warm_start(instance: Instance) -> tuple[np.ndarray, str, int]:
    """The best rule's schedule, its rule and its objective: the search's upper bound."""
    warm, rule = best_rule_schedule(instance)
    return warm, rule, int((warm + instance.output - instance.arrival).sum())


def solve_dp(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    max_requests: int = MAX_DP_REQUESTS,
    max_rounds: int = MAX_DP_ROUNDS,
    work: int | None = DEFAULT_EXPANSIONS,
) -> SolverOutput:
    """Solve exactly by the dynamic programme over rounds (see module docs).

    Parameters
    ----------
    budget
        Wall-clock cap (none: until proven) and memory budget (module docs, "Work and
        memory").
    seed
        Unused: the search is deterministic.
    max_requests
        The largest instance accepted (``>= 1``).
    max_rounds
        The most rounds the instance may span, ``a_max + sum_i o_i`` (``>= 1``;
        :data:`MAX_DP_ROUNDS`).
    work
        The work budget: state expansions of the main search (``>= 1``;
        :data:`DEFAULT_EXPANSIONS`; ``None``: until proven or out of memory).
        Stopped by it, by the cap or by the memory budget, the answer is the warm start
        with status ``WORK_LIMIT``, ``TIME_LIMIT`` or ``MEMORY_LIMIT``, the search's
        valid lower bound and ``stats["stopped_by"]`` saying which (and
        ``stats["work_budget"]`` the budget, when it was that).

    Raises
    ------
    InputError, InputTypeError
        If an option is not an integer >= 1 (``work`` may be ``None``).
    InstanceError
        If the instance has more than ``max_requests`` requests or spans more than
        ``max_rounds`` rounds.
    """
    max_requests = integer_option("dp", "max_requests", max_requests, "", minimum=1)
    max_rounds = integer_option("dp", "max_rounds", max_rounds, "", minimum=1)
    if work is not None:
        work = integer_option("dp", "work", work, " or None", minimum=1)
    if instance.n > max_requests:
        raise InstanceError(
            f"dp: n = {instance.n} requests exceeds max_requests = {max_requests}; "
            "use cpsat or raise max_requests"
        )
    rounds = int(instance.arrival.max() + instance.output.sum())
    if rounds > max_rounds:
        raise InstanceError(
            f"dp: instance {instance.name or '(unnamed)'} spans {rounds:,} rounds (latest "
            f"arrival + sum of outputs), above max_rounds = {max_rounds:,}; use local-search "
            "or lp-search, or raise max_rounds"
        )
    account = _Account(budget.max_memory)
    subsets = _SubsetOptima(instance, budget.deadline, account=account)
    search = _Search(_Model(instance, subsets, account=account), budget.deadline)
    search.run(math.inf if work is None else work)
    stats = {
        "warm_start": search.rule,
        "warm_objective": search.upper,
        "expanded": search.expanded,
        "states": len(search.best_g),
        "subset_searches": subsets.searches,
        "memory_counted": account.held,
        "stopped_by": search.stopped,
    }
    if search.stopped:
        if search.stopped == "work":
            stats["work_budget"] = {"work": work}
        status = Status.stopped(search.stopped)
        return SolverOutput(search.warm, status, float(search.bound), stats)
    # a goal is strictly better than the warm start; with none, the warm start is optimal
    return SolverOutput(search.starts(), Status.OPTIMAL, float(search.bound), stats)
