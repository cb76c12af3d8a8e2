"""What a router may know of a cluster: each node's sizes and times, derived from its
engine when asked, and the cluster as a router sees it.

:class:`NodeState` is the :class:`~schedlab.serving.routers.NodeView` of one node and
:class:`ClusterState` the :class:`~schedlab.serving.routers.ClusterView`; the cluster's
driver (:class:`~schedlab.serving.cluster.ClusterDriver`) keeps them and tells a node when
its state changes (:meth:`NodeState.touch`). What each load means is in
:mod:`schedlab.serving.routers`' module docstring.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np

from schedlab.serving.cost_model import BatchShape, batch_time
from schedlab.serving.engine_kinds import HandOverReplica
from schedlab.serving.kv_transfer import KVLink, LinkQueue

__all__ = ["ClusterState", "NodeState"]


#: What :meth:`NodeState._derive` derives: queued prefill tokens, outstanding tokens,
#: committed KV tokens and blocks, and the running decodes' (iterations left, blocks held
#: at the end, KV tokens at the end) in order.
_Loads = tuple[int, int, int, int, tuple[tuple[int, int, int], ...]]


class NodeState:
    """A node as routers see it (:class:`~schedlab.serving.routers.NodeView`): sizes and
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
                ready = max(source.prefill_done_after_s()[index], link.free_s)
                arrival = ready + link.kv_link.duration_s(prompt - 1)
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
    """The :class:`~schedlab.serving.routers.ClusterView` a router gets: the nodes by role,
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
