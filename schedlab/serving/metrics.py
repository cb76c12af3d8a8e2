r"""Per-request serving metrics and their aggregates (``docs/design.md``, "Metrics and SLOs").

For a request with arrival :math:`a`, output length :math:`o` and token times
:math:`t_1 \le \dots \le t_o`:

* TTFT :math:`= t_1 - a`; end-to-end latency :math:`= t_o - a`;
* TPOT :math:`= (t_o - t_1)/(o - 1)`, taken as 0 when :math:`o = 1`;
* inter-token latencies (ITL) :math:`t_{k+1} - t_k`, :math:`k = 1..o-1`.

A request meets the SLO :math:`(X, D, \text{kind})` when it finished, TTFT :math:`\le X`,
and its token pace meets :math:`D` in the sense of the SLO's *kind*:

==================  ==================================================================
kind                the request's pace meets :math:`D` when
==================  ==================================================================
``every-token``     every gap :math:`t_{k+1} - t_k \le D` (the default: what SLOWeave
                    guarantees, each next token's deadline)
``p99``             its P99 gap :math:`\le D` (nearest rank): at most
                    :math:`\lfloor 0.01 (o - 1) \rfloor` of its :math:`o - 1` gaps exceed
                    :math:`D`
``mean``            TPOT :math:`\le D` (vLLM's benchmark and DistServe judge the mean)
==================  ==================================================================

``every-token`` implies the other two, so its attainment is the lowest. Attainment is the
fraction of requests meeting the SLO (unfinished requests count as misses); goodput is the
number meeting it per second of the arrival window (DistServe, Zhong et al., OSDI 2024,
use the same SLO-attainment notion). The system-wide P99 time between tokens, over all
gaps of all requests, is Sarathi-Serve's latency metric (Agrawal et al., OSDI 2024):
``Summary.itl.p99``.
"""

from __future__ import annotations

import bisect
import math
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from schedlab.errors import SchedlabNote, ServingError
from schedlab.json_files import nan_to_null
from schedlab.tables import to_pandas

__all__ = [
    "GROWTH_FACTOR",
    "GROWTH_SLACK",
    "SLO",
    "SLO_KINDS",
    "TIME_TOLERANCE_S",
    "Distribution",
    "RequestRecord",
    "Summary",
    "allowed_slow_gaps",
    "queue_growth",
    "request_itl",
    "summarize",
]

#: The kinds of TPOT objective (module docstring), the default first.
SLO_KINDS = ("every-token", "p99", "mean")

#: Gaps are differences of absolute event times, each rounded to a float: an iteration
#: planned to last exactly ``D`` can measure ``D + 1e-17`` s. A gap, TPOT or TTFT meets
#: its target when it is at most the target plus this tolerance (1 ns, above the rounding
#: of times up to about 10**6 s and far below anything a server could measure).
TIME_TOLERANCE_S = 1e-9


@dataclass(frozen=True)
class SLO:
    """Service-level objective: TTFT at most ``ttft_s``, and the token pace at most
    ``tpot_s`` in the sense of ``kind`` (one of :data:`SLO_KINDS`; module docstring)."""

    ttft_s: float
    tpot_s: float
    kind: str = "every-token"

    def __post_init__(self) -> None:
        for name in ("ttft_s", "tpot_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ServingError(f"slo.{name}: expected a number of seconds, got {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise ServingError(f"slo.{name}: must be a positive finite time, got {value!r}")
        if self.kind not in SLO_KINDS:
            raise ServingError(
                f"slo.kind: expected one of {', '.join(SLO_KINDS)}, got {self.kind!r}"
            )
        if self.tpot_s >= 1:  # seconds, as every time here: 10 ms is 0.010
            note = f"slo.tpot_s: {self.tpot_s:g} s per token (seconds; 10 ms is 0.010)"
            warnings.warn(note, SchedlabNote, stacklevel=3)
        if self.ttft_s < self.tpot_s:  # the first token is one iteration at least
            note = (
                f"slo.ttft_s: {self.ttft_s:g} s is below tpot_s {self.tpot_s:g} s: the first "
                "token takes an iteration at least, so few requests can meet it"
            )
            warnings.warn(note, SchedlabNote, stacklevel=3)

    @property
    def gap_limit_s(self) -> float:
        """The largest gap (or TPOT) that meets ``tpot_s``: the target plus
        :data:`TIME_TOLERANCE_S`."""
        return self.tpot_s + TIME_TOLERANCE_S

    @property
    def ttft_limit_s(self) -> float:
        """The largest TTFT that meets ``ttft_s``, with the same tolerance."""
        return self.ttft_s + TIME_TOLERANCE_S

    @classmethod
    def restored(cls, data: dict[str, Any]) -> SLO:
        """The SLO of a saved result or scenario (its fields as keywords), without the
        notes a new one gives: they were said when it was first made."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SchedlabNote)
            return cls(**data)

    def describe(self) -> str:
        """``'TTFT <= 5 s, TPOT (every-token) <= 25 ms'``."""
        return f"TTFT <= {self.ttft_s:g} s, TPOT ({self.kind}) <= {self.tpot_s * 1e3:g} ms"


def allowed_slow_gaps(slo: SLO, output: int) -> int:
    r"""How many of a request's ``output - 1`` gaps may exceed ``slo.tpot_s`` under the
    ``every-token`` (none) or ``p99`` (:math:`\lfloor 0.01 (o - 1) \rfloor`) kind."""
    return (output - 1) // 100 if slo.kind == "p99" else 0


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

    def meets(self, slo: SLO, itl: np.ndarray | None = None) -> bool:
        """Finished with TTFT and pace within ``slo`` (a one-token request has no pace to
        meet). ``itl``, the request's gaps (:func:`request_itl`), is needed by the
        ``every-token`` and ``p99`` kinds."""
        if not (self.finished and self.ttft_s <= slo.ttft_limit_s):
            return False
        if self.output == 1:
            return True
        if slo.kind == "mean":
            return self.tpot_s <= slo.gap_limit_s
        if itl is None:
            raise ServingError(f"slo kind {slo.kind!r}: give the request's gaps (request_itl)")
        slow = int(np.count_nonzero(itl > slo.gap_limit_s))
        return slow <= allowed_slow_gaps(slo, self.output)

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
    policy, workload, cost_model, hardware
        What ran: the names of the policy, the workload and the predicted cost model, and
        the GPU that model describes.
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
    peak_kv_tokens
        The most KV tokens (whole blocks) in use at once on one replica.
    ttft, tpot, itl, latency
        Distributions in seconds (TPOT and latency over finished requests; TPOT only
        over those with at least two output tokens). ``itl.p99`` is the system-wide P99
        time between tokens.
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
    peak_kv_tokens: int = 0
    hardware: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``nan`` becomes ``null``)."""
        return nan_to_null(asdict(self))

    def row(self) -> dict[str, Any]:
        """One flat row for tables and CSV: what ran, the counts, each distribution's
        mean and percentiles in seconds (``ttft_p50_s``...), attainment and goodput (no
        policy counters)."""
        row: dict[str, Any] = {
            "policy": self.policy,
            "workload": self.workload,
            "cost_model": self.cost_model,
            "hardware": self.hardware,
            "ttft_slo_s": self.slo.ttft_s,
            "tpot_slo_s": self.slo.tpot_s,
            "tpot_slo": self.slo.kind,
            "n_requests": self.n_requests,
            "n_finished": self.n_finished,
            "duration_s": self.duration_s,
            "end_s": self.end_s,
            "iterations": self.iterations,
            "preemptions": self.preemptions,
            "peak_kv_tokens": self.peak_kv_tokens,
        }
        for name in ("ttft", "tpot", "itl", "latency"):
            d = getattr(self, name)
            for stat in ("mean", "p50", "p90", "p95", "p99"):
                row[f"{name}_{stat}_s"] = getattr(d, stat)
        return row | {
            "attainment": self.attainment,
            "goodput_rps": self.goodput_rps,
            "output_tokens_per_s": self.output_tokens_per_s,
            "truncated": self.truncated,
        }

    def to_pandas(self) -> Any:
        """:meth:`row` as a pandas DataFrame of one row (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas([self.row()])

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """The summary :meth:`to_dict` gave (``null`` back to ``nan``)."""

        def number(value: Any) -> Any:
            return math.nan if value is None else value

        distributions = {
            name: Distribution(**{k: number(v) for k, v in data[name].items()})
            for name in ("ttft", "tpot", "itl", "latency")
        }
        rates = {k: number(data[k]) for k in ("attainment", "goodput_rps", "output_tokens_per_s")}
        return cls(**{**data, **distributions, **rates, "slo": SLO.restored(data["slo"])})


#: :func:`queue_growth`'s test, in requests waiting: the last fifth's median queue exceeds
#: :data:`GROWTH_FACTOR` times the first fifth's plus :data:`GROWTH_SLACK`.
GROWTH_FACTOR = 4.0
GROWTH_SLACK = 2.0


def queue_growth(records: Sequence[RequestRecord]) -> tuple[float, float] | None:
    """The median queue each request found on arrival (the earlier arrivals still without
    a first token) among the first and the last fifth of the requests, by arrival, when
    the queue grew through the window: the last's exceeds :data:`GROWTH_FACTOR` times the
    first's plus :data:`GROWTH_SLACK`, and the middle fifth's was already over twice the
    first's plus half the slack (a queue that grows all along, not a burst at the end).
    ``None`` when it did not, when every request arrived at once, or for fewer than 10
    requests. A queue that grows through the window means the load offered exceeds what
    is served: the run's figures then grow with the window's length instead of describing
    a steady state. (A request's own prefill is no queue: long prompts served one at a
    time are not counted as growth.)"""
    if len(records) < 10:
        return None
    ordered = sorted(records, key=lambda record: (record.arrival_s, record.index))
    arrivals = [r.arrival_s for r in ordered]
    if not arrivals[-1] > arrivals[0]:
        return None
    served = sorted(r.first_token_s for r in ordered if math.isfinite(r.first_token_s))
    queue = [bisect.bisect_left(arrivals, t) - bisect.bisect_right(served, t) for t in arrivals]
    fifth = len(queue) // 5
    early, middle, late = (
        statistics.median(part)
        for part in (queue[:fifth], queue[2 * fifth : 3 * fifth], queue[-fifth:])
    )
    grew = late > GROWTH_FACTOR * early + GROWTH_SLACK
    return (early, late) if grew and middle > 2 * early + GROWTH_SLACK / 2 else None


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
    peak_kv_tokens: int = 0,
    hardware: str = "",
) -> Summary:
    """Aggregate per-request records into a :class:`Summary`."""
    ttft = np.array([r.ttft_s for r in records], dtype=float)
    tpot = np.array([r.tpot_s for r in records], dtype=float)
    latency = np.array([r.latency_s for r in records], dtype=float)
    gaps = [request_itl(r, iteration_end_s) for r in records]
    itl = np.concatenate(gaps) if gaps else np.empty(0)
    met = sum(r.meets(slo, g) for r, g in zip(records, gaps, strict=True))
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
        peak_kv_tokens=peak_kv_tokens,
        hardware=hardware,
    )
