"""Small hand-made request streams and cost models for the engine tests."""

from __future__ import annotations

import numpy as np

from schedlab.serving.cost_model import LinearAttentionCostModel
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
