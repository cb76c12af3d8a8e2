"""Small hand-made request streams and cost models for the engine tests."""

from __future__ import annotations

import numpy as np

from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.workloads import RequestStream

MS = 1e-3
#: Every iteration takes 10 ms whatever it holds.
FLAT = LinearAttentionCostModel(name="flat-10ms", base_s=10 * MS)


def stream_of(arrivals_s, prompts, outputs, duration=1.0) -> RequestStream:
    """A stream of requests arriving at ``arrivals_s`` seconds."""
    return RequestStream(
        "test",
        np.asarray(arrivals_s, float),
        np.asarray(prompts, np.int64),
        np.asarray(outputs, np.int64),
        duration,
    )


def ms_stream(arrivals_ms, prompts, outputs) -> RequestStream:
    """A stream of requests arriving at ``arrivals_ms`` milliseconds."""
    return stream_of(np.asarray(arrivals_ms, float) * MS, prompts, outputs)


def kv_bound(seed: int) -> tuple[RequestStream, EngineConfig]:
    """60 requests within 0.2 s on a 4,096-token cache: the KV cache binds."""
    rng = np.random.default_rng(seed)
    n = 60
    stream = stream_of(
        np.sort(rng.uniform(0, 0.2, n)), rng.integers(20, 400, n), rng.integers(50, 400, n)
    )
    config = EngineConfig(kv_tokens=4096, max_num_seqs=32, max_num_batched_tokens=512)
    return stream, config
