import numpy as np
import pytest

from schedlab import Status, available_solvers, read_instance, solve
from schedlab.errors import SchedlabError, UnknownNameError
from schedlab.offline.bounds import Bound
from schedlab.offline.instance import Instance, Request
from schedlab.offline.solve import with_bound
from schedlab.offline.solvers.rules import RULES
from schedlab.offline.verify import verify
from tests.conftest import INSTANCES


def test_unknown_solver_lists_the_known_ones():
    inst = Instance(5, (Request(1, 1),))
    with pytest.raises(UnknownNameError, match=r"unknown solver 'nope'; known: .*fcfs.*mc-sf"):
        solve(inst, "nope")
    with pytest.raises(ValueError):  # UnknownNameError is a ValueError, as docs/design.md asks
        solve(inst, "nope")


@pytest.mark.parametrize("limit", [0, -1, float("nan"), float("inf"), 1e308, "5", True])
def test_bad_time_limits(limit):
    with pytest.raises(SchedlabError, match="time_limit"):
        solve(Instance(5, (Request(1, 1),)), "fcfs", time_limit=limit)


def test_result_fields_and_json():
    inst = read_instance(INSTANCES / "mixed-n50.json")
    result = solve(inst, "mc-sf", seed=3)
    assert verify(inst, result.starts) == []
    assert result.solver == "mc-sf" and result.runtime >= 0
    assert result.lower_bound is not None and result.lower_bound <= result.objective
    assert result.gap == pytest.approx(
        (result.objective - result.lower_bound) / result.lower_bound
    )
    data = result.to_dict()
    for key in ("solver", "status", "objective", "lower_bound", "gap", "runtime_s", "starts"):
        assert key in data
    assert data["starts"] == result.starts.tolist() and len(data["starts"]) == inst.n


def test_status_is_optimal_when_the_objective_meets_the_bound():
    # Two requests that fit together: both start at 0, objective 2 + 1 = sum of o.
    inst = Instance(10, (Request(2, 2), Request(1, 1)))
    result = solve(inst, "fcfs", bound=Bound(3.0, "given"))
    assert result.objective == 3 and result.status is Status.OPTIMAL and result.gap == 0
    assert solve(inst, "fcfs", bound=Bound(2.5, "given")).status is Status.OPTIMAL
    assert solve(inst, "fcfs", bound=Bound(2.0, "given")).status is Status.FEASIBLE
    assert solve(inst, "fcfs", bound=None).lower_bound is None


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("tiny-*.json")), ids=lambda p: p.stem)
def test_tiny_instances_recorded_optimum_is_reproduced(path):
    inst = read_instance(path)
    result = solve(inst, "brute-force")
    assert verify(inst, result.starts) == []
    assert result.status is Status.OPTIMAL
    assert result.objective == inst.meta["optimum"]
    # and no rule reaches it (that is why these instances were chosen)
    assert min(solve(inst, r, bound=None).objective for r in RULES) > inst.meta["optimum"]
    # A proven optimum is also the best bound.
    assert result.lower_bound == result.objective


def test_brute_force_refuses_large_instances():
    inst = Instance(50, tuple(Request(1, 1) for _ in range(9)))
    with pytest.raises(SchedlabError, match="too large"):
        solve(inst, "brute-force")


def test_available_solvers():
    assert {"fcfs", "sof", "total-size", "svf", "mc-sf", "brute-force"} <= set(available_solvers())


def test_certifying_against_a_separate_bound_is_solving_with_it():
    # sorted-lp proves this optimal by its own fractional LP bound; certified again (as
    # compare does with a bound computed by another job) it must not change
    inst = Instance.from_arrays(55, [5, 16, 11, 6, 16, 3], [3, 2, 4, 5, 10, 4])
    for solver in ("sorted-lp", "lp-swap", "fcfs", "dp"):
        for bound in (None, Bound(20.0, "given"), Bound(29.0, "given")):
            once = solve(inst, solver, bound=bound)
            twice = with_bound(solve(inst, solver, bound=None), bound)
            assert (once.status, once.lower_bound, once.gap) == (
                twice.status,
                twice.lower_bound,
                twice.gap,
            )
            assert with_bound(once, bound) == once


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda inst: solve(inst, "local-search", seed=-1), r"^seed: must be >= 0, got -1"),
        (lambda inst: solve(inst, "local-search", seed=1.5), r"^seed: "),
        (lambda inst: solve(inst, "mc-sf", seed="x"), r"^seed: "),
        (lambda inst: solve(inst, "mc-sf", bound=5), r"^bound: expected a method name"),
        (lambda inst: solve(None), r"^solve: expected an Instance, got NoneType"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(call, message):
    with pytest.raises(SchedlabError, match=message):
        call(Instance(5, (Request(1, 1),)))


def test_a_numpy_seed_is_a_seed():
    inst = read_instance(INSTANCES / "tiny-1.json")
    ours = solve(inst, "local-search", seed=np.int64(3), bound=None)
    assert ours.objective == solve(inst, "local-search", seed=3, bound=None).objective
