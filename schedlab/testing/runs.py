"""A simulator run with what its checks need: :class:`ServingRun` and :func:`record_run`.

:func:`~schedlab.serving.simulator.run_engine` returns an
:class:`~schedlab.serving.simulator.EngineRun`: per-request records and, when asked, one
:class:`~schedlab.serving.iteration.BatchRecord` per iteration. Checking it needs more:
the requests (their arrivals, prompts and outputs), the engine's limits, the SLO and
cost model the policy planned with, and whether the policy splits prompts. A
:class:`ServingRun` keeps them together, so that
:func:`~schedlab.testing.check_conservation` and :func:`~schedlab.testing.check_deadlines`
take one argument.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.serving.policies import Policy
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import EngineRun, run_engine
from schedlab.serving.workloads import RequestStream

__all__ = ["ServingRun", "record_run"]


@dataclass(frozen=True)
class ServingRun:
    """A run to its end, with every iteration recorded, and what produced it.

    Attributes
    ----------
    stream
        The requests.
    scenario
        The engine, policy, cost models, SLO and seed it ran under.
    run
        The outcome, with ``run.batches`` recorded.
    chunked
        Whether the policy may split a prompt (``Policy.chunked``); a policy that does
        not may exceed the token budget with one whole prompt.
    """

    stream: RequestStream
    scenario: Scenario
    run: EngineRun
    chunked: bool


def record_run(stream: RequestStream, scenario: Scenario | str | Policy) -> ServingRun:
    """Simulate ``stream`` to its end with every iteration recorded.

    Parameters
    ----------
    stream
        The requests.
    scenario
        A :class:`~schedlab.serving.scenario.Scenario`, or a policy (its spelling, or an
        object keeping the :class:`~schedlab.serving.policies.Policy` protocol) run under
        the default scenario. A policy object serves one run: build a fresh one per run.
    """
    if not isinstance(scenario, Scenario):
        scenario = Scenario(scenario)
    # the policy object itself, or a fresh one of the spelling (only its ``chunked`` is read)
    chunked = scenario.build_policy().chunked
    run = run_engine(stream, scenario, record_batches=True)
    return ServingRun(stream, scenario, run, chunked)
