"""Engine kinds: the one interface of an engine, and where each kind is built.

The :class:`~schedlab.serving.driver.Driver` runs replicas through the small surface of
:class:`Replica`: it hands each arriving request to one (``arrive``), asks it to plan an
iteration at a time (``plan``), how long that iteration takes (``duration``), and tells
it when the iteration ended (``end``); the run's records are read back from the
requests' :class:`~schedlab.serving.request_state.RequestState` and the replica's
counters. Two kinds implement it:

* ``schedlab``: this package's engine (:class:`~schedlab.serving.engine.Engine`), whose
  batches a policy of :mod:`schedlab.serving.policies` forms;
* ``vllm``: vLLM's own scheduler, driven on the same virtual clock
  (:mod:`schedlab.integrations.vllm`), found through the entry point group
  :data:`ENTRY_POINTS` so that this layer does not import the one above it.

A cluster (:mod:`schedlab.serving.cluster`) moves requests between its nodes with their
KV, and its routers read each node's load: its nodes are :class:`HandOverReplica`, a
:class:`Replica` with that hand-over and those readings. Only schedlab's engine is one;
clusters run no other kind.

A third-party package adds a kind by declaring ``name = "module:factory"`` in that
group; the factory is called as ``factory(scenario, index=..., record_batches=...,
timing=...)`` and returns a :class:`Replica`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from schedlab.errors import UnknownNameError
from schedlab.registry import Registry

if TYPE_CHECKING:
    from schedlab.serving.cost_model import BatchShape
    from schedlab.serving.engine_config import EngineConfig
    from schedlab.serving.iteration import BatchRecord, IterationTime
    from schedlab.serving.policies import Policy
    from schedlab.serving.request_state import RequestState

__all__ = [
    "BUILTIN_KIND",
    "ENGINE_KINDS",
    "ENTRY_POINTS",
    "HandOverReplica",
    "Replica",
    "engine_kind_names",
    "replica_factory",
]

#: The kind built into this package.
BUILTIN_KIND = "schedlab"
#: Entry-point group of installed engine kinds: ``kind = "module:factory"``.
ENTRY_POINTS = "schedlab.engines"


class Replica(Protocol):
    """One replica as the driver sees it (module docstring).

    The driver sets ``busy`` (an iteration of it runs), ``start_pending`` (a start of it
    is queued) and ``back_to_back`` (that start follows its iteration's end); the replica
    sets the rest. ``plan`` returns ``None`` when there is nothing to run. The requests
    handed to ``arrive`` are the driver's; the replica writes their outcome into them
    (first and last token times, token segments, generated tokens, preemptions,
    prefilled tokens) and reads nothing of them but the request itself (index, arrival,
    prompt, output, predicted output) and what it wrote.

    Attributes
    ----------
    index
        Its number among the driver's replicas.
    config, timing, policy
        Its limits, how its iterations are timed, and the policy that forms its batches
        (its ``name``, ``chunked`` and ``stats`` are read).
    finished, violations
        Requests it finished, and requests known to miss the SLO it counts.
    reused_tokens, peak_blocks, evicted_blocks
        KV tokens taken back from the prefix cache, the most KV blocks in use at once, and
        cached blocks whose content an allocation overwrote.
    iteration_end, batches
        End time of each iteration so far, and a record of each (when asked for).
    has_work, counts
        Whether it has requests to serve, and ``(waiting, running)`` as its scheduler
        reports them to vLLM's data-parallel balancer
        (:mod:`schedlab.serving.dp_balancer`): requests not yet handed to the scheduler
        are not counted.
    """

    index: int
    config: EngineConfig
    timing: IterationTime
    policy: Policy
    busy: bool
    start_pending: bool
    back_to_back: bool
    finished: int
    reused_tokens: int
    peak_blocks: int
    iteration_end: list[float]
    batches: list[BatchRecord]

    @property
    def violations(self) -> int: ...

    @property
    def has_work(self) -> bool: ...

    @property
    def counts(self) -> tuple[int, int]: ...

    @property
    def evicted_blocks(self) -> int: ...

    def arrive(self, req: RequestState) -> None:
        """Queue the arriving request ``req``."""
        ...

    def plan(self, now: float) -> BatchShape | None:
        """Plan the iteration starting at ``now``: its batch, or ``None`` if none runs."""
        ...

    def duration(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float:
        """How long the batch ``shape`` takes (with ``group``: the lockstep step of the
        batches of all replicas)."""
        ...

    def end(self, now: float) -> None:
        """The iteration it planned last ended at ``now``: its tokens are emitted."""
        ...

    def close_open_segments(self) -> None:
        """Record the tokens of requests still running when the run stopped."""
        ...


class HandOverReplica(Replica, Protocol):
    """A cluster's node (module docstring): a :class:`Replica` that hands requests over
    to another node with their KV, and shows its load to routers.

    A request that arrives with ``hand_off`` leaves when its prefill completes, emitting
    no token; the driver collects it with ``take_handed_off`` after the iteration's end,
    moves its KV, calls ``release`` on this node once the KV has left and ``receive`` on
    the next node when it has arrived.

    Attributes
    ----------
    iteration
        The number of its next iteration (the iterations run so far).
    n_decode, decode_kv
        Running decodes, and the KV tokens they attend to at the next iteration.
    free_blocks
        KV blocks free now.
    started_s, shape
        The start and the batch of the iteration running (or of the last one run).
    """

    iteration: int
    started_s: float
    shape: BatchShape | None

    @property
    def n_decode(self) -> int: ...

    @property
    def decode_kv(self) -> int: ...

    @property
    def free_blocks(self) -> int: ...

    def arrive(self, req: RequestState, *, hand_off: bool = False) -> None:
        """Queue the arriving request ``req``; with ``hand_off``, it leaves for another
        node when its prefill completes."""
        ...

    def running_chunks(self) -> Sequence[tuple[RequestState, int]]:
        """The prefill chunks of the iteration running, ``(request, tokens)`` (none once
        it ended): what a cluster's TTFT breakdown books its seconds to."""
        ...

    def take_handed_off(self) -> list[RequestState]:
        """The requests that left in the iteration that just ended (each holds its
        blocks here until :meth:`release`)."""
        ...

    def release(self, req: RequestState) -> None:
        """Free the blocks of ``req``, handed off from here, once its KV has left."""
        ...

    def receive(self, req: RequestState, tokens: int) -> None:
        """``req`` arrives from another node with the KV of its first ``tokens`` prompt
        tokens."""
        ...

    def requests(self) -> Iterable[RequestState]:
        """The requests it holds, waiting or admitted (not those handed off)."""
        ...

    def prefill_queue(self) -> Iterable[RequestState]:
        """The requests it holds that have prompt left to prefill, in the order its
        policy is offered them: partial prefills by admission, then the waiting queue."""
        ...

    def next_decodes(self) -> BatchShape:
        """Its running decodes as its next iteration will batch them if none finishes
        at the end of the running one (no chunks)."""
        ...


#: The installed engine kinds' factories by name (:class:`~schedlab.registry.Registry`;
#: the built-in kind has none: :func:`~schedlab.serving.simulator.run_engine` builds it
#: itself).
ENGINE_KINDS: Registry[Callable[..., Replica]] = Registry(
    "engine", Callable, ENTRY_POINTS, reserved=(BUILTIN_KIND,)
)


def engine_kind_names() -> tuple[str, ...]:
    """The engine kinds known: the built-in one, then every registered or installed one."""
    return (BUILTIN_KIND, *(name for name in ENGINE_KINDS.names() if name != BUILTIN_KIND))


def replica_factory(kind: str) -> Callable[..., Replica]:
    """The factory registered or installed for engine ``kind``.

    Raises
    ------
    UnknownNameError
        If no package declares ``kind`` (the built-in kind has no factory).
    """
    if kind == BUILTIN_KIND:  # run_engine builds it: no factory is known by its name
        raise UnknownNameError("engine factory", kind, ENGINE_KINDS.names())
    if kind not in ENGINE_KINDS:
        raise UnknownNameError("engine", kind, engine_kind_names())
    return ENGINE_KINDS.get(kind)
