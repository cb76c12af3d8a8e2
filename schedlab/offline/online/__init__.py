"""The semi-online model: unknown output lengths, predictions, eviction.

An online policy sees prompts, predicted intervals (:mod:`schedlab.predictions`),
releases and what has run so far, round by round, and never a true output length before
its request finishes; it may evict a running request, which frees its memory and loses
its progress. ``docs/design.md``, "Semi-online model" and "Semi-online algorithms".

* :mod:`~schedlab.offline.online.runs`: schedules with eviction (:data:`Runs`), their
  objective and waste, and the independent verifier :func:`verify_runs`;
* :mod:`~schedlab.offline.online.engine`: :func:`run_online`, the policy's view and
  decisions;
* :mod:`~schedlab.offline.online.policies`: ``a-max``, ``a-min``, ``mc-sf-predicted``,
  ``fcfs-preempt``, registered as solvers by :mod:`schedlab.offline.solvers.online`.
"""

from __future__ import annotations

from schedlab.offline.online.engine import Decision, Policy, View, run_online
from schedlab.offline.online.policies import POLICIES
from schedlab.offline.online.runs import (
    Runs,
    assert_runs_feasible,
    evictions,
    last_starts,
    objective,
    runs_to_lists,
    verify_runs,
    wasted_rounds,
    wasted_token_rounds,
)

__all__ = [
    "POLICIES",
    "Decision",
    "Policy",
    "Runs",
    "View",
    "assert_runs_feasible",
    "evictions",
    "last_starts",
    "objective",
    "run_online",
    "runs_to_lists",
    "verify_runs",
    "wasted_rounds",
    "wasted_token_rounds",
]
