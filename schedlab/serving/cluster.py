r"""A cluster of engines: colocated, prefill-only and decode-only nodes in one event loop.

Each node is an :class:`~schedlab.serving.engine.Engine` with its own KV cache, limits,
policy and cost model; one :class:`ClusterDriver` (a :class:`~schedlab.serving.driver.Driver`
with a router and KV transfers) runs them all, deterministically under a seed, through
the hand-over protocol :class:`~schedlab.serving.engine_kinds.HandOverReplica`. The model
of the cluster is ours (its KV hand-off follows vLLM's, :mod:`schedlab.serving.kv_transfer`).

Roles
    A **colocated** node serves whole requests, like a single engine. A **prefill** node
    prefills the prompts routed to it and hands each request off when its prefill
    completes: the request leaves its seat, emits no token there, and keeps its KV blocks
    until its transfer has left (:meth:`~schedlab.serving.engine.Engine.release`). The KV
    of its first :math:`P - 1` tokens crosses the prefill node's link
    (:mod:`schedlab.serving.kv_transfer`); at its end the request joins the **decode**
    node's waiting queue holding those tokens, is admitted there like any request (its
    blocks are allocated then), computes its last prompt token as a one-token chunk and
    emits its first token. A decode node also serves whole requests a router deflects to
    it, prefilling them among its decodes as its policy allows.
Routing
    A router (:mod:`schedlab.serving.routers`) picks each request's route when it arrives.
Node specification
    ``2P2D`` is two prefill and two decode nodes (numbered in that order), ``4C`` four
    colocated nodes; a cluster is either colocated or prefill/decode (:func:`parse_nodes`).
TTFT breakdown
    Of a request's TTFT :math:`t_1 - a` (arrival :math:`a`, first token :math:`t_1`):

    * **prefill**: the execution time of the iterations that ran its prefill chunks
      before its first token, on any node (recomputation after a preemption included);
      for a request served whole, the iteration that emitted its first token is the one
      that ran its last chunk, and counts here;
    * **transfer**: for a handed-off request, from the end of its prefill :math:`r` to
      its KV's arrival at the decode node :math:`x`: the wait for the link (transfers
      queue, :mod:`schedlab.serving.kv_transfer`) and the transfer itself;
    * **first decode**: for a handed-off request, the execution time of the decode
      node's iteration that computed its last prompt token and emitted its first token;
    * **queue**: all the rest, the time it waited and nothing of it ran: before and
      between its prefill chunks up to :math:`r` (``queue_prefill_side``), and on the
      decode node from :math:`x` to the start of its first-token iteration, less any
      recomputation there (``queue_decode_side``).

    The four sum to the TTFT (up to the rounding of float differences, under a
    nanosecond); a request served whole has no transfer and no first decode. An
    iteration's execution time is its end minus its start, as the engine logs it
    (:class:`~schedlab.serving.iteration.BatchRecord`), so the auditor of
    ``tests/serving/audit.py`` recomputes every component from the logs.

With one colocated node and any router, the cluster is exactly
:func:`~schedlab.serving.simulator.run_engine` (``tests/serving/test_cluster.py``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.arguments_check import check_type, check_types
from schedlab.errors import ServingError
from schedlab.llm.interconnect import parse_link
from schedlab.llm.models import get_model_shape, kv_bytes_per_token
from schedlab.serving.cost_model import (
    BatchShape,
    CostModel,
    batch_time,
    get_cost_model,
    hardware_of,
)
from schedlab.serving.driver import EVENT_KINDS, Driver, EngineRun
from schedlab.serving.engine import Engine
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import HandOverReplica
from schedlab.serving.iteration import IterationTime
from schedlab.serving.kv_transfer import KVLink, LinkQueue, Transfer
from schedlab.serving.metrics import Distribution, RequestRecord, Summary, summarize
from schedlab.serving.policies import get_policy
from schedlab.serving.prediction import predict_outputs
from schedlab.serving.request_state import RequestState
from schedlab.serving.routers import ROLES, Arrival, Route, Router, get_router
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import check_stops, check_window
from schedlab.serving.workloads import MAX_REQUESTS, RequestStream, make_workload
from schedlab.tables import to_pandas

__all__ = [
    "BREAKDOWN",
    "DEFAULT_LINK",
    "DEFAULT_MODEL",
    "QUEUE_SIDES",
    "Cluster",
    "ClusterDriver",
    "ClusterResult",
    "ClusterRun",
    "Node",
    "is_sloweave",
    "kv_link",
    "parse_nodes",
    "run_cluster",
    "simulate_cluster",
]

#: The components of the TTFT breakdown, in the order they happen.
BREAKDOWN = ("queue", "prefill", "transfer", "first_decode")

#: The link between nodes when none is given (a 200 Gb/s NIC's order of magnitude).
DEFAULT_LINK = "25GB/s,20us"

#: The model whose KV bytes per token a transfer moves, when none is named (the model of
#: the shipped calibrated cost models).
DEFAULT_MODEL = "llama-3.1-8b"

#: The policy of prefill nodes when none is named (no decodes run there, so chunked
#: prefill up to the token budget is all a policy can do).
DEFAULT_PREFILL_POLICY = "vllm"

#: The most nodes a specification may name.
MAX_NODES = 256

_TRANSFER = 2  # event kind of a KV transfer's end: after arrivals, before starts
if _TRANSFER in EVENT_KINDS.values() or not (
    EVENT_KINDS["arrival"] < _TRANSFER < EVENT_KINDS["start"]
):
    raise ImportError(
        f"schedlab.serving.cluster: the KV transfer's event kind {_TRANSFER} must fall "
        f"between the engine's arrivals and starts, {EVENT_KINDS}"
    )

#: The queue's two sides (they sum to its ``queue``): before the KV hand-off (waiting
#: for and between prefill chunks), and on the decode node (from the KV's arrival to the
#: first-token iteration's start, less any recomputation after a preemption there).
QUEUE_SIDES = ("queue_prefill_side", "queue_decode_side")

_LETTERS = {"C": "colocated", "P": "prefill", "D": "decode"}


@dataclass(frozen=True)
class Node:
    """One node: its role, and what it does differently from the cluster's scenario.

    Attributes
    ----------
    role
        One of :data:`~schedlab.serving.routers.ROLES`.
    policy, engine, cost_model
        Its policy, limits and predicted cost model (``None``: the cluster's).
    """

    role: str
    policy: str | None = None
    engine: EngineConfig | None = None
    cost_model: str | CostModel | None = None

    def __post_init__(self) -> None:
        check_types(
            "node",
            role=(self.role, (str,)),
            policy=(self.policy, (str, type(None))),
            engine=(self.engine, (EngineConfig, type(None))),
            cost_model=(self.cost_model, (str, CostModel, type(None))),
        )
        if self.role not in ROLES:
            raise ServingError(f"node role: expected one of {', '.join(ROLES)}, got {self.role!r}")


def is_sloweave(policy: str) -> bool:
    """Whether ``policy`` forms SLOWeave's deadline-safe chunks (``sloweave``,
    ``sloweave-kv``, with or without their ``:CMAX``, or a policy registered as
    :attr:`~schedlab.serving.policies.PolicySpec.deadline_safe`): the decode-node policies
    ``deflect`` assumes."""
    return get_policy(policy).deadline_safe


def parse_nodes(spec: str, flag: str = "--nodes") -> tuple[Node, ...]:
    """Nodes from ``2P2D``, ``4C``, ``1P3D`` (module docstring).

    Raises
    ------
    ServingError
        Naming ``flag``, for another shape, zero or too many nodes, or a cluster that is
        both colocated and prefill/decode, or has prefill nodes without decode nodes (or
        the other way round).
    InputTypeError
        (a ``TypeError``) for a ``spec`` or ``flag`` that is no string.
    """
    check_types("parse_nodes", spec=(spec, (str,)), flag=(flag, (str,)))
    text = spec.strip().upper()
    if not re.fullmatch(r"(?:\d+[CPD])+", text):
        raise ServingError(
            f"{flag}: cannot read {spec!r}; write counts and roles, e.g. 2P2D (2 prefill + "
            "2 decode nodes) or 4C (4 colocated)"
        )
    counts = dict.fromkeys(_LETTERS, 0)
    for number, letter in re.findall(r"(\d+)([CPD])", text):
        counts[letter] += int(number)
    total = sum(counts.values())
    if not 1 <= total <= MAX_NODES:
        raise ServingError(f"{flag}: {spec!r} names {total} nodes; give 1 to {MAX_NODES}")
    if counts["C"] and (counts["P"] or counts["D"]):
        raise ServingError(
            f"{flag}: {spec!r} mixes colocated and prefill/decode nodes; give one kind"
        )
    if bool(counts["P"]) != bool(counts["D"]):
        raise ServingError(f"{flag}: {spec!r} needs both prefill (P) and decode (D) nodes")
    return tuple(Node(_LETTERS[k]) for k in "CPD" for _ in range(counts[k]))


def kv_link(link: str = DEFAULT_LINK, model: str = DEFAULT_MODEL, layers: bool = False) -> KVLink:
    """The KV link of ``link`` text (``25GB/s,20us``) for ``model``'s KV bytes per token,
    pipelined over its layers if ``layers``.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type.
    """
    check_types("kv_link", link=(link, (str,)), model=(model, (str,)), layers=(layers, (bool,)))
    shape = get_model_shape(model)
    return KVLink(parse_link(link), kv_bytes_per_token(shape), shape.layers if layers else None)


@dataclass(frozen=True)
class Cluster:
    """Everything a cluster run needs besides its requests.

    Attributes
    ----------
    nodes
        The nodes, numbered in order.
    router
        A name of :data:`~schedlab.serving.routers.ROUTERS`.
    scenario
        Engine limits, cost models, SLO, noise and seed of every node; its policy is the
        colocated nodes'.
    link
        The KV link of prefill nodes (default :func:`kv_link`'s).
    prefill_policy, decode_policy
        Policies of prefill and decode nodes (``None`` for decode nodes: the router's
        choice, :class:`~schedlab.serving.routers.RouterSpec`).
    """

    nodes: tuple[Node, ...]
    router: str = "round-robin"
    scenario: Scenario = field(default_factory=Scenario)
    link: KVLink | None = None
    prefill_policy: str = DEFAULT_PREFILL_POLICY
    decode_policy: str | None = None

    def __post_init__(self) -> None:
        check_types(
            "cluster",
            nodes=(self.nodes, (tuple, list)),
            router=(self.router, (str,)),
            scenario=(self.scenario, (Scenario,)),
            link=(self.link, (KVLink, type(None))),
            prefill_policy=(self.prefill_policy, (str,)),
            decode_policy=(self.decode_policy, (str, type(None))),
        )
        for k, node in enumerate(self.nodes):
            check_type(node, (Node,), f"cluster: nodes[{k}]")
        if not self.nodes:
            raise ServingError("cluster: needs at least one node")
        spec = get_router(self.router)
        roles = {node.role for node in self.nodes}
        if "colocated" in roles and len(roles) > 1:
            raise ServingError("cluster: colocated nodes with prefill/decode nodes")
        if ("prefill" in roles) != ("decode" in roles):
            raise ServingError("cluster: prefill nodes need decode nodes and back")
        if spec.disaggregated and "colocated" in roles:
            raise ServingError(
                f"router {self.router!r}: needs prefill and decode nodes (e.g. --nodes 2P2D)"
            )
        scenario = self.scenario
        if scenario.replicas != 1 or scenario.lockstep:
            raise ServingError("cluster: a node is one engine; give replicas as nodes")
        if not isinstance(scenario.policy, str):
            raise ServingError("cluster: the scenario's policy must be a name")
        for name in (scenario.policy, self.prefill_policy, self.decode_policy):
            if name is not None:
                scenario.with_(policy=name).build_policy()  # an unknown name is refused
        for node in self.nodes:
            engine = node.engine or scenario.engine
            if node.role != "colocated" and engine.async_scheduling:
                raise ServingError(
                    f"cluster: {node.role} nodes do not model asynchronous scheduling"
                )
            policy = self.policy_of(node)
            self.node_scenario(node).build_policy()
            if self.router == "deflect" and node.role == "decode" and not is_sloweave(policy):
                raise ServingError(
                    f"router 'deflect': decode node policy {policy!r}; deflect's estimate "
                    "and guarantee (proofs/deflect.md) assume a SLOWeave policy there "
                    "(sloweave, sloweave-kv)"
                )

    @property
    def reads_predictions(self) -> bool:
        """Whether its router or a node policy reads predicted output lengths
        (:attr:`~schedlab.serving.routers.RouterSpec.reads_predictions`: a ``"choosing"``
        router only with two or more colocated or decode nodes to choose from;
        :attr:`~schedlab.serving.policies.PolicySpec.reads_predictions`)."""
        if any(get_policy(self.policy_of(node)).reads_predictions for node in self.nodes):
            return True
        reads = get_router(self.router).reads_predictions
        choices = sum(node.role != "prefill" for node in self.nodes)
        return reads == "always" or (reads == "choosing" and choices >= 2)

    @property
    def label(self) -> str:
        """``deflect@2P2D``: the router and the node counts."""
        counts = {r: sum(n.role == r for n in self.nodes) for r in ROLES}
        letters = "".join(
            f"{counts[role]}{letter}" for letter, role in _LETTERS.items() if counts[role]
        )
        return f"{self.router}@{letters}"

    def policy_of(self, node: Node) -> str:
        """The policy ``node`` runs."""
        if node.policy is not None:
            return node.policy
        if node.role == "prefill":
            return self.prefill_policy
        if node.role == "decode":
            return self.decode_policy or get_router(self.router).decode_policy
        assert isinstance(self.scenario.policy, str)
        return self.scenario.policy

    def node_scenario(self, node: Node) -> Scenario:
        """The scenario of one node (its policy, limits and cost model)."""
        changes: dict[str, Any] = {"policy": self.policy_of(node)}
        if node.engine is not None:
            changes["engine"] = node.engine
        if node.cost_model is not None:
            changes["cost_model"] = node.cost_model
        return self.scenario.with_(**changes)


#: What :meth:`_NodeState._derive` derives: queued prefill tokens, outstanding tokens,
#: committed KV tokens and blocks, and the running decodes' (iterations left, blocks held
#: at the end, KV tokens at the end) in order.
_Loads = tuple[int, int, int, int, tuple[tuple[int, int, int], ...]]


class _NodeState:
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
        self._bound: dict[int, tuple[int, int, _NodeState]] = {}
        self._sent: dict[int, float] = {}  # bound requests on the link: their arrival
        self._done_at: tuple[int, dict[int, float]] = (-1, {})
        self._version = 0
        self._loads: tuple[int, _Loads] = (-1, (0, 0, 0, 0, ()))
        self._busy_at = -1
        self._busy_until = 0.0

    def touch(self) -> None:
        """Its state changed (an arrival, a start, an end, a transfer)."""
        self._version += 1

    def bind(self, index: int, prompt: int, predicted_output: int, source: _NodeState) -> None:
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


class _ClusterView:
    """The :class:`~schedlab.serving.routers.ClusterView` a router gets."""

    __slots__ = ("decode_nodes", "kv_link", "memo", "nodes", "now_s", "prefill_nodes", "rng")

    def __init__(self, nodes: list[_NodeState], kv_link: KVLink | None, seed: int) -> None:
        self.nodes = tuple(nodes)
        self.prefill_nodes = tuple(n for n in nodes if n.role == "prefill")
        self.decode_nodes = tuple(n for n in nodes if n.role == "decode")
        self.kv_link = kv_link
        self.now_s = 0.0
        self.memo: dict[Hashable, Any] = {}
        self.rng = np.random.default_rng([0x726F757465, seed])  # the router's own stream

    def transfer_s(self, tokens: int) -> float:
        return 0.0 if self.kv_link is None else self.kv_link.duration_s(tokens)


class ClusterDriver(Driver):
    """The event loop of a cluster (module docstring): arrivals go where the router says,
    prefill nodes hand requests off, KV transfers queue on links.

    Parameters
    ----------
    stream, engines
        The requests and the nodes' engines (numbered as the nodes).
    roles
        Each node's role.
    router
        Picks each request's route.
    link
        The KV link (needed with prefill nodes).
    tpot_s
        The TPOT target routers estimate with.
    seed
        Seed of the router's generator.
    time_routing
        Measure every router call (``time.perf_counter``) into :attr:`routing_s`.
    trace_loads
        Record every node's queued prefill and outstanding tokens as each router call
        saw them, into :attr:`loads` (for the auditor).
    **options
        As for :class:`~schedlab.serving.driver.Driver`.
    """

    engines: Sequence[HandOverReplica]

    def __init__(
        self,
        stream: RequestStream,
        engines: Sequence[HandOverReplica],
        roles: Sequence[str],
        router: Router,
        *,
        link: KVLink | None,
        tpot_s: float,
        seed: int = 0,
        time_routing: bool = False,
        trace_loads: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(stream, engines, **options)
        if "prefill" in roles and link is None:
            raise ServingError("cluster: prefill nodes need a KV link")
        self.roles = tuple(roles)
        self.router = router
        self.link = link
        self.nodes = [
            _NodeState(
                e,
                role,
                tpot_s,
                LinkQueue(link, e.index) if role == "prefill" and link is not None else None,
            )
            for e, role in zip(engines, roles, strict=True)
        ]
        self.view = _ClusterView(self.nodes, link, seed)
        self.decode_of = [-1] * len(self.requests)  # decode node after a transfer
        self.kv_ready_s = [math.nan] * len(self.requests)
        self.routes: list[Route] = []
        self.transfers: list[Transfer] = []
        self.time_routing = time_routing
        self.routing_s: list[float] = []
        self.trace_loads = trace_loads
        self.loads: list[tuple[tuple[int, int], ...]] = []

    def _arrive(self, t: float, req: RequestState) -> None:
        view = self.view
        view.now_s = t
        arrival = Arrival(
            req.index,
            req.arrival_s,
            req.prompt,
            req.predicted_output,
            req.prefix,
            req.prefix_block,
        )
        if self.time_routing:
            started = time.perf_counter()
            route = self.router(arrival, view)
            self.routing_s.append(time.perf_counter() - started)
        else:
            route = self.router(arrival, view)
        self._check(route, req.index)
        self.routes.append(route)
        if self.trace_loads:
            self.loads.append(
                tuple((n.queued_prefill_tokens, n.outstanding_tokens) for n in self.nodes)
            )
        node = self.nodes[route.node]
        if route.then is not None:
            self.decode_of[req.index] = route.then
            self.nodes[route.then].bind(req.index, req.prompt, req.predicted_output, node)
        req.replica = route.node
        self.engines[route.node].arrive(req, hand_off=route.then is not None)
        node.touch()
        self._wake(t, self.engines[route.node])

    def _check(self, route: Route, index: int) -> None:
        roles = self.roles
        ok = 0 <= route.node < len(roles)
        if ok and route.then is None:
            ok = roles[route.node] in ("colocated", "decode")
        elif ok:
            assert route.then is not None
            ok = 0 <= route.then < len(roles) and (roles[route.node], roles[route.then]) == (
                "prefill",
                "decode",
            )
        if not ok:
            raise ServingError(
                f"router: request {index} routed to {route} of nodes {list(roles)}; a "
                "request goes whole to a colocated or decode node, or from a prefill node "
                "to a decode node"
            )

    def _start(self, t: float, index: int) -> None:
        super()._start(t, index)
        self.nodes[index].touch()

    def _end(self, t: float, index: int) -> None:
        engine = self.engines[index]
        node = self.nodes[index]
        started = engine.started_s
        super()._end(t, index)
        node.touch()
        for req in engine.take_handed_off():
            assert node.link is not None
            target = self.decode_of[req.index]
            transfer = node.link.send(req.index, target, req.prompt - 1, t, started)
            self.nodes[target].sent(req.index, transfer.end_s)
            self.transfers.append(transfer)
            self._push(transfer.end_s, _TRANSFER, req.index)

    def _event(self, t: float, kind: int, index: int) -> None:
        if kind != _TRANSFER:
            super()._event(t, kind, index)
            return
        req = self.requests[index]
        source = self.engines[req.replica]
        source.release(req)
        self.nodes[req.replica].touch()
        if source.has_work:  # it may have waited for these blocks
            self._wake(t, source)
        target = self.decode_of[index]
        req.replica = target
        self.kv_ready_s[index] = t
        node = self.nodes[target]
        self.engines[target].receive(req, req.prompt - 1)
        node.unbind(index)
        self._wake(t, self.engines[target])

    def breakdown(self) -> dict[str, np.ndarray]:
        r"""Each request's TTFT breakdown (module docstring), seconds, with the queue's two
        sides (:data:`QUEUE_SIDES`); ``nan`` where it did not get a first token."""
        names = (*BREAKDOWN, *QUEUE_SIDES)
        parts: dict[str, list[float]] = {name: [] for name in names}
        for req in self.requests:
            first = req.first_token_s
            arrived = self.kv_ready_s[req.index]
            prefill = req.prefill_exec_s
            if math.isnan(first):
                values = [math.nan] * len(names)
            elif math.isnan(arrived):  # served whole where it arrived
                wait = first - req.arrival_s - prefill
                values = [wait, prefill, 0.0, 0.0, wait, 0.0]
            else:
                ready = req.prefill_end_s
                before = ready - req.arrival_s - req.prefill_side_exec_s
                after = first - arrived - req.first_decode_s
                after -= prefill - req.prefill_side_exec_s  # recomputed after a preemption
                values = [
                    before + after,
                    prefill,
                    arrived - ready,
                    req.first_decode_s,
                    before,
                    after,
                ]
            for name, value in zip(names, values, strict=True):
                parts[name].append(value)
        return {name: np.asarray(values, dtype=float) for name, values in parts.items()}


@dataclass(frozen=True)
class ClusterRun:
    """Raw outcome of :func:`run_cluster`.

    Attributes
    ----------
    run
        The nodes' run as one :class:`~schedlab.serving.driver.EngineRun`: a record's
        ``replica`` is the node that emitted its tokens, and ``iteration_end_s`` and
        ``batches`` hold node 0's iterations, then node 1's, ...
    roles
        Each node's role.
    routes
        Each request's route, in arrival order.
    transfers
        Every KV transfer, in the order they were queued.
    breakdown
        Per-request TTFT breakdown        (:data:`BREAKDOWN`, then :data:`QUEUE_SIDES`), seconds.
    routing_s
        Seconds of each router call, when measured.
    loads
        Per router call, each node's ``(queued prefill, outstanding)`` tokens as the
        router saw them (with ``record_batches``).
    cache_hits
        Per request, the prompt tokens its first admission found in a node's prefix
        cache (:attr:`~schedlab.serving.request_state.RequestState.cache_hits`).
    node_hits
        Per node, the sum of those hits there.
    """

    run: EngineRun
    roles: tuple[str, ...]
    routes: tuple[Route, ...]
    transfers: tuple[Transfer, ...]
    breakdown: dict[str, np.ndarray] = field(repr=False)
    routing_s: np.ndarray = field(repr=False)
    loads: tuple[tuple[tuple[int, int], ...], ...] = field(default=(), repr=False)
    cache_hits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    node_hits: tuple[int, ...] = ()

    @property
    def hit_rate(self) -> float:
        """Prompt tokens found in a prefix cache at first admission over all prompt
        tokens (vLLM's prefix-cache hit rate, ``vllm/v1/metrics/stats.py``,
        ``PrefixCacheStats``: hits over queried tokens of new requests)."""
        prompts = sum(r.prompt for r in self.run.records)
        return float(self.cache_hits.sum()) / prompts if prompts else math.nan


def run_cluster(
    stream: RequestStream,
    cluster: Cluster,
    *,
    stop_at_s: float | None = None,
    record_batches: bool = False,
    time_routing: bool = False,
) -> ClusterRun:
    """Simulate ``stream`` on ``cluster``.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type.
    ServingError
        For a request larger than a node's KV cache, or a router that routes wrongly; a
        stop time that is not finite and ``>= 0``.
    """
    check_types(
        "run_cluster",
        stream=(stream, (RequestStream,)),
        cluster=(cluster, (Cluster,)),
        record_batches=(record_batches, (bool,)),
        time_routing=(time_routing, (bool,)),
    )
    check_stops("run_cluster", stop_at_s, None)
    scenario = cluster.scenario
    link = cluster.link
    roles = [node.role for node in cluster.nodes]
    if link is None and "prefill" in roles:
        link = kv_link()
    engines = []
    for k, node in enumerate(cluster.nodes):
        own = cluster.node_scenario(node)
        model = own.predicted()
        timing = IterationTime(model, own.actual(), own.noise_cv, own.seed)
        engine = Engine(
            own.build_policy(model),
            own.engine,
            timing,
            slo=own.slo,
            index=k,
            record_batches=record_batches,
        )
        engines.append(engine)
    driver = ClusterDriver(
        stream,
        engines,
        roles,
        get_router(cluster.router).router,
        link=link,
        tpot_s=scenario.slo.tpot_s,
        seed=scenario.seed,
        time_routing=time_routing,
        trace_loads=record_batches,
        stop_at_s=stop_at_s,
        predictions=predict_outputs(scenario.prediction_spec, stream.output, scenario.seed),
    )
    run = driver.result(driver.run())
    return ClusterRun(
        run,
        tuple(roles),
        tuple(driver.routes),
        tuple(driver.transfers),
        driver.breakdown(),
        np.asarray(driver.routing_s, dtype=float),
        tuple(driver.loads),
        np.asarray([req.cache_hits for req in driver.requests], dtype=np.int64),
        tuple(engine.prefix_hits for engine in engines),
    )


@dataclass(frozen=True)
class ClusterResult:
    """A cluster simulation: records, summary, TTFT breakdown, the raw run.

    Attributes
    ----------
    records, summary
        As for one engine (:class:`~schedlab.serving.simulator.SimulationResult`).
    breakdown
        Each component's distribution over requests that got a first token
        (:data:`BREAKDOWN`, then :data:`QUEUE_SIDES`).
    tail_share
        Each component's share of the TTFT summed over the requests whose TTFT is at
        least the P95 TTFT (the slow first tokens).
    run
        The raw run.
    label
        ``router@nodes``.
    wall_s
        Wall-clock seconds of the simulation.
    """

    records: tuple[RequestRecord, ...]
    summary: Summary
    breakdown: dict[str, Distribution]
    tail_share: dict[str, float]
    run: ClusterRun = field(repr=False)
    label: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """One JSON object: the headline figures, the breakdown (seconds) and the
        summary."""
        s = self.summary

        def number(x: float) -> float | None:
            return None if math.isnan(x) else x

        routing = self.run.routing_s
        hits = self.run.cache_hits
        return {
            "cluster": self.label,
            "nodes": list(self.run.roles),
            "ttft_mean_s": number(s.ttft.mean),
            "ttft_p95_s": number(s.ttft.p95),
            "ttft_p99_s": number(s.ttft.p99),
            "latency_mean_s": number(s.latency.mean),
            "attainment": number(s.attainment),
            "breakdown": {
                name: {
                    "mean": number(d.mean),
                    "p50": number(d.p50),
                    "p95": number(d.p95),
                    "p99": number(d.p99),
                }
                for name, d in self.breakdown.items()
                if name in BREAKDOWN
            },
            "queue_sides": {
                name: {"mean": number(d.mean), "p95": number(d.p95)}
                for name, d in self.breakdown.items()
                if name in QUEUE_SIDES
            },
            "tail_share": {k: number(v) for k, v in self.tail_share.items()},
            "transfers": len(self.run.transfers),
            "deflected": sum(
                r.then is None and self.run.roles[r.node] == "decode" for r in self.run.routes
            ),
            "prefix_cache": {
                "hit_rate": number(self.run.hit_rate),
                "hit_tokens": {
                    "mean": number(float(hits.mean())) if hits.size else None,
                    "p95": number(float(np.percentile(hits, 95))) if hits.size else None,
                },
                "node_hit_tokens": list(self.run.node_hits),
            },
            "routing_ms": _routing_ms(routing),
            "summary": s.to_dict(),
            "wall_s": self.wall_s,
        }

    def row(self) -> dict[str, Any]:
        """One flat row for tables and CSV: the headline figures of :meth:`to_dict`, each
        breakdown component's mean and P95 (``queue_mean_s``...), its share of the tail's
        TTFT (``queue_tail_share``) and the prefix-cache hit rate, in seconds."""
        data = self.to_dict()
        row = {key: data[key] for key in ("cluster", "ttft_mean_s", "ttft_p95_s", "ttft_p99_s")}
        row |= {"latency_mean_s": data["latency_mean_s"], "attainment": data["attainment"]}
        for name, stats in data["breakdown"].items():
            row |= {f"{name}_mean_s": stats["mean"], f"{name}_p95_s": stats["p95"]}
        row |= {f"{name}_tail_share": share for name, share in data["tail_share"].items()}
        routing = data["routing_ms"] or {}
        return row | {
            "routing_median_ms": routing.get("median"),
            "routing_p99_ms": routing.get("p99"),
            "hit_rate": data["prefix_cache"]["hit_rate"],
            "transfers": data["transfers"],
            "deflected": data["deflected"],
        }

    def to_pandas(self) -> Any:
        """:meth:`row` as a pandas DataFrame of one row (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas([self.row()])


def _routing_ms(seconds: np.ndarray) -> dict[str, float | int] | None:
    """The router's call times in milliseconds: median, P99, largest and the number of
    calls (``None``: not timed)."""
    if not seconds.size:
        return None
    ms = seconds * 1e3
    return {
        "median": float(np.median(ms)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
        "calls": int(ms.size),
    }


def summarize_cluster(
    run: ClusterRun, cluster: Cluster, stream: RequestStream, wall_s: float = 0.0
) -> ClusterResult:
    """The :class:`ClusterResult` of a run."""
    engine_run = run.run
    summary = summarize(
        engine_run.records,
        engine_run.iteration_end_s,
        slo=cluster.scenario.slo,
        duration_s=stream.duration_s,
        end_s=engine_run.end_s,
        policy=cluster.label,
        workload=stream.name,
        cost_model=engine_run.cost_model,
        policy_stats=engine_run.policy_stats,
        peak_kv_tokens=engine_run.peak_kv_tokens,
        hardware=hardware_of(get_cost_model(cluster.scenario.cost_model)),
    )
    parts = run.breakdown
    breakdown = {name: Distribution.of(values) for name, values in parts.items()}
    ttft = np.sum([parts[name] for name in BREAKDOWN], axis=0)
    reached = ~np.isnan(ttft)
    tail_share = dict.fromkeys(BREAKDOWN, math.nan)
    if reached.any():
        p95 = np.percentile(ttft[reached], 95)
        tail = reached & (ttft >= p95)
        total = float(ttft[tail].sum())
        if total > 0:
            tail_share = {name: float(parts[name][tail].sum()) / total for name in BREAKDOWN}
    return ClusterResult(
        engine_run.records, summary, breakdown, tail_share, run, cluster.label, wall_s
    )


def simulate_cluster(
    workload: str | RequestStream,
    cluster: Cluster,
    *,
    rate: float | None = None,
    duration_s: float = 60.0,
    data_dir: str | Path | None = None,
    max_requests: int = MAX_REQUESTS,
    time_routing: bool = False,
    record_batches: bool = False,
) -> ClusterResult:
    """Draw a workload (as :func:`~schedlab.serving.simulator.simulate` does), run it on
    ``cluster`` and summarise it with its TTFT breakdown.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type (``nodes`` text where a
        :class:`Cluster` belongs: :func:`parse_nodes` reads it).
    ServingError
        As :func:`~schedlab.serving.simulator.simulate` and :func:`run_cluster`.
    """
    started = time.perf_counter()
    check_types(
        "simulate_cluster",
        workload=(workload, (str, RequestStream)),
        cluster=(cluster, (Cluster,)),
        data_dir=(data_dir, (str, Path, type(None))),
    )
    check_window("simulate_cluster", rate, duration_s, max_requests)
    if isinstance(workload, RequestStream):
        stream = workload
    else:
        stream = make_workload(workload, data_dir=data_dir).generate(
            rate, duration_s, cluster.scenario.seed, max_requests=max_requests
        )
    if len(stream) == 0:
        raise ServingError(
            f"workload {stream.name!r}: no request arrives in the {stream.duration_s:g} s "
            "window; raise the rate or the window"
        )
    run = run_cluster(stream, cluster, time_routing=time_routing, record_batches=record_batches)
    return summarize_cluster(run, cluster, stream, time.perf_counter() - started)
