"""Clusters of engines: one colocated node is one engine, conservation across nodes, the
KV hand-off by hand, the TTFT breakdown, determinism, deflection's deadlines."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import ServingError, UnknownNameError
from schedlab.llm.interconnect import Link
from schedlab.predictions import Intervals
from schedlab.serving import routers
from schedlab.serving.cluster import (
    Cluster,
    ClusterDriver,
    Node,
    parse_nodes,
    run_cluster,
    simulate_cluster,
)
from schedlab.serving.cluster_result import BREAKDOWN, QUEUE_SIDES
from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine import Engine
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.iteration import IterationTime
from schedlab.serving.kv_transfer import KVLink
from schedlab.serving.metrics import SLO, request_itl
from schedlab.serving.router_view import Arrival, Route
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.testing import check_cluster_conservation
from tests.serving.streams import FLAT, MS, ms_stream

# 2 ms a step, 0.5 ms per decode, 0.1 ms per prefill token: no KV term, so a test can
# recompute any iteration's predicted time from its batch log.
EXACT = LinearAttentionCostModel(
    name="exact", base_s=2 * MS, decode_per_seq_s=0.5 * MS, prefill_per_token_s=0.1 * MS
)
SMALL = EngineConfig(kv_tokens=320, max_num_seqs=4, max_num_batched_tokens=64)
BYTES = 1000
SLOW_LINK = KVLink(Link(1e6, 1 * MS), BYTES)  # 1 ms + 1 ms per token

# Small KV caches and long outputs: decodes outgrow the cache, so decode nodes preempt
# and recompute.
crowded = st.lists(
    st.tuples(st.integers(0, 40), st.integers(20, 70), st.integers(10, 60)),
    min_size=4,
    max_size=14,
).map(lambda rows: ms_stream(*zip(*sorted(rows), strict=True)))
CROWDED = EngineConfig(kv_tokens=160, max_num_seqs=4, max_num_batched_tokens=64)

requests = st.lists(
    st.tuples(st.integers(0, 80), st.integers(1, 90), st.integers(1, 20)),
    min_size=1,
    max_size=14,
).map(lambda rows: ms_stream(*zip(*sorted(rows), strict=True)))


def cluster(nodes, router, policy="vllm", *, model=EXACT, engine=SMALL, **kw):
    scenario = Scenario(policy, model, SLO(5.0, 0.025), engine, seed=kw.pop("seed", 0))
    return Cluster(parse_nodes(nodes), router, scenario, kw.pop("link", SLOW_LINK), **kw)


@settings(max_examples=40, deadline=None)
@given(
    stream=requests,
    policy=st.sampled_from(["vllm", "sloweave", "sangam", "whole-prefill"]),
    router=st.sampled_from(["round-robin", "least-tokens", "p2c"]),
    lagged=st.booleans(),
)
def test_one_colocated_node_is_exactly_the_single_engine(stream, policy, router, lagged):
    engine = EngineConfig(
        kv_tokens=160, max_num_seqs=3, max_num_batched_tokens=48, async_scheduling=lagged
    )
    scenario = Scenario(policy, EXACT, SLO(5.0, 0.025), engine, noise_cv=0.3, seed=7)
    alone = run_engine(stream, scenario, record_batches=True)
    one = run_cluster(stream, Cluster(parse_nodes("1C"), router, scenario), record_batches=True)
    for f in dataclasses.fields(alone):  # every field: records, batches, stats, KV ...
        mine, theirs = getattr(one.run, f.name), getattr(alone, f.name)
        if isinstance(theirs, np.ndarray):
            assert np.array_equal(mine, theirs), f.name
        else:
            assert mine == theirs, f.name
    assert one.transfers == ()


def test_a_hand_off_by_hand():
    # One request, prompt 10, output 3, 10 ms iterations. The prefill node prefills it in
    # [0, 10] ms; its 9 KV tokens cross the link in 1 + 9 = 10 ms, [10, 20]; the decode
    # node admits it at 20 and computes its last prompt token in [20, 30], emitting the
    # first token; two decodes end at 50.
    stream = ms_stream([0], [10], [3])
    result = run_cluster(stream, cluster("1P1D", "disaggregated", model=FLAT), record_batches=True)
    (record,) = result.run.records
    assert record.first_token_s == pytest.approx(0.030)
    assert record.finish_s == pytest.approx(0.050)
    assert record.replica == 1 and record.prefilled_tokens == 11
    (transfer,) = result.transfers
    assert (transfer.source, transfer.target, transfer.tokens) == (0, 1, 9)
    assert (transfer.start_s, transfer.end_s) == pytest.approx((0.010, 0.020))
    parts = {name: float(result.breakdown[name][0]) for name in BREAKDOWN}
    assert parts == pytest.approx(
        {"queue": 0.0, "prefill": 0.010, "transfer": 0.010, "first_decode": 0.010}
    )
    assert result.run.replica_iterations == (1, 3)


def test_transfers_queue_on_the_link():
    # Two requests prefilled together in [0, 10] ms: the second transfer waits for the
    # first (each 1 + 9 ms), so its KV arrives at 30, not 20.
    stream = ms_stream([0, 0], [10, 10], [2, 2])
    result = run_cluster(stream, cluster("1P1D", "disaggregated", model=FLAT))
    first, second = result.transfers
    assert (first.start_s, first.end_s) == pytest.approx((0.010, 0.020))
    assert (second.start_s, second.end_s) == pytest.approx((0.020, 0.030))
    assert result.breakdown["transfer"] == pytest.approx([0.010, 0.020])


def test_layer_wise_pipelining_overlaps_the_last_iteration():
    # With 10 layers the transfer may start with the prefill's last iteration (at 0); it
    # ends when its 10 ms are over or its last layer's 1 ms after the prefill (10 ms),
    # whichever is later: at 11 ms, so the transfer adds 1 ms to the TTFT, not 10.
    stream = ms_stream([0], [10], [2])
    link = KVLink(Link(1e6, 1 * MS), BYTES, layers=10)
    result = run_cluster(stream, cluster("1P1D", "disaggregated", model=FLAT, link=link))
    (transfer,) = result.transfers
    assert (transfer.start_s, transfer.end_s) == pytest.approx((0.0, 0.011))
    assert result.breakdown["transfer"][0] == pytest.approx(0.001)


def _audited(stream, spec, config):
    result = run_cluster(stream, spec, record_batches=True)
    chunked = [spec.policy_of(node) not in ("sangam", "whole-prefill") for node in spec.nodes]
    check_cluster_conservation(
        result, stream, [config] * len(spec.nodes), chunked=chunked, bytes_per_token=BYTES
    )
    return result


def _check_breakdown(result):
    total = sum(result.breakdown[name] for name in BREAKDOWN)
    ttft = np.array([r.ttft_s for r in result.run.records])
    assert np.all(np.abs(total - ttft) <= 1e-12)
    for name in (*BREAKDOWN, *QUEUE_SIDES):
        assert np.all(result.breakdown[name] >= -1e-12), name
    handed = {t.request for t in result.transfers}
    for i, route in enumerate(result.routes):
        assert (route.then is not None) == (i in handed)
        if route.then is None:
            assert result.breakdown["transfer"][i] == 0.0
            assert result.breakdown["first_decode"][i] == 0.0


def _decode_preemptions(result):
    return sum(r.preemptions for r in result.run.records if result.roles[r.replica] == "decode")


@settings(max_examples=60, deadline=None)
@given(
    stream=st.one_of(requests, crowded),
    nodes=st.sampled_from(["1P1D", "2P2D", "1P2D", "2P1D", "3C"]),
    router=st.sampled_from(["disaggregated", "deflect", "hybrid", "round-robin", "p2c"]),
    policy=st.sampled_from(["vllm", "sloweave"]),
    prefix_caching=st.booleans(),
)
def test_conservation_across_nodes_and_the_breakdown_sums_to_the_ttft(
    stream, nodes, router, policy, prefix_caching
):
    # The auditor replays every node's log: tokens, KV blocks, hand-offs, transfers, the
    # loads routers saw (never negative, never below the requests a node holds), and every
    # breakdown component recomputed from the logs.
    if nodes == "3C" and router in ("disaggregated", "deflect", "hybrid"):
        router = "least-tokens"
    config = CROWDED if stream.prompt.min() >= 20 else SMALL
    config = dataclasses.replace(config, prefix_caching=prefix_caching)
    spec = cluster(nodes, router, policy, engine=config)
    _check_breakdown(_audited(stream, spec, config))


def _crowded_cases(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(6, 14))
        arrivals = sorted(int(a) for a in rng.integers(0, 40, n))
        yield ms_stream(arrivals, rng.integers(20, 70, n), rng.integers(10, 60, n))


@pytest.mark.parametrize("router", ["disaggregated", "deflect", "hybrid"])
def test_conservation_with_decode_node_preemptions(router):
    # Fixed crowded streams on 1P1D and 2P2D: decode nodes preempt and recompute (asserted),
    # and the auditor still balances every token, block, transfer, load and breakdown.
    preemptions = 0
    for k, stream in enumerate(_crowded_cases(8, 2)):
        nodes = ("1P1D", "2P2D")[k % 2]
        config = dataclasses.replace(CROWDED, prefix_caching=bool(k % 3 == 0))
        spec = cluster(nodes, router, "sloweave", engine=config)
        result = _audited(stream, spec, config)
        _check_breakdown(result)
        preemptions += _decode_preemptions(result)
    assert preemptions > 0


def test_the_breakdown_by_hand():
    # 10 ms iterations (FLAT), token budget 15, link 1 ms + 1 ms per token. At 0: A (prompt
    # 10), B (prompt 5), C (prompt 5). The prefill node runs A and B in [0, 10] (15 tokens)
    # and C in [10, 20]. The link sends A's 9 tokens in [10, 20], B's 4 in [20, 25] (it
    # waited 10 ms for A's), C's 4 in [25, 30]. The decode node admits A at 20 and emits
    # its first token at 30; B arrives at 25 and waits for the iteration [30, 40], which C
    # (arrived at 30, before the start) joins: both emit their first token at 40.
    config = EngineConfig(kv_tokens=320, max_num_seqs=4, max_num_batched_tokens=15)
    stream = ms_stream([0, 0, 0], [10, 5, 5], [3, 3, 3])
    result = _audited(stream, cluster("1P1D", "disaggregated", model=FLAT, engine=config), config)
    want = {  # queue (prefill side, decode side), prefill, transfer, first decode; ms
        0: ((0, 0), 10, 10, 10),
        1: ((0, 5), 10, 15, 10),
        2: ((10, 0), 10, 10, 10),
    }
    for i, ((before, after), prefill, transfer, first) in want.items():
        got = {name: float(result.breakdown[name][i]) * 1e3 for name in result.breakdown}
        assert got == pytest.approx(
            {
                "queue": before + after,
                "queue_prefill_side": before,
                "queue_decode_side": after,
                "prefill": prefill,
                "transfer": transfer,
                "first_decode": first,
            },
            abs=1e-9,
        ), i
    assert [r.first_token_s for r in result.run.records] == pytest.approx([0.03, 0.04, 0.04])


def test_the_auditor_catches_a_wrong_breakdown():
    # Each component moved by a millisecond, or two components swapped, fails the audit.
    stream = ms_stream([0, 0, 0], [10, 5, 5], [3, 3, 3])
    config = EngineConfig(kv_tokens=320, max_num_seqs=4, max_num_batched_tokens=15)
    spec = cluster("1P1D", "disaggregated", model=FLAT, engine=config)
    result = run_cluster(stream, spec, record_batches=True)
    audit = dict(chunked=[True, True], bytes_per_token=BYTES)
    check_cluster_conservation(result, stream, [config] * 2, **audit)
    wrongs = []
    for name in (*BREAKDOWN, *QUEUE_SIDES):
        moved = {k: v.copy() for k, v in result.breakdown.items()}
        moved[name][1] += 1e-3
        wrongs.append(moved)
    swapped = {k: v.copy() for k, v in result.breakdown.items()}
    swapped["transfer"], swapped["queue"] = swapped["queue"].copy(), swapped["transfer"].copy()
    wrongs.append(swapped)
    for wrong in wrongs:
        with pytest.raises(AssertionError):
            check_cluster_conservation(
                dataclasses.replace(result, breakdown=wrong), stream, [config] * 2, **audit
            )


def test_the_auditor_catches_a_lost_transfer():
    stream = ms_stream([0, 5], [30, 40], [4, 4])
    spec = cluster("1P1D", "disaggregated")
    result = run_cluster(stream, spec, record_batches=True)
    check_cluster_conservation(
        result, stream, [SMALL] * 2, chunked=[True, True], bytes_per_token=BYTES
    )
    broken = type(result)(
        result.run,
        result.roles,
        result.routes,
        result.transfers[:1],
        result.breakdown,
        result.routing_s,
    )
    with pytest.raises((AssertionError, KeyError)):
        check_cluster_conservation(
            broken, stream, [SMALL] * 2, chunked=[True, True], bytes_per_token=BYTES
        )
    negative = dataclasses.replace(result, loads=(((5, 5), (-1, 0)),))
    with pytest.raises(AssertionError, match="loads"):
        check_cluster_conservation(
            negative, stream, [SMALL] * 2, chunked=[True, True], bytes_per_token=BYTES
        )


@pytest.mark.parametrize("router", ["deflect", "p2c", "hybrid"])
def test_same_seed_same_run(router):
    spec = cluster("2P2D", router, "sloweave", model=EXACT, engine=EngineConfig(), seed=3)
    spec = Cluster(spec.nodes, router, spec.scenario.with_(noise_cv=0.2), SLOW_LINK)
    one = simulate_cluster("bursty", spec, rate=20, duration_s=5)
    two = simulate_cluster("bursty", spec, rate=20, duration_s=5)
    assert one.records == two.records and one.run.transfers == two.run.transfers
    assert one.run.routes == two.run.routes
    other = simulate_cluster(
        "bursty",
        Cluster(spec.nodes, router, spec.scenario.with_(seed=4), SLOW_LINK),
        rate=20,
        duration_s=5,
    )
    assert other.records != one.records


def _deadline_misses(result, spec, tpot_s):
    """Decode-node iterations that ran decodes, whose decode-only batch met the TPOT
    target, and that still ended after the decodes' deadline."""
    model = spec.scenario.predicted()
    misses = checked = 0
    offset = 0
    for k, count in enumerate(result.run.replica_iterations):
        batches = result.run.batches[offset : offset + count]
        offset += count
        if result.roles[k] != "decode":
            continue
        for before, batch in itertools.pairwise(batches):
            n = len(batch.decodes)
            if not n or model.iteration_time(n, 0, ()) + model.margin_s > tpot_s:
                continue
            checked += 1
            deadline = before.end_s + tpot_s
            misses += batch.end_s > deadline + 1e-9
    return misses, checked


@settings(max_examples=40, deadline=None)
@given(stream=requests, nodes=st.sampled_from(["1P1D", "1P2D", "2P2D"]))
def test_deflect_keeps_every_decode_deadline_with_an_exact_cost_model(stream, nodes):
    # proofs/deflect.md: the predicted model is the actual one (no noise); decode nodes
    # run sloweave, so every iteration with decodes whose decode-only batch meets the
    # target ends by the decodes' deadline, deflected prefills and all.
    tpot = 0.006
    spec = Cluster(
        parse_nodes(nodes),
        "deflect",
        Scenario("vllm", EXACT, SLO(5.0, tpot), SMALL),
        SLOW_LINK,
    )
    result = run_cluster(stream, spec, record_batches=True)
    misses, _ = _deadline_misses(result, spec, tpot)
    assert misses == 0


def test_the_deadline_check_can_fail():
    # The same check finds misses once the premise fails: the iterations run 1.5x slower
    # than the model the policy and the router predict with. Requests were deflected, and
    # with the exact model there are none.
    stream = ms_stream([0, 0, 0, 1, 2, 3, 4, 5], [60] * 8, [20] * 8)
    tpot = 0.006
    slow = LinearAttentionCostModel(
        name="slow", base_s=3 * MS, decode_per_seq_s=0.75 * MS, prefill_per_token_s=0.15 * MS
    )
    for actual, expect_miss in ((slow, True), (None, False)):
        spec = Cluster(
            parse_nodes("1P1D"),
            "deflect",
            Scenario("vllm", EXACT, SLO(5.0, tpot), SMALL, actual_cost_model=actual),
            SLOW_LINK,
        )
        result = run_cluster(stream, spec, record_batches=True)
        assert any(r.then is None for r in result.routes)  # some were deflected
        misses, checked = _deadline_misses(result, spec, tpot)
        assert checked > 0
        assert (misses > 0) == expect_miss, actual


def test_deflect_refuses_a_decode_policy_it_does_not_model():
    with pytest.raises(ServingError, match="assume a SLOWeave policy"):
        cluster("1P1D", "deflect", decode_policy="vllm")
    assert cluster("1P1D", "deflect", decode_policy="sloweave-kv").router == "deflect"
    with pytest.raises(UnknownNameError, match="policy"):
        cluster("1P1D", "disaggregated", decode_policy="nope")


def test_deflect_ties_go_to_the_disaggregated_route_then_the_lowest_index(monkeypatch):
    # request 0 leaves 36 of its 100 tokens queued on the prefill node (budget 64), so
    # deflect considers request 1 for the decode nodes
    stream = ms_stream([0, 0], [100, 10], [2, 2])
    spec = cluster("1P2D", "deflect")

    def route_with(disaggregated_s, deflected_s):
        monkeypatch.setattr(
            routers, "disaggregated_ttft_s", lambda r, c: (disaggregated_s, *_pd(c))
        )
        monkeypatch.setattr(routers, "deflected_ttft_s", lambda r, n, c, *_: deflected_s[n.index])
        return run_cluster(stream, spec).routes[1]

    def _pd(c):
        return c.prefill_nodes[0], c.decode_nodes[1]

    assert route_with(1.0, {1: 1.0, 2: 1.0}) == Route(0, 2)  # a tie: disaggregated
    assert route_with(1.0, {1: 0.5, 2: 0.5}) == Route(1)  # decode nodes tie: lowest
    assert route_with(1.0, {1: 0.7, 2: 0.5}) == Route(2)  # the smallest wins
    assert route_with(math.inf, {1: math.inf, 2: math.inf}) == Route(0, 2)


class _Spy:
    """A router that records what it sees, then routes as ``route``."""

    def __init__(self, route):
        self.route = route
        self.seen = []

    def __call__(self, request, view):
        self.seen.append(
            (
                request,
                [
                    (n.queued_prefill_tokens, n.outstanding_tokens, n.committed_kv_tokens)
                    for n in view.nodes
                ],
            )
        )
        return self.route(request, view)


def _spy_run(stream, spec, route=routers.disaggregated):
    built = [
        Engine(spec.node_scenario(n).build_policy(), SMALL, IterationTime(EXACT), index=k)
        for k, n in enumerate(spec.nodes)
    ]
    spy = _Spy(route)
    driver = ClusterDriver(
        stream,
        built,
        [n.role for n in spec.nodes],
        spy,
        link=SLOW_LINK,
        tpot_s=0.025,
        predictions=Intervals(np.full(len(stream), 7), np.full(len(stream), 7), "test", False),
    )
    driver.run()
    return spy.seen


def test_routers_see_predictions_and_loads_not_the_simulator():
    # The router gets an Arrival (prompt, predicted output), not the request; the loads
    # count the predicted outputs, the running decodes' growth and the KV bound for a node.
    stream = ms_stream([0, 1, 30], [20, 20, 20], [3, 40, 3])
    spec = cluster("1P1D", "disaggregated", decode_policy="sloweave")
    seen = _spy_run(stream, spec)
    request, _ = seen[0]
    assert isinstance(request, Arrival) and request.predicted_output == 7
    assert not hasattr(request, "output") and not hasattr(seen[0], "engine")
    # request 1 arrives at 1 ms: request 0 (prompt 20, predicted 7) is prefilling on node 0
    # (its 20 tokens are in the running iteration, so not queued) and bound for node 1
    (_, loads) = seen[1]
    assert loads[0] == (0, 0, 0)
    assert loads[1] == (0, 1 + 7, 20 + 7 - 1)

    # served whole on node 1 instead: its 20 tokens run there, 7 tokens to emit, and its
    # KV grows from 20 to 26
    def whole(request, view):
        return Route(1) if request.index == 0 else routers.disaggregated(request, view)

    (_, loads) = _spy_run(stream, spec, whole)[1]
    assert loads[1] == (0, 7, 6)


def test_queued_tokens_exclude_the_running_chunks():
    # Two prompts of 60 on one prefill node (token budget 64): at 1 ms the first 60 and 4
    # of the second run; 56 are queued. The old counter said 120 and its estimate counted
    # the running iteration twice.
    stream = ms_stream([0, 0, 1], [60, 60, 10], [2, 2, 2])
    seen = _spy_run(stream, cluster("1P1D", "disaggregated"))
    assert seen[2][1][0][0] == 56


def test_deflect_goes_to_a_decode_node_only_when_faster_and_the_prefill_side_queues():
    # An idle cluster: nothing queues on the prefill side, so nothing is deflected, even
    # where the decode node would be faster (a slow link).
    fast = KVLink(Link(1e12, 0.0), BYTES)
    alone = ms_stream([0], [40], [3])
    for link in (fast, SLOW_LINK):
        assert run_cluster(alone, cluster("1P1D", "deflect", link=link)).routes == (Route(0, 1),)
    # Behind request 0's 36 queued tokens (a 100-token prompt, budget 64): request 1 waits
    # for the queue, prefill and transfer on the prefill route; the idle decode node is
    # faster with the slow link (1 ms a token), not with the free one.
    queued = ms_stream([0, 0], [100, 40], [3, 3])
    assert run_cluster(queued, cluster("1P1D", "deflect")).routes[1] == Route(1)
    assert run_cluster(queued, cluster("1P1D", "deflect", link=fast)).routes[1] == Route(0, 1)


def test_a_router_that_routes_wrongly_is_refused():
    stream = ms_stream([0], [10], [2])
    spec = cluster("1P1D", "disaggregated")
    built = [
        Engine(spec.node_scenario(n).build_policy(), SMALL, IterationTime(EXACT), index=k)
        for k, n in enumerate(spec.nodes)
    ]
    driver = ClusterDriver(
        stream, built, ["prefill", "decode"], lambda r, c: Route(0), link=SLOW_LINK, tpot_s=0.025
    )
    with pytest.raises(ServingError, match="routed to"):
        driver.run()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("2X", "cannot read"),
        ("0P0D", "names 0 nodes"),
        ("2P", "needs both"),
        ("1C1P1D", "mixes colocated"),
        ("", "cannot read"),
    ],
)
def test_bad_node_specs(spec, message):
    with pytest.raises(ServingError, match=message):
        parse_nodes(spec)


def test_node_specs():
    assert [n.role for n in parse_nodes("2p2d")] == ["prefill"] * 2 + ["decode"] * 2
    assert parse_nodes("4C") == (Node("colocated"),) * 4


def test_cluster_refusals():
    with pytest.raises(UnknownNameError, match="router"):
        cluster("2P2D", "nope")
    with pytest.raises(ServingError, match="needs prefill and decode"):
        cluster("4C", "deflect")
    with pytest.raises(ServingError, match="asynchronous"):
        cluster("1P1D", "disaggregated", engine=EngineConfig(async_scheduling=True))
    too_big = ms_stream([0], [400], [2])
    with pytest.raises(ServingError, match="exceeds the KV capacity of node 0"):
        run_cluster(too_big, cluster("1P1D", "disaggregated"))


def test_routing_is_timed_when_asked():
    result = simulate_cluster(
        "chat",
        cluster("1P1D", "deflect", engine=EngineConfig()),
        rate=5,
        duration_s=2,
        time_routing=True,
    )
    assert result.run.routing_s.size == result.summary.n_requests
    routing = result.to_dict()["routing_ms"]
    assert routing["calls"] == result.summary.n_requests
    assert 0 < routing["median"] <= routing["p99"] <= routing["max"]
    assert routing["median"] == pytest.approx(float(np.median(result.run.routing_s)) * 1e3)


# Bursts: many requests at once, so the prefill node queues and deflect may act.
bursts = st.lists(
    st.tuples(st.one_of(st.just(0), st.integers(0, 40)), st.integers(1, 90), st.integers(1, 20)),
    min_size=3,
    max_size=14,
).map(lambda rows: ms_stream(*zip(*sorted(rows), strict=True)))


def _with_router(name, router):
    """``router`` registered as ``name`` while a ``with`` block runs."""
    spec = routers.RouterSpec(router, "test", disaggregated=True, reads_predictions="always")
    return routers.ROUTERS.temporarily(name, spec)


def _meets(result, slo):
    ends = result.run.iteration_end_s
    return [r.meets(slo, request_itl(r, ends)) for r in result.run.records]


@settings(max_examples=60, deadline=None)
@given(stream=bursts, nodes=st.sampled_from(["1P1D", "1P2D"]))
def test_a_deflection_harms_no_request_the_decode_node_holds(stream, nodes):
    # proofs/deflect.md, "What the estimate guarantees": exact model, exact predictions.
    # The last request r is deflected to node d at t (when it is): run A routes as
    # deflect; run B routes the same, but r disaggregated. Every request d holds at t
    # that meets the SLO in B meets it in A; d preempts nobody after t in A; r's first
    # token comes by its estimate.
    slo = SLO(5.0, 0.006)
    estimate = {}

    def deflect_seen(request, cluster):
        route = routers.deflect(request, cluster)
        if route.then is None:
            node = cluster.nodes[route.node]
            estimate[request.index] = routers.deflected_ttft_s(request, node, cluster)
        return route

    last = len(stream) - 1
    with _with_router("deflect-seen", deflect_seen):
        spec = Cluster(
            parse_nodes(nodes), "deflect-seen", Scenario("vllm", EXACT, slo, SMALL), SLOW_LINK
        )
        a = run_cluster(stream, spec, record_batches=True)
        if a.routes[last].then is not None:
            return
        routes = a.routes

        def replay(request, cluster):
            if request.index < last:
                return routes[request.index]
            return routers.disaggregated(request, cluster)

        with _with_router("replay", replay):
            b = run_cluster(
                stream, dataclasses.replace(spec, router="replay"), record_batches=True
            )
    d, t = a.routes[last].node, float(stream.arrival_s[last])
    r = a.run.records[last]
    assert r.first_token_s - t <= estimate[last] + 1e-9
    offset = sum(a.run.replica_iterations[:d])
    batches = a.run.batches[offset : offset + a.run.replica_iterations[d]]
    assert not any(batch.preempted for batch in batches if batch.start_s >= t)
    at_d = {x.request: x.end_s for x in a.transfers if x.target == d}  # KV arrivals
    at_d |= {k: stream.arrival_s[k] for k, route in enumerate(a.routes) if route == Route(d)}
    held = [k for k, s in at_d.items() if k != last and s <= t < a.run.records[k].finish_s]
    met_a, met_b = _meets(a, slo), _meets(b, slo)
    for k in held:
        assert met_a[k] or not met_b[k], k


def test_the_no_harm_check_sees_deflections_and_can_fail():
    # Not vacuous: on this burst the last request is deflected to decode node 1 while it
    # holds request 0, decoding. And the check can fail:
    # routing a request whole to a node whose KV slack does not hold it (what harmless
    # refuses) preempts there, which assertion (a) above would catch.
    slo = SLO(5.0, 0.006)
    spec = Cluster(parse_nodes("1P1D"), "deflect", Scenario("vllm", EXACT, slo, SMALL), SLOW_LINK)
    burst = ms_stream([0, 0, 16, 20, 23, 29], [6, 42, 32, 27, 71, 28], [18, 13, 9, 11, 18, 3])
    a = run_cluster(burst, spec)
    assert a.routes[-1] == Route(1)
    held = [x.request for x in a.transfers if x.end_s <= 0.029 < a.run.records[x.request].finish_s]
    assert held == [0]
    crowded = ms_stream([0, 30], [60, 90], [150, 150])  # 14 + 15 blocks, 20 in the cache
    assert run_cluster(crowded, spec).routes[-1] == Route(0, 1)  # deflect: not harmless

    def force(request, cluster):
        return Route(1) if request.index == 1 else routers.disaggregated(request, cluster)

    with _with_router("force", force):
        forced = run_cluster(crowded, dataclasses.replace(spec, router="force"))
    assert sum(r.preemptions for r in forced.run.records) > 0
