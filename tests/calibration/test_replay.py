"""Replay of a recorded run: simulated metrics by hand, queued instants, model checks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from schedlab.calibration import shipped_model_path
from schedlab.calibration.deployment import Deployment, deployment_of
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.calibration.replay import METRIC_KEYS, queued_instants, replay
from schedlab.calibration.run_model import check_model_fits, shipped_model_for
from schedlab.errors import CalibrationError
from schedlab.serving.cost_model import LinearAttentionCostModel, load_cost_model
from schedlab.serving.engine_config import EngineConfig
from tests.calibration.recorded import req, write_run

# Every iteration takes 10 ms whatever it holds.
FLAT = LinearAttentionCostModel(name="flat-10ms", base_s=0.010)
SMALL = EngineConfig(kv_tokens=1024, max_num_seqs=4, max_num_batched_tokens=64)


def test_simulated_side_by_hand(tmp_path):
    # One request (prompt 10, output 3) on a flat 10 ms model: the prefill iteration ends
    # at 10 ms with the first token, two decode iterations end at 20 and 30 ms. So the
    # simulated TTFT is 10 ms, TPOT 10 ms, latency 30 ms; measured ones are 20, 10, 40 ms.
    run = read_recorded_run(write_run(tmp_path, [req(10, 3, 5.0, 5.020, 5.040)]))
    report = replay(run, FLAT, deployment=Deployment(SMALL))
    m = report.metrics
    assert m["ttft_mean"].simulated == pytest.approx(0.010)
    assert m["ttft_mean"].measured == pytest.approx(0.020)
    assert m["ttft_mean"].diff_pct == pytest.approx(-50.0)
    assert m["tpot_p50"].simulated == pytest.approx(0.010)
    assert m["tpot_p50"].diff_pct == pytest.approx(0.0, abs=1e-6)
    assert m["latency_p99"].simulated == pytest.approx(0.030)
    assert m["latency_p99"].diff_pct == pytest.approx(-25.0)
    assert report.worst == ("ttft_mean", pytest.approx(-50.0))
    assert report.n_finished == 1 and report.iterations == 3 and report.wall_s >= 0
    data = report.to_dict()
    assert set(data["metrics"]) == set(METRIC_KEYS)
    assert set(data["metrics"]["ttft_mean"]) == {"measured", "simulated", "diff_pct"}
    assert "worst ttft_mean -50.00%" in report.to_text()
    # The simulated series (on request) counts the prompt at its first token and every
    # output token.
    assert report.series is None
    report = replay(run, FLAT, deployment=Deployment(SMALL), series=True)
    assert report.series is not None
    assert report.series.prompt_tps.tolist() == [10.0]
    assert report.series.generation_tps.tolist() == [3.0]


def test_queued_instants_by_hand():
    # Iterations [0, 10], [10, 20], then idle, then [30, 40]. A request arriving inside an
    # iteration is queued at its end; one arriving while the engine is idle (25) or exactly
    # when an iteration starts from idle (30) is queued on arrival.
    starts, ends = np.array([0.0, 10.0, 30.0]), np.array([10.0, 20.0, 40.0])
    arrivals = np.array([5.0, 10.0, 12.0, 25.0, 30.0, 35.0])
    assert queued_instants(arrivals, starts, ends).tolist() == [10, 10, 20, 25, 30, 40]
    assert queued_instants(arrivals, starts[:0], ends[:0]).tolist() == arrivals.tolist()


def test_queued_at_the_end_of_the_running_iteration(tmp_path):
    # A (prompt 10, output 3) runs [0, 10], [10, 20], [20, 30]; B (prompt 10, output 1)
    # arrives at 5 ms and is queued at 10, prefilled in [10, 20]: simulated TTFT 10 ms,
    # measured from 10 as well, not from the arrival at 5.
    run = read_recorded_run(
        write_run(tmp_path, [req(10, 3, 0.0, 0.010, 0.030), req(10, 1, 0.005, 0.020, 0.020)])
    )
    report = replay(run, FLAT, deployment=Deployment(SMALL))
    assert report.simulated["ttft"] == pytest.approx([0.010, 0.010])
    assert report.measured["ttft"] == pytest.approx([0.010, 0.015])


def test_data_parallel_replay_queues_per_replica(tmp_path):
    # Two replicas: A goes to replica 0, B (arriving at 5 ms, while A's prefill runs) to the
    # idle replica 1 and is queued on arrival: both TTFTs are 10 ms.
    run = read_recorded_run(
        write_run(tmp_path, [req(10, 3, 0.0, 0.010, 0.030), req(10, 1, 0.005, 0.015, 0.015)])
    )
    report = replay(run, FLAT, deployment=Deployment(SMALL, replicas=2))
    assert report.simulated["ttft"] == pytest.approx([0.010, 0.010])
    assert report.to_dict()["deployment"]["replicas"] == 2


def test_lockstep_requests_queue_at_the_group_step(tmp_path):
    # Two replicas in lockstep, 10 ms steps. A (prompt 10, output 3) goes to replica 0
    # at 0; B (prompt 10, output 1) to the idle replica 1 at 5 ms, while the group's first
    # step runs (replica 1 running a dummy batch): B is queued at 10, not at 5.
    run = read_recorded_run(
        write_run(tmp_path, [req(10, 3, 0.0, 0.010, 0.030), req(10, 1, 0.005, 0.020, 0.020)])
    )
    locked = replay(run, FLAT, deployment=Deployment(SMALL, replicas=2, lockstep=True))
    assert locked.simulated["ttft"] == pytest.approx([0.010, 0.010])
    free = replay(run, FLAT, deployment=Deployment(SMALL, replicas=2))
    assert free.simulated["ttft"] == pytest.approx([0.010, 0.010])  # idle: queued at 5
    assert free.simulated["latency"] == pytest.approx([0.030, 0.010])


def test_a_benchmark_is_measured_from_the_send(tmp_path):
    # A vllm bench serve result: TTFT runs from when the client sent the request, so the
    # simulated one does too. B is sent at 5 ms while A's prefill runs until 10 ms and is
    # prefilled in [10, 20]: simulated TTFT 15 ms (from the send), not 10 ms.
    data = {
        "input_lens": [10, 10],
        "output_lens": [3, 1],
        "start_times": [0.0, 0.005],
        "ttfts": [0.012, 0.018],
        "itls": [[0.01, 0.01], []],
    }
    (tmp_path / "bench.json").write_text(json.dumps(data))
    run = read_recorded_run(tmp_path / "bench.json")
    assert run.clock == "client"
    report = replay(run, FLAT, deployment=Deployment(SMALL))
    assert report.simulated["ttft"] == pytest.approx([0.010, 0.015])


def test_worst_passes_over_undefined_differences(tmp_path):
    # A first token at the queued instant: measured TTFT 0, its difference undefined.
    run = read_recorded_run(write_run(tmp_path, [req(10, 3, 5.0, 5.0, 5.040)]))
    report = replay(run, "sloweave-default", deployment=Deployment(SMALL))  # a model by name
    assert math.isnan(report.metrics["ttft_mean"].diff_pct)
    assert report.worst[0].startswith(("tpot", "latency"))
    assert report.to_dict()["metrics"]["ttft_mean"]["diff_pct"] is None


def test_a_model_of_other_hardware_is_refused(real_run):
    run = read_recorded_run(real_run.parent)
    other = load_cost_model(shipped_model_path("rtx4090_llama-3.1-8b"))
    with pytest.raises(CalibrationError, match="hardware RTX4090, the run's is RTXPRO6000"):
        replay(run, other)
    with pytest.raises(CalibrationError, match="tensor parallelism 1, the run's is 2"):
        check_model_fits(other, Deployment(SMALL, tp=2, hardware="RTX4090"))
    check_model_fits(FLAT, Deployment(SMALL, tp=2, hardware="RTX4090"))  # cannot tell
    # Allowed explicitly, it runs.
    assert replay(run, other, allow_mismatch=True).n_finished == 300


def test_shipped_model_is_found_by_the_run(data_dir):
    for gpu in ("RTXPRO6000", "RTX4090"):
        run = read_recorded_run(data_dir / "validation" / f"vllm-0.19.0_{gpu}_Llama-3.1-8B")
        assert shipped_model_for(deployment_of(run)).hardware == gpu
    with pytest.raises(CalibrationError, match="no shipped cost model for Qwen/Qwen3-32B"):
        shipped_model_for(Deployment(SMALL, model="Qwen/Qwen3-32B", hardware="RTX4090"))
    with pytest.raises(CalibrationError, match="records no model or hardware"):
        shipped_model_for(Deployment(SMALL))


def test_replay_of_the_shared_run(real_run):
    report = replay(read_recorded_run(real_run.parent))
    assert report.n_finished == 300 and report.preemptions == 0
    assert report.config.max_num_seqs == 128 and report.config.max_num_batched_tokens == 2048
    assert report.cost_model.startswith("rtxpro6000")
    assert report.series is None and report.measured_series is not None


def test_the_report_as_rows_and_a_data_frame(tmp_path):
    pandas = pytest.importorskip("pandas")
    run = read_recorded_run(write_run(tmp_path, [req(10, 3, 5.0, 5.020, 5.040)]))
    report = replay(run, FLAT, deployment=Deployment(SMALL))
    rows = report.rows()
    assert [row["metric"] for row in rows] == list(report.metrics)
    assert rows[0] == {
        "metric": "ttft_mean",
        "measured_s": pytest.approx(0.020),
        "simulated_s": pytest.approx(0.010),
        "diff_pct": pytest.approx(-50.0),
    }
    frame = report.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert frame.set_index("metric").loc["latency_p99", "simulated_s"] == pytest.approx(0.030)


def test_a_capacity_the_run_does_not_record_is_replayed_as_a_band(data_dir):
    """The RTX 4090 run with its record of the blocks set aside: its KV capacity is then
    only known within a band, and every metric is given at both ends; the point is the
    upper end (nothing outside PyTorch). On this run the low end is the measured one
    (NON_TORCH_MEASURED_BYTES comes from it), so the measured TTFT and latency means lie
    in the band (TPOT's error is the cost model's, not the capacity's)."""
    import dataclasses

    run = read_recorded_run(data_dir / "validation" / "vllm-0.19.0_RTX4090_Llama-3.1-8B")
    meta = json.loads(json.dumps(run.meta))
    meta["kv_cache"].pop("num_gpu_blocks")
    meta["resolved_config"]["cache_config"].pop("num_gpu_blocks", None)
    bare = dataclasses.replace(run, meta=meta)
    report = replay(bare)
    low, high = report.deployment.kv_band
    assert high == report.deployment.engine.kv_tokens and low < high
    for key in ("ttft_mean", "tpot_mean", "latency_mean"):
        m = report.metrics[key]
        assert m.band[0] <= m.simulated <= m.band[1]
        if key != "tpot_mean":
            assert m.band[0] <= m.measured <= m.band[1], key
    assert report.metrics["ttft_mean"].band[0] < report.metrics["ttft_mean"].band[1]
    data = report.to_dict()["metrics"]["ttft_mean"]
    assert data["band"] == list(report.metrics["ttft_mean"].band)
    assert "band ms" in report.to_text()
    # a recorded capacity has no band
    assert all(m.band is None for m in replay(run).metrics.values())
