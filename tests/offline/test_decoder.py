import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget
from schedlab.errors import InstanceError, ScheduleError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import StrictDecoder, decode_best, list_schedule
from schedlab.offline.instance import Instance, Request
from schedlab.offline.verify import verify
from schedlab.testing import instances


def per_round_reference(inst, order, backfill):
    """The definition, literally: visit every round, try waiting requests in order."""
    s, o, a = inst.prompt.tolist(), inst.output.tolist(), inst.arrival.tolist()
    starts = [-1] * inst.n
    load = np.zeros(max(a) + sum(o) + max(o) + 2, dtype=np.int64)
    t = 0
    while min(starts) < 0:
        for i in order:
            if starts[i] >= 0 or a[i] > t:
                continue
            profile = np.arange(s[i] + 1, s[i] + o[i] + 1)
            if (load[t : t + o[i]] + profile).max() <= inst.kv_tokens:
                load[t : t + o[i]] += profile
                starts[i] = t
            elif not backfill:
                break
        t += 1
    return starts


def test_strict_order_blocks_and_backfill_does_not():
    # M = 10. r0 = (s 4, o 2) holds 5, 6; r1 the same; r2 = (1, 1) holds 2.
    # Strict FCFS: r0 starts at 0; r1 would hold 6 + 6 = 12 > 10 in round 1, so it
    # waits for r0's completion in round 2 and blocks r2 until then: starts (0, 2, 2).
    # Backfill: r2 fits next to r0 in round 0 (5 + 2 = 7): starts (0, 2, 0).
    inst = Instance(10, (Request(4, 2), Request(4, 2), Request(1, 1)))
    assert list_schedule(inst, [0, 1, 2]).tolist() == [0, 2, 2]
    assert list_schedule(inst, [0, 1, 2], backfill=True).tolist() == [0, 2, 0]


def test_admission_checks_future_rounds_not_just_the_current_one():
    # M = 10. r0 = (0, 6) holds 1..6 in rounds 0-5. r1 = (2, 5) holds 3..7 over 5 rounds.
    # Started in round 0 it would fit in round 0 (1 + 3 = 4) but reach 5 + 7 = 12 in
    # round 4. In round 3: 4 + 3, 5 + 4, 6 + 5 = 11 in round 5, no. In round 4: 5 + 3 and
    # 6 + 4 = 10, then r0 is gone: r1 starts in round 4, before r0's completion.
    inst = Instance(10, (Request(0, 6), Request(2, 5)))
    assert list_schedule(inst, [0, 1]).tolist() == [0, 4]
    # The other order: r1 first (3..7 in rounds 0-4). r0 in round 0 would reach 7 + 5 in
    # round 4, in round 1 7 + 4; in round 2 it holds 1, 2, 3 next to 5, 6, 7: 6, 8, 10.
    assert list_schedule(inst, [1, 0]).tolist() == [2, 0]


def test_start_between_events_when_the_slack_grows():
    # M = 10. r0 = (0, 3) holds 1, 2, 3 in rounds 0-2. r1 = (5, 3) started in round 0
    # would hold 6, 7, 8 next to 1, 2, 3: 11 in round 2. Started in round 1 it holds
    # 6, 7, 8 in rounds 1-3, next to 2, 3 in rounds 1-2: 8, 10, 8 - it fits. Round 1 is
    # neither a release nor a completion; the engine must still find it.
    inst = Instance(10, (Request(0, 3), Request(5, 3)))
    assert list_schedule(inst, [0, 1]).tolist() == [0, 1]


def test_releases_are_respected_without_stepping_rounds():
    inst = Instance(5, (Request(1, 2, arrival=10**9), Request(0, 1, arrival=3)))
    assert list_schedule(inst, [0, 1]).tolist() == [10**9, 3]


def test_order_must_be_a_permutation():
    inst = Instance(5, (Request(1, 1), Request(1, 1)))
    with pytest.raises(ScheduleError, match="permutation"):
        list_schedule(inst, [0, 0])
    with pytest.raises(ScheduleError, match="permutation"):
        list_schedule(inst, [0])


@settings(max_examples=400, deadline=None)
@given(instances(max_n=9, max_arrival=12), st.data(), st.booleans())
def test_engine_equals_the_round_by_round_definition(inst, data, backfill):
    order = data.draw(st.permutations(range(inst.n)))
    starts = list_schedule(inst, order, backfill=backfill)
    assert verify(inst, starts) == []
    assert starts.tolist() == per_round_reference(inst, order, backfill)


@settings(max_examples=150, deadline=None)
@given(instances(max_n=9, max_arrival=0), st.data())
def test_strict_decoder_resumes_with_any_suffix(inst, data):
    # On a backlog, placing requests one by one gives the strict engine's starts; a
    # state saved after any prefix, restored into a fresh decoder and continued with
    # another suffix gives the strict schedule of the new order.
    order = data.draw(st.permutations(range(inst.n)))
    cut = data.draw(st.integers(0, inst.n))
    decoder = StrictDecoder(inst)
    starts = [-1] * inst.n
    saved = None
    for position, i in enumerate(order):
        if position == cut:
            saved = decoder.state()
        starts[i] = decoder.place(i)
    assert starts == list_schedule(inst, order).tolist()
    suffix = data.draw(st.permutations(order[cut:]))
    other = StrictDecoder(inst)
    if saved is not None:
        other.restore(saved)
    for i in suffix:
        starts[i] = other.place(i)
    moved = list_schedule(inst, order[:cut] + suffix)
    assert starts == moved.tolist()
    assert verify(inst, moved) == []


def test_decoder_states_compare_up_to_a_shift():
    # M = 10, (s, o): r0 = (8, 1) alone in round 0; r1 = (8, 1) must wait for round 1.
    # After r0 the state is (round 0, one request: 1 round left, 9 tokens held); after
    # r1 it is the same shifted by one round.
    inst = Instance.from_arrays(10, [8, 8], [1, 1])
    decoder = StrictDecoder(inst)
    assert decoder.place(0) == 0
    first = decoder.state()
    assert decoder.place(1) == 1
    second = decoder.state()
    assert (first.round, first.remaining, first.held) == (0, (1,), (9,))
    assert second.same_running(first) and second == first.shifted(1)


def test_strict_decoder_needs_a_backlog():
    inst = Instance(5, (Request(1, 1), Request(1, 1, arrival=2)))
    with pytest.raises(InstanceError, match="StrictDecoder: needs a backlog"):
        StrictDecoder(inst)


def test_decode_best_leaves_out_the_backfilling_decode_once_the_cap_has_passed():
    inst = mixed_backlog(30, seed=5)
    order = np.argsort(inst.output, kind="stable")
    strict = list_schedule(inst, order)
    _, both = decode_best(inst, order)
    assert set(both["objectives"]) == {"strict", "backfill"}
    starts, late = decode_best(inst, order, {"other": strict + 1}, budget=Budget(1e-9))
    assert set(late["objectives"]) == {"strict", "other"}
    assert late["chosen"] == "strict"
    assert starts.tolist() == strict.tolist()
