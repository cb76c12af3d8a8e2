"""The completion-spacing bound's evaluation compiled with numba: each request's least
bracketed term over every start, the same terms in the same order as the NumPy reference.

:func:`schedlab.offline.bounds.completion_spacing.spacing_value` states the bound (module
docs there and ``proofs/completion_spacing.md``): for request ``i`` and every start
``τ`` of ``[a_i, max(a_i, T)]``, the bracket

.. math::

    f_i(τ) + \\sum_{j} w\\bigl(λ_{\\min}(c_j), ℓ_j, s_i + (l_j - τ) + 1, ν\\bigr)

over the pieces ``j`` of the rounds ``[τ, τ + o_i)`` cut by the grid of step ``P`` (piece
``j`` lies in cell ``c_j = floor(τ / P) + j``, starts at ``l_j`` and has ``ℓ_j`` rounds),
with ``w`` the least waste of
:func:`~schedlab.offline.bounds.completion_spacing.piece_waste`. The reference builds a
matrix of brackets per chunk of requests (every start of the horizon, clipped to the
request's range, so some starts repeat) and takes the least of each row; the kernel here
walks each request's distinct starts without storing them. The least of a row is the
same number however often a start repeats, and each bracket is the same IEEE expression
in the same order of operations: ``f_i`` by the pricing kernel's
:func:`~schedlab.offline.bounds.compiled_pricing.start_cost`, then the pieces' wastes added
one by one, cell by cell (numba, like NumPy, neither reassociates nor contracts
floating-point operations unless ``fastmath`` is given; a piece past the request's last
round adds ``0.0``). So the minima are equal bit for bit
(``tests/offline/bounds/test_completion_spacing.py``, by hypothesis).
"""

from __future__ import annotations

import math

from numba import types

from schedlab.jit import FLOATS, INT, READ_FLOATS, READ_MATRIX, kernel
from schedlab.offline.bounds.compiled_pricing import start_cost

__all__ = ["spacing_kernel"]

_FLOAT = types.float64

#: The tables ``P0``, ``P1`` and ``λ`` as the rows of one matrix.
READ_FLOAT_MATRIX = types.Array(_FLOAT, 2, "C", readonly=True)


@kernel(_FLOAT(_FLOAT, INT, INT, _FLOAT))
def _piece_waste(price, length, cost, nu):
    """:func:`~schedlab.offline.bounds.completion_spacing.piece_waste` of one piece."""
    ell = float(length) + 1.0
    if not ell > 1.0:
        return 0.0
    rate = nu * float(cost)
    u = ell
    if rate > 0:
        u = ell * math.sqrt(price / (2.0 * rate))
    u = min(max(u, 1.0), ell)
    return price * ell * ell / (2.0 * u) - price * ell / 2.0 + rate * (u - 1.0)


@kernel(types.void(READ_FLOAT_MATRIX, INT, READ_FLOATS, INT, _FLOAT, READ_MATRIX, FLOATS))
def spacing_kernel(tables, horizon, cells, step, nu, requests, minima):
    """``minima[i]``: the least bracket of request ``i`` (row ``i`` of ``requests``: its
    prompt, output and release) over its starts.

    ``tables`` holds the rows ``P0``, ``P1`` and ``λ`` of
    :class:`~schedlab.offline.bounds.time_indexed.RoundPrices` over the horizon ``T``
    (``horizon``); ``cells[c]`` is the least round price of grid cell ``c`` of step
    ``step`` (:func:`~schedlab.offline.bounds.completion_spacing.grid_minima`, covering
    every piece).
    """
    p0, p1, lam = tables[0], tables[1], tables[2]
    for i in range(len(minima)):
        prompt, o, a = requests[i, 0], requests[i, 1], requests[i, 2]
        s = float(prompt)
        top = max(a, horizon)
        pieces = o // step + 2
        least = math.inf
        for tau in range(a, top + 1):
            value = start_cost(p0, p1, lam, horizon, tau, s, o, a)
            end = tau + o
            first = tau // step
            for j in range(pieces):
                cell = first + j
                left = max(tau, cell * step)
                length = max(min(end, (cell + 1) * step) - left, 0)
                value += _piece_waste(cells[cell], length, prompt + (left - tau) + 1, nu)
            if least == least and (value < least or value != value):
                least = value  # a NaN stays, as NumPy's minimum keeps it
        minima[i] = least
