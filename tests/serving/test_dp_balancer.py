"""vLLM's data-parallel balancer: by hand, and against vLLM 0.19's own client code."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from schedlab.serving.dp_balancer import (
    PUBLISH_INTERVAL_S,
    QUIET_INTERVAL_S,
    DataParallelBalancer,
)
from schedlab.serving.engine import Engine
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import replica_factory
from schedlab.serving.iteration import IterationTime
from schedlab.serving.request_state import RequestState
from schedlab.serving.scenario import Scenario


def reported(balancer: DataParallelBalancer, *counts: tuple[int, int]) -> DataParallelBalancer:
    for rank, each in enumerate(counts):
        balancer.report(rank, each)
    return balancer


def test_the_view_counts_what_it_sent_until_the_next_update():
    balancer = DataParallelBalancer(2, reporting=True)
    # three at once: a tie to rank 0, then rank 1 (rank 0 has one waiting in the view)
    assert [balancer.choose(0.0) for _ in range(3)] == [0, 1, 0]
    # inside the interval the ranks' reports are not read: the view says 2 and 1
    assert reported(balancer, (0, 0), (0, 9)).choose(PUBLISH_INTERVAL_S / 2) == 1
    assert balancer.view == [[2, 0], [2, 0]]
    # after it, they are: rank 1 runs 9, scores 9 against rank 0's 4 * 1 + 1
    assert reported(balancer, (1, 1), (0, 9)).choose(PUBLISH_INTERVAL_S) == 0
    assert balancer.view == [[2, 1], [0, 9]]
    # counts that did not change are published only after the quiet interval: until
    # then what the client sent stays in its view (a tie, 9 and 9, to rank 0)
    t = PUBLISH_INTERVAL_S
    assert balancer.choose(t + 2 * PUBLISH_INTERVAL_S) == 0 and balancer.view == [[3, 1], [0, 9]]
    assert balancer.choose(t + QUIET_INTERVAL_S) == 0
    assert balancer.view == [[2, 1], [0, 9]]  # republished, then one more sent to rank 0


def test_the_ranks_of_a_dense_model_report_nothing():
    # vLLM 0.19's dense ranks publish no counts: the client balances on what it sent,
    # and the coordinator's zeros wipe that every quiet interval
    balancer = reported(DataParallelBalancer(2, reporting=False), (0, 50), (0, 0))
    assert [balancer.choose(0.0) for _ in range(3)] == [0, 1, 0]
    assert balancer.choose(1.0) == 1  # the view still holds what it sent
    assert balancer.choose(QUIET_INTERVAL_S) == 0 and balancer.view == [[1, 0], [0, 0]]


@pytest.mark.parametrize("kind", ["schedlab", "vllm"])
def test_each_engine_reports_waiting_then_running(kind):
    # one seat, three requests: after a step, two wait and one runs
    scenario = Scenario("vllm", "sloweave-default", engine=EngineConfig(max_num_seqs=1))
    model = scenario.predicted()
    timing = IterationTime(model, scenario.actual(), 0.0, 0)
    if kind == "schedlab":
        engine = Engine(scenario.build_policy(model), scenario.engine, timing)
    else:
        pytest.importorskip("vllm")
        engine = replica_factory(kind)(scenario.with_(engine_kind=kind), timing=timing, index=0)
    for k in range(3):
        engine.arrive(RequestState(k, 0.0, 16, 4, 4, lower=4, upper=4))
    assert engine.plan(0.0) is not None
    assert engine.counts == (2, 1)


def test_every_choice_is_vllms_own():
    # vLLM's DPLBAsyncMPClient.get_core_engine_for_request, run on the same view (set
    # where the coordinator would publish it) for random counts, arrival gaps and ranks.
    core_client = pytest.importorskip("vllm.v1.engine.core_client")
    rng = np.random.default_rng(7)
    for trace in range(200):
        n = int(rng.integers(2, 5))
        ours = DataParallelBalancer(n, reporting=True)
        theirs = object.__new__(core_client.DPLBAsyncMPClient)
        theirs.core_engines = [k.to_bytes(2, "little") for k in range(n)]
        theirs.eng_start_index, theirs.client_count, theirs.reqs_in_flight = 0, 1, {}
        t = 0.0
        for number in range(int(rng.integers(1, 40))):
            t += float(rng.exponential(0.05))
            counts = [(int(rng.integers(0, 6)), int(rng.integers(0, 20))) for _ in range(n)]
            before = ours.refreshed_s
            chosen = reported(ours, *counts).choose(t)
            if ours.refreshed_s != before:  # the coordinator published these counts
                theirs.lb_engines = [list(c) for c in counts]
            request = SimpleNamespace(
                data_parallel_rank=None, pooling_params=None, request_id=f"{trace}-{number}"
            )
            engine = theirs.get_core_engine_for_request(request)
            assert theirs.core_engines.index(engine) == chosen, (trace, number)
            assert theirs.lb_engines == ours.view
