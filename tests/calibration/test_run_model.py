"""``replay`` without ``--cost-model``: the shipped model, else the run's profile
calibrated and cached (:mod:`schedlab.calibration.run_model`)."""

from __future__ import annotations

import json
import shutil

import pytest

from schedlab.calibration.deployment import Deployment, deployment_of
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.calibration.run_model import (
    cache_directory,
    cached_calibration,
    find_profile,
    model_for_run,
)
from schedlab.cli import main
from schedlab.errors import CalibrationError
from schedlab.serving import workloads
from schedlab.serving.engine_config import EngineConfig
from tests.calibration.recorded import req, write_run

SMALL = EngineConfig(kv_tokens=4096, max_num_seqs=8, max_num_batched_tokens=64)

#: Every shipped profile's model, GPU and tensor-parallel degree.
SETTINGS = [
    ("meta-llama/Llama-3.1-8B", "RTX4090", 1),
    ("meta-llama/Llama-3.1-8B", "RTXPRO6000", 1),
    ("meta-llama/Llama-3.1-8B", "RTXPRO6000", 2),
    ("Qwen/Qwen3-32B", "RTXPRO6000", 1),
    ("Qwen/Qwen3-32B", "RTXPRO6000", 2),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "RTXPRO6000", 1),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "RTXPRO6000", 2),
]


def synthetic_run(directory, model, gpu, tp, *, dp=1, expert=False):
    """A run directory shaped like the shared runs' (meta.json, config.json), with a few
    made-up requests."""
    requests = [
        req(120, 30, 1.0, 1.20, 2.0),
        req(40, 12, 1.1, 1.35, 1.8),
        req(300, 5, 1.4, 1.90, 2.1),
        req(64, 50, 2.0, 2.15, 3.9),
    ]
    meta = {
        "model": model,
        "vllm_version": "0.19.0",
        "engine_kwargs": {
            "model": model,
            "tensor_parallel_size": tp,
            "data_parallel_size": dp,
            "enable_expert_parallel": expert,
            "max_num_seqs": 128,
            "max_num_batched_tokens": 2048,
        },
    }
    config = {
        "num_nodes": 1,
        "link_bw": 16,
        "link_latency": 20000,
        "nodes": [
            {
                "num_instances": 1,
                "instances": [
                    {
                        "model_name": model,
                        "hardware": gpu,
                        "npu_mem": {"mem_size": 96 if gpu == "RTXPRO6000" else 24},
                        "num_npus": tp * dp,
                        "tp_size": tp,
                    }
                ],
            }
        ],
    }
    write_run(directory, requests, meta=meta, config=config)
    return directory


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("SCHEDLAB_CACHE", str(folder))
    return folder


@pytest.mark.parametrize(("model", "gpu", "tp"), SETTINGS)
def test_replay_with_no_flags_on_every_profile_setting(
    tmp_path, capsys, cache, data_dir, model, gpu, tp
):
    run = synthetic_run(tmp_path / "run", model, gpu, tp)
    assert main(["replay", str(run), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["n_finished"] == 4 and data["deployment"]["tp"] == tp
    shipped = (model, gpu, tp) in {(s[0], s[1], 1) for s in SETTINGS[:2]}
    if shipped:
        assert "(shipped;" in captured.err
    else:
        profile = data_dir / "profiles" / "llmservingsim" / gpu / model / "bf16"
        assert f"calibrated from profile {profile} at tp{tp}" in captured.err
        assert "fitted now, cached" in captured.err
        assert len(list((cache / "cost_models").glob("*.json"))) == 1
        # The second replay reads the cache and gives the same answer.
        assert main(["replay", str(run), "--json"]) == 0
        again = capsys.readouterr()
        assert "read from the cache" in again.err
        assert json.loads(again.out)["metrics"] == data["metrics"]


def test_expert_parallel_run_takes_the_tp1_profile(tmp_path, capsys, cache, data_dir):
    model = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    run = synthetic_run(tmp_path / "run", model, "RTXPRO6000", 1, dp=2, expert=True)
    assert main(["replay", str(run), "--json"]) == 0
    captured = capsys.readouterr()
    assert "at tp1 (the run's tensor-parallel degree, experts over ep 2)" in captured.err
    assert json.loads(captured.out)["deployment"]["ep"] == 2


def test_a_changed_profile_is_fitted_again(tmp_path, cache, data_dir):
    source = data_dir / "profiles" / "llmservingsim" / "RTX4090" / "meta-llama" / "Llama-3.1-8B"
    profile = tmp_path / "profile"
    shutil.copytree(source / "bf16", profile)
    first, path, hit = cached_calibration(profile, 1)
    assert not hit and path.parent == cache / "cost_models"
    assert cached_calibration(profile, 1)[2]  # unchanged: from the cache
    dense = profile / "tp1" / "dense.csv"
    lines = dense.read_text().splitlines()
    head, first_row = lines[0], lines[1].split(",")
    first_row[-1] = str(float(first_row[-1]) * 2)
    dense.write_text("\n".join([head, ",".join(first_row), *lines[2:]]) + "\n")
    second, other, hit = cached_calibration(profile, 1)
    assert not hit and other != path
    assert second.to_dict() != first.to_dict()
    # A cache file that cannot be read is fitted again and replaced.
    other.write_text("{not json")
    third, same, hit = cached_calibration(profile, 1)
    assert not hit and same == other and third.to_dict() == second.to_dict()


def test_no_profile_for_the_setting(tmp_path, capsys, cache, data_dir):
    run = synthetic_run(tmp_path / "run", "meta-llama/Llama-2-7b-hf", "RTXPRO6000", 1)
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "no profile for meta-llama/Llama-2-7b-hf on RTXPRO6000 with tp 1" in err
    assert "meta-llama/Llama-3.1-8B on RTX4090 tp1" in err
    assert "Qwen/Qwen3-32B on RTXPRO6000 tp1/2" in err
    run = synthetic_run(tmp_path / "tp2", "meta-llama/Llama-3.1-8B", "RTX4090", 2)
    assert main(["replay", str(run)]) == 2
    assert "no profile for meta-llama/Llama-3.1-8B on RTX4090 with tp 2" in capsys.readouterr().err
    assert not (cache / "cost_models").exists()


def test_without_a_data_directory(tmp_path, capsys, cache, monkeypatch):
    monkeypatch.delenv("SCHEDLAB_DATA")
    monkeypatch.setattr(workloads, "BESIDE_CHECKOUT", tmp_path / "no" / "data")
    run = synthetic_run(tmp_path / "run", "Qwen/Qwen3-32B", "RTXPRO6000", 2)
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err
    assert "no data directory" in err and len(err.strip().splitlines()) == 1
    assert "the folder holding profiles/" in err  # what a replay needs, not traces/
    with pytest.raises(CalibrationError, match=r"no profile .* \(profiles: none under"):
        find_profile(tmp_path, "Qwen/Qwen3-32B", "RTXPRO6000", 2)


def test_the_data_directory_defaults_to_shared_data_beside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("SCHEDLAB_DATA", raising=False)
    monkeypatch.setattr(workloads, "BESIDE_CHECKOUT", tmp_path)
    assert workloads.data_directory() == tmp_path
    monkeypatch.setenv("SCHEDLAB_DATA", str(tmp_path / "env"))
    assert workloads.data_directory() == tmp_path / "env"
    assert workloads.data_directory(tmp_path / "given") == tmp_path / "given"


def test_a_shipped_model_wins_and_names_are_matched_loosely(data_dir):
    d = Deployment(SMALL, model="meta-llama/llama-3.1-8b", hardware="NVIDIA GeForce RTX 4090")
    model, note = model_for_run(d, data_dir)
    assert model.name == "rtx4090_llama-3.1-8b" and "(shipped;" in note
    with pytest.raises(CalibrationError, match="records no model or hardware"):
        model_for_run(Deployment(SMALL), data_dir)


def test_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path / "a"))
    assert cache_directory() == tmp_path / "a"
    monkeypatch.delenv("SCHEDLAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_directory() == tmp_path / "xdg" / "schedlab"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_directory() == tmp_path / "home" / ".cache" / "schedlab"


def test_the_hardware_name_from_meta_json_alone(tmp_path):
    run = write_run(
        tmp_path,
        [req(1, 2, 0, 1, 2)],
        meta={
            "model": "meta-llama/Llama-3.1-8B",
            "engine_kwargs": {"max_num_seqs": 8, "max_num_batched_tokens": 64},
            "kv_cache": {"num_gpu_blocks": 100},
            "hardware": {"device_name": "NVIDIA GeForce RTX 4090"},
        },
    )
    assert deployment_of(read_recorded_run(run.parent)).hardware == "RTX4090"
