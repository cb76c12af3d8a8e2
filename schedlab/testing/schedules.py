r"""Checks of offline schedules and lower bounds: :func:`check_schedule`, :func:`check_bound`.

A schedule gives request :math:`i` (prompt :math:`s_i`, output :math:`o_i`, release
:math:`a_i`) a start round :math:`p_i`; the instance's memory is :math:`M` tokens
(``docs/design.md``, "Offline model"). It is feasible when

.. math::

    p_i \in \mathbb{Z}, \quad p_i \ge a_i, \quad
    \sum_{i \,:\, p_i \le t < p_i + o_i} \bigl(s_i + t - p_i + 1\bigr) \le M
    \quad \text{for every round } t,

which :func:`schedlab.verify`, the independent verifier, decides (it shares no code with
any solver). Its objective is the total latency

.. math::

    F = \sum_i \bigl(p_i + o_i - a_i\bigr),

recomputed here from the instance's requests in Python integers (exact at any size). A
lower bound :math:`L` is valid when :math:`L \le F^*` (the optimum), so in particular
:math:`L \le F` for every feasible schedule: a bound above a verified objective is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from schedlab.errors import ScheduleError
from schedlab.offline.bounds import Bound
from schedlab.offline.instance import Instance
from schedlab.offline.solve import BOUND_TOLERANCE
from schedlab.offline.verify import verify
from schedlab.testing.violations import BoundViolation, ObjectiveViolation, ScheduleViolation

__all__ = ["check_bound", "check_schedule", "reproducer"]

#: Instances of at most this many requests are quoted in full in a message.
QUOTED_REQUESTS = 20

#: Problems listed in a message (the rest are counted).
LISTED_PROBLEMS = 5


def reproducer(instance: Instance) -> str:
    """Python that rebuilds ``instance`` (``Instance.from_arrays(...)``), or, above
    :data:`QUOTED_REQUESTS` requests, its name, size and memory."""
    if instance.n > QUOTED_REQUESTS:
        return f"instance {instance.name!r} ({instance.n} requests, M = {instance.kv_tokens})"
    return (
        f"Instance.from_arrays({instance.kv_tokens}, {instance.prompt.tolist()}, "
        f"{instance.output.tolist()}, {instance.arrival.tolist()})"
    )


def check_schedule(
    instance: Instance,
    starts: Sequence[Any] | np.ndarray | Mapping[int, Any],
    objective: float | None = None,
) -> int:
    r"""Check that ``starts`` is a feasible schedule of ``instance``, and return its objective.

    Parameters
    ----------
    instance
        The instance.
    starts
        One start round :math:`p_i` per request, in request order (a sequence or a 1-D
        array), or a mapping ``{request: start}``.
    objective
        The objective a solver reported for the schedule, if any; it must equal
        :math:`F = \sum_i (p_i + o_i - a_i)`.

    Returns
    -------
    int
        :math:`F`, recomputed from the instance's requests.

    Raises
    ------
    ScheduleViolation
        If a request is missing, scheduled twice, given a start that is no integer or
        that precedes its release, or if the memory exceeds :math:`M` in some round
        (the rounds and the peak are named).
    ObjectiveViolation
        If ``objective`` is given and differs from :math:`F`.
    """
    __tracebackhide__ = True
    if isinstance(starts, str | bytes) or not isinstance(starts, Iterable):
        raise ScheduleViolation(
            f"starts: expected one start round per request, got {type(starts).__name__}; "
            f"on {reproducer(instance)}"
        )
    if not isinstance(starts, Mapping | np.ndarray):
        starts = list(starts)  # read once, whatever iterable it was
    if isinstance(starts, list) and any(isinstance(p, tuple | list) for p in starts):
        raise ScheduleViolation(
            f"starts: expected one start round per request, got pairs or lists "
            f"{_quoted(starts)}; on {reproducer(instance)}"
        )
    try:
        problems = verify(instance, starts)
    except ScheduleError as exc:
        raise ScheduleViolation(f"{exc}; on {reproducer(instance)}") from None
    if problems:
        listed = "; ".join(problems[:LISTED_PROBLEMS])
        more = len(problems) - LISTED_PROBLEMS
        raise ScheduleViolation(
            f"infeasible schedule of {instance.n} request(s) with memory M = "
            f"{instance.kv_tokens}: {listed}"
            + (f"; and {more} more" if more > 0 else "")
            + f". Starts {_quoted(starts)} on {reproducer(instance)}"
        )
    rounds = (
        starts if isinstance(starts, Mapping) else dict(enumerate(np.asarray(starts).tolist()))
    )
    total = sum(
        int(rounds[i]) + request.output - request.arrival
        for i, request in enumerate(instance.requests)
    )
    if objective is not None and objective != total:
        raise ObjectiveViolation(
            f"the solver reports objective {objective}, but its schedule's total latency "
            f"sum(p_i + o_i - a_i) is {total}. Starts {_quoted(starts)} on "
            f"{reproducer(instance)}"
        )
    return total


def check_bound(instance: Instance, bound: Bound | float, objective: float) -> None:
    r"""Check that ``bound`` is a valid lower bound next to a feasible schedule's objective.

    Parameters
    ----------
    instance
        The instance (named in the message).
    bound
        A :class:`~schedlab.offline.bounds.Bound` or its value :math:`L`.
    objective
        The objective :math:`F` of a feasible schedule of ``instance`` (e.g. what
        :func:`check_schedule` returned).

    Raises
    ------
    BoundViolation
        If :math:`L` is not finite or :math:`L > F` beyond the tolerance
        :func:`schedlab.solve` allows a certificate computed in floating point (e.g. by a
        linear program): :math:`10^{-6} \max(1, F)`
        (:data:`~schedlab.offline.solve.BOUND_TOLERANCE`).
    """
    __tracebackhide__ = True
    value = float(bound.value if isinstance(bound, Bound) else bound)
    method = f"bound {bound.method!r}" if isinstance(bound, Bound) else "the bound"
    if not math.isfinite(value):
        raise BoundViolation(
            f"{method} is {value}, not a finite number, on {reproducer(instance)}"
        )
    if value > objective + BOUND_TOLERANCE * max(1.0, abs(objective)):
        raise BoundViolation(
            f"{method} = {value:.10g} exceeds {objective}, the objective of a feasible "
            f"schedule, so it is no lower bound, on {reproducer(instance)}"
        )


def _quoted(starts: Any, limit: int = QUOTED_REQUESTS) -> str:
    """``starts`` as text, cut after ``limit`` entries."""
    items: list[Any]
    if isinstance(starts, Mapping):
        items = list(starts.items())
    elif isinstance(starts, np.ndarray):
        items = starts.tolist() if starts.ndim == 1 else [repr(starts)]
    else:
        try:
            items = list(starts)
        except TypeError:
            return repr(starts)
    text = ", ".join(map(str, items[:limit]))
    return f"[{text}{', ...' if len(items) > limit else ''}]"
