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

from schedlab.offline.bounds import Bound, register_bound
from schedlab.offline.instance import Instance

__all__ = ["volume_bound", "volume_completions"]


def volume_completions(instance: Instance) -> np.ndarray:
    """Lower bounds on the sorted completions ``C_(1) <= ... <= C_(n)`` (see module docs)."""
    volumes = np.sort(instance.volume)
    area = -(-np.cumsum(volumes) // instance.memory)  # ceil(V_k / M), exact in int64
    ends = np.sort(instance.arrival + instance.output)
    return np.maximum(area, ends)


@register_bound("volume")
def volume_bound(instance: Instance, *, time_limit: float | None = None) -> Bound:
    """``sum_k max(ceil(V_k / M), (a+o)_(k)) - sum_i a_i`` (see module docs)."""
    began = time.perf_counter()
    value = float(volume_completions(instance).sum() - instance.arrival.sum())
    return Bound(value, "volume", runtime=time.perf_counter() - began)
