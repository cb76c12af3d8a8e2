"""The incremental evaluation of orders compiled with numba: ``StrictDecoder`` driven the
way :class:`~schedlab.offline.solvers.order_evaluator.OrderEvaluator` drives it.

:func:`evaluate_kernel` restores a saved decoder state, places the new order's requests,
compares the states with the old run's up to a shift and screens the move
(:mod:`schedlab.offline.solvers.order_evaluator` states the procedure);
:func:`accept_kernel` writes an evaluated decode into the evaluator's saved states. Both
run on :mod:`schedlab.offline.compiled_decoder`'s running set and its primitives, under
the same rules (explicit signatures, nothing allocated: :mod:`schedlab.jit`); their
objectives equal full reference decodes (``tests/offline/test_compiled_decoder.py``).
"""

from __future__ import annotations

import numpy as np
from numba import types

from schedlab.jit import INT, MATRIX, READ, READ_MATRIX, VECTOR, kernel
from schedlab.offline.compiled_decoder import INF, add_running, finish_until, first_fit

__all__ = ["accept_kernel", "evaluate_kernel"]


@kernel(
    types.void(
        READ_MATRIX,
        INT,
        READ,
        INT,
        INT,
        INT,
        READ,
        READ_MATRIX,
        READ_MATRIX,
        INT,
        INT,
        MATRIX,
        VECTOR,
        MATRIX,
        MATRIX,
        VECTOR,
    )
)
def evaluate_kernel(
    lengths: np.ndarray,
    memory: int,
    order: np.ndarray,
    lo: int,
    hi: int,
    every: int,
    starts: np.ndarray,
    index: np.ndarray,
    pool: np.ndarray,
    screen: int,
    allow: int,
    run: np.ndarray,
    new_starts: np.ndarray,
    new_index: np.ndarray,
    new_pool: np.ndarray,
    result: np.ndarray,
) -> None:
    """Strict decode of ``order`` from the saved state at or before ``lo`` (module docs of
    :mod:`schedlab.offline.solvers.local_search`, "Incremental evaluation").

    Saved states: checkpoint ``k`` (position ``k * every``) has round ``index[0, k]`` and
    its running requests at ``pool[:, index[1, k] : index[1, k + 1]]``, rows ``C_j - t``
    and ``w_j + t`` (``DecoderState.remaining`` / ``held``). ``starts`` holds the old
    starts by position; ``lengths`` the prompts and outputs; ``run`` is room for the
    running set (:func:`new_running`). ``screen < 0``: no screen.

    Writes the new starts of positions ``base ..`` into ``new_starts[0 ..]``, the new
    states in the same layout into ``new_index`` / ``new_pool``, and ``result`` =
    (code, stop, delta, change of the total, positions decoded, new states): code 1 met,
    2 decoded to the end, 0 cut by the screen, -1 ``new_pool`` too small.
    """
    # Over 100 lines by design: a numba kernel: one decode loop over flat arrays whose state
    # lives in locals; its repeated steps are helpers that LLVM inlines.
    prompt, output = lengths[0], lengths[1]
    comp, wt, suf, peak = run[0], run[1], run[2], run[3]
    n = len(order)
    base = lo - lo % every
    k0 = base // every
    # restore the saved state: C_j = remaining + t, w_j = held - t, sorted by (C_j, w_j)
    t = index[0, k0]
    first, last = index[1, k0], index[1, k0 + 1]
    tail = n + 1
    head = tail - (last - first)
    suf[tail] = 0
    for j in range(tail - 1, head - 1, -1):
        comp[j] = pool[0, first + j - head] + t
        wt[j] = pool[1, first + j - head] - t
        suf[j] = suf[j + 1] + wt[j]
        peak[j] = suf[j] + (comp[j] - 1) * (tail - j + 1)
    change = 0
    cuts = 0
    cut_at = hi + 1 + screen if screen >= 0 and hi + 1 + screen < n else INF
    states = 0
    used = 0
    new_index[1, 0] = 0
    latest = 0
    saved_at = base  # the next checkpoint's position, counted (not p % every)
    for p in range(base, n):
        if p == saved_at:
            saved_at += every
            head = finish_until(comp, head, tail, t)
            m = tail - head
            now_c, now_w = comp[head:tail], wt[head:tail]
            if p > hi:  # the runs meet if the old state here is this one shifted
                k = p // every
                first = index[1, k]
                same = index[1, k + 1] - first == m
                old_c, old_w = pool[0, first : first + m], pool[1, first : first + m]
                j = 0
                while same and j < m:
                    same = old_c[j] == now_c[j] - t and old_w[j] == now_w[j] + t
                    j += 1
                if same:
                    delta = t - index[0, k]
                    result[0], result[1], result[2] = 1, p, delta
                    result[3], result[4], result[5] = change + delta * (n - p), p - base, states
                    return
            if used + m > new_pool.shape[1]:
                result[0] = -1
                return
            new_index[0, states] = t
            new_c, new_w = new_pool[0, used : used + m], new_pool[1, used : used + m]
            for j in range(m):
                new_c[j] = now_c[j] - t
                new_w[j] = now_w[j] + t
            used += m
            states += 1
            new_index[1, states] = used
        if p == cut_at:
            if max(change, change + (latest - starts[p - 1]) * (n - p)) > allow:
                result[0], result[4] = 0, p - base
                return
            cuts += 1
            cut_at = hi + 1 + screen * 4**cuts
            if cut_at >= n:
                cut_at = INF
        i = order[p]
        t, head = first_fit(comp, suf, peak, head, tail, memory, t, prompt[i], output[i], INF)
        head = add_running(comp, wt, suf, peak, head, tail, t, prompt[i], output[i])
        new_starts[p - base] = t
        latest = t
        change += t - starts[p]
    result[0], result[1], result[2] = 2, n, 0
    result[3], result[4], result[5] = change, n - base, states


@kernel(
    types.void(INT, INT, INT, INT, INT, READ, READ_MATRIX, READ_MATRIX, VECTOR, MATRIX, MATRIX)
)
def accept_kernel(
    base: int,
    stop: int,
    delta: int,
    count: int,
    every: int,
    new_starts: np.ndarray,
    new_index: np.ndarray,
    new_pool: np.ndarray,
    starts: np.ndarray,
    index: np.ndarray,
    pool: np.ndarray,
) -> None:
    """Make the decode :func:`evaluate_kernel` wrote the saved one (layout as there).

    ``base``, ``stop``, ``delta`` and ``count`` are the decode's first position, its
    ``result[1]``, ``result[2]`` and ``result[5]``; ``new_starts`` holds the starts of
    positions ``base .. stop - 1``. The ``count`` new states replace those of checkpoints
    ``base // every ..`` in ``pool``, whose later states move by the change of their
    total width (the caller leaves room for it past ``index[1, -1]``); every start and
    saved round from ``stop`` on moves by ``delta``.
    """
    first = base // every
    begin, end = index[1, first], index[1, first + count]
    used, total = new_index[1, count], index[1, index.shape[1] - 1]
    grow = used - (end - begin)
    if grow > 0:  # later states one block right: copy from the far end
        for col in range(total - 1, end - 1, -1):
            pool[0, col + grow] = pool[0, col]
            pool[1, col + grow] = pool[1, col]
    elif grow < 0:
        for col in range(end, total):
            pool[0, col + grow] = pool[0, col]
            pool[1, col + grow] = pool[1, col]
    for col in range(used):
        pool[0, begin + col] = new_pool[0, col]
        pool[1, begin + col] = new_pool[1, col]
    for k in range(first + count + 1, index.shape[1]):
        index[1, k] += grow
    for k in range(count):
        index[0, first + k] = new_index[0, k]
    for k in range(count + 1):
        index[1, first + k] = begin + new_index[1, k]
    for p in range(base, stop):
        starts[p] = new_starts[p - base]
    if delta:
        for p in range(stop, len(starts)):
            starts[p] += delta
        for k in range(stop // every, index.shape[1]):
            index[0, k] += delta
