"""Local search: the incremental evaluator matches the engine; results are verified."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab import solve, verify
from schedlab.budget import Budget
from schedlab.errors import SchedlabError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.offline.solvers.local_search import (
    MAX_HISTORY,
    MAX_IDLE,
    STRATEGIES,
    SearchSettings,
    best_start_order,
    improve_order,
)
from schedlab.offline.solvers.order_evaluator import OrderEvaluator, checkpoint_spacing
from schedlab.testing import instances
from tests.conftest import INSTANCES

backlogs = instances(max_n=12, max_kv_tokens=30, max_arrival=0)


@settings(max_examples=60, deadline=None)
@given(backlogs, st.randoms(use_true_random=False), st.integers(1, 5), st.booleans())
def test_evaluator_reproduces_strict_list_scheduling(
    inst: Instance, rnd, every: int, insert: bool
) -> None:
    order = list(range(inst.n))
    rnd.shuffle(order)
    evaluator = OrderEvaluator(inst, np.array(order), checkpoint=every)
    expected = list_schedule(inst, order)
    assert evaluator.schedule().tolist() == expected.tolist()
    assert evaluator.objective() == int((expected + inst.output).sum())
    # a chain of moves, each evaluated incrementally (stopping where the runs meet)
    # and accepted: totals and schedules equal full decodes of the moved orders
    for _ in range(4 if inst.n >= 2 else 0):
        i, j = sorted(rnd.sample(range(inst.n), 2))
        moved = list(order)
        if insert:
            moved.insert(j, moved.pop(i))
        else:
            moved[i], moved[j] = moved[j], moved[i]
        move = evaluator.evaluate(moved, i, j)
        full = list_schedule(inst, moved)
        assert move is not None
        assert move.total + int(inst.output.sum()) == int((full + inst.output).sum())
        evaluator.accept(moved, move)
        order = moved
        assert evaluator.schedule().tolist() == full.tolist()
        assert verify(inst, evaluator.schedule()) == []


def test_evaluation_stops_where_the_runs_meet() -> None:
    # M = 10, (s, o): r0 = (4, 2), r1 = (4, 2), r2 = (0, 1), r3 = (0, 1). Order 0 1 2 3:
    # r0 at 0 (holds 5, 6); r1 would reach 6 + 6 = 12 in round 1, so it starts at 2
    # (r0 done); r2 and r3 (1 token each) fit beside r1's 5 in round 2.
    inst = Instance.from_arrays(10, [4, 4, 0, 0], [2, 2, 1, 1])
    evaluator = OrderEvaluator(inst, np.array([0, 1, 2, 3]), checkpoint=1)
    assert evaluator.schedule().tolist() == [0, 2, 2, 2]
    # Swapping the identical r0 and r1 leaves the state before position 2 as it was
    # (round 2, the second one running with 2 rounds left, 5 tokens): the runs meet there, shift 0.
    move = evaluator.evaluate([1, 0, 2, 3], 0, 1)
    assert move is not None and (move.stop, move.delta, move.starts.tolist()) == (2, 0, [0, 2])
    assert evaluator.met == 1


def test_shifted_runs_meet_with_a_delay() -> None:
    # M = 10, (s, o): r0 = (8, 1), r1 = (7, 2), r2 = (0, 2), r3 = (9, 1), r4 = (0, 1).
    # Order 0 1 2 3 4: r0 at 0 (9); r1 (8, 9) fits from round 1; r2 (1, 2) beside r1's
    # 8, 9 only from round 2 (9 + 1, then r1 is gone); r3 needs all 10 tokens: round 4
    # (r2 ends); r4 beside r3 not before round 5. Starts 0, 1, 2, 4, 5: sum 12.
    inst = Instance.from_arrays(10, [8, 7, 0, 9, 0], [1, 2, 2, 1, 1])
    evaluator = OrderEvaluator(inst, np.arange(5), checkpoint=1)
    assert evaluator.schedule().tolist() == [0, 1, 2, 4, 5]
    # Moving r2 to the front: r2 at 0 (1, 2); r0 at 0 (1 + 9); r1 at 1 (2 + 8, then 9);
    # r3 at 3. Before position 4 both runs hold only r3 (1 round left, 10 tokens), in
    # round 4 and round 3: they meet with shift -1, so r4 starts at 5 - 1 = 4 unseen.
    move = evaluator.evaluate([2, 0, 1, 3, 4], 0, 2)
    assert move is not None and (move.stop, move.delta) == (4, -1)
    assert move.total == 0 + 1 + 0 + 3 + 4
    evaluator.accept([2, 0, 1, 3, 4], move)
    expected = list_schedule(inst, [2, 0, 1, 3, 4])
    assert evaluator.schedule().tolist() == expected.tolist() == [0, 1, 0, 3, 4]
    assert verify(inst, evaluator.schedule()) == []


def test_evaluator_refuses_releases() -> None:
    inst = Instance.from_arrays(10, [1, 2], [3, 4], [0, 2])
    with pytest.raises(SchedlabError, match="backlog"):
        OrderEvaluator(inst, np.array([0, 1]))


def test_search_never_worsens_and_is_seeded() -> None:
    inst = mixed_backlog(120, seed=4)
    start, _ = best_start_order(inst)
    start_value = int((list_schedule(inst, start) + inst.output).sum())
    runs = [
        improve_order(
            inst,
            start,
            SearchSettings("first", work=150, screen=8, width=20),
            budget=Budget(60),
            seed=7,
        )
        for _ in range(2)
    ]
    assert runs[0][0].tolist() == runs[1][0].tolist()  # same seed, same moves
    order, stats = runs[0]
    value = int((list_schedule(inst, order) + inst.output).sum())
    assert value == stats["objective_strict"] <= start_value
    assert stats["moves"] == 150


@settings(max_examples=20, deadline=None)
@given(instances(max_n=8, max_kv_tokens=25, max_arrival=4), st.sampled_from(["first", "best"]))
def test_solver_schedules_are_verified(inst: Instance, strategy: str) -> None:
    result = solve(
        inst, "local-search", time_limit=0.2, strategy=strategy, neighbours=3, bound=None
    )
    assert verify(inst, result.starts) == []
    best_rule = min(
        solve(inst, r, bound=None).objective for r in ("fcfs", "sof", "total-size", "svf")
    )
    # the search starts from the best strict decode among the rules' orders, never
    # accepts a worse order, and also offers MC-SF's own (backfilling) schedule
    assert result.objective <= best_rule


def test_bad_options() -> None:
    inst = mixed_backlog(10, seed=0)
    with pytest.raises(SchedlabError, match="strategy"):
        solve(inst, "local-search", time_limit=0.1, strategy="worst")
    with pytest.raises(TypeError, match="unknown option"):
        solve(inst, "local-search", time_limit=0.1, temperature=3)


@pytest.mark.parametrize("field", ["width", "neighbours", "history"])
def test_a_count_below_one_is_refused_by_its_name(field: str) -> None:
    inst = mixed_backlog(10, seed=0)
    with pytest.raises(SchedlabError, match=f"^local-search: {field} must be >= 1, got 0$"):
        solve(inst, "local-search", time_limit=0.1, **{field: 0})


def test_a_history_too_long_to_hold_is_refused() -> None:
    inst = mixed_backlog(10, seed=0)
    with pytest.raises(SchedlabError, match=r"^lp-search: history must be <= 10,000,000, got"):
        solve(inst, "lp-search", history=MAX_HISTORY + 1)


def test_late_acceptance_returns_its_best_order_and_is_seeded() -> None:
    inst = mixed_backlog(60, seed=2)
    start, _ = best_start_order(inst)
    start_value = int((list_schedule(inst, start) + inst.output).sum())
    runs = [
        improve_order(
            inst, start, SearchSettings("late", history=20, work=300), budget=Budget(), seed=3
        )
        for _ in range(2)
    ]
    assert runs[0][0].tolist() == runs[1][0].tolist()
    order, stats = runs[0]
    # the best order seen is returned (the current one may be worse), never worse
    # than the start, and its full strict decode has the objective reported
    value = int((list_schedule(inst, order) + inst.output).sum())
    assert value == stats["objective_strict"] <= start_value
    assert stats["moves"] == 300


@settings(max_examples=30, deadline=None)
@given(backlogs, st.randoms(use_true_random=False))
def test_screen_with_a_wide_allowance_never_cuts(inst: Instance, rnd) -> None:
    # A screen cuts a move only where the estimate exceeds the allowance: with an
    # allowance above any possible change every move is decoded exactly.
    if inst.n < 2:
        return
    order = list(range(inst.n))
    rnd.shuffle(order)
    evaluator = OrderEvaluator(inst, np.array(order), checkpoint=1)
    i, j = sorted(rnd.sample(range(inst.n), 2))
    moved = list(order)
    moved[i], moved[j] = moved[j], moved[i]
    move = evaluator.evaluate(moved, i, j, screen=1, allow=10**9)
    assert move is not None
    full = list_schedule(inst, moved)
    assert move.total == int(full.sum())


@settings(max_examples=15, deadline=None)
@given(instances(max_n=8, max_kv_tokens=25, max_arrival=4))
def test_late_acceptance_with_releases_is_verified(inst: Instance) -> None:
    result = solve(inst, "local-search", time_limit=5, strategy="late", work=40, bound=None)
    assert verify(inst, result.starts) == []
    assert result.stats["moves"] == (40 if inst.n >= 2 else 0)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("releases", [False, True])
def test_idle_moves_end_the_search_where_a_work_budget_would(
    releases: bool, strategy: str
) -> None:
    # the search ends ``idle`` moves (a step of ``best``: ``neighbours`` moves) after the
    # best objective last fell, by itself (stopped_by None), and it is the run with that
    # many moves as its work budget, move for move; with releases in the Python loop
    inst = read_instance(INSTANCES / "mixed-n50.json")
    if releases:
        arrival = np.arange(inst.n) * 3
        inst = Instance.from_arrays(inst.kv_tokens, inst.prompt, inst.output, arrival)
    start, _ = best_start_order(inst)
    idle = 400
    ended = SearchSettings(strategy, work=10**6, idle=idle, screen=None)
    order, stats = improve_order(inst, start, ended, seed=2)
    step = ended.neighbours if strategy == "best" else 1
    assert stats["improved"] > 0 and stats["stopped_by"] is None
    assert stats["improved"] + idle <= stats["moves"] < stats["improved"] + idle + step
    budgeted = SearchSettings(strategy, work=stats["moves"], screen=None)
    same, same_stats = improve_order(inst, start, budgeted, seed=2)
    assert same.tolist() == order.tolist()
    assert same_stats["objective_strict"] == stats["objective_strict"]
    assert same_stats["improved"] == stats["improved"]


def test_an_idle_count_the_kernel_cannot_hold_is_refused() -> None:
    with pytest.raises(SchedlabError, match=r"^local-search: idle must be <= "):
        SearchSettings(idle=MAX_IDLE + 1)
    assert SearchSettings(idle=MAX_IDLE).idle == MAX_IDLE


def test_search_needs_an_end() -> None:
    inst = mixed_backlog(10, seed=0)
    with pytest.raises(SchedlabError, match="time_limit, work or idle"):
        improve_order(inst, np.arange(10), SearchSettings(work=None), budget=Budget())
    with pytest.raises(SchedlabError, match="history"):
        improve_order(inst, np.arange(10), SearchSettings("late", history=0), budget=Budget(1))


#: The statistics both engines of ``late`` must agree on (besides the order returned).
SAME_STATS = (
    "moves",
    "accepted",
    "improved",
    "decoded_per_move",
    "met",
    "objective_strict",
    "stopped_by",
)


def _both_engines(inst: Instance, start: np.ndarray, seed: int, **options) -> list:
    """``improve_order``'s ``late`` search of ``start`` with each engine: order and stats."""
    runs = []
    for engine in ("compiled", "python"):
        order, stats = improve_order(
            inst, start, SearchSettings("late", engine=engine, **options), seed=seed
        )
        runs.append((order.tolist(), {key: stats[key] for key in SAME_STATS}))
    return runs


@settings(max_examples=1000, deadline=None)
@given(
    instances(max_n=24, max_kv_tokens=40, max_arrival=0),
    st.randoms(use_true_random=False),
    st.integers(1, 30),
    st.integers(1, 40),
    st.none() | st.integers(1, 6),
    st.integers(1, 4),
    st.integers(0, 120),
    st.none() | st.integers(1, 60),
    st.integers(0, 2**32 - 1),
)
def test_compiled_late_acceptance_makes_the_reference_moves(
    inst: Instance, rnd, width, history, screen, checkpoint, moves, idle, seed
) -> None:
    start = np.arange(inst.n)
    rnd.shuffle(start)
    options = {
        "width": width,
        "history": history,
        "screen": screen,
        "work": moves,
        "idle": idle,
    }
    compiled, python = _both_engines(inst, start, seed, checkpoint=checkpoint, **options)
    assert compiled == python
    order, stats = compiled
    assert stats["objective_strict"] == int((list_schedule(inst, order) + inst.output).sum())


def _late_search(inst: Instance, screen: int | None, spacing: int | None) -> tuple:
    start, _ = best_start_order(inst)
    settings = SearchSettings("late", width=6, screen=screen, work=3000, checkpoint=spacing)
    order, stats = improve_order(inst, start, settings, seed=4)
    return order.tolist(), stats["moves"], stats["accepted"], stats["objective_strict"]


@pytest.mark.parametrize("name", ["mixed-n50", "jaillet-s3"])
def test_the_spacing_of_saved_states_changes_no_exact_move(name: str) -> None:
    inst = read_instance(INSTANCES / f"{name}.json")
    assert checkpoint_spacing(inst.n, exact=True) == 8
    runs = [_late_search(inst, None, spacing) for spacing in (None, 1, 5, inst.n + 1)]
    assert runs[0] == runs[1] == runs[2] == runs[3]
    assert runs[0][2] > 0  # moves were accepted: the saved states were rewritten


def test_a_screened_search_keeps_a_state_at_every_position() -> None:
    # on this instance a screened search ends differently at spacings 1 and 8 (a screen
    # between the runs' meeting and the next saved state), so the default must stay 1
    inst = read_instance(INSTANCES / "jaillet-s3.json")
    assert checkpoint_spacing(inst.n, exact=False) == 1
    assert _late_search(inst, 8, None) == _late_search(inst, 8, 1)
    assert _late_search(inst, 8, 8) != _late_search(inst, 8, 1)


def test_compiled_late_acceptance_grows_its_buffers() -> None:
    # 60 short requests under M = 600 all run at once, so a decode from position 0 saves
    # 0 + 1 + ... + 59 states. With the new states' buffer cut to one column the kernel must
    # return for room (for them, then for the saved states' pool) and resume with the
    # pending move, making the reference's moves all the same.
    inst = Instance.from_arrays(600, [0] * 30 + [5] * 30, [1] * 30 + [2] * 30)
    start = np.arange(inst.n)[::-1].copy()
    evaluator = OrderEvaluator(inst, start, checkpoint=1)
    evaluator._new_pool = np.empty((2, 1), dtype=np.int64)
    pool = evaluator._pool.shape[1]
    stop = Budget().stop(400)
    best, value, moves, accepted, _ = evaluator.search_late(
        np.random.default_rng(5), width=60, history=10, screen=None, stop=stop
    )
    assert evaluator._new_pool.shape[1] >= 59 * 60 // 2 and evaluator._pool.shape[1] > pool
    settings = SearchSettings(
        "late", width=60, history=10, screen=None, work=400, checkpoint=1, engine="python"
    )
    order, stats = improve_order(inst, start, settings, seed=5)
    assert (best.tolist(), value, moves, accepted) == (
        order.tolist(),
        stats["objective_strict"],
        stats["moves"],
        stats["accepted"],
    )
    assert stop.reason == "work" and accepted > 0
    # the evaluator's order and states are the last accepted ones: a further move
    # evaluated incrementally equals a full decode
    current = evaluator.order.copy()
    current[[3, 40]] = current[[40, 3]]
    move = evaluator.evaluate(current, 3, 40)
    assert move is not None
    assert move.total == int(list_schedule(inst, current).sum())


@pytest.mark.parametrize("seed", range(12))
def test_compiled_late_acceptance_grows_its_buffers_for_uneven_states(seed: int) -> None:
    # Saved states of different sizes, both buffers cut to the least: a pending move
    # re-evaluated after its states' buffer grew must still find room in the pool (the
    # room is checked before every evaluation). The evaluator's saved decode afterwards
    # is that of a fresh evaluator on its order.
    rng = np.random.default_rng(seed)
    n, memory = int(rng.integers(10, 40)), int(rng.integers(40, 200))
    output = rng.integers(1, 30, n)
    prompt = np.minimum(rng.integers(1, memory // 2, n), memory - output - 1).clip(0)
    inst = Instance.from_arrays(memory, prompt.tolist(), output.tolist())
    start = rng.permutation(n)
    evaluator = OrderEvaluator(inst, start, checkpoint=1)
    evaluator._new_pool = np.empty((2, 1), dtype=np.int64)
    used = int(evaluator._index[1, -1])
    evaluator._pool = np.ascontiguousarray(evaluator._pool[:, : used + 1])
    width, history = int(rng.integers(1, n)), int(rng.integers(1, 20))
    best, value, moves, accepted, _ = evaluator.search_late(
        np.random.default_rng(seed), width, history, None, Budget().stop(200)
    )
    assert moves == 200
    settings = SearchSettings(
        "late",
        width=width,
        history=history,
        screen=None,
        work=200,
        checkpoint=1,
        engine="python",
    )
    order, stats = improve_order(inst, start, settings, seed=seed)
    assert (best.tolist(), value, accepted) == (
        order.tolist(),
        stats["objective_strict"],
        stats["accepted"],
    )
    fresh = OrderEvaluator(inst, evaluator.order, checkpoint=1)
    assert evaluator.starts.tolist() == fresh.starts.tolist()
    # rounds of the checkpoints (the last column's round is never read) and offsets
    assert evaluator._index[0, :-1].tolist() == fresh._index[0, :-1].tolist()
    assert evaluator._index[1].tolist() == fresh._index[1].tolist()
    width = int(fresh._index[1, -1])
    assert evaluator._pool[:, :width].tolist() == fresh._pool[:, :width].tolist()


def test_compiled_late_acceptance_stops_at_the_time_limit() -> None:
    inst = mixed_backlog(200, seed=1)
    start, _ = best_start_order(inst)
    order, stats = improve_order(
        inst, start, SearchSettings("late", work=None), budget=Budget(0.3), seed=0
    )
    assert stats["stopped_by"] == "time_limit" and stats["moves"] > 0
    assert stats["objective_strict"] == int((list_schedule(inst, order) + inst.output).sum())


def test_an_unknown_engine_is_refused_by_its_name() -> None:
    inst = mixed_backlog(10, seed=0)
    with pytest.raises(
        SchedlabError, match=r"^local-search: engine must be one of compiled, python, got 'numpy'$"
    ):
        solve(inst, "local-search", time_limit=0.1, engine="numpy")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"width": 2**31}, r"^local-search: width must be <= 2,147,483,647, got 2147483648$"),
        ({"width": 2.5}, r"^local-search: width must be an integer, got 2.5$"),
        ({"work": "many"}, r"^local-search: work must be an integer, got 'many'$"),
    ],
)
def test_search_settings_refuse_what_the_engines_would_read_apart(options, message) -> None:
    with pytest.raises(SchedlabError, match=message):
        SearchSettings(**options)


def test_search_settings_hold_python_integers() -> None:
    settings = SearchSettings(width=np.uint64(7), history=np.int32(9), work=np.int64(5))
    assert [type(v) for v in (settings.width, settings.history, settings.work)] == [int] * 3
    assert settings.width == 7
