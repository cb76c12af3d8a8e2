r"""Routers of a cluster (:mod:`schedlab.serving.cluster`): which node serves an arriving
request.

A router is a plain function ``router(request, cluster) -> Route`` called once per
arrival, named in :data:`ROUTERS` by a :class:`RouterSpec`; :func:`register_router` adds
one, and an installed package adds one with a :class:`RouterSpec` in the entry-point
group :data:`ENTRY_POINTS` (:mod:`schedlab.plugins`). What it gets is what a real router
knows, and nothing else:

* the request as an :class:`~schedlab.serving.router_view.Arrival`: its index, arrival
  time, prompt length and *predicted* output length (:mod:`schedlab.serving.prediction`,
  drawn with the scenario's ``prediction_cv``; with ``prediction_cv = 0`` the prediction
  *is* the true length, an oracle router, and a benchmark says which it uses);
* the cluster's state now through :class:`~schedlab.serving.router_view.ClusterView`: per
  node the known sizes of what it holds and what is routed to it (queued prefill tokens,
  outstanding tokens, KV tokens committed to its requests at their predicted final
  sizes), its running decodes, free KV blocks, its running iteration's predicted end, its
  link's queue, and its predicted cost model.

No view holds a handle on an engine or a request (the true output lengths, the actual
iteration times stay inside the simulator). A :class:`~schedlab.serving.router_view.Route`
names the node that prefills the request and, for a prefill-only node, the decode node its
KV goes to.

==================  ==============================================================
name                rule
==================  ==============================================================
``round-robin``     request ``k`` to node ``k mod N`` (on a prefill/decode cluster,
                    prefill node ``k mod N_P`` and decode node ``k mod N_D``)
``least-tokens``    the node of least outstanding tokens (below), lowest index on ties;
                    per side on a prefill/decode cluster
``p2c``             power of two choices: two distinct nodes drawn by the cluster's
                    seeded generator, the one of fewer outstanding tokens (the first
                    drawn on ties); per side on a prefill/decode cluster
``disaggregated``   every prefill on a prefill node (least estimated queueing, below),
                    then its KV to the decode node of least outstanding tokens
``prefix-aware``    the colocated (or prefill) node of least outstanding tokens plus
                    the prompt tokens it would compute, given the prefix the router
                    believes it holds (below); per side on a prefill/decode cluster
``deflect``         ``disaggregated``'s route, or the whole request on a decode node
                    when the prefill side queues and the estimate says it is faster
                    there and harms nobody the node holds (below)
``hybrid``          ``disaggregated``'s route, but when every prefill node is backed up
                    the whole request goes to the first decode node, by least
                    outstanding tokens, where it would be faster and harm nobody
==================  ==============================================================

Loads of a node (derived from its requests when a router asks, so exact at every
moment; ``tests/serving/audit.py`` checks them against its own replay). A request here
with :math:`t - d` tokens of its (re)start's prefill target left, :math:`g` tokens
generated and predicted output :math:`\hat o` has :math:`e = \max(\hat o - g, 1)`
predicted tokens left to emit (at least one, since it has not finished) and a predicted
final size of :math:`P + g + e - 1` KV tokens. Then

* *queued prefill tokens* :math:`Q`: :math:`\sum (t - d)` over its waiting and running
  requests (the running iteration's chunks are done already: they are not queued);
* *outstanding tokens*: :math:`Q` plus :math:`\sum e`, and for each request bound for it
  (prefilled elsewhere, KV not yet arrived) :math:`1 + \hat o`;
* *committed KV tokens*: the growth still to come, :math:`\sum \max(\text{final} - h, 0)`
  over its requests holding :math:`h` KV tokens now (0 while waiting), plus
  :math:`P + \hat o - 1` for each request bound for it. A request handed off from a
  prefill node emits nothing there and its final size there is its prompt.

A preemption sends a request back to the waiting queue with a new target (prompt plus
tokens generated) and nothing done, so its recomputation is queued work again.

Estimates (all from the predicted cost model :math:`\hat T(n, K, \text{chunks})`, module
:mod:`schedlab.serving.cost_model`)
    * A prefill node's *queueing* :math:`W_p`: the rest of its running iteration (its
      predicted end minus now) plus :math:`\lfloor Q/T\rfloor \hat T(0,0,(T,0)) +
      \hat T(0,0,(Q \bmod T, 0))` for its :math:`Q` queued prefill tokens in batches of
      its token budget :math:`T` (``max_num_batched_tokens``).
    * The *prefill* of a prompt of :math:`P` tokens alone: :math:`\sum_j \hat T(0, 0,
      (c_j, p_j))` over its chunks :math:`c_j \le T` at priors :math:`p_j`.
    * Disaggregated TTFT: prefill node :math:`p^* = \arg\min W_p`; the prefill ends at
      :math:`r = \text{now} + W_{p^*} + \text{prefill}(P)`; its KV arrives at
      :math:`x = \max(r, f_{p^*}) + \tau(P-1)` (:mod:`schedlab.serving.kv_transfer`; the
      link's queue as it is now). The decode node :math:`d^*` of least outstanding
      tokens first works through its queue, :math:`\lceil Q_d / c^*_d \rceil` iterations
      of :func:`deflect_chunk`'s batch from its running iteration's end :math:`b_d`
      (infinite when :math:`c^*_d = 0` and :math:`Q_d > 0`); the request's one-token
      iteration starts at :math:`\max(x + \hat T(n_d, K_d), b_d + \text{that})` (after
      :math:`x`, an iteration in progress ends first) and lasts
      :math:`\hat T(n_d, K_d, (1, P-1))`. The decode node's start is also after the wait
      for the request's blocks (:func:`block_wait_s`: none while its free blocks less
      its committed blocks cover the request's final size, else until its running
      decodes, finishing at their predicted lengths, have released enough); not
      modelled: a wait for seats.
    * Whole-request TTFT on decode node :math:`d` (:func:`deflected_ttft_s`): the end of
      its running iteration, then the iterations its policy would run the prompt in,
      behind the requests queued there, replayed with the policy's own rule
      (:func:`prefill_end_s`; decodes leave at their predicted lengths). Infinite unless
      the request is :func:`harmless` there (a free seat, and its KV slack holds the
      request at its predicted final size, so nobody there waits for blocks or is
      preempted for it) and the prefill ends before the KV of any request already bound
      for the node can arrive
      (:attr:`~schedlab.serving.router_view.NodeView.bound_arrival_s`), so none of them
      waits behind it.

``deflect``'s rule: when every prefill node has prefill queued (otherwise moving work
off the prefill side gains nothing and takes capacity from the decode side), the
smallest estimate wins; a tie goes to the disaggregated route, and between decode nodes
to the lowest index. What it guarantees: ``proofs/deflect.md``.

``hybrid``'s "backed up" (our reading of Sangam's overflow condition): every prefill
node's queued prefill tokens are at least its token budget :math:`T`, so the request could
not start in the next iteration anywhere on the prefill side. It then overflows to the
first decode node, by least outstanding tokens, whose whole-request estimate is below
the disaggregated one. Its decode nodes run ``sloweave`` unless told otherwise; under
``sangam`` (:class:`~schedlab.serving.policies.SangamPolicy`, deficit budget, whole
prompts) the estimate asks that one iteration's deficit admit the prompt whole within
the decodes' deadline.

``prefix-aware`` (after the prefix-cache-aware routers of production systems: llm-d's
approximate prefix-cache scorer, whose router keeps an LRU index of the prompt block
hashes it sent to each server and scores a server by the share of the prompt's blocks
matched, weighed against load scorers,
https://llm-d.ai/docs/architecture/advanced/kv-management/prefix-cache-aware-routing;
SGLang's cache-aware router, an approximate radix tree per worker of the requests sent
to it, routing to the longest match unless the load is imbalanced,
``sgl-router/src/policies/cache_aware.rs``). What it sees: each request's chain block
ids (:attr:`~schedlab.serving.router_view.Arrival.prefix`), and per node an LRU index of
the ids it routed there, as large as the node's KV cache in blocks of the ids' size; not
the caches themselves, so it believes a prefix cached that the node has evicted, or holds
in a running request
(which the engine does not share, :mod:`schedlab.serving.kv_cache`). It matches the
longest run of a request's ids at the front of each node's index, :math:`h_k` tokens
(at most :math:`P - 1`), and picks the node of least :math:`U_k + P - h_k`: outstanding
tokens plus the prompt tokens left to compute, one unit for load and cache instead of
weights or thresholds.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from schedlab.arguments_check import check_types
from schedlab.errors import ServingError
from schedlab.registry import Registry
from schedlab.serving.cost_model import CostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.policy_registry import get_policy
from schedlab.serving.prefill_replay import PrefillReplay
from schedlab.serving.router_view import Arrival, ClusterView, NodeView, Route, Router
from schedlab.serving.sloweave import SLOWeaveState, deadline_safe_chunk

__all__ = [
    "BUILTIN_ROUTERS",
    "ENTRY_POINTS",
    "ROUTERS",
    "RouterSpec",
    "block_wait_s",
    "decode_free_s",
    "deflect_chunk",
    "deflected_ttft_s",
    "disaggregated_ttft_s",
    "get_router",
    "harmless",
    "prefill_end_s",
    "prefill_seconds",
    "prefix_matches",
    "queued_seconds",
    "register_router",
    "router_names",
]


def prefill_seconds(model: CostModel, config: EngineConfig, tokens: int, prior: int = 0) -> float:
    r"""Predicted seconds to prefill ``tokens`` tokens of one prompt alone, after
    ``prior`` of its tokens, in chunks of the token budget :math:`T`:
    :math:`\sum_j \hat T(0, 0, (c_j, p_j))`."""
    budget = config.max_num_batched_tokens
    seconds = 0.0
    done = 0
    while done < tokens:
        c = min(budget, tokens - done)
        seconds += model.iteration_time(0, 0, ((c, prior + done),))
        done += c
    return seconds


def queued_seconds(node: NodeView, cluster: ClusterView) -> float:
    r"""A prefill node's queueing :math:`W_p` (module docstring): the rest of its running
    iteration plus its queued prefill tokens in full batches."""
    budget = node.config.max_num_batched_tokens
    queued = node.queued_prefill_tokens
    full, rest = divmod(queued, budget)
    seconds = max(0.0, node.busy_until_s - cluster.now_s)
    if full:
        key = ("full-batch", node.index)
        batch = cluster.memo.get(key)
        if batch is None:
            batch = cluster.memo[key] = node.model.iteration_time(0, 0, ((budget, 0),))
        seconds += full * batch
    if rest:
        seconds += node.model.iteration_time(0, 0, ((rest, 0),))
    return seconds


def _least(nodes: Sequence[NodeView], key: Callable[[NodeView], float]) -> NodeView:
    return min(nodes, key=key)  # min keeps the first (lowest index) of equal keys


def _least_tokens(nodes: Sequence[NodeView]) -> NodeView:
    return _least(nodes, lambda node: node.outstanding_tokens)


def disaggregated_ttft_s(
    request: Arrival, cluster: ClusterView
) -> tuple[float, NodeView, NodeView]:
    """The disaggregated route's estimated TTFT (module docstring), its prefill node and
    its decode node."""
    now = cluster.now_s
    waits = [(queued_seconds(node, cluster), node) for node in cluster.prefill_nodes]
    wait, prefill = min(waits, key=lambda pair: pair[0])
    decode = _least_tokens(cluster.decode_nodes)
    prompt = request.prompt
    ready = now + wait + prefill_seconds(prefill.model, prefill.config, prompt)
    arrives = max(ready, prefill.link_free_s) + cluster.transfer_s(prompt - 1)
    model, n, kv = decode.model, decode.n_decode, decode.decode_kv
    free = decode_free_s(request, decode, cluster)
    begin = max(arrives + (model.iteration_time(n, kv, ()) if n else 0.0), free)
    first = model.iteration_time(n, kv, ((1, prompt - 1),))
    return begin + first - now, prefill, decode


def decode_free_s(request: Arrival, decode: NodeView, cluster: ClusterView) -> float:
    r"""When decode node ``decode`` could start ``request``'s first-token iteration at
    the earliest, its KV aside (module docstring): after its queue, :math:`\lceil Q_d /
    c^*_d \rceil` iterations of :func:`deflect_chunk`'s batch from its running
    iteration's end, and after the wait for the request's blocks
    (:func:`block_wait_s`)."""
    now = cluster.now_s
    free = max(now, decode.busy_until_s)  # its queue drains from here
    queued = decode.queued_prefill_tokens
    if queued:
        chunk, seconds = deflect_chunk(decode, cluster)
        free = free + -(-queued // chunk) * seconds if chunk else math.inf
    final = decode.config.blocks(request.prompt + request.predicted_output - 1)
    return max(free, now + block_wait_s(decode, cluster, final))


def block_wait_s(node: NodeView, cluster: ClusterView, blocks: int) -> float:
    r"""Predicted seconds until node ``node`` has ``blocks`` blocks free beyond what its
    requests are committed to (module docstring): 0 when its slack :math:`S = F -
    \sum_i B_i` already covers them, else the :math:`e_{(k)}` decode iterations of
    :math:`\hat T(n, K)` until the running decodes that finish first have released
    enough, :math:`S + \sum_{j \le k} R_{(j)} \ge` ``blocks``; ``inf`` if they never do."""
    slack = node.free_blocks - node.committed_kv_blocks
    if slack >= blocks:
        return 0.0
    n = node.n_decode
    step = node.model.iteration_time(n, node.decode_kv, ()) if n else 0.0
    for left, released, _ in node.decode_releases:
        slack += released
        if slack >= blocks:
            return left * step
    return math.inf


def harmless(request: Arrival, node: NodeView) -> bool:
    r"""Whether ``request`` served whole on decode node ``node`` keeps the requests the
    node holds as they would be without it (``proofs/deflect.md``; it joins the waiting
    queue behind them): a seat is free and the node's KV slack holds the request at its
    predicted final size, :math:`\lceil (P + \hat o - 1)/b \rceil \le F - \sum_i B_i`,
    so with exact predictions nobody there waits for blocks or is preempted for it."""
    if node.free_seats < 1:
        return False
    final = node.config.blocks(request.prompt + request.predicted_output - 1)
    return final <= node.free_blocks - node.committed_kv_blocks


def deflect_chunk(node: NodeView, cluster: ClusterView) -> tuple[int, float]:
    r"""The SLOWeave chunk :math:`c^*` a new prompt gets on decode node ``node`` in its
    next iteration (prior context 0), and that iteration's predicted seconds; ``(0, inf)``
    when even one token would break the in-flight decodes' deadline. It depends only on
    the node's state, so it is computed once per node and iteration
    (:attr:`~schedlab.serving.router_view.ClusterView.memo`)."""
    key = ("deflect-chunk", node.index)
    found = cluster.memo.get(key)
    if found is not None and found[0] == node.iteration:
        return found[1]
    config, model = node.config, node.model
    n, kv = node.n_decode, node.decode_kv
    cap = min(config.max_num_batched_tokens - n, _C_MAX)
    if cap < 1:
        result = (0, math.inf)
    elif n == 0:
        result = (cap, model.iteration_time(0, 0, ((cap, 0),)))
    else:
        t = max(cluster.now_s, node.busy_until_s)
        state = SLOWeaveState(t, t + node.tpot_s, n, kv, cap)
        decision = deadline_safe_chunk(state, model, c_max=_C_MAX, margin_s=node.margin_s)
        result = (decision.chunk, decision.predicted_s) if decision.chunk else (0, math.inf)
    cluster.memo[key] = (node.iteration, result)
    return result


#: The largest chunk the deflection estimate considers (``sloweave``'s default C_max).
_C_MAX = 4096


def deflected_ttft_s(
    request: Arrival, node: NodeView, cluster: ClusterView, beat_s: float = math.inf
) -> float:
    r"""The estimated TTFT of ``request`` served whole on decode node ``node``
    (``deflect``, and ``hybrid``'s overflow; module docstring): the rest of the node's
    running iteration, then the iterations its policy runs the prompt in
    (:func:`prefill_end_s`), which must end by the earliest arrival of a request bound
    for the node (:attr:`~schedlab.serving.router_view.NodeView.bound_arrival_s`); ``inf`` when
    they cannot, or when
    the request is not :func:`harmless` there, or when the estimate would not be below
    ``beat_s`` (the replay then stops as soon as that is known)."""
    if not harmless(request, node):
        return math.inf
    now = cluster.now_s
    end = _prefill_end(request.prompt, node, max(now, node.busy_until_s), now, beat_s)
    if end - now >= beat_s or end > node.bound_arrival_s:
        return math.inf  # not better, or a transferred request would wait behind it
    return end - now


def prefill_end_s(prompt: int, node: NodeView, start_s: float) -> float:
    r"""Predicted end of the iterations, back to back from ``start_s``, in which decode
    node ``node``'s policy prefills a prompt of ``prompt`` tokens that joins its waiting
    queue now, behind the
    requests it holds that are not decoding
    (:attr:`~schedlab.serving.router_view.NodeView.queued_chunks`) (``inf`` if
    its policy would not run the prompt):

    * its policy's own estimate (:attr:`~schedlab.serving.policy_registry.PolicySpec.prefill_end`,
      :mod:`schedlab.serving.prefill_replay`) from its decodes as its next iteration sees
      them (:attr:`~schedlab.serving.router_view.NodeView.next_decodes`), its queue
      (:attr:`~schedlab.serving.router_view.NodeView.queued_chunks`),
      its decodes' releases (:attr:`~schedlab.serving.router_view.NodeView.decode_releases`)
      and the policy's cap, the
      integer argument of its name (``sloweave:C``, ``sangam:Q``): SLOWeave's schedule
      replayed, Sangam's one iteration;
    * ``inf`` for a policy without one.
    """
    return _prefill_end(prompt, node, start_s, 0.0, math.inf)


def _prefill_end(
    prompt: int, node: NodeView, start_s: float, since_s: float, beat_s: float
) -> float:
    """:func:`prefill_end_s`, or ``inf`` as soon as the replay ends ``beat_s`` or more
    after ``since_s`` (:class:`~schedlab.serving.prefill_replay.PrefillReplay`)."""
    name, _, argument = node.policy.partition(":")
    estimate = get_policy(name).prefill_end
    if estimate is None:
        return math.inf
    if not (argument.isdigit() and int(argument) >= 1):
        raise ServingError(
            f"policy {node.policy!r}: it offers a prefill estimate, so its name must end in "
            "':CAP', the cap of an iteration's chunk tokens (an integer >= 1) the estimate uses"
        )
    job = PrefillReplay(
        decodes=node.next_decodes,
        queue=(*node.queued_chunks, (prompt, 0)),
        releases=tuple(node.decode_releases),
        start_s=start_s,
        tpot_s=node.tpot_s,
        margin_s=node.margin_s,
        token_budget=node.config.max_num_batched_tokens,
        chunk_cap=int(argument),
        since_s=since_s,
        beat_s=beat_s,
    )
    return estimate(job, node.model)


def _split(cluster: ClusterView, name: str) -> tuple[Sequence[NodeView], Sequence[NodeView]]:
    prefill, decode = cluster.prefill_nodes, cluster.decode_nodes
    if not (prefill and decode):
        raise ServingError(f"router {name!r}: needs prefill and decode nodes (e.g. --nodes 2P2D)")
    return prefill, decode


def _per_side(
    request: Arrival, cluster: ClusterView, pick: Callable[[Sequence[NodeView]], NodeView]
) -> Route:
    """A balancing rule applied to the colocated nodes, or to each side of a
    prefill/decode cluster."""
    if cluster.prefill_nodes:
        return Route(pick(cluster.prefill_nodes).index, pick(cluster.decode_nodes).index)
    return Route(pick(cluster.nodes).index)


def round_robin(request: Arrival, cluster: ClusterView) -> Route:
    """Request ``k`` to node ``k mod N`` (per side on a prefill/decode cluster)."""
    return _per_side(request, cluster, lambda nodes: nodes[request.index % len(nodes)])


def least_tokens(request: Arrival, cluster: ClusterView) -> Route:
    """The node of least outstanding tokens, lowest index on ties (per side)."""
    return _per_side(request, cluster, _least_tokens)


def power_of_two(request: Arrival, cluster: ClusterView) -> Route:
    """Of two distinct nodes drawn at random, the one of fewer outstanding tokens (the
    first drawn on ties; per side)."""

    def pick(nodes: Sequence[NodeView]) -> NodeView:
        if len(nodes) == 1:
            return nodes[0]
        a, b = cluster.rng.choice(len(nodes), size=2, replace=False)
        first, second = nodes[int(a)], nodes[int(b)]
        return second if second.outstanding_tokens < first.outstanding_tokens else first

    return _per_side(request, cluster, pick)


def prefix_matches(request: Arrival, cluster: ClusterView, nodes: Sequence[NodeView]) -> list[int]:
    r"""Per node of ``nodes``, the prompt tokens of ``request`` the router believes the
    node has cached (module docstring, ``prefix-aware``): :math:`\min(mB, P - 1)` for
    the longest run :math:`m` of the request's ids at the front of the node's index."""
    ids = request.prefix
    if ids is None:
        return [0] * len(nodes)
    chain = ids.tolist()
    found = []
    for node in nodes:
        index = _prefix_index(cluster, node)
        m = 0
        while m < len(chain) and chain[m] in index:
            m += 1
        found.append(min(m * request.prefix_block, request.prompt - 1))
    return found


def _prefix_index(cluster: ClusterView, node: NodeView) -> OrderedDict[int, None]:
    """The router's index of the ids it sent to ``node``, least recently sent first."""
    key = ("prefix-index", node.index)
    index = cluster.memo.get(key)
    if index is None:
        index = cluster.memo[key] = OrderedDict()
    return index


def _remember(request: Arrival, cluster: ClusterView, node: NodeView) -> None:
    """Record ``request``'s ids as sent to ``node``, dropping the least recently sent
    beyond the node's KV capacity in blocks of ``prefix_block`` tokens."""
    if request.prefix is None:
        return
    index = _prefix_index(cluster, node)
    for block in request.prefix.tolist():
        index[block] = None
        index.move_to_end(block)
    config = node.config
    room = config.total_blocks * config.block_size // request.prefix_block
    while len(index) > room:
        index.popitem(last=False)


def prefix_aware(request: Arrival, cluster: ClusterView) -> Route:
    r"""The colocated (or prefill) node of least :math:`U_k + P - h_k`, its outstanding
    tokens plus the prompt tokens it would compute given the :math:`h_k` it is believed
    to hold (:func:`prefix_matches`; lowest index on ties); on a prefill/decode cluster
    the decode node of least outstanding tokens."""
    nodes = cluster.prefill_nodes or cluster.nodes
    hits = prefix_matches(request, cluster, nodes)
    k = min(
        range(len(nodes)),
        key=lambda j: nodes[j].outstanding_tokens + request.prompt - hits[j],
    )
    _remember(request, cluster, nodes[k])
    if cluster.prefill_nodes:
        return Route(nodes[k].index, _least_tokens(cluster.decode_nodes).index)
    return Route(nodes[k].index)


def disaggregated(request: Arrival, cluster: ClusterView) -> Route:
    """Prefill on the prefill node of least estimated queueing, then the KV to the
    decode node of least outstanding tokens."""
    _split(cluster, "disaggregated")
    _, prefill, decode = disaggregated_ttft_s(request, cluster)
    return Route(prefill.index, decode.index)


def deflect(request: Arrival, cluster: ClusterView) -> Route:
    """The disaggregated route, or a decode node whose SLOWeave schedule gives a smaller
    estimated TTFT (ties: the disaggregated route, then the lowest index)."""
    prefill_nodes, _ = _split(cluster, "deflect")
    best, prefill, decode = disaggregated_ttft_s(request, cluster)
    route = Route(prefill.index, decode.index)
    if not all(node.queued_prefill_tokens for node in prefill_nodes):
        return route  # the prefill side has slack: moving work off it gains nothing
    for node in cluster.decode_nodes:
        estimate = deflected_ttft_s(request, node, cluster, best)
        if estimate < best:
            best, route = estimate, Route(node.index)
    return route


def hybrid(request: Arrival, cluster: ClusterView) -> Route:
    """The disaggregated route, unless every prefill node has a full token budget of
    prefill queued: then the whole request to the decode node of least outstanding
    tokens whose :func:`deflected_ttft_s` is below the disaggregated estimate (lowest index
    on ties), if any."""
    prefill, decode = _split(cluster, "hybrid")
    best, first, then = disaggregated_ttft_s(request, cluster)
    route = Route(first.index, then.index)
    if all(n.queued_prefill_tokens >= n.config.max_num_batched_tokens for n in prefill):
        for node in sorted(decode, key=lambda node: node.outstanding_tokens):
            if deflected_ttft_s(request, node, cluster, best) < best:
                return Route(node.index)
    return route


@dataclass(frozen=True)
class RouterSpec:
    """A named router: the function, a one-line description, whether it needs prefill
    and decode nodes, the policy its decode nodes run unless told otherwise, and when it
    reads predicted output lengths (``reads_predictions``): ``"never"`` (``round-robin``
    reads no node state), ``"choosing"`` (when it picks among two or more colocated or
    decode nodes, by outstanding tokens, which count requests at their predicted sizes;
    a prefill node's do not), ``"always"`` (``deflect`` also checks each request's
    predicted final size against a decode node's free blocks)."""

    router: Router
    description: str
    disaggregated: bool = False
    decode_policy: str = "sloweave"
    reads_predictions: Literal["never", "choosing", "always"] = "choosing"


#: The built-in routers, by name.
BUILTIN_ROUTERS: dict[str, RouterSpec] = {
    "round-robin": RouterSpec(
        round_robin, "request k to node k mod N (per side)", reads_predictions="never"
    ),
    "least-tokens": RouterSpec(least_tokens, "least outstanding tokens (per side)"),
    "p2c": RouterSpec(power_of_two, "power of two choices, seeded (per side)"),
    "prefix-aware": RouterSpec(
        prefix_aware, "least outstanding tokens plus uncached prompt (per side)"
    ),
    "disaggregated": RouterSpec(
        disaggregated, "every prefill on a prefill node, then transfer", disaggregated=True
    ),
    "deflect": RouterSpec(
        deflect,
        "disaggregated, or deflected to a decode node if faster",
        disaggregated=True,
        reads_predictions="always",
    ),
    "hybrid": RouterSpec(
        hybrid, "overflow to decode nodes when prefill is backed up", disaggregated=True
    ),
}


#: Entry-point group of installed routers: ``name = "module:ROUTER_SPEC"``.
ENTRY_POINTS = "schedlab.routers"

#: Every router by name: the built-ins, those added by :func:`register_router` and the
#: installed ones (:class:`~schedlab.registry.Registry`).
ROUTERS: Registry[RouterSpec] = Registry(
    "router", RouterSpec, ENTRY_POINTS, BUILTIN_ROUTERS.items()
)


def register_router(name: str, spec: RouterSpec) -> None:
    """Add a router under ``name`` (``ROUTERS.register(name, spec)``).

    Raises
    ------
    RegistrationError
        If the name is taken or empty.
    InputTypeError
        (a ``TypeError``) for a ``name`` that is no string, a ``spec`` that is no
        :class:`RouterSpec`.
    """
    check_types("register_router", name=(name, (str,)), spec=(spec, (RouterSpec,)))
    ROUTERS.register(name, spec)


def router_names() -> tuple[str, ...]:
    """The names :func:`get_router` knows: built-in, registered, then installed."""
    return ROUTERS.names()


def get_router(name: str) -> RouterSpec:
    """The router registered or installed as ``name`` (:meth:`ROUTERS.get
    <schedlab.registry.Registry.get>`).

    Raises
    ------
    UnknownNameError
        Listing the known names.
    InputTypeError
        For an installed entry that is not a :class:`RouterSpec`.
    """
    return ROUTERS.get(name)
