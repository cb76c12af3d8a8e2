"""Sorted-F: batches of least ``F(X) = sum_{i in X} o_i / |X|^2`` (Wang, Ye, Zhou).

Formalisation (ours; the paper, arXiv 2508.06133, is not available to us in full)
--------------------------------------------------------------------------------
A *batch* is a set ``X`` of requests with ``sum_{i in X} (s_i + o_i) <= M``: started in
the same round, its members never exceed the memory, because request ``i`` holds at
most its peak ``w_i = s_i + o_i`` tokens. Sorted-F repeatedly takes, among the requests
not yet batched, a feasible batch of least

.. math:: F(X) = \\frac{\\sum_{i \\in X} o_i}{|X|^2},

removes it, and goes on until every request is batched. Each batch is also *pruned*:
while dropping its member of largest ``o`` lowers ``F``, that member is dropped, so no
single removal lowers ``F`` and every member has ``o_j < 2 \\sum_X o / |X|``
(``proofs/sorted_f.md``, Lemma 1). The batches come out in non-decreasing ``F`` (a later
batch was available earlier), so "in order of F" is the order of selection.

Batch selection
---------------
``exact``
    For each cardinality ``k``, least ``sum o`` over ``k`` requests with
    ``sum w <= M`` is a cardinality-constrained knapsack, solved by a dynamic programme
    over (cardinality, capacity): ``O(r K M)`` for ``r`` remaining requests and ``K``
    the largest feasible cardinality. It returns a batch of least ``F``.
``fast``
    Requests are put in classes ``o in [2^j, 2^{j+1})``; within a class, sorted by
    ``w``. The candidate pool is the union of each class's shortest ``w``-prefix that
    fits in ``M``. Scanning the pool by increasing ``o`` while keeping the largest
    number of smallest-``w`` items that fit (a max-heap) yields, for every threshold
    ``D``, the largest feasible batch among pooled requests with ``o <= D``; the one of
    least ``F`` is pruned and taken. Guarantee (``proofs/sorted_f.md``, Lemma 3): the
    batch ``X`` has ``max_X o / |X| < 4 q``, where ``q`` is the least ``max_Z o / |Z|``
    over all feasible batches ``Z`` (the exact method achieves ``< 2 q``). Cost per
    batch ``O(P log P)`` for a pool of ``P`` requests, independent of ``n``.
``auto``
    ``exact`` while ``r K (M + 1) <= 2 * 10^7``, else ``fast``.

The exact programme keeps ``r K (M + 1)`` improvement masks of a byte and a few arrays of
``K (M + 1)`` integers (:func:`exact_bytes`): with ``exact`` asked for, a selection that
would pass the memory budget is refused (:class:`~schedlab.errors.MemoryBudgetError`),
and ``auto`` takes ``fast`` instead. Its work, the cells ``r K (M + 1)`` summed over the
selections, has a budget too, ``work`` (:data:`EXACT_CELLS`, about a minute); once it
is spent the remaining batches are selected by ``fast`` (``stopped_by == "work"``).

Schedules
---------
``sorted-f-seq`` (sequential): batch ``b`` starts in round
``T_b = max(T_{b-1} + max_{X_{b-1}} o, max_{X_b} a)``; all members start at ``T_b``.
This is the variant with a proven guarantee: on backlogs (all ``a_i = 0``) its total
latency is at most 80 times the optimum with exact selection and 160 times with fast
selection (``proofs/sorted_f.md``, Theorem). ``sorted-f`` (continuous) also decodes
the concatenated batch order with :func:`~schedlab.offline.decoder.list_schedule`,
strict and, up to ``BACKFILL_MAX_N`` requests, backfilling, and returns the best of
these schedules, so it keeps the sequential guarantee. Size rule: the backfilling
decode of an order not sorted by output length costs several times the strict one
(``docs/design.md``, "Decision record"), so above
``BACKFILL_MAX_N`` requests only the sequential and strict schedules compete.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.errors import InputError
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput

__all__ = [
    "BACKFILL_MAX_N",
    "COMPILED_MAX_MEMORY",
    "ENGINES",
    "EXACT_CELLS",
    "EXACT_WORK_LIMIT",
    "FAST_CHUNK",
    "batch_order",
    "exact_bytes",
    "exact_min_f_batch",
    "f_value",
    "fast_min_f_batch",
    "prune_batch",
    "sequential_starts",
    "sorted_f_batches",
]

#: ``auto`` uses the exact programme while remaining * max cardinality * (M + 1) is at most this.
EXACT_WORK_LIMIT = 20_000_000

#: The exact programme's work budget by default, in cells ``r K (M + 1)`` over all its
#: selections: about a minute (it fills some 2 * 10^8 cells a second).
EXACT_CELLS = 10**10

#: ``sorted-f`` adds the backfilling decode of the batch order up to this many requests.
BACKFILL_MAX_N = 20_000

_METHODS = ("auto", "exact", "fast")

#: Engines of the ``fast`` selection (:func:`sorted_f_batches`).
ENGINES: tuple[str, ...] = ("compiled", "python")

#: Batches per call of the compiled selection (the budget is checked between calls).
FAST_CHUNK = 256

#: Largest ``M`` the compiled selection takes: ``M^3 < 2^63``, so its products fit in
#: ``int64`` (module docs of :mod:`schedlab.offline.solvers.compiled_sorted_f`).
COMPILED_MAX_MEMORY = 2_097_151


def f_value(output: np.ndarray, members: np.ndarray) -> float:
    """``F(X) = sum_{i in X} o_i / |X|^2`` of the batch ``members``."""
    return float(output[members].sum()) / len(members) ** 2


def prune_batch(output: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Drop the member of largest ``o`` while that lowers ``F``; return the rest.

    Dropping ``j`` from ``X`` (``|X| = k``, ``sum o = S``) gives ``(S - o_j)/(k - 1)^2``,
    least for the largest ``o_j``; so when dropping it does not lower ``F``, no single
    removal does. Members are returned by increasing ``o`` (ties by index).
    """
    members = members[np.lexsort((members, output[members]))]
    total = int(output[members].sum())
    k = len(members)
    while k > 1:
        largest = int(output[members[k - 1]])
        if (total - largest) * k * k >= total * (k - 1) ** 2:
            break
        total -= largest
        k -= 1
    return members[:k]


def _max_cardinality(weight: np.ndarray, memory: int) -> int:
    return int(np.searchsorted(np.cumsum(np.sort(weight)), memory, side="right"))


def exact_bytes(remaining: int, cardinality: int, memory: int) -> int:
    """Bytes the exact programme takes for ``remaining`` requests of which at most
    ``cardinality`` fit together: the masks, and the table ``g`` with the three
    temporaries of one update (module docs of :func:`exact_min_f_batch`)."""
    cells = cardinality * (memory + 1)
    return remaining * cells + 4 * 8 * (cells + memory + 1)


def exact_min_f_batch(weight: np.ndarray, output: np.ndarray, memory: int) -> np.ndarray:
    """A batch of least ``F`` among items with peaks ``weight`` and outputs ``output``.

    Dynamic programme: ``g[k][c]`` is the least ``sum o`` over ``k`` items with
    ``sum w <= c``; item ``(w, o)`` updates ``g[k][c] <- min(g[k][c], g[k-1][c-w] + o)``
    for all ``k, c`` at once. The least ``g[k][M] / k^2`` over ``k`` is the optimum;
    the batch is recovered from the per-item improvement masks. Ties: the largest ``k``,
    then the earliest items.

    Returns
    -------
    numpy.ndarray
        Positions into ``weight`` / ``output`` of the batch (non-empty, since every
        ``w_i <= M``).
    """
    r = len(weight)
    kmax = max(_max_cardinality(weight, memory), 1)
    big = np.iinfo(np.int64).max // 4
    g = np.full((kmax + 1, memory + 1), big, dtype=np.int64)
    g[0, :] = 0
    masks = np.zeros((r, kmax, memory + 1), dtype=bool)
    for i, (w, o) in enumerate(zip(weight.tolist(), output.tolist(), strict=True)):
        candidate = g[:-1, : memory + 1 - w] + o
        better = candidate < g[1:, w:]
        masks[i, :, w:] = better
        g[1:, w:] = np.where(better, candidate, g[1:, w:])
    values = g[1:, memory]
    ks = np.arange(1, kmax + 1)
    ratio = np.where(values < big, values / ks**2, np.inf)
    best_k = int(ks[np.flatnonzero(ratio == ratio.min())[-1]])
    chosen = []
    k, c = best_k, memory
    for i in range(r - 1, -1, -1):
        if k and masks[i, k - 1, c]:
            chosen.append(i)
            k -= 1
            c -= int(weight[i])
    return np.array(sorted(chosen), dtype=np.int64)


class _FastSelector:
    """Remaining requests in output classes, each sorted by peak, for ``fast`` selection."""

    def __init__(self, weight: np.ndarray, output: np.ndarray, memory: int) -> None:
        self.kv_tokens = memory
        self.weight = weight
        self.output = output
        self.alive = np.ones(len(weight), dtype=bool)
        cls = np.floor(np.log2(output)).astype(np.int64)
        self.classes: list[np.ndarray] = []
        for j in np.unique(cls).tolist():
            members = np.flatnonzero(cls == j)
            self.classes.append(members[np.lexsort((members, output[members], weight[members]))])
        self.pointer = np.zeros(len(self.classes), dtype=np.int64)
        # the kernel's form of the classes (flat members, offsets) and its room
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def remove(self, members: np.ndarray) -> None:
        self.alive[members] = False

    def take(self, left: int, limit: int, stop_left: int) -> list[np.ndarray]:
        """``select``, ``prune_batch`` and ``remove`` up to ``limit`` times while more
        than ``stop_left`` of the ``left`` live requests remain, compiled
        (:func:`~schedlab.offline.solvers.compiled_sorted_f.select_batches`; needs
        ``M <= COMPILED_MAX_MEMORY``). Returns the batches."""
        from schedlab.offline.solvers import compiled_sorted_f  # numba loads here

        if self._flat is None:
            self._flat = (
                np.concatenate(self.classes),
                np.cumsum([0] + [len(c) for c in self.classes], dtype=np.int64),
                np.empty((3, len(self.weight)), dtype=np.int64),
            )
        classes, class_start, room = self._flat
        pool, members, sizes = room
        made = compiled_sorted_f.select_batches(
            self.weight,
            self.output,
            self.kv_tokens,
            classes,
            class_start,
            self.pointer,
            self.alive,
            left,
            limit,
            stop_left,
            pool,
            members,
            sizes,
        )
        ends = np.cumsum(sizes[:made])
        return [
            members[end - size : end].copy() for end, size in zip(ends, sizes[:made], strict=True)
        ]

    def _head(self, c: int) -> np.ndarray:
        """Alive members of class ``c``: the shortest peak-sorted prefix fitting in ``M``."""
        members = self.classes[c]
        start = self.pointer[c]
        while start < len(members) and not self.alive[members[start]]:
            start += 1
        self.pointer[c] = start
        window = 64
        while True:
            chunk = members[start : start + window]
            chunk = chunk[self.alive[chunk]]
            fits = int(np.searchsorted(np.cumsum(self.weight[chunk]), self.kv_tokens, "right"))
            if fits < len(chunk) or start + window >= len(members):
                return chunk[:fits]
            window *= 4

    def select(self) -> np.ndarray:
        pool = np.concatenate([self._head(c) for c in range(len(self.classes))])
        pool = pool[np.lexsort((pool, self.output[pool]))]
        weights = self.weight[pool].tolist()
        outputs = self.output[pool].tolist()
        heap: list[tuple[int, int, int]] = []
        load = total = 0
        best, best_at = np.inf, 0
        for r, (w, o) in enumerate(zip(weights, outputs, strict=True)):
            heapq.heappush(heap, (-w, -o, r))
            load += w
            total += o
            if load > self.kv_tokens:
                w_out, o_out, _ = heapq.heappop(heap)
                load += w_out
                total += o_out
            f = total / len(heap) ** 2
            if f < best:
                best, best_at = f, r
        heap = []
        load = 0
        for r in range(best_at + 1):
            heapq.heappush(heap, (-weights[r], -outputs[r], r))
            load += weights[r]
            if load > self.kv_tokens:
                load += heapq.heappop(heap)[0]
        return pool[np.array(sorted(r for _, _, r in heap), dtype=np.int64)]


def fast_min_f_batch(weight: np.ndarray, output: np.ndarray, memory: int) -> np.ndarray:
    """A pruned batch with ``max o / |X| < 4 q`` (see module docs), positions into the input."""
    return prune_batch(output, _FastSelector(weight, output, memory).select())


def sorted_f_batches(
    instance: Instance,
    *,
    method: str = "auto",
    budget: Budget | None = None,
    engine: str = "compiled",
    work: int | None = EXACT_CELLS,
) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Sorted-F's batches, in order of selection (non-decreasing ``F``).

    Parameters
    ----------
    method
        ``"exact"``, ``"fast"`` or ``"auto"`` (see module docs).
    budget
        Wall-clock cap (default none). When it binds, the remaining requests are closed
        into batches by next-fit in order of ``o`` (no guarantee;
        ``stats["stopped_by"] == "time_limit"`` says so). The work is the same for every
        run: one selection per batch, each method's cost fixed by the instance.
    engine
        How ``fast`` selections run: ``"compiled"``, :data:`FAST_CHUNK` batches per call
        of the numba kernel of :mod:`schedlab.offline.solvers.compiled_sorted_f` (the
        budget is checked between calls), where ``M <= COMPILED_MAX_MEMORY`` (else as
        ``"python"``); ``"python"``, the reference, one batch at a time. Both select the
        same batches (``tests/offline/solvers/test_sorted_f.py``).
    work
        The exact programme's work budget (module docs; ``None``: none).

    Returns
    -------
    batches, stats
        Request indices of each batch (members by increasing ``o``), and counts of the
        batches each method chose.

    Raises
    ------
    InputError
        On an unknown method or engine.
    MemoryBudgetError
        If ``method="exact"`` and a selection would pass the memory budget.
    """
    if method not in _METHODS:
        raise InputError(f"sorted-f: method must be one of {', '.join(_METHODS)}, got {method!r}")
    if engine not in ENGINES:
        raise InputError(f"sorted-f: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    budget = budget or Budget()
    weight = (instance.prompt + instance.output).astype(np.int64)
    output = instance.output.astype(np.int64)
    memory = instance.kv_tokens
    compiled = engine == "compiled" and memory <= COMPILED_MAX_MEMORY
    selector = _FastSelector(weight, output, memory)
    left = instance.n  # requests not yet batched
    # "auto" may choose the exact method once at most this many requests are left
    exact_from = instance.n if method == "exact" else 0
    if method == "auto":
        exact_from = EXACT_WORK_LIMIT // (memory + 1)
    batches: list[np.ndarray] = []
    counts = {"exact": 0, "fast": 0, "fallback": 0}
    cells_left = math.inf if work is None else work
    out_of_work = False
    while left:
        # the remaining indices cost O(n) to list, so only where the exact method may run
        expired = budget.expired()
        small = left <= exact_from
        remaining = np.flatnonzero(selector.alive) if small or expired else None
        if remaining is not None and expired:
            rest = remaining[np.lexsort((remaining, output[remaining]))]
            batches.extend(_next_fit(rest, weight, memory))
            counts["fallback"] += len(batches) - sum(counts.values())
            break
        use_exact = False
        if remaining is not None:
            cardinality = max(_max_cardinality(weight[remaining], memory), 1)
            cells = cardinality * left * (memory + 1)
            size = exact_bytes(left, cardinality, memory)
            if method == "exact":
                budget.require("sorted-f", size, "the exact programme's tables")
            use_exact = (method == "exact" or cells <= EXACT_WORK_LIMIT) and budget.fits(size)
            if use_exact:
                out_of_work = out_of_work or cells > cells_left
                use_exact = not out_of_work
                cells_left -= cells if use_exact else 0
        if remaining is not None and use_exact:
            local = exact_min_f_batch(weight[remaining], output[remaining], memory)
            new = [prune_batch(output, remaining[local])]
            selector.remove(new[0])
        elif compiled:  # up to FAST_CHUNK batches, or one where "auto" may turn exact
            new = selector.take(left, 1 if small else FAST_CHUNK, 0 if small else exact_from)
        else:
            new = [prune_batch(output, selector.select())]
            selector.remove(new[0])
        counts["exact" if use_exact else "fast"] += len(new)
        batches.extend(new)
        left -= sum(len(batch) for batch in new)
    stopped = "time_limit" if counts["fallback"] else "work" if out_of_work else None
    return batches, {"batches": len(batches), **counts, "stopped_by": stopped}


def _next_fit(order: np.ndarray, weight: np.ndarray, memory: int) -> list[np.ndarray]:
    batches: list[np.ndarray] = []
    current: list[int] = []
    load = 0
    for i in order.tolist():
        if current and load + weight[i] > memory:
            batches.append(np.array(current, dtype=np.int64))
            current, load = [], 0
        current.append(i)
        load += int(weight[i])
    batches.append(np.array(current, dtype=np.int64))
    return batches


def sequential_starts(instance: Instance, batches: list[np.ndarray]) -> np.ndarray:
    """Start every batch when the previous one has finished (and its members are released).

    ``T_b = max(T_{b-1} + max_{i in X_{b-1}} o_i, max_{i in X_b} a_i)``, ``T_0 = max a``
    over the first batch; every member of ``X_b`` starts in round ``T_b``. Unrolled, with
    ``S_b`` the sum of the batch durations ``max o`` before ``b`` and ``A_b`` the batch's
    latest release, ``T_b = S_b + max_{j <= b} (A_j - S_j)``: one cumulative maximum.
    """
    order = batch_order(batches)
    sizes = np.array([len(batch) for batch in batches], dtype=np.int64)
    firsts = np.cumsum(sizes) - sizes
    latest = np.maximum.reduceat(instance.arrival[order].astype(np.int64), firsts)
    duration = np.maximum.reduceat(instance.output[order].astype(np.int64), firsts)
    before = np.cumsum(duration) - duration  # S_b
    starts = np.zeros(instance.n, dtype=np.int64)
    starts[order] = np.repeat(before + np.maximum.accumulate(latest - before), sizes)
    return starts


def batch_order(batches: list[np.ndarray]) -> np.ndarray:
    """The priority order that lists the batches one after another."""
    return np.concatenate(batches)


def _objective(instance: Instance, starts: np.ndarray) -> int:
    return int((starts + instance.output - instance.arrival).sum())


def sorted_f_seq(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    method: str = "auto",
    work: int | None = EXACT_CELLS,
) -> SolverOutput:
    """Sequential Sorted-F: each batch starts when the previous one ends (module docs).

    Deterministic; ``seed`` is unused. ``work``: the exact programme's work budget.
    """
    batches, stats = sorted_f_batches(instance, method=method, budget=budget, work=work)
    return SolverOutput(sequential_starts(instance, batches), stats=stats)


def sorted_f(
    instance: Instance,
    *,
    budget: Budget = UNLIMITED,
    seed: int = 0,
    method: str = "auto",
    work: int | None = EXACT_CELLS,
) -> SolverOutput:
    """Sorted-F, continuous: the best of the sequential schedule and the batch order
    decoded by list scheduling (strict, and backfilling up to ``BACKFILL_MAX_N``
    requests; module docs). Deterministic; ``seed`` unused. ``work``: the exact
    programme's work budget.
    """
    batches, stats = sorted_f_batches(instance, method=method, budget=budget, work=work)
    order = batch_order(batches)
    candidates = {
        "sequential": sequential_starts(instance, batches),
        "strict": list_schedule(instance, order, backfill=False),
    }
    if instance.n <= BACKFILL_MAX_N:
        candidates["backfill"] = list_schedule(instance, order, backfill=True)
    objectives = {name: _objective(instance, p) for name, p in candidates.items()}
    chosen = min(objectives, key=lambda name: objectives[name])
    return SolverOutput(
        candidates[chosen], stats={**stats, "objectives": objectives, "chosen": chosen}
    )
