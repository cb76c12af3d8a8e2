r"""Hypothesis strategies for property tests of solvers and serving policies.

========================  ==============================================================
strategy                  draws
========================  ==============================================================
:func:`instances`         offline instances (``docs/design.md``, "Offline model") where
                          every request fits alone, :math:`s_i + o_i \le M`
:func:`traces`            request streams for the simulator
:func:`engine_configs`    small engines, so that the KV cache binds and preempts
:func:`cost_models`       cost models non-decreasing in every term, by construction
========================  ==============================================================

Each draws degenerate cases too: one request, empty prompts and one-token outputs,
identical requests, requests as large as the memory allows, all arriving at once, and
a memory of one token. Hypothesis shrinks a failing example towards them.

Once this module is imported (by any strategy's first use), ``st.from_type(Instance)``
and ``st.from_type(EngineConfig)`` draw :func:`instances` and :func:`engine_configs`
with their defaults. The registration waits for that import, so that having schedlab
installed costs ``import hypothesis`` nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from schedlab.errors import InputError
from schedlab.offline.instance import Instance, Request
from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.workloads import RequestStream

__all__ = ["cost_models", "engine_configs", "instances", "traces"]

#: How the requests of a drawn instance or trace relate (hypothesis shrinks to the first).
SHAPES = ("mixed", "identical", "largest")


@st.composite
def instances(
    draw: st.DrawFn,
    max_n: int = 8,
    max_kv_tokens: int = 30,
    max_arrival: int = 5,
    max_output: int = 12,
    shapes: Sequence[str] = SHAPES,
) -> Instance:
    r"""Small feasible offline instances.

    Parameters
    ----------
    max_n
        The most requests (at least one is drawn).
    max_kv_tokens
        The largest KV budget :math:`M` (at least 1).
    max_arrival
        The latest release round; 0 draws no releases (every :math:`a_i = 0`), and
        otherwise half the instances have none.
    max_output
        The longest output.
    shapes
        The shapes drawn, of :data:`SHAPES`: ``mixed`` requests, ``identical`` ones, or
        the ``largest`` each memory allows.

    Notes
    -----
    Requests are drawn with :math:`1 \le o_i \le \min(M, \text{max\_output})` and
    :math:`0 \le s_i \le M - o_i`, so each fits alone. ``identical`` instances repeat one
    request; in ``largest`` ones each request has :math:`s_i = M - o_i`.
    """
    memory = draw(st.integers(1, max_kv_tokens))
    n = draw(st.integers(1, max_n))
    shape = draw(st.sampled_from(_known(shapes)))
    released = max_arrival > 0 and draw(st.booleans())
    count = 1 if shape == "identical" else n
    requests = []
    for _ in range(count):
        output = draw(st.integers(1, min(max_output, memory)))
        prompt = memory - output if shape == "largest" else draw(st.integers(0, memory - output))
        arrival = draw(st.integers(0, max_arrival)) if released else 0
        requests.append(Request(prompt, output, arrival))
    if shape == "identical":
        requests *= n
    return Instance(memory, tuple(requests))


@st.composite
def traces(
    draw: st.DrawFn,
    max_requests: int = 12,
    max_prompt: int = 400,
    max_output: int = 40,
    max_tokens: int | None = None,
    max_gap_s: float = 0.05,
    shapes: Sequence[str] = SHAPES,
) -> RequestStream:
    """Small request streams.

    Parameters
    ----------
    max_requests
        The most requests (at least one is drawn).
    max_prompt, max_output
        The longest prompt and output (each at least one token).
    max_tokens
        If given, every request fits a KV cache of this many tokens on its own
        (``prompt + output - 1 <= max_tokens``, the KV it holds at its last decode).
    max_gap_s
        The longest gap between two arrivals; half the streams arrive all at once.
    shapes
        As for :func:`instances` (``largest``: each request as long as ``max_tokens``
        or the longest prompt and output allow).
    """
    n = draw(st.integers(1, max_requests))
    shape = draw(st.sampled_from(_known(shapes)))
    room = max_prompt + max_output - 1 if max_tokens is None else max_tokens
    count = 1 if shape == "identical" else n
    prompts, outputs = [], []
    for _ in range(count):
        output = draw(st.integers(1, max(1, min(max_output, room))))
        most = max(1, min(max_prompt, room - output + 1))
        prompts.append(most if shape == "largest" else draw(st.integers(1, most)))
        outputs.append(output)
    if shape == "identical":
        prompts, outputs = prompts * n, outputs * n
    together = draw(st.booleans())
    gaps = (
        [0.0] * n
        if together
        else draw(st.lists(st.floats(0.0, max_gap_s), min_size=n, max_size=n))
    )
    arrivals = np.cumsum(gaps)
    return RequestStream(
        f"drawn-{shape}",
        arrivals,
        np.asarray(prompts, np.int64),
        np.asarray(outputs, np.int64),
        max(1.0, float(arrivals[-1])),
    )


@st.composite
def engine_configs(
    draw: st.DrawFn,
    max_blocks: int = 64,
    block_sizes: tuple[int, ...] = (1, 8, 16),
    max_seqs: int = 8,
    max_extra_tokens: int = 512,
) -> EngineConfig:
    """Small engines: a KV cache of 2 to ``max_blocks`` blocks, 1 to ``max_seqs`` seats, a
    token budget of the seats plus 0 to ``max_extra_tokens``, and prefix caching, the
    full-prompt gate and asynchronous scheduling each on or off.

    Draw a trace that fits with ``traces(max_tokens=config.total_blocks *
    config.block_size)``.
    """
    block = draw(st.sampled_from(block_sizes))
    seqs = draw(st.integers(1, max_seqs))
    return EngineConfig(
        kv_tokens=block * draw(st.integers(2, max_blocks)),
        block_size=block,
        max_num_seqs=seqs,
        max_num_batched_tokens=seqs + draw(st.integers(0, max_extra_tokens)),
        prefix_caching=draw(st.booleans()),
        reserve_full_prompt=draw(st.booleans()),
        async_scheduling=draw(st.booleans()),
    )


def _known(shapes: Sequence[str]) -> tuple[str, ...]:
    """``shapes``, each one of :data:`SHAPES`, in its order there.

    Raises
    ------
    InputError
        On none or an unknown one.
    """
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown or not shapes:
        raise InputError(f"shapes: expected some of {', '.join(SHAPES)}, got {list(shapes)}")
    return tuple(shape for shape in SHAPES if shape in shapes)


#: Milliseconds, in seconds.
_MS = 1e-3


def cost_models() -> st.SearchStrategy[LinearAttentionCostModel]:
    r"""Cost models monotone by construction.

    Each is a :class:`~schedlab.serving.cost_model.LinearAttentionCostModel`

    .. math::

        T = b + [n>0]\,(f_d + a_d n + k_d K)
              + [C>0]\,\bigl(f_p + a_p C + k_p \textstyle\sum_j c_j (p_j + \frac{c_j+1}{2})\bigr)

    with :math:`b > 0` and every other coefficient :math:`\ge 0`, so :math:`T` is positive
    and non-decreasing in the decodes :math:`n`, their KV :math:`K` and every chunk
    length :math:`c_j` (each term is), as SLOWeave's binary search requires
    (:func:`~schedlab.serving.cost_model.require_monotone`). Its margin is 0.
    """
    coefficient = st.floats(0.0, 2.0).map(lambda x: x * _MS)
    return st.builds(
        LinearAttentionCostModel,
        name=st.just("drawn"),
        base_s=st.floats(0.05, 2.0).map(lambda x: x * _MS),
        decode_fixed_s=coefficient,
        decode_per_seq_s=st.floats(0.0, 0.1).map(lambda x: x * _MS),
        decode_per_kv_s=st.floats(0.0, 1e-5).map(lambda x: x * _MS),
        prefill_fixed_s=coefficient,
        prefill_per_token_s=st.floats(0.0, 0.02).map(lambda x: x * _MS),
        prefill_attention_s=st.floats(0.0, 1e-6).map(lambda x: x * _MS),
    )


st.register_type_strategy(Instance, st.deferred(instances))
st.register_type_strategy(EngineConfig, st.deferred(engine_configs))
