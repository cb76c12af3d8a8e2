import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import ScheduleError
from schedlab.offline import schedule
from schedlab.offline.instance import Instance, Request
from schedlab.offline.schedule import Schedule, load_profile
from schedlab.testing import instances


def test_metrics_by_hand():
    inst = Instance(10, (Request(2, 3), Request(3, 2, arrival=1), Request(0, 1)))
    sched = Schedule(inst, [0, 1, 0])
    # C = (3, 3, 1); latencies C - a = (3, 2, 1).
    assert sched.completion.tolist() == [3, 3, 1]
    assert sched.objective == 6 and sched.mean_latency == 2.0 and sched.makespan == 3
    # Loads: round 0: 3 + 1, round 1: 4 + 4, round 2: 5 + 5.
    assert sched.memory_profile.tolist() == [4, 8, 10] and sched.peak_memory == 10
    # Volumes 12 + 9 + 1 = 22 over M * makespan = 30.
    assert sched.utilisation == pytest.approx(22 / 30)
    assert set(sched.summary()) == {
        "objective",
        "mean_latency",
        "makespan",
        "peak_memory",
        "utilisation",
    }


def test_bad_starts():
    inst = Instance(10, (Request(1, 1), Request(1, 1)))
    with pytest.raises(ScheduleError, match="expected 2 start rounds"):
        Schedule(inst, [0])
    with pytest.raises(ScheduleError, match="integer round"):
        Schedule(inst, [0, 0.5])
    with pytest.raises(ScheduleError, match="expected integers"):
        Schedule(inst, ["a", "b"])


@settings(max_examples=200, deadline=None)
@given(instances(), st.data())
def test_profile_matches_sum_over_requests(inst, data):
    starts = [data.draw(st.integers(r.arrival, r.arrival + 6)) for r in inst.requests]
    sched = Schedule(inst, starts)
    expected = np.zeros(sched.makespan, dtype=np.int64)
    for r, p in zip(inst.requests, starts, strict=True):
        expected[p : p + r.output] += r.prompt + np.arange(1, r.output + 1)
    assert sched.memory_profile.tolist() == expected.tolist()
    assert sched.peak_memory == expected.max()
    assert sched.objective == sum(
        p + r.output - r.arrival for r, p in zip(inst.requests, starts, strict=True)
    )


@settings(max_examples=100, deadline=None)
@given(instances(max_n=6, max_kv_tokens=20, max_output=8, max_arrival=5), st.data())
def test_load_profile_of_a_window_and_a_subset(inst: Instance, data: st.DataObject) -> None:
    # the rounds origin .. span - 1 held by the kept requests, summed round by round
    starts = np.array([data.draw(st.integers(int(a), int(a) + 10)) for a in inst.arrival])
    kept = np.array(data.draw(st.lists(st.booleans(), min_size=inst.n, max_size=inst.n)))
    origin = data.draw(st.integers(0, 20))
    span = data.draw(st.integers(origin, 30))
    expected = [
        sum(
            int(inst.prompt[i]) + t - int(starts[i]) + 1
            for i in range(inst.n)
            if kept[i] and starts[i] <= t < starts[i] + inst.output[i]
        )
        for t in range(origin, span)
    ]
    assert load_profile(inst, starts, origin, span, kept).tolist() == expected


@pytest.mark.parametrize(
    "starts",
    [
        np.array([0, 2**63 - 1], dtype=np.int64),
        np.array([0, 2**64 - 1], dtype=np.uint64),  # a cast would make it -1
        [0.0, 2.0**41],
        [0, 2**40 + 1],
    ],
)
def test_starts_beyond_two_to_the_forty_are_refused(starts):
    inst = Instance(10, (Request(1, 2), Request(1, 2)))
    with pytest.raises(ScheduleError, match=r"^starts: request 1 starts in round .*above 2\*\*40"):
        Schedule(inst, starts)


def test_objectives_that_could_overflow_are_refused(monkeypatch):
    # for real only past 2**22 requests ending near round 2**41 (n * 2**41 > 2**63); the
    # same test on a small scale, with an integer type of a smaller range
    small = np.iinfo(np.int8)  # max 127
    monkeypatch.setattr(schedule.np, "iinfo", lambda _: small)
    inst = Instance(10, (Request(1, 2), Request(1, 2)))
    assert Schedule(inst, [0, 61]).objective == 65  # 2 * (61 + 2) = 126
    with pytest.raises(ScheduleError, match="could overflow 64-bit integers"):
        Schedule(inst, [0, 62])
