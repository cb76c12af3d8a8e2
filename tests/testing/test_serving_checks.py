"""check_deadlines and check_conservation on hand-made runs: a deadline-aware policy
passes, a policy that ignores deadlines or a corrupted run is caught and named."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.testing import (
    ConservationViolation,
    DeadlineViolation,
    ServingRun,
    check_conservation,
    check_deadlines,
    record_run,
)
from tests.serving.streams import MS, stream_of

# 1 ms a step, 0.1 ms a decode, 0.01 ms a prefill token
MODEL = LinearAttentionCostModel(
    name="test", base_s=1 * MS, decode_per_seq_s=0.1 * MS, prefill_per_token_s=0.01 * MS
)
CONFIG = EngineConfig(kv_tokens=4096, max_num_seqs=4, max_num_batched_tokens=2048)
# request 1's long prompt arrives while request 0 decodes
STREAM = stream_of([0.0, 0.003], [10, 2000], [20, 2])


def _run(policy: str) -> ServingRun:
    return record_run(STREAM, Scenario(policy, MODEL, SLO(5.0, 5 * MS), CONFIG))


def test_sloweave_keeps_every_deadline_and_every_token():
    served = _run("sloweave")
    check_deadlines(served)
    check_conservation(served)
    # its chunks joined the decodes: at most (5 - 1.1) / 0.01 = 390 tokens each
    mixed = [b for b in served.run.batches if b.decodes and b.chunks]
    assert mixed and all(c <= 390 for b in mixed for _, c in b.chunks)


def test_a_policy_blind_to_deadlines_is_caught():
    served = _run("vllm")  # the whole 2,000-token prompt joins the decode: 21.1 ms
    check_conservation(served)
    with pytest.raises(DeadlineViolation) as caught:
        check_deadlines(served)
    message = str(caught.value)
    assert "prefill chunks (2000 tokens of request 1) join 1 decode, and" in message
    assert "predicted to take 21.1 ms" in message
    assert "after request 0's next-token deadline" in message


def test_deadlines_are_judged_by_the_model_the_policy_planned_with():
    served = _run("sloweave")
    slower = dataclasses.replace(MODEL, prefill_per_token_s=0.1 * MS)
    wrong = dataclasses.replace(served, scenario=served.scenario.with_(cost_model=slower))
    with pytest.raises(DeadlineViolation, match="replica 0 iteration"):
        check_deadlines(wrong)


def _corrupt(served: ServingRun, **changes) -> ServingRun:
    return dataclasses.replace(served, run=dataclasses.replace(served.run, **changes))


def test_a_lost_token_is_caught():
    served = _run("sloweave")
    records = list(served.run.records)
    (first, last), *rest = records[0].segments
    records[0] = dataclasses.replace(records[0], segments=((first, last - 1), *rest))
    with pytest.raises(ConservationViolation, match="request 0: its record's segments"):
        check_conservation(_corrupt(served, records=tuple(records)))


def test_a_miscounted_cache_is_caught():
    served = _run("sloweave")
    batches = list(served.run.batches)
    batches[3] = dataclasses.replace(batches[3], used_blocks=batches[3].used_blocks + 1)
    with pytest.raises(ConservationViolation, match=r"node 0 iteration 3 .*the engine reports"):
        check_conservation(_corrupt(served, batches=tuple(batches)))


def test_a_duplicated_chunk_is_caught():
    served = _run("sloweave")
    k = next(j for j, b in enumerate(served.run.batches) if b.chunks)
    batches = list(served.run.batches)
    batches[k] = dataclasses.replace(batches[k], chunks=batches[k].chunks * 2)
    with pytest.raises(ConservationViolation, match=f"node 0 iteration {k} "):
        check_conservation(_corrupt(served, batches=tuple(batches)))


def test_a_policy_that_splits_while_claiming_not_to_is_caught():
    served = dataclasses.replace(_run("sloweave"), chunked=False)
    with pytest.raises(ConservationViolation, match="never splits prompts gives request 1"):
        check_conservation(served)


def test_a_run_without_its_batches_is_refused():
    scenario = Scenario("sloweave", MODEL, SLO(5.0, 5 * MS), CONFIG)
    bare = ServingRun(STREAM, scenario, run_engine(STREAM, scenario), True)
    with pytest.raises(ConservationViolation, match="record_batches=True"):
        check_conservation(bare)


# Found by check_policy on a toy policy: two things the engine does on purpose, as vLLM
# does, that the replay once took for broken laws. 1 ms a step, 51 one-token blocks.
TIGHT = EngineConfig(51, block_size=1, max_num_seqs=3, max_num_batched_tokens=3)
FLAT_1MS = LinearAttentionCostModel(name="flat-1ms", base_s=1 * MS)


def _tight(policy: str, outputs: list[int], asynchronous: bool) -> ServingRun:
    n = len(outputs)
    config = dataclasses.replace(
        TIGHT, prefix_caching=False, reserve_full_prompt=False, async_scheduling=asynchronous
    )
    scenario = Scenario(policy, FLAT_1MS, SLO(60.0, 1 * MS), config)
    return record_run(stream_of([0.0] * n, [1] * n, outputs), scenario)


def test_a_request_preempted_after_it_finished_is_counted():
    # Asynchronous scheduling: request 5 finishes in iteration 27, and iteration 28 is
    # planned before the engine knows it: the decodes need a block, and request 5, the
    # newest, is preempted (vLLM counts it).
    served = _tight("fixed:1", [29, 1, 1, 1, 1, 23, 1, 1, 1], asynchronous=True)
    (batch,) = [b for b in served.run.batches if 5 in b.preempted]
    assert batch.start_s >= served.run.records[5].finish_s
    assert served.run.records[5].preemptions == 1
    check_conservation(served)
    # the exception is that narrow: request 1 finished long before
    batches = list(served.run.batches)
    k = batches.index(batch)
    batches[k] = dataclasses.replace(batch, preempted=(5, 1))
    with pytest.raises(ConservationViolation, match="preempts request 1, not running there"):
        check_conservation(_corrupt(served, batches=tuple(batches)))


def test_an_iteration_that_preempted_its_only_decode_may_admit():
    # Iteration 71 preempts request 4, its only decode; nothing is left to run, so the
    # engine's next scheduling pass runs at once and admits a waiting request.
    served = _tight("vllm", [29] * 5, asynchronous=True)
    batch = served.run.batches[71]
    assert batch.preempted and not batch.decodes and batch.chunks
    check_conservation(served)


def _batch_where(served: ServingRun, test) -> int:
    return next(k for k, b in enumerate(served.run.batches) if test(b))


def _changed_batch(served: ServingRun, k: int, **changes) -> ServingRun:
    batches = list(served.run.batches)
    batches[k] = dataclasses.replace(batches[k], **changes)
    return _corrupt(served, batches=tuple(batches))


def _first_chunk_of_1(served: ServingRun) -> int:
    return _batch_where(served, lambda b: any(i == 1 for i, _ in b.chunks))


def _with_engine(served: ServingRun, **limits) -> ServingRun:
    engine = dataclasses.replace(CONFIG, **limits)
    return dataclasses.replace(served, scenario=served.scenario.with_(engine=engine))


def _with_output(served: ServingRun, first: int) -> ServingRun:
    output = served.stream.output.copy()
    output[0] = first
    return dataclasses.replace(served, stream=dataclasses.replace(served.stream, output=output))


#: One corruption a law of the replay (schedlab.testing.log_replay.LogReplay's methods),
#: and the message it must raise: every law can fail.
CORRUPTIONS = {
    "prefix_hits": (
        lambda s: _changed_batch(s, _first_chunk_of_1(s), reused=((1, 16),)),
        "request 1 takes 16 tokens back from the prefix cache, but only",
    ),
    "kv_received": (
        lambda s: _changed_batch(s, _first_chunk_of_1(s), received=((1, 1999),)),
        "request 1 receives KV on a colocated node after 0 hand-offs",
    ),
    "decodes_batched": (
        lambda s: _changed_batch(s, _batch_where(s, lambda b: b.decodes), decodes=()),
        "but the running decodes are [0] (every running decode is batched)",
    ),
    "token_budget": (
        lambda s: _with_engine(s, max_num_batched_tokens=100),
        "tokens, over max_num_batched_tokens = 100",
    ),
    "max_num_seqs": (
        lambda s: _with_engine(s, max_num_seqs=1),
        "2 requests admitted, over max_num_seqs = 1",
    ),
    "full-prompt gate": (
        lambda s: _with_engine(s, kv_tokens=2000),  # 125 blocks: 1 held, 125 needed
        "admits request 1, whose 2000 tokens need 125 blocks with 124 free",
    ),
    "tokens": (  # one token too many: the finished request decodes on
        lambda s: _with_output(s, 19),
        "batches decodes [0], but the running decodes are []",
    ),
    "nothing_lost": (
        lambda s: _with_output(s, 21),
        "request(s) [0] never emitted all their tokens (request 0: 20 of 21)",
    ),
    "tokens past the output": (  # the last decode batched twice
        lambda s: _changed_batch(
            s,
            max(k for k, b in enumerate(s.run.batches) if 0 in b.decodes),
            decodes=(0, 0),
        ),
        "request 0 emits token 21 of 20",
    ),
    "arrival": (
        lambda s: dataclasses.replace(
            s,
            stream=dataclasses.replace(
                s.stream, arrival_s=s.stream.arrival_s + np.array([0.0, 1.0])
            ),
        ),
        "prefills request 1 before its arrival at 1.003 s",
    ),
    "finished": (  # a chunk for request 1 after its last token
        lambda s: _changed_batch(
            s,
            len(s.run.batches) - 1,
            chunks=((1, 1), *s.run.batches[-1].chunks),
        ),
        "prefills request 1, already finished",
    ),
    "request_record": (
        lambda s: _corrupt(
            s,
            records=(
                dataclasses.replace(s.run.records[0], preemptions=1),
                *s.run.records[1:],
            ),
        ),
        "request 0: its record counts 10 prefill tokens and 1 preemptions, the log 10 and 0",
    ),
}


@pytest.mark.parametrize("law", sorted(CORRUPTIONS))
def test_every_law_of_the_replay_can_fail(law: str) -> None:
    served = _run("sloweave")
    check_conservation(served)
    corrupt, message = CORRUPTIONS[law]
    with pytest.raises(ConservationViolation, match=re.escape(message)):
        check_conservation(corrupt(served))
