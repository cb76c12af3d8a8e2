import json

import numpy as np
import pytest

from schedlab import json_files
from schedlab.calibration.recorded_run import read_vllm_bench_result
from schedlab.errors import (
    DataNotFoundError,
    FileAccessError,
    FormatError,
    ServingError,
    UnknownNameError,
)
from schedlab.llm.traces import MAX_TIMESTAMP_S, detect_kind, read_trace
from schedlab.serving.workloads import make_workload


def test_real_azure_traces(data_dir):
    code = read_trace(data_dir / "traces" / "AzureLLMInferenceTrace_code.csv")
    conv = read_trace(data_dir / "traces" / "AzureLLMInferenceTrace_conv.csv", kind="azure")
    # Row counts documented in ../shared/data/README.md.
    assert len(code) == 8819 and len(conv) == 19366
    for trace in (code, conv):
        assert trace.arrival_s is not None and trace.arrival_s.min() == 0.0
        assert (trace.prompt >= 0).all() and (trace.output >= 1).all()
    # One hour of traffic: the last arrival is near 3,600 s.
    assert 3000 < code.arrival_s.max() < 3700


def test_real_length_stats(data_dir):
    share = read_trace(data_dir / "traces" / "sharegpt_8k_filtered_stats_llama2_tokenizer.csv")
    arxiv = read_trace(
        data_dir / "traces" / "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"
    )
    assert (len(share), len(arxiv)) == (30731, 28257)
    assert share.arrival_s is None
    # arXiv summarization: long prompts, short outputs.
    assert np.median(arxiv.prompt) > 5 * np.median(arxiv.output)


def test_real_vllm_bench(data_dir):
    path = data_dir / "validation" / "vllm-0.19.0_RTXPRO6000_Llama-3.1-8B" / "requests.jsonl"
    trace = read_trace(path)
    assert detect_kind(path) == "vllm-bench" and len(trace) == 300
    assert set(trace.extra) == {"queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts"}
    assert (trace.extra["last_token_ts"] >= trace.extra["first_token_ts"]).all()


def test_mooncake_jsonl(tmp_path):
    path = tmp_path / "mc.jsonl"
    rows = [
        {"timestamp": 1000, "input_length": 10, "output_length": 3},
        {"timestamp": 3500, "input_length": 20, "output_length": 5},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    trace = read_trace(path)
    assert trace.prompt.tolist() == [10, 20] and trace.output.tolist() == [3, 5]
    assert trace.arrival_s.tolist() == [0.0, 2.5]  # milliseconds -> seconds from the first
    assert trace.hash_ids is None


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,12,x\n",
            "azure",
            r":2: GeneratedTokens: expected an integer, got 'x'",
        ),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,12,3\n",
            "azure",
            r":2: TIMESTAMP: expected a date-time",
        ),
        (
            "num_prefill_tokens,num_decode_tokens\n5,2\n-3,4\n",
            "length-stats",
            r":3: num_prefill_tokens: must be from 0 to 1e\+08, got -3",
        ),
        (
            "num_prefill_tokens,num_decode_tokens\n5.5,2\n",
            "length-stats",
            r":2: num_prefill_tokens: expected an integer, got '5.5'",
        ),
        (
            "num_prefill_tokens,num_decode_tokens\nnan,2\n",
            "length-stats",
            r":2: num_prefill_tokens: expected a finite number",
        ),
        ("num_prefill_tokens\n5\n", "length-stats", r":1: missing column\(s\) num_decode_tokens"),
        (  # the last of the two was read, silently
            "num_prefill_tokens,num_decode_tokens,num_prefill_tokens\n5,2,99\n",
            "length-stats",
            r":1: column\(s\) num_prefill_tokens given twice",
        ),
        ("num_prefill_tokens,num_decode_tokens\n", "length-stats", "no requests"),
        (
            '{"timestamp": 1, "input_length": 2}\n',
            "mooncake",
            r":1: missing key\(s\) output_length",
        ),
        (
            '{"timestamp": 1, "input_length": 2, "output_length": 1}\n{oops\n',
            "mooncake",
            r":2: invalid JSON",
        ),
        (
            '{"input_toks": 3, "output_toks": 1, "arrival_time": "soon"}\n',
            "vllm-bench",
            r":1: arrival_time: expected a number, got 'soon'",
        ),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, text, kind, message):
    path = tmp_path / "trace.txt"
    path.write_text(text)
    with pytest.raises(FormatError, match=message):
        read_trace(path, kind=kind)


def test_unknown_kind_and_missing_file(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(FormatError, match="not a known trace format"):
        read_trace(path)
    with pytest.raises(UnknownNameError, match="known: azure, length-stats, mooncake"):
        read_trace(path, kind="parquet")
    with pytest.raises(DataNotFoundError):
        read_trace(tmp_path / "missing.csv")


def test_vllm_bench_serve_result_as_a_trace(tmp_path):
    # Saved without --save-detailed: lengths only (the failed request is left out); the
    # simulator then resamples the lengths under Poisson arrivals.
    path = tmp_path / "bench.json"
    lengths = {"input_lens": [12, 9, 30], "output_lens": [3, 0, 5], "errors": ["", "x", ""]}
    path.write_text(json.dumps(lengths))
    trace = read_trace(path)
    assert trace.prompt.tolist() == [12, 30] and trace.output.tolist() == [3, 5]
    assert trace.arrival_s is None
    # With --save-detailed: the send times are the arrivals.
    detailed = {
        **lengths,
        "start_times": [10.0, 10.5, 11.25],
        "ttfts": [0.2, 0.0, 0.3],
        "itls": [[0.05, 0.07], [], [0.1] * 4],
    }
    path.write_text(json.dumps(detailed))
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1.25]
    assert trace.extra["ttft_s"].tolist() == [0.2, 0.3]
    assert trace.extra["decode_s"] == pytest.approx([0.12, 0.4])
    # Send times without the gaps: the arrivals are kept, no timing.
    path.write_text(json.dumps({k: v for k, v in detailed.items() if k != "itls"}))
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1.25] and trace.extra == {}
    with pytest.raises(FormatError, match=r"missing field\(s\) itls"):
        read_vllm_bench_result(path)
    # --save-detailed of a vLLM version that does not save send times: lengths only.
    path.write_text(json.dumps({k: v for k, v in detailed.items() if k != "start_times"}))
    trace = read_trace(path)
    assert trace.arrival_s is None and trace.prompt.tolist() == [12, 30]
    with pytest.raises(FormatError, match=r"missing field\(s\) start_times"):
        read_vllm_bench_result(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"timestamp": true, "input_length": 7, "output_length": 2}',
            "timestamp: expected a number, got True",
        ),
        (
            '{"timestamp": 1, "input_length": "7", "output_length": 2}',
            "input_length: expected an integer, got '7'",
        ),
        (
            '{"timestamp": 1, "input_length": 7, "output_length": 1e300}',
            "output_length: must be from 0 to 1e\\+08",
        ),
        (
            '{"timestamp": 1, "input_length": 7, "output_length": ' + "9" * 400 + "}",
            "output_length: expected a finite number",
        ),
    ],
)
def test_json_traces_take_numbers_only(tmp_path, line, message):
    # JSON has types: a bool or a quoted number is not a token count (CSV fields are text).
    path = tmp_path / "trace.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(FormatError, match=rf":1: {message}"):
        read_trace(path, kind="mooncake")


def test_blank_columns_of_a_spreadsheet_export_are_not_duplicates(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens,,\n5,2,,\n")
    trace = read_trace(path, kind="length-stats")
    assert trace.prompt.tolist() == [5] and trace.output.tolist() == [2]


def _mooncake(path, stamps):
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": 10, "output_length": 5}) + "\n"
            for t in stamps
        )
    )
    return path


@pytest.mark.parametrize(
    ("stamps", "message"),
    [
        # an absurd timestamp was read without a word (arrivals 1e297 s apart)
        ([0, 1e300], r"mc\.jsonl:2: timestamp: must be from 0 to 1e\+13 .*, got 1e\+300"),
        ([0, -5], r"mc\.jsonl:2: timestamp: must be from 0 to 1e\+13 .*, got -5"),
    ],
)
def test_mooncake_timestamps_are_finite_non_negative_and_not_absurd(tmp_path, stamps, message):
    with pytest.raises(FormatError, match=message):
        read_trace(_mooncake(tmp_path / "mc.jsonl", stamps))


def test_a_trace_of_any_real_span_is_read_and_refused_as_a_stream_beyond_the_cap(tmp_path):
    # lengths are read from a trace of a month; replaying it is refused where the stream
    # is made (its window cap), in one line
    month = [0, 2_600_000_000]  # ms
    trace = read_trace(_mooncake(tmp_path / "mc.jsonl", month))
    assert trace.arrival_s.tolist() == [0.0, 2.6e6] and MAX_TIMESTAMP_S >= 2.6e6
    with pytest.raises(ServingError, match=r"beyond the 1,000,000 s"):
        make_workload(str(tmp_path / "mc.jsonl")).generate(None, None, 0)  # the whole trace


@pytest.mark.parametrize("field", ["arrival_time", "first_token_ts"])
def test_a_vllm_requests_file_with_negative_times_is_refused(tmp_path, field):
    row = {"input_toks": 3, "output_toks": 2, "arrival_time": 1.0, "first_token_ts": 2.0}
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, field: -4.0}) + "\n")
    with pytest.raises(FormatError, match=rf"requests\.jsonl:2: {field}: must be from 0 to"):
        read_trace(path, "vllm-bench")


def test_a_trace_above_the_size_cap_is_refused_unread(tmp_path, monkeypatch):
    path = _mooncake(tmp_path / "mc.jsonl", [0, 1, 2])
    monkeypatch.setattr(json_files, "MAX_FILE_BYTES", 100)
    with pytest.raises(FileAccessError, match=r"mc\.jsonl: .* larger than the 100 bytes"):
        read_trace(path)


#: The range a block id must be in, as the refusal says it.
_ID_RANGE = r"expected an integer from 0 to 9,223,372,036,854,775,807"


def _hashed(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(t, length, ids):
    return {"timestamp": t, "input_length": length, "output_length": 2, "hash_ids": ids}


def test_mooncake_hash_ids_are_kept(tmp_path):
    path = _hashed(tmp_path / "mc.jsonl", [_row(0, 600, [0, 1]), _row(5, 512, [0])])
    trace = read_trace(path)
    assert trace.hash_block_tokens == 512
    assert [ids.tolist() for ids in trace.hash_ids] == [[0, 1], [0]]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        # more blocks than 600 tokens allow, fewer, none
        ([_row(0, 600, [0, 1, 2])], r":1: hash_ids: 3 block ids for input_length 600; .* need 2"),
        ([_row(0, 1100, [0, 1])], r":1: hash_ids: 2 block ids for input_length 1100; .* need 3"),
        ([_row(0, 600, [])], r":1: hash_ids: expected a list of 2 block ids, got \[\]"),
        (
            [_row(0, 10, [1]), {"timestamp": 1, "input_length": 10, "output_length": 2}],
            r":2: hash_ids: expected a list of 1 block ids, got None",
        ),
        (
            [{"timestamp": 1, "input_length": 10, "output_length": 2}, _row(2, 10, [1])],
            r":2: hash_ids on this line but not on the lines before",
        ),
        # not integers
        ([_row(0, 10, [1.5])], rf":1: hash_ids\[0\]: {_ID_RANGE}, got 1\.5"),
        ([_row(0, 10, ["7"])], rf":1: hash_ids\[0\]: {_ID_RANGE}, got '7'"),
        ([_row(0, 10, [True])], rf":1: hash_ids\[0\]: {_ID_RANGE}, got True"),
        ([_row(0, 10, [-1])], rf":1: hash_ids\[0\]: {_ID_RANGE}, got -1"),
        # beyond int64 (an OverflowError in NumPy before), and the largest one read
        ([_row(0, 10, [2**63])], rf":1: hash_ids\[0\]: {_ID_RANGE}, got {2**63}"),
        ([_row(0, 10, [2**100])], rf":1: hash_ids\[0\]: {_ID_RANGE}, got {2**100}"),
        ([_row(0, 10, "x")], r":1: hash_ids: expected a list of 1 block ids, got 'x'"),
        # an id that names two different prefixes
        (
            [_row(0, 600, [0, 1]), _row(1, 600, [2, 1])],
            r":2: hash_ids\[1\]: id 1 was block 1 after id 0 on an earlier line",
        ),
        (
            [_row(0, 600, [0, 1]), _row(1, 10, [1])],
            r":2: hash_ids\[0\]: id 1 was block 1 after id 0",
        ),
    ],
)
def test_mooncake_hash_ids_that_contradict_the_trace_are_refused(tmp_path, rows, message):
    with pytest.raises(FormatError, match=message):
        read_trace(_hashed(tmp_path / "mc.jsonl", rows))


def test_the_largest_hash_id_is_read(tmp_path):
    top = 2**63 - 1
    trace = read_trace(_hashed(tmp_path / "mc.jsonl", [_row(0, 600, [top, 5])]))
    assert trace.hash_ids is not None and trace.hash_ids[0].tolist() == [top, 5]


@pytest.mark.parametrize("kind", ["mooncake", "azure"])
def test_an_arrival_log_going_back_in_time_is_refused_by_line(tmp_path, kind):
    if kind == "mooncake":
        path = _mooncake(tmp_path / "mc.jsonl", [0, 100, 10])
        message = r"mc\.jsonl:3: timestamp: 0\.09 s before the request on the line before"
    else:
        path = tmp_path / "azure.csv"
        path.write_text(
            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2023-11-16 18:15:46.6805900,374,44\n"
            "2023-11-16 18:15:50.9951690,396,109\n"
            "2023-11-16 18:15:48.0000000,879,143\n"
        )
        message = r"azure\.csv:4: TIMESTAMP: 2\.99517 s before the request on the line before"
    with pytest.raises(FormatError, match=message + "; an arrival log lists its requests in"):
        read_trace(path)


def test_equal_timestamps_are_in_order(tmp_path):
    trace = read_trace(_mooncake(tmp_path / "mc.jsonl", [0, 5, 5, 7]))
    assert trace.arrival_s is not None and trace.arrival_s.tolist() == [0, 0.005, 0.005, 0.007]


@pytest.mark.parametrize(
    ("times", "message"),
    [
        ({"queued_ts": 4.0, "scheduled_ts": 3.2}, "scheduled_ts 3.2 before queued_ts 4.0"),
        ({"scheduled_ts": 5.0, "first_token_ts": 4.5}, "first_token_ts 4.5 before scheduled_ts"),
        ({"queued_ts": 5.0, "first_token_ts": 4.5}, "first_token_ts 4.5 before queued_ts 5.0"),
        ({"first_token_ts": 5.0, "last_token_ts": 4.0}, "last_token_ts 4.0 before first_token"),
    ],
)
def test_a_vllm_request_whose_times_go_back_is_refused(tmp_path, times, message):
    row = {"input_toks": 3, "output_toks": 2, "arrival_time": 1.0}
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, **times}) + "\n")
    with pytest.raises(
        FormatError, match=rf"requests\.jsonl:2: timestamps out of order: {message}"
    ):
        read_trace(path, "vllm-bench")


def test_real_mooncake_trace_shares_prefixes(data_dir):
    trace = read_trace(data_dir / "traces" / "mooncake_synthetic_trace.jsonl")
    assert len(trace) == 3993 and trace.hash_block_tokens == 512
    assert sum(ids.size for ids in trace.hash_ids) == 121_877
    assert len({h for ids in trace.hash_ids for h in ids.tolist()}) == 43_924
