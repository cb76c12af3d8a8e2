"""The mean-busy-time bound: the volume bound with each request's memory profile, ``O(n log n)``.

Request ``i`` started in round ``p_i`` holds ``s_i + k`` tokens in round ``p_i + k - 1``
(``k = 1..o_i``). Its *mean busy time*, the memory-weighted mean of the round midpoints,

.. math:: B_i = \\frac{1}{v_i} \\sum_{k=1}^{o_i} (p_i + k - \\tfrac12)(s_i + k)
          = p_i + \\frac{m_i}{v_i}, \\qquad m_i = \\sum_{k=1}^{o_i} (k - \\tfrac12)(s_i + k),

lies a fixed ``d_i = o_i - m_i / v_i`` before its completion ``C_i = p_i + o_i``, and
``B_i >= a_i + m_i / v_i``. For any set ``S`` of requests the token-rounds they hold are
at most ``M`` per round, so (the *parallel inequality*, Goemans 1997; Queyranne 1993)

.. math:: \\sum_{i \\in S} v_i B_i \\ge \\frac{V(S)^2}{2M}.

Taking ``S`` = the ``k`` smallest volumes (``v_(1) <= ... <= v_(n)``, prefix sums ``V_k``)
and summing by parts with the non-increasing weights ``1 / v_(k)`` gives

.. math:: \\mathrm{OPT} \\ge \\sum_k \\frac{Y_k - Y_{k-1}}{v_{(k)}} + \\sum_i (d_i - a_i),
          \\qquad Y_k = \\max\\Bigl(\\frac{V_k^2}{2M},\\; Y_{k-1} + v_{(k)} a_{(k)}
          + m_{(k)}\\Bigr), \\; Y_0 = 0,

where ``Y_k`` is the least value of ``sum_{j <= k} v_(j) B_(j)`` those inequalities allow.
Without the release term it is ``sum_k (V_k + V_{k-1}) / (2M)``: compared with the volume
bound's ``sum_k V_k / M`` every request gains ``d_i - v_i / (2M)``, about half its output
length on a mixed backlog, where a request holds a small part of ``M``. That is the
fluid relaxation with the requests' shapes; on large backlogs it is as tight as the
time-indexed LP (figures in ``benchmarks/bounds_scaling.py``) at the cost of a sort.

Proof and tests: ``proofs/mean_busy_time_bound.md``. Sources: Goemans, "Improved
approximation algorithms for scheduling with release dates" (SODA 1997) for mean busy
times; Queyranne, "Structure of a simple scheduling polyhedron" (Math. Prog. 1993) for
the parallel inequalities.
"""

from __future__ import annotations

import math
import time

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.bounds.bound import Bound
from schedlab.offline.instance import Instance

__all__ = ["busy_offsets", "mean_busy_time_bound", "mean_busy_time_value"]

#: Relative safety margin taken off the value against floating-point error.
_SAFETY = 1e-9


def busy_offsets(instance: Instance) -> np.ndarray:
    """``m_i / v_i``: mean busy time minus start, ``m_i = sum_k (k - 1/2)(s_i + k)``.

    ``2 m_i = s_i o_i^2 + o_i(o_i+1)(2 o_i+1)/3 - o_i(o_i+1)/2`` (sums of ``k`` and ``k^2``).
    """
    s = instance.prompt.astype(float)
    o = instance.output.astype(float)
    twice_moment = s * o * o + o * (o + 1) * (2 * o + 1) / 3 - o * (o + 1) / 2
    return twice_moment / (2.0 * instance.volume)


def mean_busy_time_value(instance: Instance) -> float:
    """The bound before rounding (see module docs), reduced by a relative ``1e-9``.

    The increments ``Y_k - Y_{k-1}`` are formed without subtracting large numbers: with
    ``Δ_k = v_(k) (V_k + V_{k-1}) / (2M)`` (the increment of ``V_k^2 / (2M)``) and the
    excess ``e_k = Y_k - V_k^2/(2M) = max(0, e_{k-1} + l_k - Δ_k)``, ``l_k = v_(k) (a_(k) +
    m_(k)/v_(k))``, the increment is ``Δ_k + e_k - e_{k-1}``. The excess follows Lindley's
    recursion, ``e_k = R_k - min(0, min_{j<=k} R_j)`` with ``R`` the prefix sums of
    ``l - Δ``; it is exactly ``0`` wherever the area term dominates.
    """
    offset = busy_offsets(instance)
    order = np.argsort(instance.volume, kind="stable")
    v = instance.volume[order].astype(float)
    prefix = np.cumsum(instance.volume[order]).astype(float)  # V_k, exact in int64
    delta = v * (2 * prefix - v) / (2.0 * instance.kv_tokens)
    least = v * (instance.arrival[order] + offset[order])
    walk = np.cumsum(least - delta)
    excess = walk - np.minimum(np.minimum.accumulate(walk), 0.0)
    increment = delta + np.diff(excess, prepend=0.0)
    busy = float((increment / v).sum())
    value = busy + float((instance.output - offset - instance.arrival).sum())
    return value - _SAFETY * abs(value)


def mean_busy_time_bound(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """Volume bound with each request's memory profile (see module docs), rounded up."""
    began = time.perf_counter()
    value = float(math.ceil(mean_busy_time_value(instance) - 1e-6))  # OPT is an integer
    return Bound(value, "mean-busy-time", runtime=time.perf_counter() - began)
