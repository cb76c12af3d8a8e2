"""Every error a user can cause is a SchedlabError and the built-in exception Python's
habits expect: ValueError for a bad value, TypeError for a wrong type,
FileNotFoundError for a missing file (issue 43, "Errors outside the hierarchy")."""

from __future__ import annotations

import math

import pytest

import schedlab
from schedlab.errors import (
    BoundError,
    DataNotFoundError,
    InputError,
    InputTypeError,
    PredictionError,
    SchedlabError,
    ServingError,
)
from schedlab.offline.bounds import Bound
from schedlab.predictions import predict
from schedlab.serving.cluster import Cluster
from schedlab.serving.simulator import simulate
from schedlab.serving.sloweave import SLOWeaveState, choose_chunk
from tests.conftest import INSTANCES

TINY = schedlab.read_instance(INSTANCES / "tiny-1.json")
STATE = SLOWeaveState(0.0, 0.05, 4, 1000, 500)


@pytest.mark.parametrize(
    ("call", "builtin", "ours"),
    [
        (
            lambda: schedlab.write_instance(TINY, "/nonexistent/x.json"),
            FileNotFoundError,
            DataNotFoundError,
        ),
        (lambda: schedlab.read_instance("nosuch.json"), FileNotFoundError, DataNotFoundError),
        (lambda: schedlab.solve(TINY, "fcfs", time_limit=-1), ValueError, InputError),
        (lambda: schedlab.solve(TINY, "fcfs", time_limit="1"), TypeError, InputTypeError),
        (lambda: schedlab.solve(TINY, "fcfs", seed=-1), ValueError, InputError),
        (lambda: schedlab.solve(TINY, "fcfs", seed=1.5), TypeError, InputTypeError),
        (lambda: schedlab.solve("tiny.json", "fcfs"), TypeError, InputTypeError),
        (lambda: schedlab.write_instance("tiny", "x.json"), TypeError, InputTypeError),
        (lambda: simulate("chat", "sloweave"), TypeError, InputTypeError),
        (lambda: simulate(5), TypeError, InputTypeError),
        (lambda: simulate("chat", rate="5"), TypeError, InputTypeError),
        (lambda: simulate("chat", rate=math.nan), ValueError, ServingError),
        (lambda: Cluster(nodes="2P2D"), TypeError, InputTypeError),
        (lambda: choose_chunk(STATE, "sloweave-default"), TypeError, InputTypeError),
        (lambda: predict("perfect", [3], seed="1"), TypeError, InputTypeError),
        (lambda: predict("interval:0.5:" + "9" * 50, [3]), ValueError, PredictionError),
    ],
)
def test_a_user_error_is_ours_and_the_builtin_one(call, builtin, ours):
    with pytest.raises(builtin) as info:
        call()
    assert isinstance(info.value, SchedlabError) and isinstance(info.value, ours)


def test_simulate_names_the_argument_of_the_wrong_type():
    with pytest.raises(
        InputTypeError,
        match=r"^simulate: scenario: expected Scenario or None, got str 'sloweave'$",
    ):
        simulate("chat", "sloweave")


def test_a_bound_above_the_verified_objective_is_refused_naming_the_method():
    honest = schedlab.solve(TINY, "fcfs", bound=None)
    with pytest.raises(BoundError, match=r"^lower bound 'bogus' is 1e\+12, above the objective"):
        schedlab.solve(TINY, "fcfs", bound=Bound(1e12, "bogus"))
    # a bound at the objective certifies it; one just below does not
    at = schedlab.solve(TINY, "fcfs", bound=Bound(float(honest.objective), "exact"))
    assert at.status == "OPTIMAL" and at.gap == 0
    below = schedlab.solve(TINY, "fcfs", bound=Bound(honest.objective - 1.0, "weaker"))
    assert below.status == "FEASIBLE" and below.lower_bound == honest.objective - 1
