"""Replay: metric definitions, reading recorded runs, KV capacity, the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from schedlab.calibration.replay import (
    METRIC_KEYS,
    engine_config_for_run,
    kv_tokens_for_run,
    read_recorded_run,
    replay,
    run_metrics,
)
from schedlab.cli import main
from schedlab.errors import DataNotFoundError, FormatError
from schedlab.llm.models import GIB
from schedlab.serving.cost_model import LinearAttentionCostModel, save_cost_model
from schedlab.serving.engine_config import EngineConfig

# Every iteration takes 10 ms whatever it holds.
FLAT = LinearAttentionCostModel(name="flat-10ms", base_s=0.010)


def write_run(tmp_path, requests, meta=None, config=None):
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in requests) + "\n")
    if meta is not None:
        (tmp_path / "meta.json").write_text(json.dumps(meta))
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
    return path


def req(prompt, output, queued, first, last):
    return {
        "input_toks": prompt,
        "output_toks": output,
        "queued_ts": queued,
        "first_token_ts": first,
        "last_token_ts": last,
        "arrival_time": 0,
    }


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
    run = read_recorded_run(path)
    assert run.arrival_s.tolist() == [0.0, 1.0, 2.0]  # sorted by queued_ts, aligned at 99.0
    assert run.prompt.tolist() == [7, 10, 4]
    assert run.ttft_s == pytest.approx([0.2, 0.5, 0.1])
    assert run.latency_s == pytest.approx([1.2, 2.5, 0.1])
    assert run.tpot_s[:2] == pytest.approx([0.5, 0.5]) and math.isnan(run.tpot_s[2])
    metrics = run_metrics(run.ttft_s, run.tpot_s, run.latency_s)
    assert list(metrics) == list(METRIC_KEYS)
    assert metrics["ttft_mean"] == pytest.approx(0.8 / 3)
    assert metrics["ttft_p50"] == pytest.approx(0.2)
    assert metrics["tpot_p99"] == pytest.approx(0.5)  # the one-token request is excluded
    assert metrics["latency_p90"] == pytest.approx(np.percentile([1.2, 2.5, 0.1], 90))


def test_simulated_side_by_hand(tmp_path):
    # One request (prompt 10, output 3) on a flat 10 ms model: the prefill iteration ends
    # at 10 ms with the first token, two decode iterations end at 20 and 30 ms. So the
    # simulated TTFT is 10 ms, TPOT 10 ms, latency 30 ms; measured ones are 20, 10, 40 ms.
    path = write_run(tmp_path, [req(10, 3, 5.0, 5.020, 5.040)])
    run = read_recorded_run(path)
    config = EngineConfig(kv_capacity_tokens=1024, max_num_seqs=4, max_num_batched_tokens=64)
    report = replay(run, FLAT, config=config)
    m = report.metrics
    assert m["ttft_mean"].simulated == pytest.approx(0.010)
    assert m["ttft_mean"].measured == pytest.approx(0.020)
    assert m["ttft_mean"].diff_pct == pytest.approx(-50.0)
    assert m["tpot_p50"].simulated == pytest.approx(0.010)
    assert m["tpot_p50"].diff_pct == pytest.approx(0.0, abs=1e-6)
    assert m["latency_p99"].simulated == pytest.approx(0.030)
    assert m["latency_p99"].diff_pct == pytest.approx(-25.0)
    assert report.n_finished == 1 and report.iterations == 3 and report.wall_s >= 0
    data = report.to_dict()
    assert set(data["metrics"]) == set(METRIC_KEYS)
    assert set(data["metrics"]["ttft_mean"]) == {"measured", "simulated", "diff_pct"}


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
            "input_toks: expected an integer >= 1",
        ),
        (
            '{"input_toks": 3, "output_toks": 2, "queued_ts": 5, "first_token_ts": 2, '
            '"last_token_ts": 3}',
            "out of order",
        ),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_malformed_requests_name_the_line(tmp_path, line, fragment):
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(req(1, 2, 0, 1, 2)) + "\n" + line + "\n")
    with pytest.raises(FormatError, match=rf"requests\.jsonl:2: .*{fragment}"):
        read_recorded_run(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataNotFoundError):
        read_recorded_run(tmp_path / "none.jsonl")
    (tmp_path / "requests.jsonl").write_text("\n")
    with pytest.raises(FormatError, match="no requests"):
        read_recorded_run(tmp_path / "requests.jsonl")


def test_kv_capacity_formula(tmp_path):
    config = {
        "nodes": [
            {
                "instances": [
                    {
                        "model_name": "meta-llama/Llama-3.1-8B",
                        "npu_mem": {"mem_size": 96, "mem_util": 0.9},
                    }
                ]
            }
        ]
    }
    path = write_run(tmp_path, [req(1, 2, 0, 1, 2)], config=config)
    run = read_recorded_run(path)
    # (0.9 * 96e9 - 2 * 8.03e9 - 1 GiB) / (2 * 32 layers * 8 heads * 128 dims * 2 bytes)
    expected = int((0.9 * 96e9 - 2 * 8.03e9 - GIB) // (2 * 32 * 8 * 128 * 2))
    assert kv_tokens_for_run(run) == expected == 528_459
    with pytest.raises(FormatError, match=r"engine_kwargs\.max_num_seqs"):
        engine_config_for_run(run)
    cfg = engine_config_for_run(run, max_num_seqs=8, max_num_batched_tokens=64, kv_tokens=512)
    assert (cfg.kv_capacity_tokens, cfg.max_num_seqs) == (512, 8)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FormatError, match="mem_size"):
        kv_tokens_for_run(read_recorded_run(path))


def test_replay_cli_json_shape(tmp_path, capsys):
    path = write_run(tmp_path, [req(10, 3, 5.0, 5.020, 5.040), req(20, 4, 5.5, 5.6, 5.7)])
    model = tmp_path / "flat.json"
    save_cost_model(FLAT, model)
    code = main(
        [
            "replay",
            str(path),
            "--cost-model",
            str(model),
            "--policy",
            "vllm",
            "--max-num-seqs",
            "4",
            "--max-num-batched-tokens",
            "64",
            "--kv-tokens",
            "1024",
            "--json",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["metrics"]) == list(METRIC_KEYS)
    assert data["metrics"]["ttft_mean"]["measured"] == pytest.approx((0.020 + 0.1) / 2)
    assert data["wall_s"] >= 0
    # Without --kv-tokens and without config.json the error names the file.
    code = main(
        [
            "replay",
            str(path),
            "--cost-model",
            str(model),
            "--max-num-seqs",
            "4",
            "--max-num-batched-tokens",
            "64",
        ]
    )
    assert code == 2
    assert "config.json" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "ttft_ms"), [("off", 10.0), ("on", 15.0), ("auto", 15.0)])
def test_replay_cli_async_scheduling(tmp_path, capsys, flag, ttft_ms):
    # Flat 10 ms iterations. A (prompt 10, output 3) is prefilled in [0, 10] and decodes
    # until 30; B is queued at 5 ms, while A's prefill runs, so the simulated B is queued
    # at 10 (the end of that iteration). Synchronous: B is prefilled in [10, 20], TTFT
    # 10 ms. Async (meta.json says vLLM 0.19.0, so "auto" means on): B joins [20, 30], TTFT
    # 20 ms. Mean simulated TTFT: 10 ms, or (10 + 20) / 2 = 15 ms.
    path = write_run(
        tmp_path,
        [req(10, 3, 5.0, 5.010, 5.030), req(10, 2, 5.005, 5.030, 5.040)],
        meta={"vllm_version": "0.19.0"},
    )
    model = tmp_path / "flat.json"
    save_cost_model(FLAT, model)
    args = ["replay", str(path), "--cost-model", str(model), "--max-num-seqs", "4"]
    args += ["--max-num-batched-tokens", "64", "--kv-tokens", "1024", "--json"]
    assert main([*args, "--async-scheduling", flag]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["async_scheduling"] is (flag != "off")
    assert data["metrics"]["ttft_mean"]["simulated"] == pytest.approx(ttft_ms * 1e-3)


def test_calibrate_cli(synthetic_profile, tmp_path, capsys):
    out = tmp_path / "model.json"
    assert (
        main(
            [
                "calibrate",
                str(synthetic_profile),
                "--model",
                "meta-llama/Llama-3.1-8B",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "attention (interpolation)" in text and out.is_file()
    assert json.loads(out.read_text())["kind"] == "profile-grid"
    assert (
        main(["calibrate", str(synthetic_profile), "--model", "other/model", "-o", str(out)]) == 2
    )
    assert "not 'other/model'" in capsys.readouterr().err


def test_replay_of_the_shared_run(real_run):
    from schedlab.calibration import shipped_model_path
    from schedlab.serving.cost_model import load_cost_model

    run = read_recorded_run(real_run)
    assert len(run) == 300
    # README reference figures of the measured run (ms): TTFT mean 7097, median 9443.
    measured = run_metrics(run.ttft_s, run.tpot_s, run.latency_s)
    assert measured["ttft_mean"] * 1e3 == pytest.approx(7097, abs=1)
    assert measured["ttft_p50"] * 1e3 == pytest.approx(9443, abs=1)
    report = replay(run, load_cost_model(shipped_model_path()))
    assert report.n_finished == 300 and report.preemptions == 0
    assert report.config.max_num_seqs == 128 and report.config.max_num_batched_tokens == 2048
