import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab import solve
from schedlab.budget import Budget
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance, Request
from schedlab.offline.priority import best_rule_schedule
from schedlab.offline.solvers.rules import RULES, priority_order
from schedlab.offline.verify import verify
from schedlab.testing import instances

RULE_NAMES = sorted(RULES)


def test_priority_keys():
    # s = (5, 0, 1), o = (1, 4, 2), a = (2, 0, 1); volumes s*o + o(o+1)/2 = (6, 10, 5).
    inst = Instance(20, (Request(5, 1, 2), Request(0, 4, 0), Request(1, 2, 1)))
    assert priority_order(inst, "fcfs").tolist() == [1, 2, 0]
    assert priority_order(inst, "sof").tolist() == [0, 2, 1]
    assert priority_order(inst, "total-size").tolist() == [2, 1, 0]  # s+o = 6, 4, 3
    assert priority_order(inst, "svf").tolist() == [2, 0, 1]
    assert priority_order(inst, "mc-sf").tolist() == [0, 2, 1]
    assert priority_order(inst, "mc-sf-backfill").tolist() == [0, 2, 1]


def test_ties_are_broken_by_index():
    inst = Instance(9, tuple(Request(1, 2) for _ in range(4)))
    for rule in RULE_NAMES:
        assert priority_order(inst, rule).tolist() == [0, 1, 2, 3]


def test_sof_versus_mc_sf_by_hand():
    # M = 6. Shortest first: r0 = (4, 1) holds 5; r1 = (1, 2) holds 2, 3; r2 = (0, 3)
    # holds 1, 2, 3. Order by o: r0, r1, r2. Round 0: r0 (5 tokens). r1 next: 5 + 2 = 7 > 6
    # does not fit. `sof` and `mc-sf` (Jaillet et al.'s rule) stop there;
    # `mc-sf-backfill` tries r2: 5 + 1 = 6 in round 0, then r2 alone: fits, so r2 starts
    # at 0.
    # Round 1: r0 done; sof starts r1 (2) and r2 (1 + ... ) -> r1: 2, 3 in rounds 1-2 and
    # r2: 1, 2, 3 in rounds 1-3: 3, 5, 3: fits; starts (0, 1, 1), total 1 + 3 + 4 = 8.
    # mc-sf-backfill: r1 in round 1 next to r2 (2, 3 in rounds 1-2): 4, 6: fits; starts
    # (0, 1, 0), total 1 + 3 + 3 = 7.
    inst = Instance(6, (Request(4, 1), Request(1, 2), Request(0, 3)))
    for strict in ("sof", "mc-sf"):
        result = solve(inst, strict, bound=None)
        assert result.starts.tolist() == [0, 1, 1] and result.objective == 8
    result = solve(inst, "mc-sf-backfill", bound=None)
    assert result.starts.tolist() == [0, 1, 0] and result.objective == 7


@settings(max_examples=300, deadline=None)
@given(instances(max_n=10), st.integers(0, 6))
def test_mc_sf_variants_coincide_with_equal_prompts(drawn, prompt):
    # With one prompt length the admission slack is non-increasing in o, so once a request
    # fails every longer one fails too: backfilling never finds another (rules.py docs).
    memory = max(drawn.kv_tokens, prompt + int(drawn.output.max()))
    inst = Instance.from_arrays(memory, [prompt] * drawn.n, drawn.output, arrival=drawn.arrival)
    strict = solve(inst, "mc-sf", bound=None)
    backfill = solve(inst, "mc-sf-backfill", bound=None)
    assert verify(inst, strict.starts) == [] and verify(inst, backfill.starts) == []
    assert strict.starts.tolist() == backfill.starts.tolist()


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_backfill_option_overrides_the_default(rule):
    inst = Instance(10, (Request(4, 2), Request(4, 2), Request(1, 1)))
    strict = solve(inst, rule, backfill=False, bound=None)
    greedy = solve(inst, rule, backfill=True, bound=None)
    assert strict.stats["backfill"] is False and greedy.stats["backfill"] is True
    assert greedy.objective <= strict.objective


@settings(max_examples=1000, deadline=None)
@given(instances(max_n=10, max_kv_tokens=40, max_arrival=8, max_output=15))
def test_every_rule_returns_a_verified_schedule(inst):
    for rule in RULE_NAMES:
        result = solve(inst, rule, bound=None)
        assert verify(inst, result.starts) == []
        assert result.objective == int((result.starts + inst.output - inst.arrival).sum())


def test_rules_on_a_mixed_backlog():

    inst = mixed_backlog(300, seed=11)
    objectives = {}
    for rule in RULE_NAMES:
        result = solve(inst, rule, bound=None)
        assert verify(inst, result.starts) == []
        objectives[rule] = result.objective
    # FCFS ignores lengths; on a heterogeneous backlog every size-aware rule beats it.
    assert all(objectives[r] < objectives["fcfs"] for r in RULE_NAMES if r != "fcfs")


def test_best_rule_schedule_stops_at_the_cap_with_the_first_rule():
    # a cap already passed: only the first rule's strict decode is made, and returned

    inst = mixed_backlog(40, seed=3)
    first = next(iter(RULES))
    starts, rule = best_rule_schedule(inst, Budget(1e-9))
    assert rule == first
    assert starts.tolist() == list_schedule(inst, priority_order(inst, first)).tolist()
    assert verify(inst, starts) == []
    full, _ = best_rule_schedule(inst)
    assert (full + inst.output).sum() <= (starts + inst.output).sum()


@settings(max_examples=200, deadline=None)
@given(instances(max_n=7, max_kv_tokens=14, max_output=6, max_arrival=3))
def test_best_rule_schedule_is_the_first_least_rule_and_mode(inst):
    # reference: every rule in RULES order, strict then backfilling, the first least
    # objective kept (what best_rule_schedule returns, whatever order it decodes in)

    best = None
    for rule in RULES:
        for backfill in (False, True):
            starts = list_schedule(inst, priority_order(inst, rule), backfill=backfill)
            objective = int((starts + inst.output).sum())
            if best is None or objective < best[0]:
                best = (objective, starts, f"{rule}{'+backfill' if backfill else ''}")
    starts, rule = best_rule_schedule(inst)
    assert verify(inst, starts) == []
    assert (rule, starts.tolist()) == (best[2], best[1].tolist())
