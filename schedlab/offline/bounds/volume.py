"""The volume bound: memory-time area and output lengths, ``O(n log n)`` at any size.

Let ``C_(1) <= ... <= C_(n)`` be the completions of any feasible schedule, ``V`` the
volumes ``s_i o_i + o_i(o_i + 1)/2`` sorted increasingly and ``V_k`` the sum of the ``k``
smallest. The ``k`` requests completing first are processed entirely in rounds
``0 .. C_(k) - 1``, each of which holds at most ``M`` tokens, and their volumes add up to
at least ``V_k``; so ``C_(k) >= ceil(V_k / M)``. They also include one with
``a_i + o_i`` at least the k-th smallest ``a + o``, hence ``C_(k) >= (a+o)_(k)``. Both
are integers, so

.. math:: \\mathrm{OPT} \\ge \\sum_k \\max(\\lceil V_k / M \\rceil, (a+o)_{(k)}) - \\sum_i a_i .

Proof and tests: ``proofs/volume_bound.md``. Jaillet et al. (arXiv 2502.07115) use the
same area argument for their hindsight benchmark.
"""

from __future__ import annotations

import time

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.bounds.bound import Bound
from schedlab.offline.instance import Instance

__all__ = ["start_slack", "volume_bound", "volume_completions"]


def volume_completions(instance: Instance) -> np.ndarray:
    """Lower bounds on the sorted completions ``C_(1) <= ... <= C_(n)`` (see module docs)."""
    volumes = np.sort(instance.volume)
    area = -(-np.cumsum(volumes) // instance.kv_tokens)  # ceil(V_k / M), exact in int64
    ends = np.sort(instance.arrival + instance.output)
    return np.maximum(area, ends)


def volume_bound(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """``sum_k max(ceil(V_k / M), (a+o)_(k)) - sum_i a_i`` (see module docs)."""
    began = time.perf_counter()
    value = float(volume_completions(instance).sum() - instance.arrival.sum())
    return Bound(value, "volume", runtime=time.perf_counter() - began)


def start_slack(instance: Instance, upper: int) -> list[int]:
    """How many rounds after its release each request may start in a schedule as good as
    one of objective ``upper``: ``U_i - a_i = UB - LB(N \\ {i}) - o_i``.

    In any schedule of objective at most ``UB`` the other requests form a feasible
    schedule of their own instance, so ``C_i - a_i <= UB - LB(N \\ {i})`` with ``LB``
    any lower bound on that instance (``proofs/cpsat_horizon.md``).

    ``LB`` is the volume bound for ``n <= 200`` and ``sum_j o_j`` beyond (``O(n^2 log n)``
    otherwise).
    """
    output = instance.output
    if instance.n == 1:
        return [upper - int(output[0])]
    if instance.n > 200:
        others_min = int(output.sum()) - output
        return [int(x) for x in upper - others_min - output]
    slack: list[int] = []
    for i in range(instance.n):
        keep = np.arange(instance.n) != i
        others = Instance.from_arrays(
            instance.kv_tokens, instance.prompt[keep], output[keep], instance.arrival[keep]
        )
        rest = int(volume_completions(others).sum() - others.arrival.sum())
        slack.append(upper - rest - int(output[i]))
    return slack
