"""The online policies (:mod:`schedlab.offline.online.policies`) as registered solvers:
every schedule under every prediction model passes the independent verifier and is no
better than hindsight allows; with perfect predictions the estimate policies are MC-SF;
each evicts by its own rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab import solve
from schedlab.errors import PredictionError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import lower_bound
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.online.engine import Decision, Policy, View, run_online
from schedlab.offline.online.policies import POLICIES, FcfsPreempt, a_max, a_min
from schedlab.offline.online.runs import (
    evictions,
    last_starts,
    objective,
    verify_runs,
    wasted_token_rounds,
)
from schedlab.offline.priority import priority_order
from schedlab.offline.verify import verify
from schedlab.predictions import Intervals, predict
from schedlab.testing import instances

ALGORITHMS = sorted(POLICIES)
SPECS = ["perfect", "interval:0.5", "interval:0.1", "buckets", "buckets:0.3:1", "lognormal:0.8"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_n=5, max_kv_tokens=20, max_output=8, max_arrival=6), st.integers(0, 99))
def test_every_schedule_is_verified_and_above_hindsight(instance: Instance, seed: int) -> None:
    # proofs/hindsight.md: the last runs form a feasible schedule without eviction of the
    # same objective, so no online objective is below the optimum with the true lengths,
    # nor below the best lower bound
    optimum = solve(instance, "brute-force", bound=None).objective
    bound = lower_bound(instance, "best").value
    assert optimum >= bound - 1e-9
    for name in ALGORITHMS:
        for spec in SPECS:
            runs = run_online(instance, predict(spec, instance.output, seed), POLICIES[name]())
            assert verify_runs(instance, runs) == [], (name, spec)
            assert verify(instance, last_starts(runs)) == []
            assert objective(instance, runs) >= optimum, (name, spec)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_the_solver_returns_its_verified_runs_and_their_waste(name: str) -> None:
    instance = Instance.from_arrays(12, [2, 0, 3, 1, 4], [3, 5, 2, 4, 1], [0, 1, 1, 3, 4])
    result = solve(instance, name, predictions="lognormal:1:3", bound=None)
    runs = tuple(tuple(tuple(run) for run in request) for request in result.stats["runs"])
    assert verify_runs(instance, runs) == []
    assert result.starts.tolist() == last_starts(runs).tolist()
    assert result.objective == objective(instance, runs)
    assert result.stats["evictions"] == evictions(runs)
    assert result.stats["wasted_token_rounds"] == wasted_token_rounds(instance, runs)
    assert result.stats["predictions"] == "lognormal:1:3"


@settings(max_examples=30, deadline=None)
@given(instances(max_n=8, max_kv_tokens=30, max_output=12, max_arrival=5))
def test_with_perfect_predictions_the_estimate_policies_are_mc_sf(instance: Instance) -> None:
    mc_sf = list_schedule(instance, priority_order(instance, "mc-sf"), backfill=False)
    for name in ("a-max", "a-min", "mc-sf-predicted"):
        result = solve(instance, name, bound=None)
        assert result.starts.tolist() == mc_sf.tolist(), name
        assert result.stats["evictions"] == 0


@settings(max_examples=30, deadline=None)
@given(
    instances(max_n=8, max_kv_tokens=30, max_output=12, max_arrival=5),
    st.floats(0.05, 1.0),
    st.integers(0, 99),
)
def test_a_max_never_evicts_with_intervals_that_hold_the_truth(
    instance: Instance, alpha: float, seed: int
) -> None:
    intervals = predict(f"interval:{alpha}:{seed}", instance.output)
    runs = run_online(instance, intervals, a_max())
    assert evictions(runs) == 0 and verify_runs(instance, runs) == []


def test_fcfs_preempt_evicts_the_newest_and_starts_nothing_that_round() -> None:
    # M = 10, two requests of prompt 1 and output 8: both start in round 0 (2 + 2 <= 10);
    # in round 4 they would hold 6 + 6 = 12, so the newer (request 1) is preempted with 4
    # rounds done, and is not restarted in round 4
    instance = Instance.from_arrays(10, [1, 1], [8, 8])
    runs = run_online(instance, predict("perfect", instance.output), FcfsPreempt())
    assert runs[0] == ((0, 8),)
    assert runs[1][0] == (0, 4) and runs[1][1][0] >= 5
    assert verify_runs(instance, runs) == []


def test_a_min_starts_from_the_lower_end_and_evicts_the_least_estimate() -> None:
    # two requests of output 6 with interval [1, 6]: A_min starts both (estimate 1); by
    # round 4 both have run 4 rounds (estimates 5) and would hold 5 + 5 > 8: the tie goes
    # to the later index, which restarts in round 5 (estimate 5, learned) beside request
    # 0's last round, not in round 4, the round of the eviction
    instance = Instance.from_arrays(8, [0, 0], [6, 6])
    intervals = Intervals(np.array([1, 1]), np.array([6, 6]), "test", exact=True)
    runs = run_online(instance, intervals, a_min())
    assert runs == (((0, 6),), ((0, 4), (5, 6)))
    # A_max plans with 6: request 1 waits until it fits beside request 0's last two
    # rounds (5 + 1, 6 + 2 <= 8), and nothing is evicted
    assert run_online(instance, intervals, a_max()) == (((0, 6),), ((4, 6),))


@pytest.mark.parametrize("name", ALGORITHMS)
def test_a_bad_prediction_spec_names_the_solver_option(name: str) -> None:
    instance = Instance.from_arrays(10, [1, 2], [3, 4])
    with pytest.raises(ValueError, match=rf"^{name}: predictions: alpha must be in \(0, 1\]"):
        solve(instance, name, predictions="interval:2")


@pytest.mark.parametrize("name", ["a-min", "mc-sf-predicted", "fcfs-preempt"])
def test_on_a_mixed_backlog_evictions_happen_and_are_verified(name: str) -> None:
    instance = mixed_backlog(80, seed=3)
    runs = run_online(instance, predict("interval:0.3:1", instance.output), POLICIES[name]())
    assert evictions(runs) > 0
    assert verify_runs(instance, runs) == []


def test_predictions_may_come_from_a_file(tmp_path: Path) -> None:
    instance = Instance.from_arrays(12, [2, 0, 3], [3, 5, 2])
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper\n0,1,3\n1,5,9\n2,2,2\n")
    result = solve(instance, "a-min", predictions=str(path), bound=None)
    assert result.stats["predictions"] == str(path)
    path.write_text("id,lower,upper\n0,1,3\n1,5,9\n7,2,2\n")
    with pytest.raises(PredictionError, match=r"p.csv: line 4: unknown request id '7'$"):
        solve(instance, "a-min", predictions=str(path), bound=None)


class _Recorder:
    """A policy's decisions, recorded as it makes them."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.log: list[tuple[int, tuple[int, ...], tuple[int, ...], int | None]] = []

    def decide(self, view: View) -> Decision:
        decision = self.inner.decide(view)
        self.log.append((view.round, tuple(decision.evict), tuple(decision.start), decision.wake))
        return decision


@settings(max_examples=40, deadline=None)
@given(
    instances(max_n=6, max_kv_tokens=24, max_output=10, max_arrival=4, shapes=("mixed",)),
    st.data(),
)
def test_no_policy_acts_on_a_length_before_its_request_finishes(
    instance: Instance, data: st.DataObject
) -> None:
    # two instances that differ only in request k's output length, with the same
    # intervals: every policy decides alike until k finishes in one of them
    k = data.draw(st.integers(0, instance.n - 1))
    request = instance.requests[k]
    other = data.draw(st.integers(1, instance.kv_tokens - request.prompt))
    changed = list(instance.output)
    changed[k] = other
    twin = Instance.from_arrays(instance.kv_tokens, instance.prompt, changed, instance.arrival)
    lower = np.ones(instance.n, dtype=np.int64)
    intervals = Intervals(lower, instance.kv_tokens - instance.prompt, "wide", exact=True)
    for name in ALGORITHMS:
        logs, finish = [], []
        for case in (instance, twin):
            policy = _Recorder(POLICIES[name]())
            runs = run_online(case, intervals, policy)
            logs.append(policy.log)
            finish.append(runs[k][-1][0] + case.requests[k].output)
        first = min(finish)
        before = [[entry for entry in log if entry[0] < first] for log in logs]
        assert before[0] == before[1], name
