"""The list-scheduling engine compiled with numba: the same procedure on flat ``int64`` arrays.

:mod:`schedlab.offline.decoder` is the reference: its module docstring and
``proofs/list_scheduling.md`` state and prove the procedure (event jumping by the
deficit, the slack ``S_t(o)`` from suffix sums and prefix maxima of ``h(C_j - 1)``, the
min-tree over priority positions for backfilling, resumable strict decoding on a
backlog). The kernels here implement that procedure step for step, with these
representation changes only:

* the running set ``_Running`` is four arrays of length ``2n + 2`` (``C_j``, ``w_j``,
  suffix weight, peak ``h(C_j - 1)``), live in ``[head, tail)``. Completed requests
  are dropped by moving ``head`` right; a start shifts the entries before its sorted
  position one place left while adding its weight and one token a round (the update
  ``_Running.add`` makes to exactly those entries), so nothing after it moves.
  ``head`` starts at ``n + 1`` and falls by at most one per start, so it stays in range;
* the prefix maximum of the peaks up to the last completion inside the window is read
  off directly (``O(m)`` for ``m`` running requests) instead of being cached, and the
  slack is not memoised;
* ``inf`` is :data:`INF` (``2^62``; every round and load stays below ``2^60``, see
  :data:`~schedlab.offline.instance.MAX_VALUE`);
* the waiting heap and the min-tree's search stack are arrays;
* backfilling keeps one min-tree per output bucket (:func:`bucket_layout`) instead of
  one over all positions, and admits the least-position candidate of the buckets: the
  same requests, with far fewer subtrees searched on orders unrelated to output length
  (:func:`backfill_kernel`).

:func:`strict_kernel` and :func:`backfill_kernel` (called by :func:`schedule`, which
allocates their room) return the same starts as the reference's ``_strict_schedule``
and ``_Engine.run``; the incremental evaluation's kernels, on the same running-set
primitives (:func:`add_running`, :func:`finish_until`, :func:`first_fit`), are
:mod:`schedlab.offline.compiled_evaluation`'s. Agreement is checked
schedule for schedule by ``tests/offline/test_compiled_decoder.py`` (hypothesis, with
and without releases, both modes, and moves evaluated incrementally against full
reference decodes).

The kernels have explicit signatures and allocate nothing (:mod:`schedlab.jit`),
so each helper is compiled once and no NumPy constructor is: they compile when this
module is first imported (by the first compiled decode;
``benchmarks/list_scheduling_speed.py --compile`` times it), and later processes load
them from numba's cache. They run without numba's runtime, so no reference is counted
when a helper is called, and LLVM inlines the helpers
(:func:`~schedlab.jit.kernel`). numba wraps a negative index around (``a[-1]``
is the last element), a test and a fix-up at every access whose index it cannot prove
non-negative; that also made the peaks' maximum a gather. So the loops over a stretch of
the running set or of the saved states run over a view from index 0
(``peak[head:crit]``, ``comp[head - 1 : pos]``), which LLVM can prove, and the bisection
indexes with an unsigned integer (``docs/design.md``, "Decision record", gives what
this gained); :func:`~schedlab.offline.solvers.order_evaluator.checkpoint_spacing` gives the
rest.
"""

from __future__ import annotations

import numpy as np
from numba import types

from schedlab.jit import INT, MATRIX, READ, READ_MATRIX, VECTOR, kernel

__all__ = [
    "INF",
    "add_running",
    "finish_until",
    "first_fit",
    "new_running",
    "schedule",
]

#: "Never": larger than every round, prompt and load the engine meets.
INF = 1 << 62

#: The ``C_j``, suffix weight and peak rows of the running set, as the helpers take them.
_RUN = (VECTOR, VECTOR, VECTOR)


def new_running(n: int) -> np.ndarray:
    """Room for a running set of decodes of at most ``n`` starts (rows ``C_j``, ``w_j``,
    suffix weight, peak)."""
    return np.zeros((4, 2 * n + 2), dtype=np.int64)


def schedule(
    prompt: np.ndarray,
    output: np.ndarray,
    arrival: np.ndarray,
    memory: int,
    order: np.ndarray,
    *,
    backfill: bool,
) -> np.ndarray:
    """The starts of list scheduling ``order`` (reference: ``decoder.list_schedule``).

    Allocates the kernels' room here, so that the kernels use no NumPy constructor
    (each would be one more function for numba to compile).
    """
    n = len(order)
    order = np.ascontiguousarray(order, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    # a backlog releases everything at once, in priority order
    releases = order if int(arrival.max()) == 0 else np.lexsort((rank, arrival))
    lengths = [np.ascontiguousarray(a, dtype=np.int64) for a in (prompt, output, arrival)]
    starts = np.full(n, -1, dtype=np.int64)
    run = new_running(n)
    if backfill:
        layout, place, members = bucket_layout(lengths[1], order)
        tree = np.full((2, int(layout[-1, 3] + 2 * layout[-1, 2])), INF, dtype=np.int64)
        stack = np.empty((3, 256), dtype=np.int64)
        candidates = np.empty((2, len(layout)), dtype=np.int64)
        backfill_kernel(
            *lengths,
            memory,
            order,
            releases,
            run,
            starts,
            tree,
            stack,
            layout,
            place,
            members,
            order[members],
            candidates,
        )
    else:
        heap = np.empty(n, dtype=np.int64)
        strict_kernel(*lengths, memory, order, releases, rank, run, starts, heap)
    return starts


@kernel(INT(VECTOR, INT, INT, INT))
def _bisect_right(a: np.ndarray, lo: int, hi: int, x: int) -> int:
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[np.uint64(mid)]:  # unsigned: no negative-index fix-up (module docs)
            hi = mid
        else:
            lo = mid + 1
    return lo


@kernel(INT(VECTOR, INT, INT, INT))
def finish_until(comp: np.ndarray, head: int, tail: int, t: int) -> int:
    """``_Running.finish_until``: the new ``head`` once the requests with ``C_j <= t``
    are dropped (few leave at a time, so a scan)."""
    while head < tail and comp[head] <= t:
        head += 1
    return head


@kernel(INT(*_RUN, VECTOR, INT, INT, INT, INT, INT))
def add_running(
    comp: np.ndarray,
    wt: np.ndarray,
    suf: np.ndarray,
    peak: np.ndarray,
    head: int,
    tail: int,
    start: int,
    prompt: int,
    output: int,
) -> int:
    """``_Running.add``: start a request in round ``start``; returns the new ``head``."""
    done, weight = start + output, prompt - start + 1
    pos = _bisect_right(comp, head, tail, done)
    while pos > head and comp[pos - 1] == done and wt[pos - 1] > weight:
        pos -= 1
    # entries before the new one: one place left, updated (views from head - 1)
    c, w, s, h = (
        comp[head - 1 : pos],
        wt[head - 1 : pos],
        suf[head - 1 : pos],
        peak[head - 1 : pos],
    )
    for k in range(pos - head):
        c[k] = c[k + 1]
        w[k] = w[k + 1]
        s[k] = s[k + 1] + weight
        h[k] = h[k + 1] + weight + c[k + 1] - 1
    q = pos - 1
    comp[q] = done
    wt[q] = weight
    suf[q] = suf[pos] + weight
    peak[q] = suf[q] + (done - 1) * (tail - q + 1)
    return head - 1


@kernel(INT(*_RUN, INT, INT, INT, INT, INT))
def _slack(
    comp: np.ndarray,
    suf: np.ndarray,
    peak: np.ndarray,
    head: int,
    tail: int,
    memory: int,
    t: int,
    output: int,
) -> int:
    """``_Running.slack``: ``S_t(o)``, for ``t`` before the next completion."""
    end = t + output - 1
    q = _bisect_right(comp, head, tail, end)
    value = suf[q] + end * (tail - q + 1)  # h(t + o - 1)
    crit = q
    while crit < tail and comp[crit] <= end + 1:
        crit += 1
    live = peak[head:crit]
    for k in range(crit - head):  # h(C_j - 1) for C_j <= t + o
        value = max(value, live[k])
    return memory - 1 + t - value


@kernel(INT(*_RUN, INT, INT, INT, INT, INT, INT, INT))
def _earliest_fit(
    comp: np.ndarray,
    suf: np.ndarray,
    peak: np.ndarray,
    head: int,
    tail: int,
    memory: int,
    t: int,
    prompt: int,
    output: int,
    until: int,
) -> int:
    """``_Running.earliest_fit``: first round in ``[t, until)`` where it fits, else INF."""
    while t < until:
        deficit = prompt - _slack(comp, suf, peak, head, tail, memory, t, output)
        if deficit <= 0:
            return t
        t += deficit
    return INF


@kernel(types.UniTuple(INT, 2)(*_RUN, INT, INT, INT, INT, INT, INT, INT))
def first_fit(
    comp: np.ndarray,
    suf: np.ndarray,
    peak: np.ndarray,
    head: int,
    tail: int,
    memory: int,
    t: int,
    prompt: int,
    output: int,
    until: int,
) -> tuple[int, int]:
    """``_Running.first_fit``: as :func:`_earliest_fit`, passing completions; returns the
    round and the new ``head``."""
    head = finish_until(comp, head, tail, t)
    while True:
        nxt = min(comp[head] if head < tail else INF, until)
        fit = _earliest_fit(comp, suf, peak, head, tail, memory, t, prompt, output, nxt)
        if fit < INF or nxt >= until:
            return fit, head
        t = nxt
        head = finish_until(comp, head, tail, t)


@kernel(types.void(READ, READ, READ, INT, READ, READ, READ, MATRIX, VECTOR, VECTOR))
def strict_kernel(
    prompt: np.ndarray,
    output: np.ndarray,
    arrival: np.ndarray,
    memory: int,
    order: np.ndarray,
    releases: np.ndarray,
    rank: np.ndarray,
    run: np.ndarray,
    starts: np.ndarray,
    heap: np.ndarray,
) -> None:
    """Strict list scheduling (reference: ``decoder._strict_schedule``).

    ``releases`` lists the requests by ``(a_i, priority position)``, ``rank`` is the
    position of each request in ``order``; ``run`` is room for the running set
    (:func:`new_running`), ``heap`` for the min-heap of waiting priority positions.
    Writes the starts into ``starts``.
    """
    n = len(order)
    comp, wt, suf, peak = run[0], run[1], run[2], run[3]
    head = tail = n + 1
    size = 0
    released = 0
    t = arrival[releases[0]]
    while released < n or size:
        while released < n and arrival[releases[released]] <= t:
            value = rank[releases[released]]
            child = size
            size += 1
            while child:
                parent = (child - 1) >> 1
                if heap[parent] <= value:
                    break
                heap[child] = heap[parent]
                child = parent
            heap[child] = value
            released += 1
        pending = arrival[releases[released]] if released < n else INF
        if size:
            i = order[heap[0]]
            fit, head = first_fit(
                comp, suf, peak, head, tail, memory, t, prompt[i], output[i], pending
            )
            if fit < INF:
                t = fit
                starts[i] = t
                head = add_running(comp, wt, suf, peak, head, tail, t, prompt[i], output[i])
                size -= 1
                last = heap[size]
                node = 0
                while True:
                    child = 2 * node + 1
                    if child >= size:
                        break
                    if child + 1 < size and heap[child + 1] < heap[child]:
                        child += 1
                    if heap[child] >= last:
                        break
                    heap[node] = heap[child]
                    node = child
                heap[node] = last
                continue
        t = pending


#: Output buckets of the backfilling search (:func:`bucket_layout`).
OUTPUT_BUCKETS = 16


def bucket_layout(output: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, ...]:
    """The output buckets of the backfilling search, and one min-tree per bucket.

    Bucket ``k`` holds the requests with outputs in ``(c_{k-1}, c_k]``, the cuts ``c``
    being the outputs at the quantiles ``1/B, ..., (B-1)/B`` (:data:`OUTPUT_BUCKETS`
    ``= B``; fewer where cuts coincide or a range holds no output). An order by output
    length, shortest or longest first, gets one bucket: a subtree's outputs are then a
    range of consecutive ones, and the buckets' searches would cost more than they save
    (``docs/design.md``, "Decision record").

    Returns ``layout`` (a row per bucket: first index into ``members``, member count,
    leaves of its tree (a power of two), first node of its tree), ``place`` (rows: each
    request's bucket and its slot, i.e. its index among the bucket's members) and
    ``members`` (the priority positions of each bucket's requests in turn, increasing
    within a bucket).
    """
    steps = np.diff(output[order])
    if bool(np.all(steps >= 0) or np.all(steps <= 0)):  # one tree prunes well (see above)
        bucket: np.ndarray = np.zeros(len(output), dtype=np.int64)
    else:
        levels = np.arange(1, OUTPUT_BUCKETS) / OUTPUT_BUCKETS
        cuts = np.unique(np.quantile(output, levels, method="lower"))  # outputs themselves
        # bucket numbers without gaps: a range of outputs that no request has gets none
        ranges = np.searchsorted(cuts, output, side="left")
        bucket = np.unique(ranges, return_inverse=True)[1].astype(np.int64)
    at = bucket[order]  # the bucket of each priority position
    members = np.argsort(at, kind="stable").astype(np.int64)
    sizes = np.bincount(at).astype(np.int64)
    first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    leaves = np.array([1 << max(int(m) - 1, 0).bit_length() for m in sizes], dtype=np.int64)
    nodes = np.concatenate(([0], np.cumsum(2 * leaves)[:-1])).astype(np.int64)
    place = np.empty((2, len(order)), dtype=np.int64)
    place[0] = bucket
    place[1, order[members]] = np.arange(len(order)) - first[at[members]]
    return np.stack([first, sizes, leaves, nodes], axis=1), place, members


@kernel(types.void(VECTOR, VECTOR, INT, INT, INT, INT, INT))
def _tree_put(
    min_s: np.ndarray, min_o: np.ndarray, base: int, width: int, slot: int, s: int, o: int
) -> None:
    """``_WaitingTree.put`` in the tree of nodes ``base .. base + 2 width - 1``: set leaf
    ``slot`` (``INF`` removes it), update its ancestors."""
    node = width + slot
    min_s[base + node] = s
    min_o[base + node] = o
    node >>= 1
    while node:
        left = base + 2 * node
        least_s = min(min_s[left], min_s[left + 1])
        least_o = min(min_o[left], min_o[left + 1])
        if min_s[base + node] == least_s and min_o[base + node] == least_o:
            break
        min_s[base + node] = least_s
        min_o[base + node] = least_o
        node >>= 1


@kernel(INT(*_RUN, INT, INT, INT, INT, INT, READ, READ, READ, VECTOR, VECTOR, READ, INT, MATRIX))
def _first_in_bucket(
    comp: np.ndarray,
    suf: np.ndarray,
    peak: np.ndarray,
    head: int,
    tail: int,
    memory: int,
    t: int,
    free: int,
    prompt: np.ndarray,
    output: np.ndarray,
    who: np.ndarray,
    min_s: np.ndarray,
    min_o: np.ndarray,
    bucket: np.ndarray,
    since: int,
    stack: np.ndarray,
) -> int:
    """The first slot ``>= since`` of a bucket (``bucket``: its row of ``layout``) whose
    request fits in round ``t``, searched left to right with the reference's tests, or
    ``-1``. ``who`` lists the requests of every bucket's slots in turn."""
    first, size, width, base = bucket[0], bucket[1], bucket[2], bucket[3]
    stack[0, 0], stack[1, 0], stack[2, 0] = 1, 0, width
    top = 1
    while top:
        top -= 1
        node, lo, leaves = stack[0, top], stack[1, top], stack[2, top]
        if lo + leaves <= since or lo >= size:
            continue
        least = min_s[base + node]
        if least >= free or least > _slack(
            comp, suf, peak, head, tail, memory, t, min_o[base + node]
        ):
            continue
        if leaves == 1:
            i = who[first + lo]
            if prompt[i] < free and prompt[i] <= _slack(
                comp, suf, peak, head, tail, memory, t, output[i]
            ):
                return lo
            continue
        half = leaves >> 1
        stack[0, top], stack[1, top], stack[2, top] = 2 * node + 1, lo + half, half
        stack[0, top + 1], stack[1, top + 1], stack[2, top + 1] = 2 * node, lo, half
        top += 2
    return -1


@kernel(
    types.void(
        READ, READ, READ, INT, READ, READ, MATRIX, VECTOR, MATRIX, MATRIX, READ_MATRIX,
        READ_MATRIX, READ, READ, MATRIX
    )
)  # fmt: skip
def backfill_kernel(
    prompt: np.ndarray,
    output: np.ndarray,
    arrival: np.ndarray,
    memory: int,
    order: np.ndarray,
    releases: np.ndarray,
    run: np.ndarray,
    starts: np.ndarray,
    tree: np.ndarray,
    stack: np.ndarray,
    layout: np.ndarray,
    place: np.ndarray,
    members: np.ndarray,
    who: np.ndarray,
    candidates: np.ndarray,
) -> None:
    """Backfilling list scheduling (reference: ``decoder._Engine``).

    Arguments as :func:`strict_kernel` without ``rank``, and :func:`bucket_layout`'s
    ``layout``, ``place`` and ``members``, with ``who = order[members]``; ``tree`` holds the
    min-trees of the buckets (rows: least prompt, least output; all ``INF``),
    ``stack`` the search stack (rows: node, first slot, slots under it), ``candidates``
    room for each bucket's candidate slot and the admissions counted when it was found.
    Writes the starts into ``starts``.

    The reference searches one min-tree over all priority positions. Here each output
    bucket has its own, over its requests' positions, and the search is done bucket by
    bucket with the reference's tests; within a bucket the outputs are close, so the
    test on a subtree's least prompt and least output (two requests, perhaps) rarely
    lets through a subtree where nothing fits. An order by output length keeps one tree
    (each admission's search starts again from the root). ``docs/design.md``, "Decision
    record", gives the measurements that chose this.

    The requests started in a round are the same. The reference admits, left to right in
    one pass, every request that fits when its turn comes; that is, it repeatedly admits
    the fitting request of least position (an admission only tightens the test, so
    nothing it passed fits later). Here each bucket keeps a candidate, a slot no later
    than its first fitting request (found fitting earlier in the round, so its first
    fitting one now is no earlier), and the candidate of least position is tested
    again: if it fits it is that least fitting request and is admitted, and either way
    its bucket's candidate moves on to the next fitting slot. The wake-up search takes
    the least earliest fit over all buckets, as the reference does over all requests.
    """
    # Over 100 lines by design: a numba kernel: one event loop over flat arrays whose state lives
    # in locals; its repeated steps are helpers that LLVM inlines.
    n = len(order)
    min_s, min_o = tree[0], tree[1]
    buckets = len(layout)
    count = 0
    comp, wt, suf, peak = run[0], run[1], run[2], run[3]
    head = tail = n + 1
    next_release = 0
    t = arrival[releases[0]]
    while next_release < n or count:
        while next_release < n and arrival[releases[next_release]] <= t:
            i = releases[next_release]
            row = layout[place[0, i]]
            _tree_put(min_s, min_o, row[3], row[2], place[1, i], prompt[i], output[i])
            count += 1
            next_release += 1
        head = finish_until(comp, head, tail, t)
        free = memory - (suf[head] + t * (tail - head))
        pending = arrival[releases[next_release]] if next_release < n else INF
        # admissions: the candidate of least position, tested again, as above
        admitted = 0
        for k in range(buckets):
            candidates[0, k] = _first_in_bucket(
                comp, suf, peak, head, tail, memory, t, free, prompt, output, who, min_s,
                min_o, layout[k], 0, stack
            )  # fmt: skip
            candidates[1, k] = admitted
        while True:
            least, chosen = INF, -1
            for k in range(buckets):
                slot = candidates[0, k]
                if slot >= 0 and members[layout[k, 0] + slot] < least:
                    least, chosen = members[layout[k, 0] + slot], k
            if chosen < 0:
                break
            row = layout[chosen]
            slot = candidates[0, chosen]
            i = who[row[0] + slot]
            if candidates[1, chosen] == admitted or (  # found since the last admission
                prompt[i] < free
                and prompt[i] <= _slack(comp, suf, peak, head, tail, memory, t, output[i])
            ):
                starts[i] = t
                head = add_running(comp, wt, suf, peak, head, tail, t, prompt[i], output[i])
                free -= prompt[i] + 1
                _tree_put(min_s, min_o, row[3], row[2], slot, INF, INF)
                count -= 1
                admitted += 1
            candidates[0, chosen] = _first_in_bucket(
                comp, suf, peak, head, tail, memory, t, free, prompt, output, who, min_s,
                min_o, row, slot + 1, stack
            )  # fmt: skip
            candidates[1, chosen] = admitted
        # wake at the next release or completion (admissions may have moved it), or at
        # the earliest later fit: only where the deficit is below wake - t - 1
        wake = min(pending, comp[head] if head < tail else INF)
        for k in range(buckets):
            margin = wake - t - 1
            if margin <= 0:
                break
            first, width, base = layout[k, 0], layout[k, 2], layout[k, 3]
            stack[0, 0], stack[1, 0], stack[2, 0] = 1, 0, width
            top = 1
            while top:
                top -= 1
                node, lo, leaves = stack[0, top], stack[1, top], stack[2, top]
                least = min_s[base + node]
                if least >= free or least > (
                    _slack(comp, suf, peak, head, tail, memory, t, min_o[base + node]) + margin
                ):
                    continue
                if leaves == 1:
                    i = who[first + lo]
                    later = _earliest_fit(
                        comp, suf, peak, head, tail, memory, t + 1, prompt[i], output[i], wake
                    )
                    if later < wake:
                        wake = later
                        margin = later - t - 1
                    continue
                half = leaves >> 1
                stack[0, top], stack[1, top], stack[2, top] = 2 * node + 1, lo + half, half
                stack[0, top + 1], stack[1, top + 1], stack[2, top + 1] = 2 * node, lo, half
                top += 2
        if wake < INF:
            t = wake
