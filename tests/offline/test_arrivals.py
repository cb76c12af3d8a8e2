"""Arrival streams: the load sets the rate, Poisson and trace-timed arrivals, bad input."""

import numpy as np
import pytest

from schedlab.errors import InstanceError
from schedlab.llm.traces import Trace, read_trace
from schedlab.offline.arrivals import DEFAULT_LOAD, arrival_stream


def test_the_load_sets_the_rate_and_the_stream_is_seeded():
    a = arrival_stream(2000, source="sharegpt", load=0.5, seed=3)
    assert a == arrival_stream(2000, source="sharegpt", load=0.5, seed=3)
    assert a != arrival_stream(2000, source="sharegpt", load=0.5, seed=4)
    rate = a.meta["rate_per_round"]
    assert rate * a.volume.mean() / a.kv_tokens == pytest.approx(0.5)
    assert a.arrival[0] == 0 and (np.diff(a.arrival) >= 0).all()
    # Poisson: 1,999 exponential gaps of mean 1/rate, scaled to exactly that mean
    # before flooring, so the last arrival is (n - 1) / rate rounds, less one
    assert (a.n - 1) / rate - 1 <= a.arrival[-1] <= (a.n - 1) / rate
    gaps = np.diff(a.arrival)
    assert gaps.std() == pytest.approx(gaps.mean(), rel=0.1)  # exponential: CV 1
    # twice the load: the same lengths, half the gaps
    b = arrival_stream(2000, source="sharegpt", load=1.0, seed=3)
    assert (b.output == a.output).all() and b.arrival[-1] == pytest.approx(a.arrival[-1] / 2, 1)
    assert a.meta["arrivals"] == "poisson" and DEFAULT_LOAD == 0.9


def _trace(times, prompt, output):
    return Trace("toy", np.array(prompt), np.array(output), arrival_s=np.array(times, dtype=float))


def test_a_timed_trace_keeps_its_gaps_and_skips_what_does_not_fit():
    # times out of order in the file; request at 3.0 s needs 100 + 5 > M = 50
    trace = _trace([0.0, 2.0, 1.0, 3.0, 4.0], [1, 2, 3, 100, 4], [1, 1, 1, 5, 2])
    inst = arrival_stream(4, kv_tokens=50, source=trace, load=1.0, seed=0)
    assert inst.meta["arrivals"] == "trace-timed" and inst.meta["skipped"] == 1
    assert inst.prompt.tolist() == [1, 3, 2, 4]  # time order, the 100-token one skipped
    rate = inst.meta["rate_per_round"]
    # recorded times 0, 1, 2, 4 s scaled so that the 3 gaps take 3 / rate rounds
    expected = np.floor(np.array([0.0, 1.0, 2.0, 4.0]) * (3 / rate) / 4.0)
    assert inst.arrival.tolist() == expected.astype(int).tolist()
    untimed = arrival_stream(4, kv_tokens=50, source=trace, load=1.0, seed=0, timed=False)
    assert untimed.meta["arrivals"] == "poisson"


@pytest.mark.parametrize(
    "file", ["AzureLLMInferenceTrace_code.csv", "mooncake_synthetic_trace.jsonl"]
)
def test_real_traces_give_streams(data_dir, file):
    trace = read_trace(data_dir / "traces" / file)
    inst = arrival_stream(300, source=trace, seed=1)
    assert inst.n == 300 and inst.meta["arrivals"] == "trace-timed"
    assert (inst.prompt + inst.output <= inst.kv_tokens).all()


def test_bad_input_is_refused_in_one_line():
    for load in (0, -0.5, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(InstanceError, match="load: must be in"):
            arrival_stream(10, load=load)  # type: ignore[arg-type]
    trace = _trace([0.0, 1.0], [1, 1], [1, 1])
    with pytest.raises(InstanceError, match="fewer than n = 3"):
        arrival_stream(3, kv_tokens=50, source=trace)
