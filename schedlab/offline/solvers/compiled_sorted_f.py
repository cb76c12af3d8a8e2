"""Sorted-F's ``fast`` batch selection compiled with numba, many batches a call.

:class:`schedlab.offline.solvers.sorted_f._FastSelector` is the reference (module docs
of :mod:`schedlab.offline.solvers.sorted_f`, ``proofs/sorted_f.md`` Lemma 3); the
kernel here runs its ``select``, then ``prune_batch`` and ``remove``, step for step on
the same state (classes flattened into one array with offsets, one pointer per class,
the ``alive`` flags), for one batch after another:

* pool: each class's shortest peak-sorted prefix of live requests fitting in ``M``
  (``_head``: the members, skipping dead ones, while the running sum of ``w`` stays at
  most ``M``);
* the pool sorted by ``(o, index)`` (a sort of the keys ``o n + index``);
* the scan by increasing ``o`` with a max-heap on ``(w, o, -position)`` (the order in
  which ``heapq`` pops ``(-w, -o, position)``; positions are distinct, so every heap
  pops the same item), keeping the first position of least ``F = total / k^2``; a
  second scan up to it gives the batch, members in pool order, which is the order
  ``prune_batch`` sorts by, so pruning drops members from the end.

Arithmetic: ``total <= M`` (a batch's outputs are at most its peaks), ``k <= M`` and
the caller ensures ``M^3 < 2^63``
(``sorted_f.COMPILED_MAX_MEMORY``), so ``total * k^2`` fits in ``int64`` and
``total / k^2`` is the correctly rounded quotient of two integers below ``2^53``, as in
Python. ``tests/offline/solvers/test_sorted_f.py`` checks that both engines select the
same batches.
"""

from __future__ import annotations

import numpy as np
from numba import types

from schedlab.jit import INT, READ, VECTOR, kernel

__all__ = ["select_batches"]

_FLAGS = types.Array(types.boolean, 1, "C")


@kernel(types.boolean(READ, READ, INT, INT))
def _above(weight: np.ndarray, output: np.ndarray, a: int, b: int) -> bool:
    """Whether pool item ``a`` pops before ``b``: larger ``w``, then ``o``, then earlier."""
    if weight[a] != weight[b]:
        return weight[a] > weight[b]
    if output[a] != output[b]:
        return output[a] > output[b]
    return a < b


@kernel(INT(READ, READ, VECTOR, INT, INT))
def _push(weight: np.ndarray, output: np.ndarray, heap: np.ndarray, size: int, item: int) -> int:
    """Add ``item`` to the max-heap ``heap[:size]``; returns the new size."""
    child = size
    while child:
        parent = (child - 1) >> 1
        if not _above(weight, output, item, heap[parent]):
            break
        heap[child] = heap[parent]
        child = parent
    heap[child] = item
    return size + 1


@kernel(INT(READ, READ, VECTOR, INT))
def _pop(weight: np.ndarray, output: np.ndarray, heap: np.ndarray, size: int) -> int:
    """Remove the top of the max-heap ``heap[:size]`` (size then ``size - 1``); returns it."""
    top = heap[0]
    size -= 1
    last = heap[size]
    node = 0
    while True:
        child = 2 * node + 1
        if child >= size:
            break
        if child + 1 < size and _above(weight, output, heap[child + 1], heap[child]):
            child += 1
        if not _above(weight, output, heap[child], last):
            break
        heap[node] = heap[child]
        node = child
    heap[node] = last
    return top


@kernel(
    INT(READ, READ, INT, READ, READ, VECTOR, _FLAGS, INT, INT, INT, VECTOR, VECTOR, VECTOR),
    allocates=True,  # its working room
)
def select_batches(
    weight: np.ndarray,
    output: np.ndarray,
    memory: int,
    classes: np.ndarray,
    class_start: np.ndarray,
    pointer: np.ndarray,
    alive: np.ndarray,
    left: int,
    limit: int,
    stop_left: int,
    pool: np.ndarray,
    members: np.ndarray,
    sizes: np.ndarray,
) -> int:
    """Select, prune and remove up to ``limit`` batches while more than ``stop_left``
    requests are left (``left`` of them now).

    ``classes[class_start[c] : class_start[c + 1]]`` is output class ``c`` sorted by
    ``(w, o, index)``, ``pointer[c]`` its first possibly live position within the
    class (both updated as ``_FastSelector`` does), ``alive`` the live flags (cleared
    for each batch).
    ``pool`` is room for ``n`` indices. Writes the batches one after another into
    ``members`` and their sizes into ``sizes``; returns how many.
    """
    made = 0
    used = 0
    n = len(pool)
    room = np.empty((4, n), dtype=np.int64)
    heap, chosen = room[0], room[1]  # pool positions; request at each pool position
    w, o = room[2], room[3]  # its peak and output
    while made < limit and left > stop_left:
        size = 0
        for c in range(len(class_start) - 1):
            p, end = class_start[c] + pointer[c], class_start[c + 1]
            while p < end and not alive[classes[p]]:
                p += 1
            pointer[c] = p - class_start[c]
            load = 0
            while p < end:
                i = classes[p]
                if alive[i]:
                    if load + weight[i] > memory:
                        break
                    load += weight[i]
                    pool[size] = i
                    size += 1
                p += 1
        # the pool by (o, index): sort the keys o n + index (below M n + n < 2^63)
        for r in range(size):
            pool[r] = output[pool[r]] * n + pool[r]
        pool[:size].sort()
        for r in range(size):
            i = pool[r] % n
            chosen[r], w[r], o[r] = i, weight[i], output[i]
        count = load = total = best_at = 0
        best = np.inf
        for r in range(size):
            count = _push(w, o, heap, count, r)
            load += w[r]
            total += o[r]
            if load > memory:
                out = _pop(w, o, heap, count)
                count -= 1
                load -= w[out]
                total -= o[out]
            f = total / (count * count)
            if f < best:
                best, best_at = f, r
        count = load = 0
        for r in range(best_at + 1):
            count = _push(w, o, heap, count, r)
            load += w[r]
            if load > memory:
                load -= w[_pop(w, o, heap, count)]
                count -= 1
        kept = heap[:count]
        kept.sort()  # pool positions: increasing (o, index)
        total = 0
        for r in kept:
            total += o[r]
        k = count
        while k > 1:
            largest = o[kept[k - 1]]
            if (total - largest) * k * k >= total * (k - 1) * (k - 1):
                break
            total -= largest
            k -= 1
        for j in range(k):
            i = chosen[kept[j]]
            members[used + j] = i
            alive[i] = False
        used += k
        sizes[made] = k
        made += 1
        left -= k
    return made
