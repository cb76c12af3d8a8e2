"""The errors :mod:`schedlab.testing`'s checks raise: one class per invariant.

Each is an :class:`AssertionError`, so pytest and hypothesis report it as a failed test
(and hypothesis shrinks the example that raised it), and a test may catch the class of
the invariant it expects to break. The message is one paragraph that names the request,
the round or the iteration where the invariant broke, and what was found there. The checks
hide their own frames from pytest's tracebacks (``__tracebackhide__``), so a failure
shows the test's line and the message.
"""

from __future__ import annotations

__all__ = [
    "BoundViolation",
    "ConservationViolation",
    "DeadlineViolation",
    "InvariantViolation",
    "ObjectiveViolation",
    "ScheduleViolation",
]


class InvariantViolation(AssertionError):
    """Base class: a schedule, bound or simulator run breaks an invariant."""


class ScheduleViolation(InvariantViolation):
    """An offline schedule is infeasible (a request missing, started before its release,
    or the memory exceeded in some round)."""


class ObjectiveViolation(InvariantViolation):
    """A solver reports an objective other than its schedule's total latency."""


class BoundViolation(InvariantViolation):
    """A lower bound exceeds the objective of a feasible schedule, or is not finite."""


class DeadlineViolation(InvariantViolation):
    """An iteration with prefill work is predicted to end after a running decode's
    next-token deadline (SLOWeave's per-step guarantee)."""


class ConservationViolation(InvariantViolation):
    """A simulator run loses, duplicates or invents a token, a prefill token or a KV
    block, or breaks an engine limit."""
