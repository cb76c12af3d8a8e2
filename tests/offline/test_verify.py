import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from schedlab.errors import SchedlabError, ScheduleError
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance, Request
from schedlab.offline.verify import assert_feasible, verify
from schedlab.testing import instances

# M = 10; r0 holds 3, 4, 5 in rounds 0-2 when started at 0; r1 (released in round 1)
# holds 4, 5 in its two rounds; r2 holds 1 in its only round.
INST = Instance(10, (Request(2, 3), Request(3, 2, arrival=1), Request(0, 1)))


def test_feasible_schedule_has_no_violation():
    # starts 0, 1, 0: round 0 holds 3 + 1 = 4, round 1 holds 4 + 4 = 8, round 2 5 + 5 = 10.
    assert verify(INST, [0, 1, 0]) == []
    assert verify(INST, np.array([0, 1, 0])) == []
    assert verify(INST, {0: 0, 1: 1, 2: 0}) == []


def test_release_violation():
    assert verify(INST, [0, 0, 0]) == ["request 1: starts in round 0, before its release round 1"]


def test_memory_violation_names_rounds_and_peak():
    tight = Instance(9, INST.requests)
    # Same starts with M = 9: round 2 holds 10 tokens.
    assert verify(tight, [0, 1, 0]) == ["memory: round 2 exceed M = 9 (peak 10 tokens in round 2)"]
    # All three in round 1: r0 holds 3, 4, 5 in rounds 1-3, r1 holds 4, 5 in rounds 1-2
    # and r2 holds 1 in round 1, so rounds 1, 2, 3 hold 8, 9, 5 tokens.
    assert verify(Instance(8, INST.requests), [1, 1, 1]) == [
        "memory: round 2 exceed M = 8 (peak 9 tokens in round 2)"
    ]


def test_duplicates_missing_and_unknown_requests():
    problems = verify(INST, [(0, 0), (0, 4), (1, 1), (7, 0)])
    assert "request 0: scheduled more than once (rounds 0 and 4)" in problems
    assert "unknown request 7 (the instance has requests 0..2)" in problems
    assert "1 request(s) not scheduled: 2" in problems


def test_non_integer_starts():
    assert verify(INST, [0, 1.5, 0]) == ["request 1: start must be an integer round, got 1.5"]
    assert verify(INST, [0, "1", 0])[0] == "request 1: start must be an integer round, got '1'"
    assert verify(INST, [0, 1.0, 0]) == []


def test_assert_feasible_raises_with_all_problems():
    with pytest.raises(ScheduleError, match="before its release round 1"):
        assert_feasible(INST, [0, 0, 0])
    assert_feasible(INST, [0, 1, 0])


def _load_by_round(inst, starts):
    """Tokens per round, summed request by request (slow and obvious)."""
    load = {}
    for r, p in zip(inst.requests, starts, strict=True):
        for k in range(1, r.output + 1):
            load[p + k - 1] = load.get(p + k - 1, 0) + r.prompt + k
    return load


def _expected_memory_lines(inst, starts):
    """The verifier's memory messages, derived from the round-by-round count."""
    load = _load_by_round(inst, starts)
    over = sorted(t for t, v in load.items() if v > inst.kv_tokens)
    runs: list[list[int]] = []
    for t in over:
        if runs and runs[-1][-1] == t - 1:
            runs[-1].append(t)
        else:
            runs.append([t])
    lines = []
    for run in runs:
        peak_round = max(run, key=lambda t: (load[t], -t))  # the first round at the peak
        text = f"round {run[0]}" if len(run) == 1 else f"rounds {run[0]}..{run[-1]}"
        lines.append(
            f"memory: {text} exceed M = {inst.kv_tokens} "
            f"(peak {load[peak_round]} tokens in round {peak_round})"
        )
    return lines


@settings(max_examples=300, deadline=None)
@given(instances(), st.data())
def test_verifier_matches_a_round_by_round_count(inst, data):
    starts = [data.draw(st.integers(r.arrival, r.arrival + 8)) for r in inst.requests]
    memory_lines = [x for x in verify(inst, starts) if x.startswith("memory")]
    assert memory_lines == _expected_memory_lines(inst, starts)


def test_huge_values_are_exact():
    # Loads beyond 2**63 would overflow 64-bit integers; the instance limits keep values
    # at most 2**40 and the verifier sums in exact integers.
    big = 2**40
    inst = Instance(big, (Request(big - 700, 700), Request(big - 700, 700)))
    assert verify(inst, [0, 3])[0].startswith("memory: rounds 3..699 exceed")
    assert verify(inst, [0, 700]) == []
    assert verify(inst, [0, 10**13]) == []  # far-away starts need no per-round array


@settings(max_examples=300, deadline=None)
@given(instances(max_n=7), st.data())
def test_verifier_rejects_each_kind_of_corruption(inst, data):
    starts = list_schedule(inst, list(range(inst.n))).tolist()
    assert verify(inst, starts) == []
    i = data.draw(st.integers(0, inst.n - 1))
    kind = data.draw(st.sampled_from(["release", "duplicate", "missing", "memory", "type"]))
    if kind == "release":
        if inst.requests[i].arrival == 0:
            starts[i] = -1
        else:
            starts[i] = inst.requests[i].arrival - 1
        assert any(f"request {i}: starts in round" in x for x in verify(inst, starts))
    elif kind == "duplicate":
        pairs = [*enumerate(starts), (i, starts[i] + 1)]
        assert any("more than once" in x for x in verify(inst, pairs))
    elif kind == "missing":
        pairs = [(j, p) for j, p in enumerate(starts) if j != i]
        assert f"1 request(s) not scheduled: {i}" in verify(inst, pairs)
    elif kind == "memory":
        # Shrink M just below the schedule's peak (when every request still fits alone).
        peak = max(_load_by_round(inst, starts).values())
        assume(max(r.peak for r in inst.requests) <= peak - 1)
        smaller = Instance(peak - 1, inst.requests)
        assert any(x.startswith("memory") for x in verify(smaller, starts))
    else:
        starts[i] = float(starts[i]) + 0.5
        assert any("must be an integer round" in x for x in verify(inst, starts))


@settings(max_examples=300, deadline=None)
@given(instances(max_n=8, max_arrival=6), st.data())
def test_the_array_check_agrees_with_the_exact_sweep(inst, data):
    # An int64 array goes through the NumPy sweep first; a list only through the exact
    # Python sweep. Random starts (mostly infeasible) and list-scheduled ones (feasible).
    if data.draw(st.booleans()):
        starts = list_schedule(inst, list(range(inst.n)))
    else:
        starts = np.array(
            data.draw(st.lists(st.integers(-2, 30), min_size=inst.n, max_size=inst.n))
        )
    assert verify(inst, starts) == verify(inst, starts.tolist())


@pytest.mark.parametrize(
    ("instance", "starts", "message"),
    [
        (None, [0], r"^verify: expected an Instance, got NoneType"),
        ("tiny", None, r"^starts: expected a sequence .* got NoneType"),
        ("tiny", 5, r"^starts: expected a sequence .* got int"),
        ("tiny", "0", r"^starts: expected a sequence .* got str"),
        ("tiny", np.array(3), r"^starts: expected one start a request, got shape \(\)"),
    ],
)
def test_what_is_not_a_schedule_is_refused_in_one_line(instance, starts, message):
    tiny = Instance(5, (Request(1, 1),))
    with pytest.raises(SchedlabError, match=message):
        verify(tiny if instance == "tiny" else instance, starts)
