"""What a lower-bound method returns (:class:`Bound`) and the signature it has."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from schedlab.budget import UNLIMITED, Budget
from schedlab.offline.instance import Instance

__all__ = ["Bound", "BoundFn", "integer_bound"]


@dataclass(frozen=True)
class Bound:
    """A lower bound on the optimum of an instance.

    Attributes
    ----------
    value
        The bound (total latency, in rounds).
    method
        Registry name of the method that produced it.
    status
        ``"proven"`` when the method ran to its end, ``"stopped"`` when its work budget
        or the wall-clock cap ended it early (the value is still valid, only weaker;
        ``stats["stopped_by"]`` says which).
    runtime
        Wall seconds.
    stats
        Method details (iterations, LP size, per-method values for ``best``).
    """

    value: float
    method: str
    status: str = "proven"
    runtime: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)


class BoundFn(Protocol):
    """A bound method: ``fn(instance, *, budget) -> Bound``, deterministic in its work."""

    def __call__(self, instance: Instance, *, budget: Budget = UNLIMITED) -> Bound: ...


def integer_bound(method: str, value: float, stats: Mapping[str, Any], began: float) -> Bound:
    """The :class:`Bound` of a method's real ``value``: rounded up, ``ceil(value - 1e-6)``
    (the optimum is an integer), ``"stopped"`` when ``stats["stopped_by"]`` is set, timed
    from ``began`` (a ``time.perf_counter`` instant)."""
    status = "stopped" if stats["stopped_by"] else "proven"
    return Bound(
        float(math.ceil(value - 1e-6)), method, status, time.perf_counter() - began, dict(stats)
    )
