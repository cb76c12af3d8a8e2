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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.arguments_check import check_type, check_types
from schedlab.errors import ServingError
from schedlab.llm.interconnect import parse_link
from schedlab.llm.models import get_model_shape, kv_bytes_per_token
from schedlab.serving.cluster_result import BREAKDOWN, QUEUE_SIDES, ClusterResult, ClusterRun
from schedlab.serving.cost_model import (
    CostModel,
    get_cost_model,
    hardware_of,
)
from schedlab.serving.driver import EVENT_KINDS, Driver
from schedlab.serving.engine import Engine
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import HandOverReplica
from schedlab.serving.iteration import IterationTime
from schedlab.serving.kv_transfer import KVLink, LinkQueue, Transfer
from schedlab.serving.metrics import Distribution, summarize
from schedlab.serving.policy_registry import get_policy
from schedlab.serving.prediction import predict_outputs
from schedlab.serving.request_state import RequestState
from schedlab.serving.router_view import ROLES, Arrival, ClusterState, NodeState, Route, Router
from schedlab.serving.routers import get_router
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import check_stops, check_window
from schedlab.serving.workloads import MAX_REQUESTS, RequestStream, make_workload

__all__ = [
    "DEFAULT_LINK",
    "DEFAULT_MODEL",
    "Cluster",
    "ClusterDriver",
    "Node",
    "is_sloweave",
    "kv_link",
    "parse_nodes",
    "run_cluster",
    "simulate_cluster",
]

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

_LETTERS = {"C": "colocated", "P": "prefill", "D": "decode"}


@dataclass(frozen=True)
class Node:
    """One node: its role, and what it does differently from the cluster's scenario.

    Attributes
    ----------
    role
        One of :data:`~schedlab.serving.router_view.ROLES`.
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
    :attr:`~schedlab.serving.policy_registry.PolicySpec.deadline_safe`): the decode-node policies
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
        :attr:`~schedlab.serving.policy_registry.PolicySpec.reads_predictions`)."""
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
            NodeState(
                e,
                role,
                tpot_s,
                LinkQueue(link, e.index) if role == "prefill" and link is not None else None,
            )
            for e, role in zip(engines, roles, strict=True)
        ]
        self.view = ClusterState(self.nodes, link, seed)
        n = len(self.requests)
        self.decode_of = [-1] * n  # decode node after a transfer
        self.kv_ready_s = [math.nan] * n
        # the TTFT breakdown's books, from the iterations the nodes run: seconds of the
        # iterations that ran a request's chunks before its first token (on every node,
        # then up to its hand-off), when its prefill completed on a prefill node, and
        # seconds of the iteration that emitted its first token after a transfer
        self.prefill_exec_s = [0.0] * n
        self.prefill_side_exec_s = [0.0] * n
        self.prefill_end_s = [math.nan] * n
        self.first_decode_s = [0.0] * n
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
        self._book_prefill(engine, t - started)
        super()._end(t, index)
        node.touch()
        for req in engine.take_handed_off():
            self.prefill_end_s[req.index] = t
            self.prefill_side_exec_s[req.index] = self.prefill_exec_s[req.index]
            assert node.link is not None
            target = self.decode_of[req.index]
            transfer = node.link.send(req.index, target, req.prompt - 1, t, started)
            self.nodes[target].sent(req.index, transfer.end_s)
            self.transfers.append(transfer)
            self._push(transfer.end_s, _TRANSFER, req.index)

    def _book_prefill(self, engine: HandOverReplica, seconds: float) -> None:
        """Book the ``seconds`` of ``engine``'s iteration ending now to the TTFT of each
        request it prefills that has no token yet: the first decode of a request whose
        KV came from another node, when its last chunk runs, else prefill time."""
        for req, _ in engine.running_chunks():
            if not math.isnan(req.first_token_s):
                continue
            i = req.index
            if not math.isnan(self.kv_ready_s[i]) and req.done == req.target:
                self.first_decode_s[i] = seconds  # it emits its first token now
            else:
                self.prefill_exec_s[i] += seconds

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
            i = req.index
            arrived = self.kv_ready_s[i]
            prefill = self.prefill_exec_s[i]
            if math.isnan(first):
                values = [math.nan] * len(names)
            elif math.isnan(arrived):  # served whole where it arrived
                wait = first - req.arrival_s - prefill
                values = [wait, prefill, 0.0, 0.0, wait, 0.0]
            else:
                ready, there = self.prefill_end_s[i], self.prefill_side_exec_s[i]
                before = ready - req.arrival_s - there
                after = first - arrived - self.first_decode_s[i]
                after -= prefill - there  # recomputed after a preemption
                values = [before + after, prefill, arrived - ready, self.first_decode_s[i]]
                values += [before, after]
            for name, value in zip(names, values, strict=True):
                parts[name].append(value)
        return {name: np.asarray(values, dtype=float) for name, values in parts.items()}


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
