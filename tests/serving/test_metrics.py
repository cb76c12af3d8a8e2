"""Per-request metrics and aggregates on hand-made records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schedlab.errors import ServingError
from schedlab.serving.metrics import (
    SLO,
    Distribution,
    RequestRecord,
    queue_growth,
    request_itl,
    summarize,
)

# Iterations end at 1, 2, 3, ..., 10 s.
ENDS = np.arange(1.0, 11.0)


def record(index, arrival, output, segments, finished=True):
    times = [ENDS[k] for a, b in segments for k in range(a, b + 1)]
    return RequestRecord(
        index,
        arrival,
        10,
        output,
        times[0] if times else math.nan,
        times[-1] if finished else math.nan,
        len(segments) - 1,
        10,
        tuple(segments),
    )


def test_request_metrics():
    # Arrives at 0.5; tokens at 2, 3, 4 (iterations 1..3) then, after a preemption,
    # 7 and 8: TTFT 1.5, TPOT (8 - 2)/4 = 1.5, ITL [1, 1, 3, 1].
    r = record(0, 0.5, 5, [(1, 3), (6, 7)])
    assert r.ttft_s == 1.5
    assert r.tpot_s == 1.5
    assert r.latency_s == 7.5
    itl = request_itl(r, ENDS)
    assert itl.tolist() == [1.0, 1.0, 3.0, 1.0]
    assert r.meets(SLO(ttft_s=2.0, tpot_s=1.5, kind="mean"))
    assert not r.meets(SLO(ttft_s=1.0, tpot_s=2.0, kind="mean"))
    assert not r.meets(SLO(ttft_s=2.0, tpot_s=1.4, kind="mean"))
    # every gap must meet the target: the preemption's 3 s stall misses 1.5 s and 2.9 s
    assert not r.meets(SLO(ttft_s=2.0, tpot_s=1.5), itl)
    assert not r.meets(SLO(ttft_s=2.0, tpot_s=2.9), itl)
    assert r.meets(SLO(ttft_s=2.0, tpot_s=3.0), itl)
    # four gaps: floor(0.04) = 0 may be slow, so p99 is every-token here
    assert not r.meets(SLO(ttft_s=2.0, tpot_s=2.9, kind="p99"), itl)
    with pytest.raises(ServingError, match="gaps"):
        r.meets(SLO(ttft_s=2.0, tpot_s=3.0))


def test_p99_kind_allows_one_slow_gap_in_a_hundred():
    ends = np.arange(1.0, 300.0)
    ends[50:] += 5.0  # one 6 s gap, before iteration 50
    ends[150:] += 5.0  # and a second, before iteration 150
    slo = SLO(ttft_s=10.0, tpot_s=1.0, kind="p99")

    def run(output):
        last = output - 1
        return RequestRecord(0, 0.0, 10, output, ends[0], ends[last], 0, 10, ((0, last),))

    for output, meets in ((100, False), (101, True), (150, True), (151, False), (201, True)):
        r = run(output)
        itl = request_itl(r, ends)
        assert r.meets(slo, itl) is meets, output
        # the same as the nearest-rank P99 of its gaps meeting the target
        assert bool(np.percentile(itl, 99, method="inverted_cdf") <= 1.0) is meets


def test_single_token_and_unfinished():
    # TPOT = (last - first) / (o - 1) is undefined for o = 1: NaN, left out of the TPOT
    # distribution, and the TPOT target does not apply to it.
    one = record(1, 0.0, 1, [(0, 0)])
    assert math.isnan(one.tpot_s) and one.meets(SLO(2.0, 0.001))
    assert not one.meets(SLO(0.5, 0.001))  # its TTFT of 1 s still counts
    two = record(3, 0.0, 2, [(0, 1)])
    summary = summarize(
        [one, two],
        ENDS,
        slo=SLO(2.0, 2.0),
        duration_s=10.0,
        end_s=10.0,
        policy="p",
        workload="w",
        cost_model="m",
    )
    assert summary.tpot.count == 1 and summary.tpot.mean == 1.0
    cut = record(2, 0.0, 5, [(0, 2)], finished=False)
    assert math.isnan(cut.tpot_s) and not cut.meets(SLO(100.0, 100.0))


def test_distribution():
    d = Distribution.of(np.arange(1.0, 101.0))
    assert (d.count, d.mean, d.p50) == (100, 50.5, 50.5)
    assert d.p99 == pytest.approx(99.01)
    empty = Distribution.of([math.nan])
    assert empty.count == 0 and math.isnan(empty.mean)


@pytest.mark.parametrize("kind", ["every-token", "p99", "mean"])
def test_summary_attainment_and_goodput(kind):
    records = [
        record(0, 0.0, 3, [(0, 2)]),  # TTFT 1, TPOT 1: meets
        record(1, 0.0, 3, [(4, 6)]),  # TTFT 5: misses TTFT
        record(2, 1.0, 2, [(1, 1), (5, 5)]),  # TTFT 1, TPOT 4: misses TPOT
        record(3, 2.0, 4, [(2, 3)], finished=False),  # unfinished: misses
    ]
    s = summarize(
        records,
        ENDS,
        slo=SLO(2.0, 1.0, kind),
        duration_s=4.0,
        end_s=10.0,
        policy="p",
        workload="w",
        cost_model="m",
    )
    assert s.attainment == 0.25
    assert s.goodput_rps == 0.25  # 1 request / 4 s
    assert (s.n_requests, s.n_finished, s.truncated) == (4, 3, True)
    assert s.preemptions == 1
    assert s.itl.count == 2 + 2 + 1 + 1
    assert s.output_tokens_per_s == pytest.approx(10 / 10.0)
    assert s.to_dict()["ttft"]["count"] == 4
    assert s.to_dict()["slo"]["kind"] == kind


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ttft_s": 0.0, "tpot_s": 1.0},
        {"ttft_s": 1.0, "tpot_s": math.inf},
        {"ttft_s": 1.0, "tpot_s": 1.0, "kind": "p95"},
    ],
)
def test_slo_validation(kwargs):
    with pytest.raises(ServingError, match="slo"):
        SLO(**kwargs)


def _arrivals(times, firsts):
    """Requests arriving at ``times`` with their first tokens at ``firsts`` (``nan``:
    none)."""
    return [
        RequestRecord(i, t, 10, 5, f, math.nan, 0, 10, ())
        for i, (t, f) in enumerate(zip(times, firsts, strict=True))
    ]


def test_queue_growth_is_told_from_a_steady_queue():
    times = [float(t) for t in range(40)]
    steady = _arrivals(times, [t + 0.5 for t in times])  # served before the next arrives
    assert queue_growth(steady) is None
    # one served every 2 s while one arrives every second: the queue grows all along
    growing = _arrivals(times, [1.0 + 2.0 * i for i in range(40)])
    early, late = queue_growth(growing)
    assert early < 4 < 14 < late
    # never served at all: the queue is everyone who arrived before
    assert queue_growth(_arrivals(times, [math.nan] * 40)) == (3.5, 35.5)
    assert queue_growth(growing[:9]) is None  # too few to judge


def test_a_burst_or_long_prompts_are_no_growing_queue():
    # every request at one instant: nobody found anyone ahead on arrival
    assert queue_growth(_arrivals([0.0] * 50, [1.0 + i for i in range(50)])) is None
    # a light stream, then a burst at its end that drains
    times = [float(t) for t in range(30)] + [30.0] * 12
    firsts = [t + 0.1 for t in range(30)] + [31.0 + 2 * i for i in range(12)]
    assert queue_growth(_arrivals(times, firsts)) is None
    # prompts ever longer, each served before the next arrives: waits grow, no queue
    times = [30.0 * i for i in range(20)]
    assert (
        queue_growth(_arrivals(times, [t + 0.2 + 0.25 * i for i, t in enumerate(times)])) is None
    )
