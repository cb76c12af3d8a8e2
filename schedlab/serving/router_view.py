"""What a router sees and what it answers: the arriving request (:class:`Arrival`), each
node (:class:`NodeView`) and the cluster (:class:`ClusterView`), and the :class:`Route` a
:class:`Router` returns; what each load means is in :mod:`schedlab.serving.routers`'
module docstring.

The cluster's views: :class:`NodeState` is the :class:`NodeView` of one node, derived
from its engine when asked, and :class:`ClusterState` the :class:`ClusterView`; the
cluster's driver (:class:`~schedlab.serving.cluster.ClusterDriver`) keeps them and tells a
node when its state changes (:meth:`NodeState.touch`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from schedlab.serving.cost_model import BatchShape, CostModel, batch_time
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import HandOverReplica
from schedlab.serving.kv_transfer import KVLink, LinkQueue

__all__ = [
    "ROLES",
    "Arrival",
    "ClusterState",
    "ClusterView",
    "NodeState",
    "NodeView",
    "Route",
    "Router",
]

#: Roles of a cluster's nodes.
ROLES = ("colocated", "prefill", "decode")


@dataclass(frozen=True, slots=True)
class Route:
    """Where a request goes: ``node`` prefills it; ``then`` is its decode node after a KV
    transfer (``None``: ``node`` serves it whole)."""

    node: int
    then: int | None = None


@dataclass(frozen=True, slots=True)
class Arrival:
    """An arriving request as a router sees it: no true output length.

    Attributes
    ----------
    index
        Its number in the stream (arrival order).
    arrival_s
        Its arrival time, seconds.
    prompt
        Its prompt length, tokens.
    predicted_output
        Its predicted output length (:mod:`schedlab.serving.prediction`, with the
        scenario's ``prediction_cv``; the true length when that is 0).
    prefix, prefix_block
        The chain ids of its prompt's blocks of ``prefix_block`` tokens
        (:mod:`schedlab.serving.prefix`): what a router that hashes the prompt's tokens
        in blocks of that size computes; ``None`` when the stream shares no prefixes.
    """

    index: int
    arrival_s: float
    prompt: int
    predicted_output: int
    prefix: np.ndarray | None = None
    prefix_block: int = 0


class NodeView(Protocol):
    """What a router may read of one node, now."""

    @property
    def index(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def config(self) -> EngineConfig: ...
    @property
    def model(self) -> CostModel:
        """The node's predicted cost model."""
        ...

    @property
    def tpot_s(self) -> float: ...
    @property
    def margin_s(self) -> float: ...
    @property
    def iteration(self) -> int:
        """Iterations it has run (its state changes only between iterations)."""
        ...

    @property
    def n_decode(self) -> int: ...
    @property
    def decode_kv(self) -> int: ...
    @property
    def free_blocks(self) -> int: ...
    @property
    def queued_prefill_tokens(self) -> int:
        """Prefill tokens its requests still need (not the running iteration's chunks)."""
        ...

    @property
    def outstanding_tokens(self) -> int:
        """Tokens routed here and not computed yet (module docstring)."""
        ...

    @property
    def committed_kv_tokens(self) -> int:
        """KV tokens its requests, and those bound for it, will still need at their
        predicted final sizes (module docstring)."""
        ...

    @property
    def committed_kv_blocks(self) -> int:
        """KV blocks its requests, and those bound for it, will still need at their
        predicted final sizes, each request's rounded up on its own (module docstring)."""
        ...

    @property
    def decode_releases(self) -> Sequence[tuple[int, int, int]]:
        """Its running decodes' predicted iterations left, and blocks and KV tokens held
        at their end, fewest iterations first."""
        ...

    @property
    def bound_requests(self) -> int:
        """Requests routed to it through a prefill node whose KV has not arrived."""
        ...

    @property
    def bound_arrival_s(self) -> float:
        """The earliest their KV may arrive: a transfer's end once it is on the link,
        else the end of the running iteration of the prefill node that holds the request
        (``-inf`` while that node is idle); ``inf`` when none is bound."""
        ...

    @property
    def free_seats(self) -> int:
        """``max_num_seqs`` less the requests it holds (running and waiting)."""
        ...

    @property
    def policy(self) -> str:
        """Its policy's name (``sloweave:4096``, ``sangam:1801``, ...)."""
        ...

    @property
    def queued_chunks(self) -> Sequence[tuple[int, int]]:
        """Each request it holds that is not decoding, in its policy's order (partial
        prefills by admission, then the waiting queue): ``(tokens left, tokens in KV)``."""
        ...

    @property
    def next_decodes(self) -> BatchShape:
        """Its running decodes as its next iteration will see them if none finishes:
        their count, KV and longest and shortest KV (no chunks)."""
        ...

    @property
    def busy_until_s(self) -> float:
        """Predicted end of its running iteration (``-inf`` when idle)."""
        ...

    @property
    def link_free_s(self) -> float:
        """When its outgoing link's queued transfers end (prefill nodes)."""
        ...


class ClusterView(Protocol):
    """What a router may read of the cluster."""

    @property
    def now_s(self) -> float: ...
    @property
    def nodes(self) -> Sequence[NodeView]: ...
    @property
    def prefill_nodes(self) -> Sequence[NodeView]: ...
    @property
    def decode_nodes(self) -> Sequence[NodeView]: ...
    @property
    def rng(self) -> np.random.Generator:
        """The router's own seeded generator."""
        ...

    @property
    def memo(self) -> dict[Hashable, Any]:
        """Scratch space for a router's caches over one run (keys name their owner)."""
        ...

    def transfer_s(self, tokens: int) -> float:
        """Seconds a transfer of ``tokens`` KV tokens takes on an idle link."""
        ...


class Router(Protocol):
    """Picks the route of each arriving request."""

    def __call__(self, request: Arrival, cluster: ClusterView) -> Route: ...


#: What :meth:`NodeState._derive` derives: queued prefill tokens, outstanding tokens,
#: committed KV tokens and blocks, and the running decodes' (iterations left, blocks held
#: at the end, KV tokens at the end) in order.
_Loads = tuple[int, int, int, int, tuple[tuple[int, int, int], ...]]


class NodeState:
    """A node as routers see it (:class:`NodeView`): sizes and
    times a real router could know, derived from the engine's state when asked (and
    cached until the node's state changes, :meth:`touch`), never a handle on the engine
    or its requests."""

    __slots__ = (
        "_bound",
        "_busy_at",
        "_busy_until",
        "_done_at",
        "_engine",
        "_loads",
        "_sent",
        "_version",
        "config",
        "index",
        "link",
        "margin_s",
        "model",
        "role",
        "tpot_s",
    )

    def __init__(
        self, engine: HandOverReplica, role: str, tpot_s: float, link: LinkQueue | None
    ) -> None:
        self._engine = engine
        self.index = engine.index
        self.role = role
        self.config = engine.config
        self.model = engine.timing.predicted
        self.margin_s = self.model.margin_s
        self.tpot_s = tpot_s
        self.link = link
        # requests routed here through a prefill node whose KV has not arrived yet:
        # index -> (prompt, predicted output)
        self._bound: dict[int, tuple[int, int, NodeState]] = {}
        self._sent: dict[int, float] = {}  # bound requests on the link: their arrival
        self._done_at: tuple[int, dict[int, float]] = (-1, {})
        self._version = 0
        self._loads: tuple[int, _Loads] = (-1, (0, 0, 0, 0, ()))
        self._busy_at = -1
        self._busy_until = 0.0

    def touch(self) -> None:
        """Its state changed (an arrival, a start, an end, a transfer)."""
        self._version += 1

    def bind(self, index: int, prompt: int, predicted_output: int, source: NodeState) -> None:
        """A request prefilled on node ``source`` will decode here."""
        self._bound[index] = (prompt, predicted_output, source)
        self.touch()

    def sent(self, index: int, end_s: float) -> None:
        """The KV of bound request ``index`` is on the link and arrives at ``end_s``."""
        self._sent[index] = end_s

    def unbind(self, index: int) -> None:
        """Its KV arrived (it is this node's waiting request now)."""
        del self._bound[index]
        del self._sent[index]
        self.touch()

    def _derive(self) -> _Loads:
        r"""(queued prefill tokens, outstanding tokens, committed KV tokens, committed KV
        blocks, decode releases), from the engine's requests (module docstring of
        :mod:`schedlab.serving.routers`).

        A request here with :math:`g` tokens generated, predicted output :math:`\hat o`
        and :math:`h` KV tokens held has :math:`t - d` prefill tokens left (its target
        and done), :math:`e = \max(\hat o - g, 1)` predicted tokens left to emit (at least
        one: it has not finished) and reaches :math:`P + g + e - 1` KV tokens; a request
        handed off from here emits none here and reaches its prompt. A request bound for
        this node (prefilled elsewhere, KV not arrived) will need one prompt token,
        :math:`\hat o` tokens to emit and :math:`P + \hat o - 1` KV tokens here.
        """
        if self._loads[0] == self._version:
            return self._loads[1]
        engine = self._engine
        size = self.config.block_size  # blocks of t tokens: -(-t // size)
        i = engine.iteration
        queued = emit = growth = growth_blocks = 0
        releases: list[tuple[int, int, int]] = []
        for req in engine.requests():  # RequestState.generated_by and kv_tokens, inlined
            queued += req.target - req.done
            decoding = req.decoding
            g = req.gen_at_join + (i - req.join_iter) if decoding else req.generated
            if req.hand_off:
                final, left = req.prompt, 0
            else:
                left = max(req.predicted_output - g, 1)
                final = req.prompt + g + left - 1
            emit += left
            held = (req.prompt + g - 1 if decoding else req.done) if req.admitted else 0
            growth += max(final - held, 0)
            growth_blocks += max(-(-final // size) + (held // -size), 0)
            if decoding:
                releases.append((left, -(-final // size), final))
        for prompt, predicted, _ in self._bound.values():
            emit += 1 + predicted
            growth += prompt + predicted - 1
            growth_blocks += -(-(prompt + predicted - 1) // size)
        releases.sort()
        loads = (queued, queued + emit, growth, growth_blocks, tuple(releases))
        self._loads = (self._version, loads)
        return loads

    @property
    def iteration(self) -> int:
        return self._engine.iteration

    @property
    def n_decode(self) -> int:
        return self._engine.n_decode

    @property
    def decode_kv(self) -> int:
        return self._engine.decode_kv

    @property
    def free_blocks(self) -> int:
        return self._engine.free_blocks

    @property
    def queued_prefill_tokens(self) -> int:
        return self._derive()[0]

    @property
    def outstanding_tokens(self) -> int:
        return self._derive()[1]

    @property
    def committed_kv_tokens(self) -> int:
        return self._derive()[2]

    @property
    def committed_kv_blocks(self) -> int:
        return self._derive()[3]

    @property
    def decode_releases(self) -> tuple[tuple[int, int, int], ...]:
        return self._derive()[4]

    @property
    def policy(self) -> str:
        return self._engine.policy.name

    @property
    def next_decodes(self) -> BatchShape:
        return self._engine.next_decodes()

    @property
    def queued_chunks(self) -> tuple[tuple[int, int], ...]:
        return tuple((req.target - req.done, req.done) for req in self._engine.prefill_queue())

    @property
    def bound_requests(self) -> int:
        return len(self._bound)

    @property
    def bound_arrival_s(self) -> float:
        sent = self._sent
        earliest = math.inf
        for index, (prompt, _, source) in self._bound.items():
            if index in sent:
                arrival = sent[index]
            else:
                link = source.link
                assert link is not None  # a prefill node
                arrival = link.estimate_end_s(prompt - 1, source.prefill_done_after_s()[index])
            earliest = min(earliest, arrival)
        return earliest

    def prefill_done_after_s(self) -> dict[int, float]:
        r"""A prefill node's lower bound on when each of its requests' prefill completes:
        its running iteration's end if its last chunk runs there, else that end plus
        :math:`\lceil A / T \rceil` iterations of at least :math:`\hat T(0, 0, (1, 0))`,
        :math:`A` the queued prefill tokens of it and of the requests ahead of it in the
        policy's order (partial prefills by admission, then the waiting queue) and
        :math:`T` the token budget (an iteration prefills at most :math:`T` tokens and
        lasts at least a one-token batch, for a cost model monotone in its batch)."""
        if self._done_at[0] == self._version:
            return self._done_at[1]
        engine = self._engine
        start = self.busy_until_s
        least = self.model.iteration_time(0, 0, ((1, 0),))
        budget = self.config.max_num_batched_tokens
        done: dict[int, float] = {}
        ahead = 0
        for req in engine.prefill_queue():
            ahead += req.target - req.done
            done[req.index] = start + -(-ahead // budget) * least
        self._done_at = (self._version, done)
        return done

    @property
    def free_seats(self) -> int:
        engine = self._engine
        return self.config.max_num_seqs - sum(1 for _ in engine.requests())

    @property
    def busy_until_s(self) -> float:
        engine = self._engine
        if not engine.busy or engine.shape is None:
            return -math.inf  # idle: a router takes the later of this and now
        if self._busy_at != engine.iteration:
            self._busy_at = engine.iteration
            self._busy_until = engine.started_s + batch_time(self.model, engine.shape)
        return self._busy_until

    @property
    def link_free_s(self) -> float:
        return self.link.free_s if self.link is not None else 0.0


class ClusterState:
    """The :class:`ClusterView` a router gets: the nodes by role,
    the time now, the link's transfer time, a seeded generator and a scratch memo."""

    __slots__ = ("decode_nodes", "kv_link", "memo", "nodes", "now_s", "prefill_nodes", "rng")

    def __init__(self, nodes: list[NodeState], kv_link: KVLink | None, seed: int) -> None:
        self.nodes = tuple(nodes)
        self.prefill_nodes = tuple(n for n in nodes if n.role == "prefill")
        self.decode_nodes = tuple(n for n in nodes if n.role == "decode")
        self.kv_link = kv_link
        self.now_s = 0.0
        self.memo: dict[Hashable, Any] = {}
        self.rng = np.random.default_rng([0x726F757465, seed])  # the router's own stream

    def transfer_s(self, tokens: int) -> float:
        return 0.0 if self.kv_link is None else self.kv_link.duration_s(tokens)
