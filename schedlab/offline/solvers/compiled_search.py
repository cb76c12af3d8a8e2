"""Late-acceptance search compiled with numba: ``improve_order``'s ``late`` loop in one kernel.

:func:`~schedlab.offline.solvers.local_search.improve_order` keeps the reference loop
(``engine="python"``): per move it draws a swap or an insertion
(:func:`~schedlab.offline.solvers.local_search.random_move`), evaluates it
incrementally (:func:`~schedlab.offline.compiled_evaluation.evaluate_kernel`), accepts it
when its objective is at most ``max(late[k mod history], current)`` (Burke and Bykov,
"The late acceptance hill-climbing heuristic", European Journal of Operational Research
258(1), 2017) and writes the accepted decode into the saved states
(:func:`~schedlab.offline.compiled_evaluation.accept_kernel`). :func:`late_acceptance_kernel`
makes the same moves in the same order, with these representation changes only:

* the draws come from the same ``numpy.random.Generator``, which numba's ``integers``
  and ``random`` advance exactly as NumPy's do (same bit generator, same algorithms), so
  a seed gives the same moves;
* the candidate order is one buffer equal to the current order outside the move's
  positions ``lo .. hi`` (restored or kept there after the move), not a fresh copy; the
  best order is copied into a buffer when it improves;
* the kernel runs the number of moves it is given, or fewer when the ``idle`` moves since
  the best last fell are reached first (``IDLE``), and returns; between calls the caller
  checks the idle count and the wall-clock cap and grows the state buffers. So that an
  accepted move always fits, a move is evaluated only when the saved states' pool has at
  least as much spare room as the new states can take (an accepted decode widens the
  pool by at most its own states); an evaluation that overflows the new states' buffer is kept
  pending and evaluated again after the caller grows it (and then the pool, if need be);
* the width is at most :data:`~schedlab.offline.solvers.local_search.MAX_WIDTH`
  (``2^31 - 1``): numba's 64-bit bounded draw, used above it, rounds its rejection
  threshold in floating point and leaves NumPy's stream (numba 0.68).

``tests/offline/solvers/test_local_search.py`` checks that both engines return the same
order, objective and counts, move for move, on random backlogs (hypothesis).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

from schedlab.jit import INT, MATRIX, READ_MATRIX, VECTOR, kernel
from schedlab.offline.compiled_evaluation import accept_kernel, evaluate_kernel

__all__ = [
    "DONE",
    "GROW_NEW_POOL",
    "GROW_POOL",
    "IDLE",
    "STATE",
    "late_acceptance_kernel",
]

#: Fields of the kernel's ``state`` vector, in order: moves made (all calls together), the
#: move count to stop at, the current sum of starts, the best objective, moves accepted,
#: positions decoded, evaluations whose runs met again, whether a drawn move awaits its
#: evaluation, that move's first and last positions and its acceptance threshold, the
#: moves made when the best objective last fell, the idle moves at which the search ends
#: (``< 0``: never), and why the kernel returned.
STATE = (
    "moves",
    "target",
    "total",
    "best",
    "accepted",
    "decoded",
    "met",
    "pending",
    "lo",
    "hi",
    "threshold",
    "improved",
    "idle",
    "code",
)
_MOVES, _TARGET, _TOTAL, _BEST, _ACCEPTED, _DECODED, _MET = range(7)
_PENDING, _LO, _HI, _THRESHOLD, _IMPROVED, _IDLE, _CODE = range(7, 14)

#: Return codes (``state[-1]``): the target reached; the pool needs spare room for
#: ``new_pool.shape[1]`` more columns; ``new_pool`` is too small for the pending move;
#: ``idle`` moves made since the best objective last fell (the search's end).
DONE, GROW_POOL, GROW_NEW_POOL, IDLE = 0, 1, 2, 3

_GENERATOR = numba.typeof(np.random.default_rng(0))


@kernel(
    types.void(
        READ_MATRIX,
        INT,
        INT,
        INT,
        INT,
        INT,
        VECTOR,
        VECTOR,
        VECTOR,
        VECTOR,
        MATRIX,
        MATRIX,
        MATRIX,
        VECTOR,
        MATRIX,
        MATRIX,
        VECTOR,
        VECTOR,
        _GENERATOR,
        VECTOR,
    ),
    allocates=True,  # numba's Generator.integers makes a one-element array per draw
)
def late_acceptance_kernel(
    lengths: np.ndarray,
    memory: int,
    every: int,
    screen: int,
    width: int,
    output_total: int,
    current: np.ndarray,
    candidate: np.ndarray,
    best: np.ndarray,
    starts: np.ndarray,
    index: np.ndarray,
    pool: np.ndarray,
    run: np.ndarray,
    new_starts: np.ndarray,
    new_index: np.ndarray,
    new_pool: np.ndarray,
    result: np.ndarray,
    late: np.ndarray,
    rng: np.random.Generator,
    state: np.ndarray,
) -> None:
    """Late-acceptance moves until ``state``'s move count reaches its target, or until
    ``state``'s ``idle`` moves have passed since the best objective last fell (module docs).

    Parameters
    ----------
    lengths, memory, every
        The instance's prompts and outputs (rows), ``M``, and the positions between
        saved states, as :func:`~schedlab.offline.compiled_evaluation.evaluate_kernel`
        takes them.
    screen, width
        First screening distance (``< 0``: none) and the moves' reach.
    output_total
        ``sum_i o_i``: objective = sum of starts + this.
    current, candidate, best
        The current order (updated on acceptance), a copy of it (equal to it outside
        a pending move), and the best order so far (written when it improves).
    starts, index, pool
        The evaluator's saved decode of ``current``, updated on acceptance.
    run, new_starts, new_index, new_pool, result
        Room for one evaluation (:func:`~schedlab.offline.compiled_evaluation.evaluate_kernel`).
    late
        The late-acceptance list; its length is ``history``.
    rng
        The move generator.
    state
        The fields of :data:`STATE`, updated in place; ``code`` says why it returned.
    """
    # Over 100 lines by design: a numba kernel: the whole search loop (draw, evaluate, accept) in
    # one compiled call is what it is for.
    n = len(current)
    history = len(late)
    last = index.shape[1] - 1
    while state[_MOVES] < state[_TARGET]:
        moves = state[_MOVES]
        if 0 <= state[_IDLE] <= moves - state[_IMPROVED]:
            state[_CODE] = IDLE
            return
        value = state[_TOTAL] + output_total
        if pool.shape[1] - index[1, last] < new_pool.shape[1]:
            state[_CODE] = GROW_POOL  # before every evaluation: new_pool may have grown
            return
        if state[_PENDING] == 0:
            i = int(rng.integers(0, n))
            j = min(max(i + int(rng.integers(-width, width + 1)), 0), n - 1)
            if j == i:
                j = (i + 1) % n
            if rng.random() < 0.5:
                candidate[i], candidate[j] = current[j], current[i]
            else:  # take the request at i out and put it at j
                if i < j:
                    for p in range(i, j):
                        candidate[p] = current[p + 1]
                else:
                    for p in range(j + 1, i + 1):
                        candidate[p] = current[p - 1]
                candidate[j] = current[i]
            state[_LO], state[_HI] = min(i, j), max(i, j)
            state[_THRESHOLD] = max(late[moves % history], value)
            state[_PENDING] = 1
        lo, hi, threshold = state[_LO], state[_HI], state[_THRESHOLD]
        evaluate_kernel(
            lengths,
            memory,
            candidate,
            lo,
            hi,
            every,
            starts,
            index,
            pool,
            screen,
            threshold - value,
            run,
            new_starts,
            new_index,
            new_pool,
            result,
        )
        if result[0] < 0:
            state[_CODE] = GROW_NEW_POOL
            return
        state[_PENDING] = 0
        state[_DECODED] += result[4]
        if result[0] == 1:
            state[_MET] += 1
        if result[0] != 0 and value + result[3] <= threshold:
            base = lo - lo % every
            accept_kernel(
                base,
                result[1],
                result[2],
                result[5],
                every,
                new_starts,
                new_index,
                new_pool,
                starts,
                index,
                pool,
            )
            for p in range(lo, hi + 1):
                current[p] = candidate[p]
            state[_TOTAL] += result[3]
            value += result[3]
            state[_ACCEPTED] += 1
            if value < state[_BEST]:
                state[_BEST] = value
                state[_IMPROVED] = moves + 1
                for p in range(n):
                    best[p] = current[p]
        else:
            for p in range(lo, hi + 1):
                candidate[p] = current[p]
        late[moves % history] = value
        state[_MOVES] = moves + 1
    state[_CODE] = DONE
