r"""The completion-chain bound: consecutive completions lie apart, searched over orders.

Two requests ending in rounds ``C_i <= C_j`` satisfy (``proofs/dp_rounds.md``, the tall
chain lemma, with peaks ``P = s + o``)

.. math:: C_j - C_i \ge \mathrm{gap}(i, j) = \min\bigl(o_j, \max(0, P_i + P_j - M)\bigr):

if ``j`` is still active in round ``C_i - 1`` it holds ``P_j - (C_j - C_i)`` tokens there
beside ``i``'s ``P_i``. For a set ``X`` ordered by completion, ``π(1), π(2), ...``,
induction gives ``C_{π(k)} >= c_k`` with ``c_1 = o_{π(1)}`` and
``c_k = c_{k-1} + gap(π(k-1), π(k))``. So

.. math:: \sum_{i \in X} C_i \ge \mathrm{chain}(X) = \min_{π} \sum_k c_k ,

a shortest-path problem over orders that a Held–Karp dynamic programme (Held & Karp
1962) solves over the subsets of ``X``. Built back to front, prepending ``j`` to a chain
of ``S`` that starts with ``i`` moves all of ``S`` by ``o_j + gap(j, i) - o_i``:

.. math:: g(S \cup \{j\}, j) = \min_{i \in S} g(S, i)
          + |S| (o_j + \mathrm{gap}(j, i) - o_i) + o_j ,

with ``g({j}, j) = o_j`` and ``chain(S) = min_i g(S, i)``, for every subset at once
(:func:`chain_values`). With ``C_i - a_i >= o_i`` for the requests outside ``X``,

.. math:: \mathrm{OPT} \ge \mathrm{chain}(X) - \sum_{X} a_i + \sum_{N \setminus X} o_i

for any ``X``. The gaps are large between *tall* requests (``2 P > M``, every pair of them
has ``P_i + P_j > M``), so ``X`` is the tall requests, at most :data:`MAX_CHAIN` of them
(those of largest peak; any subset is valid). Strong on Jaillet-parameter backlogs, where
the tall requests run nearly one after another; weak when most requests are small.
Proof and tests: ``proofs/tall_chain.md``.
"""

from __future__ import annotations

import time

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.bounds.bound import Bound
from schedlab.offline.instance import Instance

__all__ = [
    "MAX_CHAIN",
    "chain_members",
    "chain_values",
    "tall_chain_bound",
    "tall_chain_ceiling",
    "tall_chain_without",
]

#: Most requests in the chain: the table has ``2^MAX_CHAIN * MAX_CHAIN`` entries (about
#: 1.8 MB), built in well under a second.
MAX_CHAIN = 14

_INF = np.int64(1) << 50


def chain_members(instance: Instance) -> list[int]:
    """The tall requests (``2 (s_i + o_i) > M``), at most :data:`MAX_CHAIN` of largest peak
    (ties by index), in index order."""
    peak = (instance.prompt + instance.output).tolist()
    tall = [i for i in range(instance.n) if 2 * peak[i] > instance.kv_tokens]
    tall.sort(key=lambda i: (-peak[i], i))
    return sorted(tall[:MAX_CHAIN])


def chain_values(memory: int, prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
    """``chain(S)`` for every subset ``S`` of the requests given, by bit mask (entry 0: 0).

    Requests ``(prompt[k], output[k])`` in memory ``memory``; at most :data:`MAX_CHAIN`.
    The Held–Karp recursion of the module docs, one popcount layer at a time.
    """
    m = len(output)
    if m == 0:
        return np.zeros(1, dtype=np.int64)
    if m > MAX_CHAIN:
        raise ValueError(f"chain_values: {m} requests exceeds MAX_CHAIN = {MAX_CHAIN}")
    o = np.asarray(output, dtype=np.int64)
    peak = np.asarray(prompt, dtype=np.int64) + o
    # gap[j, i]: least C_i - C_j when C_j <= C_i
    gap = np.minimum(o[None, :], np.maximum(0, peak[:, None] + peak[None, :] - memory))
    # step[j, i]: shift of a chain starting with i when j is prepended, per member
    step = o[:, None] + gap - o[None, :]
    g = np.full((1 << m, m), _INF, dtype=np.int64)
    ones = np.arange(m)
    g[1 << ones, ones] = o
    masks = np.arange(1 << m)
    count = np.zeros(1 << m, dtype=np.int64)
    for k in range(m):
        count += (masks >> k) & 1
    for size in range(1, m):
        layer = masks[count == size]
        rows = g[layer]  # (A, m) over the first member i
        # best[a, j] = min_i rows[a, i] + size * step[j, i]
        best = (rows[:, None, :] + size * step[None, :, :]).min(axis=2) + o[None, :]
        free = ((layer[:, None] >> ones[None, :]) & 1) == 0
        a, j = np.nonzero(free)
        target = layer[a] | (1 << j)
        np.minimum.at(g, (target, j), best[a, j])
    values = g.min(axis=1)
    values[0] = 0
    return values


def _parts(instance: Instance) -> tuple[list[int], np.ndarray]:
    members = chain_members(instance)
    return members, chain_values(
        instance.kv_tokens, instance.prompt[members], instance.output[members]
    )


def tall_chain_bound(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """``chain(X) - sum_X a_i + sum_{N \\ X} o_i`` with ``X`` the chain members (module docs)."""
    began = time.perf_counter()
    members, values = _parts(instance)
    inside = np.zeros(instance.n, dtype=bool)
    inside[members] = True
    value = int(values[-1]) - int(instance.arrival[inside].sum())
    value += int(instance.output[~inside].sum())
    return Bound(
        float(value),
        "tall-chain",
        runtime=time.perf_counter() - began,
        stats={"members": len(members)},
    )


def tall_chain_ceiling(instance: Instance) -> float:
    """An upper bound on :func:`tall_chain_bound`'s value in ``O(n + k log k)``, without the
    table: ``gap(i, j) <= o_j``, so ``c_k`` is at most the outputs of the first ``k``
    members summed, and ``chain(X)`` at most those prefix sums added up in the order of
    increasing output (``proofs/best_order.md``, Claim 1). With no member it is
    ``sum_i o_i``, the ``trivial`` bound."""
    members = chain_members(instance)
    ordered = np.sort(instance.output[members])
    spt = int(np.cumsum(ordered).sum())
    rest = int(instance.output.sum()) - int(ordered.sum())
    return float(spt - int(instance.arrival[members].sum()) + rest)


def tall_chain_without(instance: Instance) -> list[int]:
    """The bound of the instance without request ``i``, for every ``i`` (one table).

    Dropping ``i`` from ``X`` leaves a subset of ``X``, whose ``chain`` is in the table.
    """
    members, values = _parts(instance)
    position = {i: k for k, i in enumerate(members)}
    full = len(values) - 1
    chained_arrival = int(instance.arrival[members].sum())
    rest = int(instance.output.sum()) - int(instance.output[members].sum())
    out = []
    for i in range(instance.n):
        if i in position:
            mask = full & ~(1 << position[i])
            out.append(int(values[mask]) - chained_arrival + int(instance.arrival[i]) + rest)
        else:
            out.append(int(values[full]) - chained_arrival + rest - int(instance.output[i]))
    return out
