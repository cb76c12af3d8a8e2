r"""Seeded arrival streams: offline instances whose requests are released over time.

An arrival stream is an :class:`~schedlab.offline.instance.Instance` with release rounds
:math:`a_i`: the input of an online algorithm, which sees request :math:`i` only from
round :math:`a_i` on. Lengths come from the same sources as
:mod:`schedlab.offline.backlogs` (a shipped length table, a
:class:`~schedlab.llm.lengths.LengthTable`, or a real :class:`~schedlab.llm.traces.Trace`);
the arrival rate is set by the **load**

.. math::

    \rho = \frac{\lambda \, \bar v}{M}, \qquad
    \bar v = \frac{1}{n} \sum_i \Big( s_i o_i + \frac{o_i (o_i + 1)}{2} \Big),

the memory-time volume the requests bring per round (:math:`\lambda` requests a round,
each holding :math:`\bar v` token-rounds on average) over the :math:`M` token-rounds the
KV cache offers a round. No schedule keeps up with :math:`\rho > 1` for long; below 1 the
queue stays bounded, and how full it is depends on how well a scheduler packs memory.

Arrival times:

* **Poisson** (sources without timestamps, and any source with ``timed=False``):
  unit-rate exponential gaps divided by :math:`\lambda`, the first request at round 0.
* **Trace-timed** (a :class:`~schedlab.llm.traces.Trace` with arrival times: the Azure
  and Mooncake traces): ``n`` consecutive requests of the trace from a seeded offset, in
  time order, their recorded gaps scaled so that the mean rate is :math:`\lambda`; the
  trace's bursts and lulls are kept. Requests with :math:`s + o > M` are skipped
  (counted in ``meta["skipped"]``), not redrawn, so the window stays consecutive.

Times are floored to whole rounds. :data:`DEFAULT_LOAD` is the documented default
(``docs/online-ratios.md`` shows why).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from schedlab.errors import InstanceError
from schedlab.llm.traces import Trace, check_lengths
from schedlab.offline.backlogs import (
    DEFAULT_KV_TOKENS,
    MAX_REQUESTS,
    LengthSource,
    request_count,
    sample_lengths,
    source_label,
)
from schedlab.offline.instance import Instance, check_int

__all__ = ["DEFAULT_LOAD", "arrival_stream"]

#: Default load :math:`\rho`: enough that requests queue (a scheduler's choices matter),
#: well below the volume limit 1, where the queue of any scheduler grows without bound.
DEFAULT_LOAD = 0.9


def arrival_stream(
    n: int,
    kv_tokens: int = DEFAULT_KV_TOKENS,
    source: LengthSource = "sharegpt",
    load: float = DEFAULT_LOAD,
    seed: int = 0,
    name: str | None = None,
    *,
    timed: bool = True,
    max_requests: int = MAX_REQUESTS,
) -> Instance:
    """``n`` requests from ``source`` released over time at load ``load`` (module docs).

    Parameters
    ----------
    n
        Number of requests (refused beyond ``max_requests``).
    kv_tokens
        KV budget :math:`M` in tokens.
    source
        A shipped length table name, a :class:`~schedlab.llm.lengths.LengthTable`, or a
        :class:`~schedlab.llm.traces.Trace`.
    load
        :math:`\\rho \\in (0, 1]` of the module docs.
    seed
        Seed of the lengths, the window of a trace and the Poisson gaps.
    name
        The instance's name (default ``SOURCE-stream-nN-sSEED``).
    timed
        Keep a timed trace's recorded gaps (scaled); ``False``: Poisson arrivals with
        lengths drawn from the trace.

    Raises
    ------
    InstanceError
        For ``load`` outside (0, 1], a timed trace with fewer than ``n`` requests that fit
        in ``kv_tokens``, or a budget too small for the source.
    """
    n = request_count(n, max_requests)
    kv_tokens = check_int(kv_tokens, "kv_tokens", 1)
    if isinstance(load, bool) or not isinstance(load, int | float) or not 0 < load <= 1:
        raise InstanceError(f"load: must be in (0, 1], got {load!r}")
    rng = np.random.default_rng(seed)
    label = source_label(source)
    meta: dict[str, Any] = {"generator": "arrival_stream", "source": label, "seed": seed}
    if isinstance(source, Trace) and timed and source.arrival_s is not None:
        prompt, output, times, skipped = _trace_window(source, n, kv_tokens, rng)
        meta |= {"arrivals": "trace-timed", "skipped": skipped}
    else:
        if isinstance(source, Trace):
            check_lengths(source, source.name, min_prompt=0)
        prompt, output, redrawn = sample_lengths(source, n, kv_tokens, rng)
        times = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0, n - 1))])
        meta |= {"arrivals": "poisson", "redrawn": redrawn}
    volume = prompt * output + output * (output + 1) // 2
    rate = load * kv_tokens / float(volume.mean())  # requests a round
    span = float(times[-1])
    # scale the times to mean gap 1/rate: (n - 1) gaps over the window's span
    scale = (n - 1) / (rate * span) if span > 0 else 0.0
    arrival = np.floor(times * scale).astype(np.int64)
    meta |= {"load": load, "rate_per_round": rate, "last_arrival": int(arrival[-1])}
    return Instance.from_arrays(
        kv_tokens,
        prompt,
        output,
        arrival,
        name=name or f"{label}-stream-n{n}-s{seed}",
        meta=meta,
    )


def _trace_window(
    trace: Trace, n: int, kv_tokens: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``n`` consecutive requests (in time order) that fit in ``kv_tokens``, from a seeded
    offset: prompts, outputs, times from the first (seconds) and the count skipped."""
    assert trace.arrival_s is not None
    check_lengths(trace, trace.name, min_prompt=0)
    order = np.argsort(trace.arrival_s, kind="stable")
    fits = order[trace.prompt[order] + trace.output[order] <= kv_tokens]
    if fits.size < n:
        raise InstanceError(
            f"n: {trace.name} has {fits.size:,} requests that fit in M = {kv_tokens:,}, "
            f"fewer than n = {n:,}"
        )
    first = int(rng.integers(0, fits.size - n + 1))
    rows = fits[first : first + n]
    # requests skipped inside the window: time-ordered positions between its ends
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    lo, hi = int(position[rows[0]]), int(position[rows[-1]])
    skipped = (hi - lo + 1) - n
    times = trace.arrival_s[rows] - trace.arrival_s[rows[0]]
    return trace.prompt[rows].copy(), trace.output[rows].copy(), times.astype(float), skipped
