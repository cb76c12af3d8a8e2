"""How long a solver or a bound may run: deterministic work, and a wall-clock cap.

Every solver and bound of schedlab runs under two limits, kept apart on purpose:

* **Work**, counted in the method's own unit (moves of a local search, node expansions
  of ``dp``, column-generation rounds of the LP, subgradient steps, ...). Each method
  documents its unit and a default fixed in advance, so the same instance, options and
  seed give the same answer on every machine, however loaded.
* **A wall-clock cap**, :class:`Budget`, an outer safety. ``time_limit=None`` means *no
  wall-clock limit* — the one meaning of ``None`` everywhere in schedlab. A method whose
  cap binds stops with what it has (still valid: a feasible schedule, a valid bound) and
  records ``stats["stopped_by"] = "time_limit"``; its answer may then depend on the
  machine.

A loop combines both with :meth:`Budget.stop`, which returns a :class:`Stop`: PyVRP's
stopping criteria (``pyvrp/stop/``: ``MaxIterations``, ``MaxRuntime`` and their
combination) in one object, called once per unit of work.

``stats["stopped_by"]`` takes one of :data:`STOPPED_BY`'s values: ``None`` (the method
ended on its own: converged, proven, or out of moves to try), ``"work"`` (its work
budget), ``"time_limit"``.
"""

from __future__ import annotations

import math
import time
from typing import Any

from schedlab.errors import InputError, InputTypeError

__all__ = [
    "MAX_TIME_LIMIT",
    "STOPPED_BY",
    "UNLIMITED",
    "Budget",
    "Expired",
    "Stop",
    "check_time_limit",
    "stopped_by",
]

#: What can end a method early (``None``: it ended on its own).
STOPPED_BY: tuple[str | None, ...] = (None, "work", "time_limit")


#: The longest time limit accepted, in seconds (about 31.7 years): longer ones are no cap at
#: all (``None``), and rates of work computed from the time left stay finite below it.
MAX_TIME_LIMIT = 1e9


def check_time_limit(time_limit: Any) -> float | None:
    """``time_limit`` as float seconds, or ``None`` (no limit); refuses anything else."""
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float):
        raise InputTypeError(f"time_limit: expected seconds, got {time_limit!r}")
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise InputError(f"time_limit: must be a positive number of seconds, got {time_limit}")
    if time_limit > MAX_TIME_LIMIT:
        raise InputError(
            f"time_limit: at most {MAX_TIME_LIMIT:.0e} seconds, got {time_limit:g} (for no "
            "limit, give none)"
        )
    return float(time_limit)


class Budget:
    """A wall-clock cap that starts when the budget is made.

    Parameters
    ----------
    time_limit
        Seconds, or ``None`` for no wall-clock limit.

    Raises
    ------
    InputError, InputTypeError
        (a ``ValueError``, a ``TypeError``) if ``time_limit`` is not ``None`` or a
        positive finite number.
    """

    __slots__ = ("deadline", "time_limit")

    def __init__(self, time_limit: float | None = None) -> None:
        self.time_limit = check_time_limit(time_limit)
        now = time.perf_counter()
        self.deadline = math.inf if self.time_limit is None else now + self.time_limit

    @classmethod
    def _until(cls, deadline: float) -> Budget:
        budget = cls()
        budget.deadline = deadline
        budget.time_limit = None if math.isinf(deadline) else deadline - time.perf_counter()
        return budget

    @property
    def limited(self) -> bool:
        """Whether there is a wall-clock limit at all."""
        return math.isfinite(self.deadline)

    def remaining(self) -> float:
        """Seconds left (``inf`` without a limit, ``0`` once past it)."""
        return max(0.0, self.deadline - time.perf_counter())

    def expired(self) -> bool:
        """Whether the wall-clock limit has passed."""
        return time.perf_counter() >= self.deadline

    def check(self) -> None:
        """Raise :class:`Expired` if the wall-clock limit has passed: for a unit of work
        too long to finish past the cap, which checks between its own parts."""
        if self.expired():
            raise Expired

    def seconds(self, floor: float = 1e-3) -> float | None:
        """Seconds left for a backend that takes a time limit (at least ``floor``), or
        ``None`` without a limit."""
        return None if not self.limited else max(floor, self.remaining())

    def share(self, fraction: float) -> Budget:
        """A budget ending once ``fraction`` of what is left has passed (no limit stays
        no limit)."""
        if not 0 < fraction <= 1:
            raise ValueError(f"Budget.share: fraction must be in (0, 1], got {fraction}")
        if not self.limited:
            return Budget()
        return Budget._until(time.perf_counter() + fraction * self.remaining())

    def stop(self, max_work: int | None = None) -> Stop:
        """The stopping rule of one loop: at most ``max_work`` units (``None``: no work
        limit) and this budget's wall-clock cap."""
        return Stop(self, max_work)

    def __repr__(self) -> str:
        return f"Budget(time_limit={self.time_limit!r})"


class Expired(Exception):
    """A unit of work was cut by the wall-clock cap (:meth:`Budget.check`).

    The method that owns the budget catches it, drops the unfinished unit and returns what
    it had, with ``stats["stopped_by"] = "time_limit"``; it never reaches the caller of a
    solver or bound.
    """


#: The budget without a wall-clock limit (the default of every solver and bound function).
UNLIMITED = Budget()


class Stop:
    """Maximum work and maximum runtime combined; call once before each unit of work.

    ``stop()`` returns ``True`` when the loop must end, and then :attr:`reason` says why
    (``"work"`` or ``"time_limit"``); otherwise it counts one unit in :attr:`work`
    (:meth:`take` grants several).
    """

    __slots__ = ("budget", "max_work", "reason", "work")

    def __init__(self, budget: Budget, max_work: int | None = None) -> None:
        if max_work is not None and (isinstance(max_work, bool) or max_work < 0):
            raise InputError(f"work budget: must be an integer >= 0, got {max_work!r}")
        self.budget = budget
        self.max_work = max_work
        self.work = 0
        self.reason: str | None = None

    def __call__(self) -> bool:
        return self.take(1) == 0

    def take(self, units: int) -> int:
        """Grant up to ``units`` units at once (a compiled loop's batch): how many may
        run, counted in :attr:`work`; ``0`` when the loop must end (:attr:`reason` set).
        The wall-clock cap is checked once, before the batch.

        Raises
        ------
        ValueError
            If ``units < 1``.
        """
        if units < 1:
            raise ValueError(f"Stop.take: units must be >= 1, got {units}")
        if self.max_work is not None and self.work >= self.max_work:
            self.reason = "work"
            return 0
        if self.budget.expired():
            self.reason = "time_limit"
            return 0
        granted = units if self.max_work is None else min(units, self.max_work - self.work)
        self.work += granted
        return granted


def stopped_by(*reasons: str | None) -> str | None:
    """The reason a method of several phases stopped early: ``"time_limit"`` if any phase
    hit it, else ``"work"`` if any ran out of work, else ``None``."""
    if "time_limit" in reasons:
        return "time_limit"
    return "work" if "work" in reasons else None
