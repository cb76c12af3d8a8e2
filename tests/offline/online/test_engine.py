"""The online engine (:mod:`schedlab.offline.online.engine`): eviction frees memory and
loses progress, a request restarts only after its release, a policy never sees a true
length before its request finishes, and decisions against the rules are refused."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab.errors import SolverError
from schedlab.offline.instance import Instance
from schedlab.offline.online.engine import Decision, View, run_online
from schedlab.offline.online.runs import verify_runs
from schedlab.predictions import Intervals, predict


class Scripted:
    """A policy that plays a script: ``{round: Decision}``, and records what it saw."""

    name = "scripted"

    def __init__(self, script: dict[int, Decision]) -> None:
        self.script = script
        self.seen: list[tuple[int, int, np.ndarray, np.ndarray]] = []

    def decide(self, view: View) -> Decision:
        self.seen.append((view.round, view.load(), view.progress, view.running.copy()))
        return self.script.get(view.round, Decision())


# M = 10: request 0 (s 2, o 4, a 0), request 1 (s 3, o 3, a 2)
INSTANCE = Instance.from_arrays(10, [2, 3], [4, 3], [0, 2])
PERFECT = predict("perfect", INSTANCE.output)


def test_an_evicted_request_frees_its_memory_loses_progress_and_restarts() -> None:
    script = {
        0: Decision(start=[0], wake=2),
        2: Decision(evict=[0], start=[1], wake=5),
        5: Decision(start=[0]),
    }
    policy = Scripted(script)
    runs = run_online(INSTANCE, PERFECT, policy)
    assert runs == (((0, 2), (5, 4)), ((2, 3),))
    assert verify_runs(INSTANCE, runs) == []
    rounds = [seen[0] for seen in policy.seen]
    assert rounds == [0, 2, 5]
    # before round 2 request 0 had run 2 rounds and would hold 2 + 3 = 5 tokens
    _, load, progress, _ = policy.seen[1]
    assert (load, progress[0]) == (5, 2)
    # before round 5 request 0 is waiting, from scratch: nothing of its run is held
    _, load, progress, running = policy.seen[2]
    assert (load, progress[0], running[0]) == (0, 0, False)


def test_a_request_cannot_start_before_its_release() -> None:
    with pytest.raises(SolverError, match=r"^online policy scripted: round 0: starts request 1, "):
        run_online(INSTANCE, PERFECT, Scripted({0: Decision(start=[0, 1])}))


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({0: Decision(start=[0, 0])}, r"round 0: starts a request twice"),
        ({0: Decision(start=[0]), 2: Decision(start=[0])}, r"round 2: starts request 0, which is"),
        ({0: Decision(evict=[1])}, r"round 0: evicts request 1, which is not running"),
        ({0: Decision(start=[7])}, r"round 0: starts 7, which is no request"),
        ({0: Decision()}, r"round 2: 2 request\(s\) wait with nothing running, no release"),
    ],
)
def test_a_decision_against_the_rules_is_refused(
    script: dict[int, Decision], message: str
) -> None:
    with pytest.raises(SolverError, match=message):
        run_online(INSTANCE, PERFECT, Scripted(script))


def test_a_decision_that_overflows_memory_is_refused() -> None:
    # both requests from round 2: 2 + 3 + 1 = 6 and 3 + 1 = 4 fit; round 3 holds
    # 7 + 5 = 12 > 10, and the policy, asked before it, evicts nothing
    tight = Scripted({0: Decision(start=[0]), 2: Decision(start=[1])})
    with pytest.raises(SolverError, match=r"round 3: the running requests would hold 11 tokens"):
        run_online(Instance.from_arrays(10, [2, 3], [5, 3], [0, 2]), PERFECT_5, tight)


PERFECT_5 = predict("perfect", [5, 3])


class Spy:
    """FCFS that checks, at every decision, that what it may read reveals no unfinished
    request's length, and tries every way in it holds."""

    name = "spy"

    def __init__(self, truth: np.ndarray) -> None:
        self.truth = truth
        self.calls = 0

    def decide(self, view: View) -> Decision:
        self.calls += 1
        unfinished = ~view.finished
        assert (view.output[unfinished] == -1).all()
        assert (view.output[view.finished] == self.truth[view.finished]).all()
        assert (view.prompt[~view.released] == -1).all()
        assert (view.lower[~view.released] == -1).all()
        # nothing the view holds is the engine or the instance
        for value in vars(view).values():
            assert not isinstance(value, Instance)
            assert not callable(value)
        with pytest.raises(ValueError, match="read-only"):
            view.output[0] = 1
        load = view.load()
        start = []
        for k in np.flatnonzero(view.waiting):
            if load + view.prompt[k] + 1 > view.kv_tokens or view.running.any() or start:
                break
            start.append(int(k))
        return Decision(start=start)


@pytest.mark.parametrize("spec", ["perfect", "interval:0.3:2", "buckets:4"])
def test_no_policy_sees_a_true_length_before_its_request_finishes(spec: str) -> None:
    instance = Instance.from_arrays(30, [3, 5, 1, 8, 2], [6, 2, 9, 4, 7], [0, 1, 1, 3, 20])
    spy = Spy(instance.output)
    runs = run_online(instance, predict(spec, instance.output), spy)
    assert verify_runs(instance, runs) == [] and spy.calls >= 5


def test_inexact_intervals_are_allowed_and_exact_ones_checked() -> None:
    wrong = Intervals(np.array([1, 1]), np.array([2, 2]), "file", exact=True)
    with pytest.raises(Exception, match=r"request 0: interval \[1, 2\] excludes the true"):
        run_online(INSTANCE, wrong, Scripted({}))


def test_the_engine_jumps_between_events() -> None:
    # one request of 10**6 rounds: asked at its start only
    instance = Instance.from_arrays(2 * 10**6, [0], [10**6])
    policy = Scripted({0: Decision(start=[0])})
    assert run_online(instance, predict("perfect", instance.output), policy) == (((0, 10**6),),)
    assert len(policy.seen) == 1
