"""Shared prefixes: chain ids to token ids and cache keys, the synthetic model, prefix
hits in the engine's cache, the prefix-aware router and the breakdown's hit counts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import ServingError
from schedlab.serving import routers
from schedlab.serving.cluster import Cluster, parse_nodes, run_cluster, simulate_cluster
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.prefix import (
    SharedPrefixes,
    SharedPrefixModel,
    block_contents,
    prompt_token_ids,
)
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RandomWorkload, RequestStream, builtin_table
from tests.serving.streams import FLAT, MS


def _chains(draw, count, block, tokens):
    """``count`` prompts of ``tokens`` sharing random prefixes: a tree of chain ids."""
    ids, next_id = [], 0
    for _ in range(count):
        need = -(-tokens // block)
        if ids and draw(st.booleans()):
            parent = ids[draw(st.integers(0, len(ids) - 1))]
            keep = draw(st.integers(0, need))
            chain = list(parent[:keep])
        else:
            chain = []
        while len(chain) < need:
            chain.append(next_id)
            next_id += 1
        ids.append(chain)
    return [np.asarray(c, np.int64) for c in ids]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), big=st.integers(1, 40), small=st.integers(1, 40))
def test_cache_keys_name_exactly_the_equal_token_prefixes(data, big, small):
    # Engine block j of two prompts has the same key (h, j) exactly when their token ids
    # agree on every position up to the end of that block: the mapping from blocks of B
    # tokens to blocks of b is exact, for any b and B.
    tokens = data.draw(st.integers(1, 200))
    a, b = _chains(data.draw, 2, big, tokens)
    ta, tb = prompt_token_ids(a, big, tokens), prompt_token_ids(b, big, tokens)
    ka, kb = block_contents(a, big, small, tokens), block_contents(b, big, small, tokens)
    assert len(ka) == tokens // small
    for j in range(len(ka)):
        same_tokens = ta[: (j + 1) * small] == tb[: (j + 1) * small]
        assert (ka[j] == kb[j]) == same_tokens, (j, a, b)


def test_token_ids_are_a_fixed_function_of_id_and_offset():
    ids = np.array([7, 9], np.int64)
    tokens = prompt_token_ids(ids, 4, 7)
    assert len(tokens) == 7 and all(1000 <= t < 31_000 for t in tokens)
    assert tokens[:4] == prompt_token_ids(np.array([7], np.int64), 4, 4)
    assert tokens != prompt_token_ids(np.array([8, 9], np.int64), 4, 7)


def test_a_stream_checks_its_ids_against_its_prompts():
    with pytest.raises(ServingError, match="request 1: 1 hash ids for a prompt of 5 tokens"):
        RequestStream(
            "s",
            np.array([0.0, 1.0]),
            np.array([4, 5]),
            np.array([1, 1]),
            2.0,
            SharedPrefixes(4, (np.array([0]), np.array([0]))),
        )


def test_the_synthetic_model_keeps_chain_ids_and_resends_history():
    model = SharedPrefixModel(system_prompts=2, system_tokens=32, followup=0.5, block_tokens=8)
    drawn = np.full(400, 20, np.int64)
    prompt, prefix = model.apply(drawn, np.random.default_rng(3))
    again = model.apply(drawn, np.random.default_rng(3))
    assert np.array_equal(prompt, again[0])  # deterministic under a seed
    RequestStream("s", np.arange(400.0), prompt, np.ones(400, np.int64), 400.0, prefix)
    where: dict[int, tuple[int, int]] = {}
    for ids in prefix.hash_ids:  # an id names its whole prefix
        before = -1
        for k, h in enumerate(ids.tolist()):
            assert where.setdefault(h, (k, before)) == (k, before)
            before = h
    heads = {tuple(ids[:4].tolist()) for ids in prefix.hash_ids if ids.size >= 4}
    systems = [np.arange(k * 4, k * 4 + 4) for k in range(2)]
    assert sum(tuple(s.tolist()) in heads for s in systems) == 2  # both system prompts used
    longer = prompt > 20 + 32  # next turns: a previous prompt resent, then 20 new tokens
    assert longer.any()
    for k in np.flatnonzero(longer)[:20]:
        ids = prefix.hash_ids[k]
        parents = [
            j
            for j in range(k)
            if prompt[j] + 20 == prompt[k]
            and np.array_equal(prefix.hash_ids[j][: prompt[j] // 8], ids[: prompt[j] // 8])
        ]
        assert parents, k


def test_the_synthetic_model_refuses_bad_parameters():
    with pytest.raises(ServingError, match="followup"):
        SharedPrefixModel(followup=1.5)
    with pytest.raises(ServingError, match="block_tokens"):
        SharedPrefixModel(block_tokens=0)


def test_a_random_workload_with_shared_prefixes_keeps_its_drawn_lengths_stream():
    plain = RandomWorkload("w", ((1.0, builtin_table("sharegpt")),))
    shared = dataclasses.replace(plain, shared_prefixes=SharedPrefixModel(followup=0.0))
    a, b = plain.generate(5.0, 20.0, 1), shared.generate(5.0, 20.0, 1)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.output, b.output)
    assert a.prefix is None and b.prefix is not None
    extra = b.prompt - a.prompt  # a system prompt or nothing
    assert set(extra.tolist()) <= {0, 1024} and (extra == 1024).any()


ENGINE = EngineConfig(kv_tokens=4096, max_num_seqs=8, max_num_batched_tokens=256)


def _two(ids_a, ids_b, prompt=100, gap_ms=200):
    return RequestStream(
        "two",
        np.array([0.0, gap_ms * MS]),
        np.array([prompt, prompt]),
        np.array([2, 2]),
        1.0,
        SharedPrefixes(16, (np.asarray(ids_a, np.int64), np.asarray(ids_b, np.int64))),
    )


def test_a_later_request_hits_the_blocks_of_a_finished_one_with_its_prefix():
    # 100 tokens, blocks of 16 tokens (ids) and of 16 (engine): request 1 shares the first
    # four ids; it finds 4 full blocks (64 tokens) cached and prefills 36.
    scenario = Scenario("vllm", FLAT, engine=ENGINE)
    shared = run_engine(_two(range(7), [0, 1, 2, 3, 10, 11, 12]), scenario)
    assert shared.reused_tokens == 64
    assert [r.prefilled_tokens for r in shared.records] == [100, 36]
    apart = run_engine(_two(range(7), range(7, 14)), scenario)
    assert apart.reused_tokens == 0
    # the same prompt: every full block but the last token's is found
    same = run_engine(_two(range(7), range(7)), scenario)
    assert [r.prefilled_tokens for r in same.records] == [100, 100 - 96]
    # without prefix caching nothing is found
    off = run_engine(
        _two(range(7), range(7)),
        scenario.with_(engine=dataclasses.replace(ENGINE, prefix_caching=False)),
    )
    assert off.reused_tokens == 0


def test_a_hit_on_blocks_a_running_request_holds():
    # The second request arrives 1 ms after the first, which still runs: it shares the
    # first's cached prompt blocks (vLLM caches a block when it allocates it).
    scenario = Scenario("vllm", FLAT, engine=ENGINE)
    run = run_engine(_two(range(7), range(7), gap_ms=1), scenario)
    assert run.reused_tokens == 96
    assert [r.prefilled_tokens for r in run.records] == [100, 4]


def _cluster(nodes, router, engine=ENGINE):
    scenario = Scenario("vllm", FLAT, SLO(5.0, 0.1), engine)
    return Cluster(parse_nodes(nodes), router, scenario)


def test_prefix_aware_sends_a_request_where_its_prefix_went():
    # Request 0 goes to node 0 (all idle); request 1 shares its prefix and arrives when
    # request 0 is done: least-tokens would take node 0 too (a tie, lowest index), so give
    # request 2 a different prefix first: it goes to node 0 under least-tokens' tie rule
    # and to node 1 under prefix-aware only if that is cheaper. Loads are equal (idle).
    ids = [list(range(7)), list(range(7, 14)), [0, 1, 2, 3, 4, 20, 21]]
    stream = RequestStream(
        "three",
        np.array([0.0, 0.3, 0.6]),
        np.array([100, 100, 100]),
        np.array([2, 2, 2]),
        1.0,
        SharedPrefixes(16, tuple(np.asarray(i, np.int64) for i in ids)),
    )
    aware = run_cluster(stream, _cluster("2C", "prefix-aware"))
    # request 1 has no match anywhere: cost = load + prompt, a tie: node 0; request 2
    # matches node 0's index (request 0's ids, 5 blocks) and goes there
    assert [r.node for r in aware.routes] == [0, 0, 0]
    assert aware.cache_hits.tolist() == [0, 0, 80]
    assert aware.node_hits == (80, 0)
    # with request 1 still running on node 0, request 2 is sent where its prefix is
    # unless the load there costs more than the prompt it saves
    busy = dataclasses.replace(stream, arrival_s=np.array([0.0, 0.3, 0.3]))
    routes = run_cluster(busy, _cluster("2C", "prefix-aware")).routes
    assert [r.node for r in routes] == [0, 0, 1]


def test_prefix_matches_sees_the_routed_ids_not_the_cache():
    seen = []

    def spy(request, cluster):
        seen.append(routers.prefix_matches(request, cluster, cluster.nodes))
        return routers.prefix_aware(request, cluster)

    ids = [list(range(7)), list(range(7))]
    stream = dataclasses.replace(
        _two(*ids, gap_ms=300), prefix=SharedPrefixes(16, tuple(np.array(i) for i in ids))
    )
    spec = _cluster("2C", "prefix-aware")
    spied = dataclasses.replace(routers.ROUTERS["prefix-aware"], router=spy)
    with routers.ROUTERS.temporarily("prefix-aware", spied, replace=True):
        run_cluster(stream, spec)
    assert seen == [[0, 0], [99, 0]]  # min(7 * 16, P - 1) on node 0


def test_the_breakdown_reports_hits_per_request_and_node():
    workload = RandomWorkload(
        "conv",
        ((1.0, builtin_table("sharegpt")),),
        shared_prefixes=SharedPrefixModel(system_prompts=2, system_tokens=256),
    )
    stream = workload.generate(4.0, 20.0, 0)
    big = EngineConfig(kv_tokens=200_000)
    result = simulate_cluster(stream, _cluster("2C", "prefix-aware", big))
    cache = result.to_dict()["prefix_cache"]
    hits = result.run.cache_hits
    assert hits.sum() == sum(result.run.node_hits) > 0
    assert cache["hit_rate"] == pytest.approx(hits.sum() / stream.prompt.sum())
    assert cache["node_hit_tokens"] == list(result.run.node_hits)
    # every hit is whole blocks of the prompt, short of its last token
    assert np.all(hits % 16 == 0) and np.all(hits <= stream.prompt - 1)
    plain = simulate_cluster(
        dataclasses.replace(stream, prefix=None), _cluster("2C", "prefix-aware", big)
    )
    assert plain.run.cache_hits.sum() == 0 and plain.to_dict()["prefix_cache"]["hit_rate"] == 0
