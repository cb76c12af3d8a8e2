"""The ``vllm`` engine kind: vLLM's own scheduler wherever schedlab's engine runs, its
settings printed, and every way it can be misused refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from schedlab.cli import main
from schedlab.errors import ServingError, UnknownNameError
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import engine_kind_names
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import simulate

SMALL = ["--rate", "4", "--duration", "5s", "--kv-tokens", "8192", "--max-num-seqs", "16"]


def _schedlab(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedlab", *argv], capture_output=True, text=True, check=False
    )


def test_the_kind_is_installed_by_entry_point() -> None:
    assert engine_kind_names() == ("schedlab", "vllm")


def test_a_missing_vllm_is_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    assert main(["simulate", "--engine", "vllm", *SMALL]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "pip install -e '.[vllm]'" in err and "0.19.0" in err


def test_another_vllm_release_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    vllm = pytest.importorskip("vllm")
    monkeypatch.setattr(vllm, "__version__", "0.33.0")
    monkeypatch.delenv("SCHEDLAB_VLLM_ANY_VERSION", raising=False)
    assert main(["simulate", "--engine", "vllm", *SMALL]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("schedlab: error: engine vllm: vLLM 0.33.0 is installed")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine", "tgi"], "unknown engine 'tgi'; known: schedlab, vllm"),
        (["--engine", "vllm", "--policy", "sarathi"], "runs vllm, or sloweave or sloweave-kv"),
        (["--vllm-model", "."], "engine_model: read only by engine kinds"),
    ],
)
def test_misuse_is_one_line(argv: list[str], message: str) -> None:
    done = _schedlab("simulate", *SMALL, *argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr


def test_a_model_folder_without_config_json_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    done = _schedlab("simulate", *SMALL, "--engine", "vllm", "--vllm-model", str(tmp_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"model folder {str(tmp_path)!r} has no config.json" in lines[0]


def test_simulate_prints_the_mapping_and_matches_our_engine() -> None:
    """``simulate --engine vllm`` prints how each setting maps, and its summary is our
    engine's under the ``vllm`` policy (the differential test holds them step by step)."""
    pytest.importorskip("vllm")
    theirs = _schedlab("simulate", *SMALL, "--engine", "vllm", "--json")
    ours = _schedlab("simulate", *SMALL, "--policy", "vllm", "--json")
    assert theirs.returncode == 0 and ours.returncode == 0, theirs.stderr
    assert "cache_config.num_gpu_blocks = 513" in theirs.stderr  # 512 blocks + null block
    assert "scheduler_config.max_num_seqs = 16" in theirs.stderr
    a, b = json.loads(ours.stdout), json.loads(theirs.stdout)
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_scenario_runs_either_engine_in_python() -> None:
    pytest.importorskip("vllm")
    engine = EngineConfig(kv_tokens=32768, max_num_seqs=8, async_scheduling=True)
    ours = simulate("chat", Scenario(policy="vllm", engine=engine), rate=3, duration_s=5)
    theirs = simulate(
        "chat", Scenario(policy="vllm", engine=engine, engine_kind="vllm"), rate=3, duration_s=5
    )
    assert theirs.records == ours.records
    assert theirs.summary.n_finished == len(theirs.records) > 0


def test_scenario_checks_the_kind() -> None:
    with pytest.raises(UnknownNameError, match="unknown engine 'x'"):
        Scenario(engine_kind="x")
    with pytest.raises(ServingError, match="takes a policy by name"):
        Scenario(engine_kind="vllm", policy=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("run", ["vllm-0.19.0_RTXPRO6000_Llama-3.1-8B"])
def test_replay_with_vllms_scheduler_equals_ours(data_dir: Path, run: str) -> None:
    """A recorded run replayed on vLLM's scheduler gives our engine's 15 metrics."""
    pytest.importorskip("vllm")
    path = str(data_dir / "validation" / run)
    theirs = _schedlab("replay", path, "--engine", "vllm", "--json")
    ours = _schedlab("replay", path, "--json")
    assert theirs.returncode == 0, theirs.stderr
    a, b = json.loads(ours.stdout), json.loads(theirs.stdout)
    assert b["engine_kind"] == "vllm" and a["engine_kind"] == "schedlab"
    assert a["metrics"] == b["metrics"]
    assert (a["iterations"], a["preemptions"]) == (b["iterations"], b["preemptions"])


@pytest.mark.parametrize(
    ("argument", "value", "feature"),
    [
        ("speculative_config", {"method": "ngram", "num_speculative_tokens": 3}, "speculative"),
        ("enable_lora", True, "LoRA"),
        ("pipeline_parallel_size", 2, "pipeline parallelism"),
    ],
)
def test_a_run_the_integration_cannot_map_is_refused(
    data_dir: Path, tmp_path: Path, argument: str, value: object, feature: str
) -> None:
    pytest.importorskip("vllm")
    source = data_dir / "validation" / "vllm-0.19.0_RTXPRO6000_Llama-3.1-8B"
    for name in ("requests.jsonl", "config.json", "timeseries.csv"):
        (tmp_path / name).write_bytes((source / name).read_bytes())
    meta = json.loads((source / "meta.json").read_text())
    meta["engine_kwargs"][argument] = value
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    done = _schedlab("replay", str(tmp_path), "--engine", "vllm")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"engine_kwargs.{argument} = " in lines[0] and feature in lines[0]
