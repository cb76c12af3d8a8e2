r"""Per-request serving metrics and their aggregates (``docs/design.md``, "Metrics and SLOs").

For a request with arrival :math:`a`, output length :math:`o` and token times
:math:`t_1 \le \dots \le t_o`:

* TTFT :math:`= t_1 - a`; end-to-end latency :math:`= t_o - a`;
* TPOT :math:`= (t_o - t_1)/(o - 1)`, taken as 0 when :math:`o = 1`;
* inter-token latencies (ITL) :math:`t_{k+1} - t_k`, :math:`k = 1..o-1`.

A request meets the SLO :math:`(X, D)` when it finished, TTFT :math:`\le X` and
TPOT :math:`\le D`. Attainment is the fraction of requests meeting it (unfinished requests
count as misses); goodput is the number meeting it per second of the arrival window
(DistServe, Zhong et al., OSDI 2024, use the same SLO-attainment notion).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from schedlab.errors import ServingError
from schedlab.json_files import nan_to_null

__all__ = ["SLO", "Distribution", "RequestRecord", "Summary", "request_itl", "summarize"]


@dataclass(frozen=True)
class SLO:
    """Service-level objective: TTFT at most ``ttft_s`` and TPOT at most ``tpot_s``."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ServingError(f"slo.{name}: expected a number of seconds, got {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise ServingError(f"slo.{name}: must be a positive finite time, got {value!r}")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one request.

    Attributes
    ----------
    index, arrival_s, prompt, output
        The request.
    first_token_s, finish_s
        Times of its first and last token (``nan`` if not reached when the run stopped).
    preemptions
        Times it was preempted (and later recomputed).
    prefilled_tokens
        Prefill tokens processed for it over all its (re)starts.
    segments
        ``(first, last)`` iteration indices of each run of consecutive tokens; token
        ``k`` of a segment was produced at the end of iteration ``first + k``.
    replica
        The data-parallel replica that served it.
    """

    index: int
    arrival_s: float
    prompt: int
    output: int
    first_token_s: float
    finish_s: float
    preemptions: int
    prefilled_tokens: int
    segments: tuple[tuple[int, int], ...]
    replica: int = 0

    @property
    def finished(self) -> bool:
        return not math.isnan(self.finish_s)

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def latency_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        """``(last - first) / (o - 1)``; NaN for one-token requests (undefined) and
        unfinished ones."""
        if self.output == 1:
            return math.nan
        return (self.finish_s - self.first_token_s) / (self.output - 1)

    def meets(self, slo: SLO) -> bool:
        """Finished with TTFT and TPOT within ``slo`` (a one-token request has no TPOT to
        meet; NaN otherwise compares false)."""
        tpot_ok = self.output == 1 or self.tpot_s <= slo.tpot_s
        return self.finished and self.ttft_s <= slo.ttft_s and tpot_ok

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form with the derived metrics (no segments)."""
        return {
            "index": self.index,
            "arrival_s": self.arrival_s,
            "prompt": self.prompt,
            "output": self.output,
            "first_token_s": _json_float(self.first_token_s),
            "finish_s": _json_float(self.finish_s),
            "ttft_s": _json_float(self.ttft_s),
            "tpot_s": _json_float(self.tpot_s),
            "latency_s": _json_float(self.latency_s),
            "preemptions": self.preemptions,
            "prefilled_tokens": self.prefilled_tokens,
        }


def _json_float(x: float) -> float | None:
    return None if math.isnan(x) else x


def request_itl(record: RequestRecord, iteration_end_s: np.ndarray) -> np.ndarray:
    """The ``o - 1`` inter-token gaps of a finished request (fewer if unfinished)."""
    times = np.concatenate(
        [iteration_end_s[first : last + 1] for first, last in record.segments] or [np.empty(0)]
    )
    return np.diff(times)


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles of a sample (``nan`` for an empty sample)."""

    count: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray | Sequence[float]) -> Distribution:
        data = np.asarray(values, dtype=float)
        data = data[~np.isnan(data)]
        if data.size == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        p50, p90, p95, p99 = np.percentile(data, [50, 90, 95, 99])
        return cls(
            int(data.size), float(data.mean()), float(p50), float(p90), float(p95), float(p99)
        )


@dataclass(frozen=True)
class Summary:
    """Aggregates of one simulation.

    Attributes
    ----------
    policy, workload, cost_model
        What ran.
    slo
        The SLO attainment and goodput refer to.
    n_requests, n_finished
        Requests that arrived, and those finished when the run stopped.
    duration_s
        Arrival window; goodput divides by it.
    end_s
        Simulated time when the run stopped.
    iterations, preemptions
        Engine iterations and preemptions.
    ttft, tpot, itl, latency
        Distributions in seconds (TPOT and latency over finished requests; TPOT only
        over those with at least two output tokens).
    attainment, goodput_rps
        Fraction meeting the SLO, and those per second of ``duration_s``.
    output_tokens_per_s
        Output tokens produced per simulated second.
    truncated
        ``True`` if the run stopped before every request finished.
    policy_stats
        The policy's own counters.
    """

    policy: str
    workload: str
    cost_model: str
    slo: SLO
    n_requests: int
    n_finished: int
    duration_s: float
    end_s: float
    iterations: int
    preemptions: int
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    latency: Distribution
    attainment: float
    goodput_rps: float
    output_tokens_per_s: float
    truncated: bool
    policy_stats: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``nan`` becomes ``null``)."""
        return nan_to_null(asdict(self))


def summarize(
    records: Sequence[RequestRecord],
    iteration_end_s: np.ndarray,
    *,
    slo: SLO,
    duration_s: float,
    end_s: float,
    policy: str,
    workload: str,
    cost_model: str,
    policy_stats: dict[str, int] | None = None,
) -> Summary:
    """Aggregate per-request records into a :class:`Summary`."""
    ttft = np.array([r.ttft_s for r in records], dtype=float)
    tpot = np.array([r.tpot_s for r in records], dtype=float)
    latency = np.array([r.latency_s for r in records], dtype=float)
    gaps = [request_itl(r, iteration_end_s) for r in records if r.output > 1]
    itl = np.concatenate(gaps) if gaps else np.empty(0)
    met = sum(r.meets(slo) for r in records)
    n = len(records)
    produced = sum(sum(last - first + 1 for first, last in r.segments) for r in records)
    return Summary(
        policy=policy,
        workload=workload,
        cost_model=cost_model,
        slo=slo,
        n_requests=n,
        n_finished=sum(r.finished for r in records),
        duration_s=duration_s,
        end_s=end_s,
        iterations=int(iteration_end_s.size),
        preemptions=sum(r.preemptions for r in records),
        ttft=Distribution.of(ttft),
        tpot=Distribution.of(tpot),
        itl=Distribution.of(itl),
        latency=Distribution.of(latency),
        attainment=met / n if n else math.nan,
        goodput_rps=met / duration_s if duration_s > 0 else math.nan,
        output_tokens_per_s=produced / end_s if end_s > 0 else math.nan,
        truncated=any(not r.finished for r in records),
        policy_stats=dict(policy_stats or {}),
    )
