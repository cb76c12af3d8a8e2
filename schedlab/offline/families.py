"""Instance families from the theory: unbounded ratios of simple rules, NP-hardness.

Each ``*_family(m)`` builds a backlog on which one list-scheduling rule is worse than a
known feasible schedule (the *witness*, stored in ``meta["witness_starts"]``) by a
factor that grows without bound in ``m``; since the optimum is at most the witness,
the rule's approximation ratio is unbounded. Closed forms and proofs:
``proofs/unbounded_ratios.md``. Wang, Ye and Zhou (arXiv 2508.06133) state that FCFS,
shortest-first and total-size ordering have unbounded ratios; these families are ours.

================= ====================================== ================================
family            requests (``L = m^2``)                 rule cost / witness cost
================= ====================================== ================================
``fcfs``          1 long ``(s, o) = (0, L)`` listed       ``(L + mL + m(m+1)/2) /``
                  first, ``m`` shorts ``(L - 1, 1)``;     ``(m(m+1)/2 + m + L)``
                  ``M = L``
``sof``           ``m`` fat ``(2m^2 - 1, 1)``,           ``(m(m+1)/2 + m^2(m+2)) /``
                  ``m^2`` thin ``(0, 2)``; ``M = 2m^2``   ``(2m^2 + 2m + m(m+1)/2)``
``total-size``    1 long ``(0, L)``, ``m`` fat            as ``fcfs``
                  ``(L, 1)``; ``M = L + 1``
================= ====================================== ================================

:func:`three_partition_instance` is the reduction of ``proofs/np_hardness.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from schedlab.errors import InstanceError
from schedlab.offline.instance import Instance, check_int

__all__ = [
    "FAMILIES",
    "family_instance",
    "fcfs_family",
    "sof_family",
    "three_partition_instance",
    "total_size_family",
]


def _build(
    name: str, memory: int, requests: list[tuple[int, int]], witness: Sequence[int], m: int
) -> Instance:
    prompt = [s for s, _ in requests]
    output = [o for _, o in requests]
    witness_cost = int(sum(p + o for p, o in zip(witness, output, strict=True)))
    meta = {
        "family": name,
        "m": m,
        "witness_starts": list(witness),
        "witness_objective": witness_cost,
        "source": "schedlab.offline.families (proofs/unbounded_ratios.md)",
    }
    return Instance.from_arrays(memory, prompt, output, name=f"{name}-family-m{m}", meta=meta)


def fcfs_family(m: int) -> Instance:
    """FCFS (release order, ties by index) is ``Omega(m)`` times the witness.

    One long request ``(0, m^2)`` comes first, then ``m`` short ones ``(m^2 - 1, 1)``
    that need the whole memory ``M = m^2``; the witness runs the shorts first.
    """
    m = check_int(m, "m", 1)
    length = m * m
    requests = [(0, length)] + [(length - 1, 1)] * m
    witness = [m, *range(m)]
    return _build("fcfs", length, requests, witness, m)


def sof_family(m: int) -> Instance:
    """Shortest-output-first (and MC-SF) is ``Omega(m)`` times the witness.

    ``m`` fat requests ``(2m^2 - 1, 1)`` fill the memory ``M = 2m^2`` for one round
    each; ``m^2`` thin requests ``(0, 2)`` all fit together. SOF runs the fats first
    (shorter output), making every thin request wait ``m`` rounds; the witness runs the
    thins first.
    """
    m = check_int(m, "m", 1)
    memory = 2 * m * m
    requests = [(memory - 1, 1)] * m + [(0, 2)] * (m * m)
    witness = [2 + j for j in range(m)] + [0] * (m * m)
    return _build("sof", memory, requests, witness, m)


def total_size_family(m: int) -> Instance:
    """Total-size order (by ``s + o``) is ``Omega(m)`` times the witness.

    A long request ``(0, m^2)`` has the least ``s + o``; ``m`` fat requests
    ``(m^2, 1)`` need the whole memory ``M = m^2 + 1``; the witness runs the fats first.
    """
    m = check_int(m, "m", 1)
    length = m * m
    requests = [(0, length)] + [(length, 1)] * m
    witness = [m, *range(m)]
    return _build("total-size", length + 1, requests, witness, m)


#: rule name -> family generator
FAMILIES: dict[str, Callable[[int], Instance]] = {
    "fcfs": fcfs_family,
    "sof": sof_family,
    "total-size": total_size_family,
}


def family_instance(rule: str, m: int) -> Instance:
    """The member ``m`` of the bad family of ``rule`` (a key of :data:`FAMILIES`)."""
    from schedlab.errors import UnknownNameError

    if rule not in FAMILIES:
        raise UnknownNameError("family", rule, list(FAMILIES))
    return FAMILIES[rule](m)


def three_partition_instance(numbers: Sequence[int], bound: int) -> Instance:
    """The reduction from 3-PARTITION of ``proofs/np_hardness.md``.

    Given ``3q`` integers ``a_j`` with ``bound/4 < a_j < bound/2`` and
    ``sum a_j = q * bound``, build requests ``(s, o) = (a_j - 1, 1)`` with ``M = bound``.
    The optimum total latency is ``3q(q+1)/2`` if and only if the numbers split into
    ``q`` triples of sum ``bound`` each (``meta["target"]``).

    Raises
    ------
    InstanceError
        If the numbers do not meet the 3-PARTITION preconditions.
    """
    bound = check_int(bound, "bound", 1)
    values = [check_int(a, f"numbers[{j}]", 1) for j, a in enumerate(numbers)]
    if not values or len(values) % 3:
        raise InstanceError(f"numbers: need 3q > 0 numbers, got {len(values)}")
    q = len(values) // 3
    if sum(values) != q * bound:
        raise InstanceError(f"numbers: sum {sum(values)} differs from q * bound = {q * bound}")
    for j, a in enumerate(values):
        if not 4 * a > bound or not 2 * a < bound:
            raise InstanceError(f"numbers[{j}]: {a} is not strictly between bound/4 and bound/2")
    prompt = np.array(values, dtype=np.int64) - 1
    meta = {"reduction": "3-partition", "q": q, "target": 3 * q * (q + 1) // 2}
    return Instance.from_arrays(
        bound, prompt, np.ones(len(values), dtype=np.int64), name=f"3partition-q{q}", meta=meta
    )
