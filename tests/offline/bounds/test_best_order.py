"""``best`` in the order of cost: its plan, its dominance skips and its value.

Checks ``proofs/best_order.md``: the tall-chain ceiling is never below the tall-chain
bound (Claim 1); on backlogs where every method is in reach ``best`` is never below the
largest of the methods it used to run one after another (Claim 2); what runs depends
only on the instance and the work budget (Claim 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings

from schedlab.errors import HorizonError, InputError, InputTypeError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import BEST_WORK, BOUNDS, BUILTIN_BOUNDS, lower_bound, plan
from schedlab.offline.bounds.tall_chain import tall_chain_bound, tall_chain_ceiling
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.testing import instances
from tests.conftest import INSTANCES

#: What ``best`` ran on instances of up to 1,000 requests before it was planned by cost
#: (every method one after another, commit b912de9).
EXHAUSTIVE = (
    "trivial",
    "volume",
    "tall-chain",
    "mean-busy-time",
    "fluid-spacing",
    "completion-spacing",
)

#: ``best`` before this change (b912de9, every chosen method run; 2026-12-06) where it is
#: too slow to recompute here: the shipped mixed n = 1,000 backlog (112 s; completion-spacing
#: gave 4,468,244) and ``mixed_backlog(10_000)`` (310 s; lagrangian gave 452,347,448).
MIXED_1000_BEFORE = 4_470_244.0
MIXED_10000_BEFORE = 453_632_375.0


def _exhaustive(inst: Instance, known: dict[str, float] | None = None) -> float:
    """The largest value of the methods ``best`` used to run on ``inst``; ``known``: values
    already computed (``best``'s ``stats["values"]``), not run again."""
    values = list((known or {}).values())
    for name in EXHAUSTIVE:
        if name in (known or {}):
            continue
        try:
            values.append(lower_bound(inst, name).value)
        except HorizonError:
            continue
    return max(values)


@settings(max_examples=150, deadline=None)
@given(instances(max_n=9, max_kv_tokens=24, max_output=14, max_arrival=6))
def test_the_tall_chain_ceiling_is_never_below_the_bound(inst: Instance) -> None:
    assert tall_chain_bound(inst).value <= tall_chain_ceiling(inst)


@settings(max_examples=40, deadline=None)
@given(instances(max_n=7, max_kv_tokens=30, max_output=12, max_arrival=0))
def test_best_is_never_below_the_exhaustive_best_on_random_backlogs(inst: Instance) -> None:
    best = lower_bound(inst)
    assert best.stats["out_of_reach"] == []
    assert best.value >= _exhaustive(inst)


@settings(max_examples=20, deadline=None)
@given(instances(max_n=6, max_kv_tokens=30, max_output=10, max_arrival=8))
def test_best_is_never_below_the_exhaustive_best_with_releases(inst: Instance) -> None:
    assert lower_bound(inst).value >= _exhaustive(inst)


SMALL_SHIPPED = [p for p in sorted(INSTANCES.glob("*.json")) if read_instance(p).n <= 200]


@pytest.mark.parametrize("path", SMALL_SHIPPED, ids=[p.stem for p in SMALL_SHIPPED])
def test_best_keeps_its_value_on_the_shipped_instances(path: Path) -> None:
    inst = read_instance(path)
    best = lower_bound(inst)
    assert best.value >= _exhaustive(inst, best.stats["values"])


def test_best_on_the_shipped_mixed_1000_skips_what_is_out_of_reach() -> None:
    inst = read_instance(INSTANCES / "mixed-n1000.json")
    best = lower_bound(inst)
    assert best.value >= MIXED_1000_BEFORE
    assert best.stats["out_of_reach"] == ["completion-spacing"]
    assert "completion-spacing" not in best.stats["values"]


def test_best_on_a_large_mixed_backlog_keeps_its_value() -> None:
    best = lower_bound(mixed_backlog(10_000))
    assert best.value >= MIXED_10000_BEFORE
    assert best.stats["out_of_reach"] == ["lagrangian"]


def test_the_plan_runs_the_cheapest_first_and_charges_each_its_estimate() -> None:
    inst = read_instance(INSTANCES / "mixed-n200.json")
    chosen = [m for m in BUILTIN_BOUNDS if m.chosen_for(inst)]
    planned, out, charged = plan(inst, chosen, BEST_WORK)
    estimates = [m.work(inst) for m in planned if m.work is not None]
    assert estimates == sorted(estimates)
    assert out == []
    assert charged == pytest.approx(sum(estimates))
    # a budget below completion-spacing's estimate leaves it out, and only it
    planned, out, charged = plan(inst, chosen, 1e7)
    assert out == ["completion-spacing"]
    assert charged <= 1e7
    assert plan(inst, chosen, 1e7) == (planned, out, charged)  # deterministic
    best = lower_bound(inst, work=1e7)
    assert best.stats["out_of_reach"] == ["completion-spacing"]
    assert best.value == lower_bound(inst, "fluid-spacing").value


def test_a_dominated_method_is_not_run() -> None:
    # no request peaks above M / 2: tall-chain could give only sum o_i, the trivial bound
    best = lower_bound(mixed_backlog(60, seed=3))
    assert best.stats["dominated"] == ["tall-chain"]
    assert "tall-chain" not in best.stats["values"]


def test_with_nothing_in_reach_best_is_the_trivial_bound() -> None:
    inst = read_instance(INSTANCES / "tiny-1.json")
    best = lower_bound(inst, work=1e-9)
    assert best.value == float(inst.output.sum())
    assert "trivial" not in best.stats["out_of_reach"]  # charged nothing, always run
    chosen = {m.name for m in BOUNDS.entries().values() if m.chosen_for(inst)}
    assert set(best.stats["out_of_reach"]) == chosen - {"trivial"}


@pytest.mark.parametrize(
    ("work", "error", "match"),
    [
        (0, InputError, "work: must be a positive number of start costs, got 0"),
        (float("nan"), InputError, "work: must be a positive"),
        ("1e9", InputTypeError, "work: expected a number of start costs"),
        (True, InputTypeError, "work: expected a number of start costs"),
    ],
)
def test_a_bad_work_budget_is_refused(work: object, error: type, match: str) -> None:
    inst = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(error, match=match):
        lower_bound(inst, work=work)  # type: ignore[arg-type]
