"""Workloads: determinism, common random numbers, the documented mixes, trace replay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from schedlab.errors import DataNotFoundError, FormatError, ServingError, UnknownNameError
from schedlab.llm.lengths import builtin_table
from schedlab.serving import workloads
from schedlab.serving.workloads import (
    BLOCK,
    BURSTY_CV,
    DEFAULT_RATE_RPS,
    RequestStream,
    data_directory,
    make_workload,
)
from tests.conftest import DATA_DIR

DATA = DATA_DIR
needs_data = pytest.mark.skipif(
    not (DATA / "traces").is_dir(), reason=f"shared data not at {DATA}"
)


def test_same_seed_same_stream_and_window():
    w = make_workload("chat")
    a, b = w.generate(5.0, 100.0, seed=4), w.generate(5.0, 100.0, seed=4)
    c = w.generate(5.0, 100.0, seed=5)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.prompt, b.prompt)
    assert not np.array_equal(a.prompt[:20], c.prompt[:20])
    assert a.arrival_s.max() < 100.0 and a.duration_s == 100.0
    assert (a.prompt >= 1).all() and (a.output >= 1).all()
    # About rate x duration requests (Poisson: 500 +- 3 sd of 22).
    assert 430 < len(a) < 570


def test_common_random_numbers_across_rates():
    # Doubling the rate halves every arrival time and keeps every request's lengths,
    # also when the two streams need a different number of draw blocks.
    w = make_workload("mixed")
    slow, fast = w.generate(2.0, 3000.0, seed=1), w.generate(4.0, 3000.0, seed=1)
    k = len(slow)
    assert BLOCK < k < 2 * BLOCK < len(fast)
    assert np.allclose(fast.arrival_s[:k], slow.arrival_s / 2)
    assert np.array_equal(fast.prompt[:k], slow.prompt)
    assert np.array_equal(fast.output[:k], slow.output)


def test_mixed_is_half_chat_half_long():
    # arXiv outputs are short: P(output > 1000) is ~0 for arXiv and a known value for
    # ShareGPT, so the share of such outputs identifies the mix.
    rng = np.random.default_rng(0)
    chat_out = builtin_table("sharegpt").sample(200_000, rng)[1]
    long_out = builtin_table("arxiv").sample(200_000, rng)[1]
    threshold = 800
    expected = 0.5 * (chat_out > threshold).mean() + 0.5 * (long_out > threshold).mean()
    mixed = make_workload("mixed").generate(50.0, 2000.0, seed=3)
    assert (mixed.output > threshold).mean() == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(("name", "cv"), [("chat", 1.0), ("bursty", BURSTY_CV)])
def test_inter_arrival_cv(name, cv):
    stream = make_workload(name).generate(10.0, 20_000.0, seed=2)
    gaps = np.diff(stream.arrival_s)
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)


def test_length_trace_file_as_workload(tmp_path):
    path = tmp_path / "lengths.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n100,5\n200,7\n")
    stream = make_workload(str(path)).generate(5.0, 40.0, seed=0)
    assert set(zip(stream.prompt.tolist(), stream.output.tolist(), strict=True)) == {
        (100, 5),
        (200, 7),
    }


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("100,5\n200,0\n", "request 1 .in file order. has output length 0"),
        ("0,5\n200,3\n", "request 0 .in file order. has prompt length 0"),
    ],
)
def test_a_request_without_tokens_is_refused_not_raised_to_one(tmp_path, rows, message):
    path = tmp_path / "lengths.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n" + rows)
    with pytest.raises(FormatError, match=message):
        make_workload(str(path))


def _mooncake(path, rows):
    path.write_text(
        "".join(
            f'{{"timestamp": {t}, "input_length": {p}, "output_length": {o}}}\n'
            for t, p, o in rows
        )
    )
    return str(path)


def test_a_replay_out_of_time_order_is_refused_not_sorted(tmp_path):
    # an arrival log is refused as it is read, naming the line
    path = _mooncake(tmp_path / "trace.jsonl", [(0, 10, 3), (4000, 30, 2), (1000, 20, 1)])
    with pytest.raises(FormatError, match=r"trace\.jsonl:3: timestamp: 3 s before the request"):
        make_workload(path).generate(None, None, seed=0)
    # a recorded vLLM run may list its requests in any order; a replay of it needs time order
    rows = [(0.0, 10, 3), (4.0, 30, 2), (1.0, 20, 1)]
    run = tmp_path / "requests.jsonl"
    run.write_text(
        "".join(
            json.dumps({"input_toks": p, "output_toks": o, "arrival_time": t}) + "\n"
            for t, p, o in rows
        )
    )
    with pytest.raises(FormatError, match=r"request 2 \(in file order\) arrives before request 1"):
        make_workload(str(run)).generate(None, None, seed=0)


def test_a_missing_trace_file_is_named_as_such():
    with pytest.raises(DataNotFoundError, match=r"nowhere\.csv: no such trace file"):
        make_workload("nowhere.csv")
    with pytest.raises(DataNotFoundError, match="no such trace file"):
        make_workload("some/dir/trace")
    with pytest.raises(UnknownNameError, match="unknown workload"):
        make_workload("chatt")  # a name, not a path


def test_a_synthetic_workload_has_a_default_rate():
    stream = make_workload("chat").generate(None, 100.0, seed=0)
    assert len(stream) == pytest.approx(DEFAULT_RATE_RPS * 100, rel=0.15)


def test_vllm_bench_serve_result_as_workload(tmp_path):
    # A vllm bench serve result: lengths only, resampled under Poisson arrivals; with the
    # send times (--save-detailed), replayed.
    path = tmp_path / "bench.json"
    lengths = {"input_lens": [12, 30], "output_lens": [3, 5]}
    path.write_text(json.dumps(lengths))
    stream = make_workload(str(path)).generate(2.0, 50.0, seed=1)
    assert set(stream.prompt.tolist()) == {12, 30} and len(stream) > 10
    timed = {**lengths, "start_times": [3.0, 4.5], "ttfts": [0.1, 0.1], "itls": [[0.1], []]}
    path.write_text(json.dumps(timed))
    replayed = make_workload(str(path)).generate(None, None, seed=0)
    assert replayed.arrival_s.tolist() == [0.0, 1.5] and replayed.output.tolist() == [3, 5]


def test_replay_rescales_time_and_says_so(tmp_path):
    path = _mooncake(tmp_path / "trace.jsonl", [(0, 10, 3), (1000, 20, 1), (4000, 30, 2)])
    w = make_workload(path)
    native = w.generate(None, None, seed=0)
    assert native.arrival_s.tolist() == [0.0, 1.0, 4.0] and native.name == "trace"
    assert native.output.tolist() == [3, 1, 2]
    # Native rate 3 / 4 s = 0.75 req/s; at 1.5 req/s time runs twice as fast.
    fast = w.generate(1.5, None, seed=0)
    assert fast.arrival_s.tolist() == [0.0, 0.5, 2.0]
    assert fast.name == "trace (timestamps x0.5 to 1.5 req/s)"
    assert w.generate(None, 2.0, seed=0).arrival_s.tolist() == [0.0, 1.0]


@needs_data
def test_azure_replay_at_a_rate():
    w = make_workload("azure-conv")
    stream = w.generate(2.0, 600.0, seed=0)
    assert len(stream) == pytest.approx(1200, rel=0.2)
    assert np.all(np.diff(stream.arrival_s) >= 0)


def test_missing_azure_trace(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"AzureLLMInferenceTrace_code\.csv"):
        make_workload("azure-code", data_dir=tmp_path)


def test_bad_inputs():
    with pytest.raises(UnknownNameError, match="bursty"):
        make_workload("nope")
    with pytest.raises(ServingError, match="rate"):
        make_workload("chat").generate(0.0, 10.0, seed=0)
    with pytest.raises(ServingError, match="duration"):
        make_workload("chat").generate(1.0, -1.0, seed=0)


@pytest.mark.parametrize(
    ("arrival", "prompt", "output", "message"),
    [
        ([0.0, -1.0], [1, 1], [1, 1], "request 1: arrival"),
        ([1.0, 0.5], [1, 1], [1, 1], "request 1: arrivals must be non-decreasing"),
        ([0.0, 1.0], [1, 0], [1, 1], "request 1: prompt must be >= 1"),
        ([0.0, 1.0], [1, 1], [0, 1], "request 0: output must be >= 1"),
    ],
)
def test_stream_validation(arrival, prompt, output, message):
    with pytest.raises(ServingError, match=message):
        RequestStream("s", np.array(arrival), np.array(prompt), np.array(output), 1.0)


@pytest.mark.parametrize(("last", "duration"), [(0.0, 2e6), (1.5e6, 1.0)])
def test_a_window_beyond_a_million_seconds_is_refused(last, duration):
    # times there are floats too coarse for 1 ns SLO tests: at 5e13 s every TPOT was 0
    with pytest.raises(
        ServingError, match=r"arrivals over [12],[05]00,000 s, beyond the 1,000,000 s"
    ):
        RequestStream("s", np.array([0.0, last]), np.ones(2, int), np.ones(2, int), duration)


def test_the_data_directory_is_given_set_or_beside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("SCHEDLAB_DATA", raising=False)
    monkeypatch.setattr(workloads, "BESIDE_CHECKOUT", tmp_path / "absent")
    with pytest.raises(DataNotFoundError, match="set SCHEDLAB_DATA to the folder holding traces/"):
        make_workload("azure-conv")
    monkeypatch.setattr(workloads, "BESIDE_CHECKOUT", tmp_path)
    assert data_directory() == tmp_path
    assert data_directory(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv("SCHEDLAB_DATA", str(tmp_path / "set"))
    assert data_directory() == tmp_path / "set"


def test_a_stream_too_large_is_refused_before_it_is_drawn():
    chat = make_workload("chat")
    with pytest.raises(ServingError, match=r"about 1,000 requests .* limit of 999"):
        chat.generate(100.0, 10.0, seed=0, max_requests=999)
    assert len(chat.generate(100.0, 10.0, seed=0, max_requests=2000)) > 900
    # the default limit refuses 10**9 requests at once, without allocating them
    with pytest.raises(ServingError, match="--max-requests"):
        chat.generate(1e9, 1.0, seed=0)


def test_a_window_without_requests_is_an_error_not_nan():
    from schedlab.serving.simulator import simulate

    with pytest.raises(ServingError, match="no request arrives"):
        simulate("chat", rate=1e-9, duration_s=1.0)


def test_a_replayed_trace_file_is_read_once(tmp_path, monkeypatch):
    # make_workload reads the file to tell a replay from lengths; simulate reuses that read
    from schedlab.serving import workloads
    from schedlab.serving.simulator import simulate

    path = _mooncake(tmp_path / "trace.jsonl", [(0, 10, 3), (1000, 20, 1), (4000, 30, 2)])
    reads = []
    original = workloads.read_trace
    monkeypatch.setattr(workloads, "read_trace", lambda p: reads.append(p) or original(p))
    result = simulate(path, duration_s=10.0)
    assert len(result.records) == 3
    assert reads == [tmp_path / "trace.jsonl"]
    replay = make_workload(path)
    for _ in range(3):  # and every stream generated from one replay shares it
        replay.generate(None, None, seed=0)
    assert len(reads) == 2
