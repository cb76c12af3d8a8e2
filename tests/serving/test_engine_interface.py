"""The engine's hand-over API (:class:`~schedlab.serving.engine_kinds.HandOverReplica`),
driven by hand: a request prefilled on one engine, handed off with its KV, received by
another, and what each engine holds and reports on the way."""

from __future__ import annotations

import math

import pytest

from schedlab.errors import ServingError
from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine import Engine
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.iteration import IterationTime
from schedlab.serving.request_state import RequestState
from schedlab.serving.scenario import Scenario

MS = 1e-3
MODEL = LinearAttentionCostModel(
    name="exact", base_s=2 * MS, decode_per_seq_s=0.5 * MS, prefill_per_token_s=0.1 * MS
)
CONFIG = EngineConfig(kv_tokens=320, block_size=16, max_num_seqs=4, max_num_batched_tokens=64)


def _engine(index: int) -> Engine:
    return Engine(
        Scenario(policy="vllm").build_policy(MODEL), CONFIG, IterationTime(MODEL), index=index
    )


def _step(engine: Engine, now: float) -> float:
    shape = engine.plan(now)
    assert shape is not None
    end = now + engine.duration(shape)
    engine.end(end)
    return end


def test_a_request_moves_with_its_kv():
    prefill, decode = _engine(0), _engine(1)
    req = RequestState(0, 0.0, 40, 3, 3)
    prefill.arrive(req, hand_off=True)
    assert list(prefill.requests()) == [req]
    shape = prefill.plan(0.0)  # the whole prompt in one chunk: it leaves, emitting nothing
    assert shape is not None
    assert prefill.running_chunks() == [(req, 40)]  # what a cluster's TTFT books read
    t = prefill.duration(shape)
    prefill.end(t)
    assert prefill.running_chunks() == []
    assert prefill.take_handed_off() == [req]
    assert prefill.take_handed_off() == []
    assert list(prefill.requests()) == [] and not prefill.has_work
    assert req.generated == 0 and math.isnan(req.first_token_s)
    assert prefill.free_blocks == CONFIG.total_blocks - CONFIG.blocks(40)  # held until release
    prefill.release(req)
    assert prefill.free_blocks == CONFIG.total_blocks

    decode.receive(req, req.prompt - 1)
    assert (req.target, req.done, req.received) == (40, 39, 39)
    t = _step(decode, t)  # its last prompt token, as a one-token chunk: the first token
    assert req.first_token_s == t and req.generated == 1
    assert req.prefilled == 41  # the whole prompt on the prefill node, then one token
    # next, it decodes: it holds its prompt in KV, and attends that and its first token
    assert req.generated_by(decode.iteration) == 1 and req.kv_tokens(decode.iteration) == 40
    assert decode.n_decode == 1 and decode.decode_kv == 41
    t = _step(decode, t)
    t = _step(decode, t)
    assert req.finish_s == t and decode.finished == 1
    assert decode.free_blocks == CONFIG.total_blocks


@pytest.mark.parametrize("tokens", [-1, 40, 41])
def test_receive_refuses_kv_the_request_cannot_bring(tokens):
    engine = _engine(2)
    with pytest.raises(ServingError, match=f"engine 2: request 5 .* cannot receive {tokens} KV"):
        engine.receive(RequestState(5, 0.0, 40, 3, 3), tokens)
    assert not engine.has_work
