"""How long a solver or a bound may run, and how much memory it may take.

Every solver and bound of schedlab runs under two limits of time, kept apart on purpose,
and one of memory:

* **Work**, counted in the method's own unit (moves of a local search, node expansions
  of ``dp``, column-generation rounds of the LP, subgradient steps, ...). Each method
  documents its unit and a default fixed in advance, so the same instance, options and
  seed give the same answer on every machine, however loaded.
* **A wall-clock cap**, :class:`Budget`, an outer safety. ``time_limit=None`` means *no
  wall-clock limit* — the one meaning of ``None`` everywhere in schedlab. A method whose
  cap binds stops with what it has (still valid: a feasible schedule, a valid bound) and
  records ``stats["stopped_by"] = "time_limit"``; its answer may then depend on the
  machine.

* **A memory budget**, ``Budget(max_memory=...)`` in bytes (default
  :func:`default_max_memory`: a quarter of the machine's memory). Before a method
  allocates what grows with its input (arrays over rounds, tables over subsets, a
  model's terms) it estimates the bytes and calls :meth:`Budget.require`, which refuses
  with a :class:`~schedlab.errors.MemoryBudgetError` naming the method, the estimate
  and the budget. A search whose states grow as it runs (``dp``, ``brute-force``)
  counts them and, once their estimate would pass the budget (:meth:`Budget.fits`),
  stops with what it has and ``stats["stopped_by"] = "memory"``: the count is
  deterministic, so that stop is as reproducible as a work budget. An allocation that
  fails anyway is turned into a ``MemoryBudgetError`` naming the method and the size
  (:func:`memory_guard`).

A loop combines the limits of time with :meth:`Budget.stop`, which returns a :class:`Stop`: PyVRP's
stopping criteria (``pyvrp/stop/``: ``MaxIterations``, ``MaxRuntime`` and their
combination) in one object, called once per unit of work.

``stats["stopped_by"]`` takes one of :data:`STOPPED_BY`'s values: ``None`` (the method
ended on its own: converged, proven, or out of moves to try), ``"work"`` (its work
budget), ``"memory"`` (its states reached the memory budget), ``"time_limit"``.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Iterator
from typing import Any

from schedlab.errors import InputError, InputTypeError, MemoryBudgetError

__all__ = [
    "MAX_TIME_LIMIT",
    "STOPPED_BY",
    "UNLIMITED",
    "Budget",
    "Expired",
    "Stop",
    "check_max_memory",
    "check_time_limit",
    "default_max_memory",
    "format_bytes",
    "memory_guard",
    "parse_memory",
    "stopped_by",
]

#: What can end a method early (``None``: it ended on its own).
STOPPED_BY: tuple[str | None, ...] = (None, "work", "memory", "time_limit")

#: The machine's memory assumed where it cannot be read (:func:`default_max_memory`).
FALLBACK_MEMORY = 8 << 30

#: Binary multiples of the units :func:`parse_memory` reads.
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MEMORY_TEXT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)


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


def _physical_memory() -> int | None:
    """Bytes of memory this process may use at most: the machine's physical memory, or
    its control group's limit where that is lower (Linux); ``None`` if unknown."""
    try:
        found: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        found = None
    with contextlib.suppress(OSError, ValueError):
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as file:
            text = file.read().strip()
        if text != "max":
            found = int(text) if found is None else min(found, int(text))
    return found if found is not None and found > 0 else None


def default_max_memory() -> int:
    """The default memory budget in bytes: a quarter of the machine's memory
    (:data:`FALLBACK_MEMORY` where it cannot be read), and at most half of the address
    space the process may take (``RLIMIT_AS``) where that is capped: the interpreter and
    its libraries take their share of it too."""
    budget = (_physical_memory() or FALLBACK_MEMORY) // 4
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            budget = min(budget, soft // 2)
    return budget


def check_max_memory(max_memory: Any) -> int:
    """``max_memory`` as a positive number of bytes; ``None`` gives
    :func:`default_max_memory`.

    Raises
    ------
    InputTypeError, InputError
        (a ``TypeError``, a ``ValueError``) for anything but ``None`` or an integer
        ``>= 1`` (NumPy integers too).
    """
    if max_memory is None:
        return default_max_memory()
    if isinstance(max_memory, bool) or not hasattr(max_memory, "__index__"):
        raise InputTypeError(f"max_memory: expected a number of bytes, got {max_memory!r}")
    value = int(max_memory.__index__())
    if value < 1:
        raise InputError(f"max_memory: must be a positive number of bytes, got {value}")
    return value


def parse_memory(text: str) -> int:
    """Bytes from a size such as ``4G``, ``512M``, ``1.5GiB`` or ``1000000`` (bare bytes);
    the units K, M, G, T are binary (``1K = 1024``), with an optional ``B`` or ``iB``.

    Raises
    ------
    InputError
        (a ``ValueError``) for any other text, or a size below one byte.
    """
    match = _MEMORY_TEXT.fullmatch(text.strip())
    if match is None:
        raise InputError(f"expected a size such as 4G, 512M or a number of bytes, got {text!r}")
    value = int(float(match[1]) * _UNITS[match[2].upper()])
    if value < 1:
        raise InputError(f"expected a size of at least one byte, got {text!r}")
    return value


def format_bytes(size: float) -> str:
    """``size`` bytes for a message: ``3.2 GiB``, ``512.0 MiB``, ``100 bytes``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{int(size)} bytes"


class Budget:
    """A wall-clock cap that starts when the budget is made, and a memory budget.

    Parameters
    ----------
    time_limit
        Seconds, or ``None`` for no wall-clock limit.
    max_memory
        Bytes a method may allocate for what grows with its input (module docs);
        ``None``: :func:`default_max_memory`.

    Raises
    ------
    InputError, InputTypeError
        (a ``ValueError``, a ``TypeError``) if ``time_limit`` is not ``None`` or a
        positive finite number, or ``max_memory`` not ``None`` or a positive integer.
    """

    __slots__ = ("deadline", "max_memory", "time_limit")

    def __init__(self, time_limit: float | None = None, max_memory: int | None = None) -> None:
        self.time_limit = check_time_limit(time_limit)
        self.max_memory = check_max_memory(max_memory)
        now = time.perf_counter()
        self.deadline = math.inf if self.time_limit is None else now + self.time_limit

    @classmethod
    def _until(cls, deadline: float, max_memory: int) -> Budget:
        budget = cls(max_memory=max_memory)
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
            return Budget(max_memory=self.max_memory)
        return Budget._until(time.perf_counter() + fraction * self.remaining(), self.max_memory)

    def fits(self, size: float) -> bool:
        """Whether ``size`` bytes are within the memory budget."""
        return size <= self.max_memory

    def require(self, owner: str, size: float, what: str) -> None:
        """Refuse, before allocating, what would take ``size`` bytes above the budget.

        Raises
        ------
        MemoryBudgetError
            ``"{owner}: {what} would take about {size}, above the memory budget of ..."``.
        """
        if not self.fits(size):
            raise MemoryBudgetError(
                f"{owner}: {what} would take about {format_bytes(size)}, above the memory "
                f"budget of {format_bytes(self.max_memory)} (max_memory=, --max-memory)"
            )

    def stop(self, max_work: int | None = None) -> Stop:
        """The stopping rule of one loop: at most ``max_work`` units (``None``: no work
        limit) and this budget's wall-clock cap."""
        return Stop(self, max_work)

    def __repr__(self) -> str:
        return f"Budget(time_limit={self.time_limit!r}, max_memory={self.max_memory!r})"


class Expired(Exception):
    """A unit of work was cut by the wall-clock cap (:meth:`Budget.check`).

    The method that owns the budget catches it, drops the unfinished unit and returns what
    it had, with ``stats["stopped_by"] = "time_limit"``; it never reaches the caller of a
    solver or bound.
    """


#: The budget without a wall-clock limit and with the default memory budget (the default
#: of every solver and bound function).
UNLIMITED = Budget()


@contextlib.contextmanager
def memory_guard(owner: str) -> Iterator[None]:
    """Run a method so that running out of memory is a one-line error naming it.

    A :class:`~schedlab.errors.MemoryBudgetError` raised inside gets ``owner`` in front
    (unless it names it already); any other ``MemoryError`` (NumPy's
    ``_ArrayMemoryError`` among them, whose size is given) becomes one.
    """
    try:
        yield
    except MemoryBudgetError as exc:
        if str(exc).startswith(f"{owner}:"):
            raise
        raise MemoryBudgetError(f"{owner}: {exc}") from exc
    except MemoryError as exc:
        size = getattr(exc, "_total_size", None)
        what = f"{format_bytes(size)} for an array" if isinstance(size, int) else "memory"
        raise MemoryBudgetError(
            f"{owner}: ran out of memory allocating {what}; lower the instance's size or "
            "the method's options"
        ) from exc


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
    hit it, else ``"memory"`` if any reached the memory budget, else ``"work"`` if any ran
    out of work, else ``None``."""
    for reason in ("time_limit", "memory", "work"):
        if reason in reasons:
            return reason
    return None
