"""Bad-instance families (proofs/unbounded_ratios.md) and the 3-PARTITION reduction
(proofs/np_hardness.md)."""

from __future__ import annotations

import itertools

import pytest

from schedlab import solve, verify
from schedlab.errors import InstanceError, UnknownNameError
from schedlab.offline.families import FAMILIES, family_instance, three_partition_instance


def closed_form(rule: str, m: int) -> tuple[int, int]:
    """(rule cost, witness cost) from proofs/unbounded_ratios.md."""
    if rule == "sof":
        return m * (m + 1) // 2 + m * m * (m + 2), 2 * m * m + 2 * m + m * (m + 1) // 2
    length = m * m
    return length + m * length + m * (m + 1) // 2, m * (m + 1) // 2 + m + length


@pytest.mark.parametrize("rule", sorted(FAMILIES))
@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
def test_rule_cost_and_witness_match_closed_forms(rule: str, m: int) -> None:
    inst = family_instance(rule, m)
    witness = inst.meta["witness_starts"]
    assert verify(inst, witness) == []
    cost, witness_cost = closed_form(rule, m)
    assert inst.meta["witness_objective"] == witness_cost
    assert solve(inst, rule, bound=None).objective == cost


@pytest.mark.parametrize("rule", sorted(FAMILIES))
def test_ratio_grows_without_bound(rule: str) -> None:
    ratios = []
    for m in (2, 4, 8, 16, 32):
        inst = family_instance(rule, m)
        ratios.append(solve(inst, rule, bound=None).objective / inst.meta["witness_objective"])
    assert all(b > a for a, b in itertools.pairwise(ratios))
    assert ratios[-1] > 32 / 5  # proofs/unbounded_ratios.md: ratio > m / 5 for m >= 2


def test_backfilling_mcsf_shares_the_sof_family() -> None:
    # mc-sf is sof (strict); backfilling changes nothing here (proofs/unbounded_ratios.md)
    inst = family_instance("sof", 8)
    result = solve(inst, "mc-sf-backfill", bound=None)
    assert verify(inst, result.starts) == []
    assert result.objective == closed_form("sof", 8)[0]


def test_unknown_family() -> None:
    with pytest.raises(UnknownNameError, match="family"):
        family_instance("svf", 3)


def test_three_partition_yes_instance_reaches_target() -> None:
    # 6 + 7 + 7 = 6 + 6 + 8 = 20: two triples, so two rounds of three requests each:
    # 3 * 1 + 3 * 2 = 9 = 3q(q+1)/2 with q = 2.
    inst = three_partition_instance([6, 7, 7, 6, 6, 8], 20)
    assert inst.meta["target"] == 9
    assert solve(inst, "brute-force", bound=None).objective == 9


def test_three_partition_no_instance_misses_target() -> None:
    # In (10, 20) summing to 80: no triple of 11, 11, 11, 13, 17, 17 sums to 40.
    inst = three_partition_instance([11, 11, 11, 13, 17, 17], 40)
    assert solve(inst, "brute-force", bound=None).objective > inst.meta["target"]


@pytest.mark.parametrize(
    ("numbers", "bound", "message"),
    [
        ([6, 7, 7, 6, 6], 20, "3q"),
        ([6, 7, 7, 6, 6, 9], 20, "sum"),
        ([5, 8, 7, 6, 6, 8], 20, "between"),
    ],
)
def test_three_partition_preconditions(numbers: list[int], bound: int, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        three_partition_instance(numbers, bound)
