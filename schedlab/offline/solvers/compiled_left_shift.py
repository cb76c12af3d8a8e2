"""Left-shift passes compiled with numba: the earliest fit by one forward sweep.

:mod:`schedlab.offline.solvers.left_shift` states the compaction and keeps the reference
(``engine="python"``), whose earliest fit takes a sliding-window maximum over every
candidate round. The kernel here visits the same requests in the same order and puts
each at the same round, found instead by one sweep. With ``g(τ) = L(τ) + τ`` and
``c = M - s_i - 1``, request ``i`` fits from ``t`` iff ``g(τ) <= c + t`` for
``τ = t .. t + o_i - 1``. The sweep keeps a candidate ``t`` and the first round ``τ`` not
yet checked for it (every round of ``[t, τ)`` has ``g <= c + t``):

* if ``τ = t + o_i``, ``t`` fits, and it is the least one (below);
* if ``g(τ) <= c + t``, ``τ`` advances;
* otherwise no start in ``(t, g(τ) - c)`` fits, since each of them still has ``τ`` in
  its window (while it is ``<= τ``) and too little room there. The candidate becomes
  ``t' = g(τ) - c`` when ``t' <= τ``: the rounds already checked satisfy
  ``g <= c + t < c + t'`` and ``g(τ) = c + t'``, so ``τ`` advances and nothing is
  checked twice; when ``t' > τ`` every start up to ``τ`` is ruled out and the sweep
  restarts at ``t = τ = τ + 1``.

Neither ``t`` nor ``τ`` ever decreases, so a request costs ``O(p_i - a_i + o_i)``
integer steps without allocation, against the reference's NumPy pass over the same
range (``benchmarks/offline_targets.py --rows shift`` times both on a 10,000-request
mixed backlog).
``tests/offline/solvers/test_left_shift.py`` checks that both engines give the same
schedule, pass for pass.
"""

from __future__ import annotations

import numpy as np

from schedlab.jit import INT, READ, VECTOR, kernel

__all__ = ["shift_requests"]


@kernel(INT(VECTOR, INT, INT, INT, INT, INT))
def _earliest(
    load: np.ndarray, memory: int, prompt: int, output: int, release: int, latest: int
) -> int:
    """Least ``t`` in ``[release, latest]`` where the request fits (the sweep); -1 if none."""
    room = memory - prompt - 1
    t = release
    tau = release
    while t <= latest:
        if tau == t + output:
            return t
        need = load[tau] + tau - room  # the least start that has room in round tau
        if need <= t:
            tau += 1
        elif need <= tau:
            t = need
            tau += 1
        else:
            t = tau + 1
            tau = t
    return -1


@kernel(INT(READ, READ, READ, INT, READ, INT, INT, VECTOR, VECTOR))
def shift_requests(
    prompt: np.ndarray,
    output: np.ndarray,
    arrival: np.ndarray,
    memory: int,
    visit: np.ndarray,
    lo: int,
    hi: int,
    starts: np.ndarray,
    load: np.ndarray,
) -> int:
    """Left-shift the requests ``visit[lo:hi]`` in turn, updating ``starts`` and ``load``.

    Returns the number moved, or ``-1 - i`` when request ``i`` does not fit at its own
    start beside the others (``starts`` was not feasible; ``starts`` and ``load`` are
    then as they were before that request).
    """
    moved = 0
    for k in range(lo, hi):
        i = visit[k]
        p, s, o = starts[i], prompt[i], output[i]
        for r in range(o):
            load[p + r] -= s + 1 + r
        t = _earliest(load, memory, s, o, arrival[i], p)
        if t < 0:
            for r in range(o):
                load[p + r] += s + 1 + r
            return -1 - i
        for r in range(o):
            load[t + r] += s + 1 + r
        if t < p:
            starts[i] = t
            moved += 1
    return moved
