"""Property tests of a user's solver or serving policy: :func:`check_solver_properties`
and :func:`check_policy_properties`.

Each runs a hypothesis test inside the caller (a test function, or any script): it draws
cases from :mod:`schedlab.testing.strategies`, runs the solver or policy on each and holds
the outcome to the invariants of :mod:`schedlab.testing`. A broken invariant raises its
:class:`~schedlab.testing.violations.InvariantViolation` for the smallest case hypothesis
finds, which it prints as the falsifying example. The pytest plugin
(:mod:`schedlab.testing.plugin`) hands both out as the fixtures ``check_solver`` and
``check_policy``.

Hypothesis settings not given here (the seed, derandomisation, the example database, the
phases) come from the active settings profile, so a CI can pin them with
``settings.load_profile``; the *explain* phase is left out, as it reruns a failing case
hundreds of times (a minute or more of simulation for a failing policy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import strategies as st

from schedlab.errors import ServingError
from schedlab.offline.instance import Instance
from schedlab.offline.solve import solve
from schedlab.serving.metrics import SLO
from schedlab.serving.policies import Policy, PolicyContext
from schedlab.serving.policy_registry import make_policy
from schedlab.serving.scenario import Scenario
from schedlab.testing import strategies
from schedlab.testing.conservation import check_conservation
from schedlab.testing.deadlines import check_deadlines
from schedlab.testing.runs import record_run
from schedlab.testing.schedules import check_bound, check_schedule

__all__ = ["check_policy_properties", "check_solver_properties"]

#: A solver under test: an instance in, one start round per request out (or an object
#: with ``starts`` and, optionally, ``objective`` and ``lower_bound``), or a registered
#: solver's name.
SolverUnderTest = Callable[[Instance], Any] | str

#: A policy under test: a factory building a fresh policy from a
#: :class:`~schedlab.serving.policies.PolicyContext`, or a registered policy's spelling.
PolicyUnderTest = Callable[[PolicyContext], Policy] | str

#: The TTFT target of the drawn scenarios (long: runs are judged by their invariants).
TTFT_S = 60.0


def check_solver_properties(
    solver: SolverUnderTest,
    *,
    instances: st.SearchStrategy[Instance] | None = None,
    max_examples: int = 100,
) -> None:
    """Property-test ``solver`` on drawn instances.

    On each instance (default :func:`~schedlab.testing.strategies.instances`) the
    schedule must be feasible (:func:`~schedlab.testing.check_schedule`), the objective
    the solver reports, if any, must be its schedule's, and a lower bound it reports must
    not exceed that objective (:func:`~schedlab.testing.check_bound`).

    Parameters
    ----------
    solver
        A function ``solver(instance)`` returning one start round per request, or an
        object with ``starts`` (and optionally ``objective``, ``lower_bound``), such as a
        :class:`~schedlab.offline.result.Result`; or the name of a registered solver
        (run by :func:`schedlab.solve` with its defaults and seed 0).
    instances
        The instances to draw.
    max_examples
        Instances tried (hypothesis's ``max_examples``).

    Raises
    ------
    InvariantViolation
        For the smallest instance hypothesis finds that breaks an invariant.
    """
    run: Callable[[Instance], Any]
    if isinstance(solver, str):
        name = solver
        run = lambda instance: solve(instance, name, bound=None)  # noqa: E731
    else:
        run = solver

    @settings(
        max_examples=max_examples,
        deadline=None,
        phases=_phases(),
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(instances or strategies.instances())
    def solver_keeps_the_invariants(instance: Instance) -> None:
        __tracebackhide__ = True
        out = run(instance)
        starts: Any = getattr(out, "starts", out)
        objective = check_schedule(instance, starts, getattr(out, "objective", None))
        own_bound = getattr(out, "lower_bound", None)
        if own_bound is not None:
            check_bound(instance, own_bound, objective)

    solver_keeps_the_invariants()


def check_policy_properties(
    policy: PolicyUnderTest,
    *,
    deadlines: bool = False,
    max_examples: int = 100,
) -> None:
    r"""Property-test a serving policy on drawn runs.

    Each case draws an engine (:func:`~schedlab.testing.strategies.engine_configs`), a
    trace that fits it (:func:`~schedlab.testing.strategies.traces`), a monotone cost
    model (:func:`~schedlab.testing.strategies.cost_models`), a TPOT target :math:`D`
    and a seed; builds a fresh
    policy for them, runs the trace to its end with every iteration recorded and checks
    :func:`~schedlab.testing.check_conservation` and, with ``deadlines``,
    :func:`~schedlab.testing.check_deadlines`. A case whose policy refuses to be built
    (a :class:`~schedlab.errors.ServingError`, e.g. a token budget that cannot meet
    :math:`D`) is skipped. :math:`D` is the predicted time of one decode and a chunk of
    0 to 512 tokens, :math:`D = \hat T(1, 0, c)`: a target that some batches meet and
    others miss, where a deadline-aware policy must choose its chunks with care.

    Parameters
    ----------
    policy
        A factory ``policy(context)`` returning a fresh object that keeps the
        :class:`~schedlab.serving.policies.Policy` protocol, or the spelling of a
        registered policy (:func:`~schedlab.serving.policy_registry.make_policy`).
    deadlines
        Also hold the policy to SLOWeave's per-step guarantee.
    max_examples
        Runs tried (hypothesis's ``max_examples``).

    Raises
    ------
    InvariantViolation
        For the smallest run hypothesis finds that breaks an invariant.
    """
    build: Callable[[PolicyContext], Policy]
    if isinstance(policy, str):
        spelling = policy
        build = lambda context: make_policy(spelling, context)  # noqa: E731
    else:
        build = policy

    @settings(
        max_examples=max_examples,
        deadline=None,
        phases=_phases(),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(
        data=st.data(),
        config=strategies.engine_configs(),
        model=strategies.cost_models(),
        chunk=st.integers(0, 512),
        seed=st.integers(0, 2**16),
    )
    def policy_keeps_the_invariants(data: Any, config: Any, model: Any, chunk: int, seed: int):
        __tracebackhide__ = True
        stream = data.draw(strategies.traces(max_tokens=config.total_blocks * config.block_size))
        tpot = model.iteration_time(1, 0, ((chunk, 0),) if chunk else ())
        try:
            built = build(PolicyContext(model, config, tpot))
        except ServingError:
            reject()
        scenario = Scenario(built, model, SLO(TTFT_S, tpot), config, seed=seed)
        run = record_run(stream, scenario)
        check_conservation(run)
        if deadlines:
            check_deadlines(run)

    policy_keeps_the_invariants()


def _phases() -> list[Phase]:
    """The active profile's phases, less *explain* (module docstring)."""
    return [phase for phase in settings().phases if phase is not Phase.explain]
