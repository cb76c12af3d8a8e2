"""The online policies keep their state across decisions (a heap of waiting requests,
estimates changed only where something happened): each is played against a plain
policy that re-reads the whole view and re-sorts at every decision, as the rules of
:mod:`schedlab.offline.online.policies` are written, and the runs must be equal
request for request, on random instances (releases, pressure that evicts, predictions
short and long) and on a mixed backlog."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import RunningSet
from schedlab.offline.instance import Instance
from schedlab.offline.online.engine import Decision, View, run_online
from schedlab.offline.online.policies import POLICIES
from schedlab.predictions import geometric_mean, predict


def _evict_until_fit(view: View, order: np.ndarray) -> Decision:
    """Evict the running requests in ``order`` until the rest fit the coming round."""
    keep = view.running.copy()
    evict = []
    for i in order.tolist():
        keep[i] = False
        evict.append(i)
        if view.load(keep) <= view.kv_tokens:
            break
    return Decision(evict=evict, wake=view.round + 1)


class _PlainEstimate:
    """MC-SF admission with refined estimates, everything recomputed from the view."""

    def __init__(self, name: str, initial: Callable[[View], np.ndarray]) -> None:
        self.name, self.initial = name, initial
        self.estimate: np.ndarray | None = None
        self.known: np.ndarray | None = None

    def decide(self, view: View) -> Decision:
        if self.estimate is None or self.known is None:
            self.estimate = np.zeros(view.n, dtype=np.int64)
            self.known = np.zeros(view.n, dtype=bool)
        estimate, t, memory = self.estimate, view.round, view.kv_tokens
        new = view.released & ~self.known
        estimate[new] = self.initial(view)[new]
        self.known |= new
        running = np.flatnonzero(view.running)
        start, prompt = view.run_start, view.prompt
        estimate[running] = np.maximum(estimate[running], t - start[running] + 1)
        released = view.released
        estimate[released] = np.minimum(estimate[released], memory - prompt[released])
        if view.load() > memory:
            keys = (-running, -start[running], t - start[running], estimate[running])
            return _evict_until_fit(view, running[np.lexsort(keys)])
        completion = start[running] + estimate[running]
        weight = prompt[running] - start[running] + 1
        by_end = np.lexsort((weight, completion))
        plan = RunningSet(memory)
        plan.restore(completion[by_end].tolist(), weight[by_end].tolist())
        waiting = np.flatnonzero(view.waiting)
        starts: list[int] = []
        for k in waiting[np.lexsort((waiting, estimate[waiting]))].tolist():
            deficit = int(prompt[k]) - plan.slack(t, int(estimate[k]))
            if deficit > 0:
                return Decision(start=starts, wake=t + deficit)
            plan.add(t, int(prompt[k]), int(estimate[k]))
            starts.append(k)
        return Decision(start=starts)


class _PlainFcfs:
    """FCFS with preemption of the newest, everything recomputed from the view."""

    name = "plain-fcfs"

    def __init__(self) -> None:
        self.seen: np.ndarray | None = None

    def decide(self, view: View) -> Decision:
        t, memory = view.round, view.kv_tokens
        if self.seen is None:
            self.seen = np.full(view.n, -1, dtype=np.int64)
        self.seen[view.released & (self.seen < 0)] = t
        load = view.load()
        if load > memory:
            running = np.flatnonzero(view.running)
            keys = (-running, -self.seen[running], -view.run_start[running])
            return _evict_until_fit(view, running[np.lexsort(keys)])
        waiting = np.flatnonzero(view.waiting)
        starts: list[int] = []
        for k in waiting[np.lexsort((waiting, self.seen[waiting]))].tolist():
            if load + int(view.prompt[k]) + 1 > memory:
                break
            load += int(view.prompt[k]) + 1
            starts.append(k)
        return Decision(start=starts)


PLAIN: dict[str, Callable[[], _PlainEstimate | _PlainFcfs]] = {
    "a-max": lambda: _PlainEstimate("plain-a-max", lambda view: view.upper),
    "a-min": lambda: _PlainEstimate("plain-a-min", lambda view: view.lower),
    "mc-sf-predicted": lambda: _PlainEstimate(
        "plain-mc-sf-predicted",
        lambda view: geometric_mean(np.maximum(view.lower, 1), np.maximum(view.upper, 1)),
    ),
    "fcfs-preempt": _PlainFcfs,
}


def test_every_policy_has_a_plain_twin() -> None:
    assert sorted(PLAIN) == sorted(POLICIES)


@st.composite
def _pressured(draw: st.DrawFn) -> Instance:
    """Up to 30 requests, some released together, in little memory."""
    n = draw(st.integers(1, 30))
    memory = draw(st.integers(8, 60))
    requests = []
    for _ in range(n):
        output = draw(st.integers(1, memory - 1))
        prompt = draw(st.integers(0, memory - output))
        requests.append((prompt, output, draw(st.sampled_from([0, 0, 1, 2, 5, 9, 20]))))
    prompt, output, arrival = (np.array([r[j] for r in requests]) for j in range(3))
    return Instance.from_arrays(memory, prompt, output, arrival)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _pressured(),
    st.sampled_from(["perfect", "interval:0.5", "interval:0.1", "lognormal:0.8", "buckets"]),
    st.integers(0, 99),
)
def test_the_runs_are_those_of_the_plain_policies(
    instance: Instance, spec: str, seed: int
) -> None:
    intervals = predict(spec, instance.output, seed)
    for name, make in POLICIES.items():
        runs = run_online(instance, intervals, make())
        assert runs == run_online(instance, intervals, PLAIN[name]()), name


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_the_runs_on_a_mixed_backlog_are_those_of_the_plain_policies(name: str) -> None:
    instance = mixed_backlog(400, seed=3)
    intervals = predict("interval:0.5", instance.output, 1)
    runs = run_online(instance, intervals, POLICIES[name]())
    assert runs == run_online(instance, intervals, PLAIN[name]())


def test_the_view_shows_the_release_order_of_released_requests_only() -> None:
    seen: list[tuple[int, list[int], list[int]]] = []

    class Watcher:
        name = "watcher"

        def decide(self, view: View) -> Decision:
            order = view.released_in_order().tolist()
            seen.append((view.round, order, np.flatnonzero(view.released).tolist()))
            waiting = np.flatnonzero(view.waiting).tolist()
            return Decision(start=waiting[:1] if not view.running.any() else [])

    instance = Instance.from_arrays(100, [3, 3, 3, 3], [2, 2, 2, 2], [9, 0, 5, 3])
    run_online(instance, predict("perfect", instance.output), Watcher())
    for _, order, released in seen:
        assert sorted(order) == released  # nothing of the requests still to come
    assert seen[-1][1] == [1, 3, 2, 0]  # by release round


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_view_built_by_hand_mid_run_is_read_as_its_arrays_say(name: str) -> None:
    # request 0 runs since round 0, the others wait; a fresh policy sees the view as is
    n = 3
    view = View(
        20, np.full(n, 3), np.full(n, 1), np.full(n, 5), np.full(n, -1),
        np.array([0, -1, -1]), np.array([True, False, False]), np.zeros(n, bool),
        np.ones(n, bool),
    )  # fmt: skip
    view.round = 2
    assert view.load() == 6 and view.running_indices().tolist() == [0]
    assert view.released_in_order().tolist() == [0, 1, 2]
    assert POLICIES[name]().decide(view) == PLAIN[name]().decide(view)
