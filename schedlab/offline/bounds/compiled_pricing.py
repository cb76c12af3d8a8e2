"""The time-indexed LP's pricing compiled with numba: ``min_{τ >= a_i} f_i(τ)`` request by
request, the same candidates in the same order as the NumPy reference.

:func:`schedlab.offline.bounds.time_indexed.price_starts` states the procedure (module
docs there and ``proofs/time_indexed_lagrangian.md``): with ``P0``, ``P1`` and ``λ`` the
tables of :class:`~schedlab.offline.bounds.time_indexed.RoundPrices`,

.. math::

    f_i(τ) = τ + o_i - a_i + (s_i + 1 - τ)\\,(P0(τ + o_i) - P0(τ)) + P1(τ + o_i) - P1(τ),

evaluated either at every start ``τ`` of ``[a_i, max(a_i, T)]`` (the dense case) or at the
breakpoints of the pieces on which ``f_i`` is a quadratic, each piece's last round and
the four integers around each convex piece's vertex. The reference builds a matrix of
candidates per chunk of requests and takes ``argmin`` along each row; the kernel here
walks the same row without storing it:

* the breakpoints are ``a_i`` and the block boundaries ``b_k`` and ``b_k - o_i`` clipped
  to ``[a_i, max(a_i, T)]``, sorted; clipping keeps each of the two lists sorted and
  none below ``a_i``, so they are merged after ``a_i`` instead of sorted: the same
  multiset in the same order;
* the candidates are visited in the order of the reference's row (every piece's left
  end, every piece's last round, the last breakpoint, then the vertex neighbours at
  offsets ``-1, 0, 1, 2``), and the first least cost is kept (``<``), which is
  ``argmin``'s choice among equal costs;
* every cost is the same IEEE expression as the reference's ``_cost``, in the same
  order of operations (numba, like NumPy, neither reassociates nor contracts
  floating-point operations unless ``fastmath`` is given), so the minima and their starts
  are equal bit for bit, and the column generation adds the same columns.

``tests/offline/bounds/test_compiled_pricing.py`` checks the equality by hypothesis
(random instances, prices and blocks, dense and sparse) and the LP bound on every
shipped instance; ``benchmarks/pricing_speed.py`` measures the speed against the
reference. The kernel allocates nothing (:mod:`schedlab.jit`): its caller passes
the room for the merged breakpoints and the vertex neighbours.
"""

from __future__ import annotations

import math

from numba import types

from schedlab.jit import FLOATS, INT, READ, READ_FLOATS, VECTOR, kernel

__all__ = ["price_kernel", "start_cost"]

_TABLES = (READ_FLOATS, READ_FLOATS, READ_FLOATS, INT)


@kernel(types.float64(*_TABLES, INT, types.float64, INT, INT))
def start_cost(p0, p1, lam, horizon, tau, s, o, a):
    """``f_i(τ)`` of a request with prompt ``s``, output ``o`` and release ``a``."""
    x = min(tau, horizon)
    y = min(tau + o, horizon)
    window = p0[y] - p0[x]
    tf = float(tau)
    return tf + o - a + (s + 1 - tf) * window + p1[y] - p1[x]


@kernel(INT(*_TABLES, INT, types.float64, INT, INT, INT))
def _vertex_base(p0, p1, lam, horizon, left, s, o, a, right):
    """``floor(clip(τ*, left, right))`` of the piece from ``left`` to ``right``: ``τ*`` is
    the vertex ``left - f'(left) / (2A)`` of a convex piece (``A > 0``), ``left`` otherwise."""
    x = min(left, horizon)
    y = min(left + o, horizon)
    window = p0[y] - p0[x]
    mu1 = lam[x]
    mu2 = lam[y]
    tf = float(left)
    slope = (1.0 - window + (s + 1 - tf) * (mu2 - mu1) + mu2 * (tf + o - 0.5)) - mu1 * (tf - 0.5)
    curve = (mu1 - mu2) / 2
    vertex = float(left)
    if curve > 0:
        vertex = left - slope / (2 * curve)
    vertex = min(max(vertex, float(left)), float(right))
    return math.floor(vertex)


@kernel(
    types.void(
        *_TABLES, READ, READ_FLOATS, READ, READ, INT, INT, INT, VECTOR, VECTOR, FLOATS, VECTOR
    )
)
def price_kernel(
    p0, p1, lam, horizon, bounds, prompt, output, arrival, dense, lo, hi, points, base, best, arg
):
    """``best[i] = min_τ f_i(τ)`` and ``arg[i]`` its first minimiser, for ``lo <= i < hi``.

    ``dense``: ``1`` to evaluate every start of ``[a_i, max(a_i, T)]``, ``0`` for the
    breakpoints and vertex neighbours. ``points`` (``2 len(bounds) + 1`` entries) and
    ``base`` (``2 len(bounds)``) are room for the merged breakpoints and the vertex
    bases; ``bounds`` are the block boundaries (``T = bounds[-1]``).
    """
    nb = len(bounds)
    for i in range(lo, hi):
        s = prompt[i]
        o = output[i]
        a = arrival[i]
        top = max(a, horizon)
        if dense:
            pick = min(max(0, a), top)
            least = start_cost(p0, p1, lam, horizon, pick, s, o, a)
            for t in range(1, horizon + 1):
                tau = min(max(t, a), top)
                cost = start_cost(p0, p1, lam, horizon, tau, s, o, a)
                if cost < least:
                    least, pick = cost, tau
            best[i], arg[i] = least, pick
            continue
        # a_i, then clip(b_k) and clip(b_k - o_i) merged (each is sorted, none below a_i)
        points[0] = a
        count = 1
        j = k = 0
        while j < nb or k < nb:
            first = min(max(bounds[j], a), top) if j < nb else top + 1
            second = min(max(bounds[k] - o, a), top) if k < nb else top + 1
            if first <= second:
                points[count] = first
                j += 1
            else:
                points[count] = second
                k += 1
            count += 1
        pieces = count - 1
        pick = points[0]
        least = start_cost(p0, p1, lam, horizon, pick, s, o, a)
        for q in range(1, pieces):  # the left ends
            cost = start_cost(p0, p1, lam, horizon, points[q], s, o, a)
            if cost < least:
                least, pick = cost, points[q]
        for q in range(pieces):  # the last round of each piece
            tau = max(points[q + 1] - 1, points[q])
            cost = start_cost(p0, p1, lam, horizon, tau, s, o, a)
            if cost < least:
                least, pick = cost, tau
            base[q] = _vertex_base(p0, p1, lam, horizon, points[q], s, o, a, tau)
        cost = start_cost(p0, p1, lam, horizon, points[pieces], s, o, a)
        if cost < least:
            least, pick = cost, points[pieces]
        for d in range(-1, 3):  # the vertex neighbours, offset by offset
            for q in range(pieces):
                right = max(points[q + 1] - 1, points[q])
                tau = min(max(base[q] + d, points[q]), right)
                cost = start_cost(p0, p1, lam, horizon, tau, s, o, a)
                if cost < least:
                    least, pick = cost, tau
        best[i], arg[i] = least, pick
