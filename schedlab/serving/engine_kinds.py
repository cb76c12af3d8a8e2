"""Engine kinds: what the event loop needs of one replica, and where each kind is built.

The :class:`~schedlab.serving.engine.Driver` runs replicas through the small surface of
:class:`Replica`: it hands each arriving request to one (``arrive``), asks it to plan an
iteration at a time (``plan``), how long that iteration takes (``duration``), and tells
it when the iteration ended (``end``); the run's records are read back from the request
objects and the replica's counters. Two kinds implement it:

* ``schedlab``: this package's engine (:class:`~schedlab.serving.engine.Engine`), whose
  batches a policy of :mod:`schedlab.serving.policies` forms;
* ``vllm``: vLLM's own scheduler, driven on the same virtual clock
  (:mod:`schedlab.integrations.vllm`), found through the entry point group
  :data:`ENTRY_POINTS` so that this layer does not import the one above it.

A third-party package adds a kind by declaring ``name = "module:factory"`` in that
group; the factory is called as ``factory(scenario, index=..., record_batches=...,
timing=...)`` and returns a :class:`Replica`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from schedlab.errors import UnknownNameError

if TYPE_CHECKING:
    from schedlab.serving.cost_model import BatchShape
    from schedlab.serving.engine_config import EngineConfig
    from schedlab.serving.policies import Policy

__all__ = ["BUILTIN_KIND", "ENTRY_POINTS", "Replica", "engine_kind_names", "replica_factory"]

#: The kind built into this package.
BUILTIN_KIND = "schedlab"
#: Entry-point group of installed engine kinds: ``kind = "module:factory"``.
ENTRY_POINTS = "schedlab.engines"


class Replica(Protocol):
    """One replica as the driver sees it (module docstring).

    The driver sets ``busy``, ``start_pending`` and ``back_to_back``; the replica sets
    the rest. ``plan`` returns ``None`` when there is nothing to run; the request objects
    handed to ``arrive`` are the driver's, and the replica writes their outcome into
    them (first and last token times, token segments, preemptions, prefilled tokens).
    """

    index: int
    config: EngineConfig
    timing: Any  # an IterationTime (schedlab.serving.engine, which imports this module)
    policy: Policy
    busy: bool
    start_pending: bool
    back_to_back: bool
    finished: int
    violations: int
    reused_tokens: int
    peak_blocks: int
    iteration_end: list[float]
    batches: list[Any]  # BatchRecords

    @property
    def has_work(self) -> bool: ...

    @property
    def load(self) -> int: ...

    @property
    def evicted_blocks(self) -> int: ...

    def arrive(self, req: Any) -> None: ...

    def plan(self, now: float) -> BatchShape | None: ...

    def duration(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float: ...

    def end(self, now: float) -> None: ...

    def close_open_segments(self) -> None: ...


def engine_kind_names() -> tuple[str, ...]:
    """The engine kinds known: the built-in one and every installed one."""
    installed = sorted({point.name for point in entry_points(group=ENTRY_POINTS)})
    return (BUILTIN_KIND, *(name for name in installed if name != BUILTIN_KIND))


def replica_factory(kind: str) -> Callable[..., Replica]:
    """The factory an installed package declares for engine ``kind``.

    Raises
    ------
    UnknownNameError
        If no installed package declares ``kind`` (the built-in kind has no factory:
        :func:`~schedlab.serving.simulator.run_engine` builds it itself).
    """
    for point in entry_points(group=ENTRY_POINTS, name=kind):
        factory: Callable[..., Replica] = point.load()
        return factory
    raise UnknownNameError("engine", kind, engine_kind_names())
