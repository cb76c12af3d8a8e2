"""Per-request metrics and aggregates on hand-made records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schedlab.errors import ServingError
from schedlab.serving.metrics import SLO, Distribution, RequestRecord, request_itl, summarize

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
    assert request_itl(r, ENDS).tolist() == [1.0, 1.0, 3.0, 1.0]
    assert r.meets(SLO(ttft_s=2.0, tpot_s=1.5))
    assert not r.meets(SLO(ttft_s=1.0, tpot_s=2.0))
    assert not r.meets(SLO(ttft_s=2.0, tpot_s=1.4))


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


def test_summary_attainment_and_goodput():
    records = [
        record(0, 0.0, 3, [(0, 2)]),  # TTFT 1, TPOT 1: meets
        record(1, 0.0, 3, [(4, 6)]),  # TTFT 5: misses TTFT
        record(2, 1.0, 2, [(1, 1), (5, 5)]),  # TTFT 1, TPOT 4: misses TPOT
        record(3, 2.0, 4, [(2, 3)], finished=False),  # unfinished: misses
    ]
    s = summarize(
        records,
        ENDS,
        slo=SLO(2.0, 1.0),
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


@pytest.mark.parametrize(
    "kwargs", [{"ttft_s": 0.0, "tpot_s": 1.0}, {"ttft_s": 1.0, "tpot_s": math.inf}]
)
def test_slo_validation(kwargs):
    with pytest.raises(ServingError, match="slo"):
        SLO(**kwargs)
