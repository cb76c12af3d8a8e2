"""Local search: the incremental evaluator matches the engine; results are verified."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab import solve, verify
from schedlab.errors import SchedlabError
from schedlab.instance import Instance
from schedlab.list_scheduling import list_schedule
from schedlab.solvers.local_search import OrderEvaluator, best_start_order, improve_order
from schedlab.workloads import mixed_backlog
from tests.strategies import instances

backlogs = instances(max_n=12, max_memory=30, max_arrival=0)


@settings(max_examples=60, deadline=None)
@given(backlogs, st.randoms(use_true_random=False), st.integers(1, 5))
def test_evaluator_reproduces_strict_list_scheduling(inst: Instance, rnd, every: int) -> None:
    order = list(range(inst.n))
    rnd.shuffle(order)
    evaluator = OrderEvaluator(inst, np.array(order), checkpoint=every)
    expected = list_schedule(inst, order)
    assert evaluator.schedule().tolist() == expected.tolist()
    assert evaluator.objective() == int((expected + inst.output).sum())
    # a move replayed from a checkpoint equals a full decode of the moved order
    if inst.n >= 2:
        i, j = sorted(rnd.sample(range(inst.n), 2))
        moved = list(order)
        moved[i], moved[j] = moved[j], moved[i]
        replay = evaluator.try_move(moved, i, j, None)
        full = int((list_schedule(inst, moved) + inst.output).sum())
        if replay is None:
            assert full >= evaluator.objective()
        else:
            assert replay.total + int(inst.output.sum()) == full
            evaluator.accept(moved, replay)
            assert evaluator.schedule().tolist() == list_schedule(inst, moved).tolist()


def test_evaluator_refuses_releases() -> None:
    inst = Instance.from_arrays(10, [1, 2], [3, 4], [0, 2])
    with pytest.raises(SchedlabError, match="backlog"):
        OrderEvaluator(inst, np.array([0, 1]))


def test_search_never_worsens_and_is_seeded() -> None:
    inst = mixed_backlog(120, seed=4)
    start, _ = best_start_order(inst)
    start_value = int((list_schedule(inst, start) + inst.output).sum())
    runs = [
        improve_order(inst, start, time_limit=60, seed=7, max_moves=150, screen=8)
        for _ in range(2)
    ]
    assert runs[0][0].tolist() == runs[1][0].tolist()  # same seed, same moves
    order, stats = runs[0]
    value = int((list_schedule(inst, order) + inst.output).sum())
    assert value == stats["objective_strict"] <= start_value
    assert stats["moves"] == 150


@settings(max_examples=20, deadline=None)
@given(instances(max_n=8, max_memory=25, max_arrival=4), st.sampled_from(["first", "best"]))
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
