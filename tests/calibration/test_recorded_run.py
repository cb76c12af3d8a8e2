"""Reading recorded runs: LLMServingSim's bench directory and vLLM's benchmark JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from schedlab.calibration.recorded_run import read_recorded_run, read_vllm_bench_result
from schedlab.calibration.replay import METRIC_KEYS, run_metrics
from schedlab.errors import DataNotFoundError, FormatError, SchedlabNote
from tests.calibration.recorded import req, write_run


def test_measured_metric_definitions(tmp_path):
    # Request B is queued at 100.0: TTFT = 100.5 - 100.0 = 0.5, latency = 102.5 - 100 = 2.5,
    # TPOT = (102.5 - 100.5) / (5 - 1) = 0.5. Request A (queued first, at 99.0) has
    # TTFT 0.2, latency 1.2, TPOT (100.2 - 99.2) / 2 = 0.5. A one-token request C has no TPOT.
    path = write_run(
        tmp_path,
        [
            req(10, 5, 100.0, 100.5, 102.5),
            req(7, 3, 99.0, 99.2, 100.2),
            req(4, 1, 101.0, 101.1, 101.1),
        ],
    )
    with pytest.warns(SchedlabNote, match=r"request 1 \(in file order\) arrived before"):
        run = read_recorded_run(path)  # read sorted, and said so
    assert run.arrival_s.tolist() == [0.0, 1.0, 2.0]  # sorted by queued_ts, aligned at 99.0
    assert run.prompt.tolist() == [7, 10, 4]
    assert run.ttft_s == pytest.approx([0.2, 0.5, 0.1])
    assert run.latency_s == pytest.approx([1.2, 2.5, 0.1])
    assert run.tpot_s[:2] == pytest.approx([0.5, 0.5]) and math.isnan(run.tpot_s[2])
    assert run.series is None and run.meta == {} and run.config == {}
    metrics = run_metrics(run.ttft_s, run.tpot_s, run.latency_s)
    assert list(metrics) == list(METRIC_KEYS)
    assert metrics["ttft_mean"] == pytest.approx(0.8 / 3)
    assert metrics["ttft_p50"] == pytest.approx(0.2)
    assert metrics["tpot_p99"] == pytest.approx(0.5)  # the one-token request is excluded
    assert metrics["latency_p90"] == pytest.approx(np.percentile([1.2, 2.5, 0.1], 90))
    # The directory reads the same as its requests.jsonl.
    with pytest.warns(SchedlabNote):
        assert read_recorded_run(tmp_path).prompt.tolist() == [7, 10, 4]


def test_a_run_in_arrival_order_is_read_without_a_note(tmp_path, recwarn):
    path = write_run(tmp_path, [req(7, 3, 99.0, 99.2, 100.2), req(10, 5, 100.0, 100.5, 102.5)])
    assert read_recorded_run(path).prompt.tolist() == [7, 10]
    assert not [w for w in recwarn if issubclass(w.category, SchedlabNote)]


@pytest.mark.parametrize("field", ["queued_ts", "first_token_ts", "last_token_ts"])
def test_a_negative_timestamp_is_refused_by_line(tmp_path, field):
    times = {"queued_ts": -3.0, "first_token_ts": -2.0, "last_token_ts": -1.0}
    row = {"input_toks": 3, "output_toks": 2, **{k: abs(v) for k, v in times.items()}}
    row[field] = times[field] if field == "queued_ts" else -abs(times[field])
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(FormatError, match=rf"requests\.jsonl:1: {field}: must be >= 0"):
        read_recorded_run(path)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("not json", "invalid JSON"),
        (
            '{"input_toks": 3, "output_toks": 2, "queued_ts": 1, "first_token_ts": 2}',
            r"missing key\(s\) last_token_ts",
        ),
        (
            '{"input_toks": 0, "output_toks": 2, "queued_ts": 1, "first_token_ts": 2, '
            '"last_token_ts": 3}',
            r"input_toks: expected an integer from 1 to 1e\+08, got 0",
        ),
        (
            '{"input_toks": 3, "output_toks": 2, "queued_ts": 5, "first_token_ts": 2, '
            '"last_token_ts": 3}',
            "out of order",
        ),
        (
            '{"input_toks": 3, "output_toks": 2, "queued_ts": 1, "first_token_ts": 2, '
            '"last_token_ts": "3"}',
            "last_token_ts: expected a number",
        ),
        ("[1, 2]", "expected a JSON object"),
        (
            '{"input_toks": ' + "1" * 400 + ', "output_toks": 2, "queued_ts": 1, '
            '"first_token_ts": 2, "last_token_ts": 3}',
            "input_toks: must be finite",
        ),
        (
            '{"input_toks": 3, "output_toks": 1e300, "queued_ts": 1, "first_token_ts": 2, '
            '"last_token_ts": 3}',
            r"output_toks: expected an integer from 1 to 1e\+08",
        ),
        (  # negative and zero counts get one message
            '{"input_toks": -3, "output_toks": 2, "queued_ts": 1, "first_token_ts": 2, '
            '"last_token_ts": 3}',
            r"input_toks: expected an integer from 1 to 1e\+08, got -3",
        ),
        (
            '{"input_toks": 0, "output_toks": 2, "queued_ts": 1, "first_token_ts": 2, '
            '"last_token_ts": 3}',
            r"input_toks: expected an integer from 1 to 1e\+08, got 0",
        ),
    ],
)
def test_malformed_requests_name_the_line(tmp_path, line, fragment):
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(req(1, 2, 0, 1, 2)) + "\n" + line + "\n")
    with pytest.raises(FormatError, match=rf"requests\.jsonl:2:(\d+:)? .*{fragment}"):
        read_recorded_run(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arrival_time": -5.0}, r"arrival_time: must be from 0 to 1e\+10 .*, got -5\.0"),
        ({"arrival_time": 1e300}, r"arrival_time: must be from 0 to 1e\+10 .*, got 1e\+300"),
        ({"arrival_time": "5"}, r"arrival_time: expected a number, got '5'"),
        ({"scheduled_ts": -1.0}, r"scheduled_ts: must be from 0 to"),
        (
            {"scheduled_ts": 3.2, "queued_ts": 4.0},
            r"timestamps out of order: scheduled_ts 3\.2 before queued_ts 4\.0",
        ),
        (
            {"scheduled_ts": 7.0},
            r"timestamps out of order: first_token_ts 5\.0 before scheduled_ts 7\.0",
        ),
    ],
)
def test_the_times_a_replay_does_not_use_are_checked_too(tmp_path, change, message):
    # each was read without a word before (issue 54): arrival_time and scheduled_ts
    rows = [{**req(3, 2, 4.0, 5.0, 6.0), "scheduled_ts": 4.5}]
    path = write_run(tmp_path, [rows[0], {**rows[0], **change}])
    with pytest.raises(FormatError, match=rf"requests\.jsonl:2: {message}"):
        read_recorded_run(path)


def test_times_given_as_null_or_left_out_are_not_measured(tmp_path):
    row = req(3, 2, 4.0, 5.0, 6.0)
    path = write_run(tmp_path, [{**row, "arrival_time": None, "scheduled_ts": None}, row])
    assert read_recorded_run(path).arrival_s.tolist() == [0.0, 0.0]


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataNotFoundError, match="no such run"):
        read_recorded_run(tmp_path / "none.jsonl")
    with pytest.raises(DataNotFoundError, match=r"no requests\.jsonl"):
        read_recorded_run(tmp_path)
    (tmp_path / "requests.jsonl").write_text("\n")
    with pytest.raises(FormatError, match="no requests"):
        read_recorded_run(tmp_path / "requests.jsonl")
    (tmp_path / "requests.jsonl").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FormatError, match="UTF-8"):
        read_recorded_run(tmp_path / "requests.jsonl")


def test_mixed_clocks_are_refused(tmp_path):
    # One request on an epoch clock among monotonic ones: a span of 1.7e9 s.
    write_run(tmp_path, [req(1, 2, 100.0, 100.5, 101.0), req(1, 2, 1.7e9, 1.7e9 + 1, 1.7e9 + 2)])
    with pytest.raises(
        FormatError, match=r"span 1,699,999,902 s, more than 1,000,000 s: are two clocks mixed"
    ):
        read_recorded_run(tmp_path)


def test_meta_must_be_an_object(tmp_path):
    write_run(tmp_path, [req(1, 2, 0, 1, 2)])
    (tmp_path / "meta.json").write_text("[1]")
    with pytest.raises(FormatError, match=r"meta\.json: expected a JSON object"):
        read_recorded_run(tmp_path)


def test_timeseries_is_read(tmp_path):
    write_run(tmp_path, [req(1, 2, 0, 1, 2)])
    (tmp_path / "timeseries.csv").write_text(
        "t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n"
        "1,100,20,3,1,12.5\n2,0,30,2,0,\n"
    )
    series = read_recorded_run(tmp_path).series
    assert series is not None
    assert series.t.tolist() == [1, 2] and series.generation_tps.tolist() == [20, 30]
    assert series.running.tolist() == [3, 2] and series.waiting.tolist() == [1, 0]
    assert series.kv_percent[0] == 12.5 and math.isnan(series.kv_percent[1])
    (tmp_path / "timeseries.csv").write_bytes(b"t,prompt_throughput\xff\n")
    with pytest.raises(FormatError, match=r"timeseries\.csv: not UTF-8"):
        read_recorded_run(tmp_path)
    (tmp_path / "timeseries.csv").write_text("t,running\n1,2\n")
    with pytest.raises(FormatError, match=r"timeseries\.csv:1: missing column"):
        read_recorded_run(tmp_path)
    (tmp_path / "timeseries.csv").write_text(
        "t,prompt_throughput,gen_throughput,running,waiting\n1,x,2,3,4\n"
    )
    with pytest.raises(
        FormatError, match=r"timeseries\.csv:2: prompt_throughput: expected a number, got 'x'"
    ):
        read_recorded_run(tmp_path)
    for bad, message in (
        ("nan", "must be finite"),
        ("inf", "must be finite"),
        ("-3", "must be >= 0"),
    ):
        (tmp_path / "timeseries.csv").write_text(
            f"t,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct\n1,1,2,3,4,{bad}\n"
        )
        with pytest.raises(FormatError, match=rf"timeseries\.csv:2: kv_cache_pct: {message}"):
            read_recorded_run(tmp_path)


def bench_result(**changes):
    # Two requests sent at perf_counter 50.0 and 50.5. The first: prompt 12, 3 tokens,
    # TTFT 0.2, gaps 0.05 and 0.07 -> last token at 50.32. The second failed.
    data = {
        "input_lens": [12, 9],
        "output_lens": [3, 0],
        "ttfts": [0.2, 0.0],
        "itls": [[0.05, 0.07], []],
        "start_times": [50.0, 50.5],
        "errors": ["", "connection reset"],
    }
    data.update(changes)
    return data


def test_vllm_bench_result(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench_result()))
    run = read_recorded_run(path)
    assert len(run) == 1  # the failed request is left out
    assert run.prompt.tolist() == [12] and run.output.tolist() == [3]
    assert run.ttft_s == pytest.approx([0.2])
    assert run.latency_s == pytest.approx([0.32])
    assert run.tpot_s == pytest.approx([0.06])  # (0.32 - 0.2) / (3 - 1)
    # Arrivals are the send times, aligned at the first.
    data = bench_result(output_lens=[3, 2], errors=["", ""], itls=[[0.05, 0.07], [0.1]])
    path.write_text(json.dumps(data))
    run = read_vllm_bench_result(path)
    assert run.arrival_s.tolist() == pytest.approx([0.0, 0.5])


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"start_times": None}, r"missing field\(s\) start_times \(only --save-detailed"),
        ({"itls": None}, r"missing field\(s\) itls \("),
        ({"input_lens": None}, r"missing field\(s\) input_lens"),
        ({"ttfts": [0.2]}, "ttfts: expected a list of 2 entries"),
        ({"ttfts": ["a", 0.0]}, "request 0: ttfts: expected a number, got 'a'"),
        ({"ttfts": [-0.1, 0.0]}, "request 0: ttfts and itls must be >= 0"),
        ({"input_lens": [0, 9]}, r"request 0: input_lens: must be from 1 to 1e\+08"),
        ({"itls": [0.1, []]}, "request 0: itls: expected a list of gaps"),
    ],
)
def test_vllm_bench_result_errors(tmp_path, changes, fragment):
    data = bench_result(**changes)
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=fragment):
        read_recorded_run(path)
    path.write_text("[]")
    with pytest.raises(FormatError, match="expected a JSON object"):
        read_recorded_run(path)


def test_shared_run_reference_figures(real_run):
    run = read_recorded_run(real_run.parent)
    assert len(run) == 300 and run.series is not None
    # Reference figures of the measured run in ../shared/data/README.md (ms).
    measured = run_metrics(run.ttft_s, run.tpot_s, run.latency_s)
    assert measured["ttft_mean"] * 1e3 == pytest.approx(7097, abs=1)
    assert measured["ttft_p50"] * 1e3 == pytest.approx(9443, abs=1)
