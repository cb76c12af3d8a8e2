"""The ``calibrate`` and ``replay`` subcommands."""

from __future__ import annotations

import json

import pytest

from schedlab.cli import main
from schedlab.serving.cost_model import LinearAttentionCostModel, save_cost_model
from tests.calibration.conftest import RUN, write_profile
from tests.calibration.recorded import req, write_run

FLAT = LinearAttentionCostModel(name="flat-10ms", base_s=0.010)
LIMITS = ["--max-num-seqs", "4", "--max-num-batched-tokens", "64", "--kv-tokens", "1024"]


@pytest.fixture
def flat_model(tmp_path):
    path = tmp_path / "flat.json"
    save_cost_model(FLAT, path)
    return str(path)


def test_replay_json_shape(tmp_path, capsys, flat_model):
    run = write_run(tmp_path / "run", [req(10, 3, 5.0, 5.020, 5.040), req(20, 4, 5.5, 5.6, 5.7)])
    args = ["replay", str(run), "--cost-model", flat_model, "--policy", "vllm"]
    assert main([*args, *LIMITS, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["metrics"]["ttft_mean"]["measured"] == pytest.approx((0.020 + 0.1) / 2)
    assert data["wall_s"] >= 0 and data["n_finished"] == 2
    assert "KV capacity 1,024 tokens (given)" in data["deployment"]["notes"]
    # Without --kv-tokens, and without kv_cache or config.json, the error names the file.
    assert main([*args, *LIMITS[:4]]) == 2
    err = capsys.readouterr().err
    assert "config.json" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(("flag", "ttft_ms"), [("off", 10.0), ("on", 15.0), ("auto", 15.0)])
def test_replay_async_scheduling_flag(tmp_path, capsys, flat_model, flag, ttft_ms):
    # Flat 10 ms iterations. A (prompt 10, output 3) is prefilled in [0, 10] and decodes
    # until 30; B is queued at 5 ms, while A's prefill runs, so the simulated B is queued
    # at 10 (the end of that iteration). Synchronous: B is prefilled in [10, 20], TTFT
    # 10 ms. Async (meta.json says vLLM 0.19.0, so "auto" means on): B joins [20, 30], TTFT
    # 20 ms. Mean simulated TTFT: 10 ms, or (10 + 20) / 2 = 15 ms.
    run = write_run(
        tmp_path / "run",
        [req(10, 3, 5.0, 5.010, 5.030), req(10, 2, 5.005, 5.030, 5.040)],
        meta={"vllm_version": "0.19.0"},
    )
    args = ["replay", str(run), "--cost-model", flat_model, *LIMITS, "--json"]
    assert main([*args, "--async-scheduling", flag]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["async_scheduling"] is (flag != "off")
    assert data["metrics"]["ttft_mean"]["simulated"] == pytest.approx(ttft_ms * 1e-3)


def test_replay_text_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    if not RUN.is_dir():
        pytest.skip("../shared/data validation run is not present")
    figure = tmp_path / "replay.png"
    assert main(["replay", str(RUN), "--plot", str(figure)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == [
        "metric",
        "measured",
        "ms",
        "simulated",
        "ms",
        "diff",
        "%",
        "band",  # the run does not record its KV blocks: the capacity is a band
        "ms",
    ]
    assert "cost model rtxpro6000" in text and figure.stat().st_size > 10_000


def test_replay_bad_input(tmp_path, capsys, flat_model):
    assert main(["replay", str(tmp_path / "none"), "--cost-model", flat_model]) == 2
    assert "no such run directory" in capsys.readouterr().err
    run = write_run(tmp_path / "run", [req(10, 3, 5.0, 5.020, 5.040)])
    assert main(["replay", str(run), "--cost-model", "nonesuch", *LIMITS]) == 2
    assert "nonesuch" in capsys.readouterr().err
    assert main(["replay", str(run), *LIMITS]) == 2  # no file names the model or GPU
    assert "there is no meta.json or config.json beside it" in capsys.readouterr().err
    assert main(["replay", str(run), "--cost-model", flat_model, "--plot", "x.txt"]) == 2
    assert "--plot" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "limit"), [("--dp", "1000000000", "1,024"), ("--tp", "129", "128")]
)
def test_replay_caps_the_parallel_degrees(tmp_path, capsys, flat_model, flag, value, limit):
    # --dp 1000000000 built a billion engines (memory ran away); refused while parsing
    run = write_run(tmp_path / "run", [req(10, 3, 5.0, 5.020, 5.040)])
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(run), "--cost-model", flat_model, *LIMITS, flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: expected an integer from 1 to {limit}, got '{value}'" in err
    assert len(err.splitlines()) == 1


def test_replay_caps_the_recorded_data_parallel_size(tmp_path, capsys, flat_model):
    meta = {"resolved_config": {"parallel_config": {"data_parallel_size": 10**9}}}
    run = write_run(tmp_path / "run", [req(10, 3, 5.0, 5.020, 5.040)], meta=meta)
    assert main(["replay", str(run), "--cost-model", flat_model, *LIMITS]) == 2
    err = capsys.readouterr().err
    assert "resolved_config.parallel_config.data_parallel_size: expected an integer" in err
    assert len(err.splitlines()) == 1


def test_calibrate_refuses_a_time_above_an_hour(tmp_path, capsys):
    profile = write_profile(tmp_path / "profile")
    dense = profile / "tp1" / "dense.csv"
    lines = dense.read_text().splitlines()
    lines[1] = ",".join([*lines[1].split(",")[:-1], "1e308"])
    dense.write_text("\n".join(lines) + "\n")
    out = tmp_path / "model.json"
    assert main(["calibrate", str(profile), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dense.csv:2: time_us: must be at most 3.6e+09 (an hour), got '1e308'" in err
    assert len(err.splitlines()) == 1 and not out.exists()


def test_calibrate(tmp_path, capsys):
    profile = write_profile(tmp_path / "profile")
    out = tmp_path / "model.json"
    assert main(["calibrate", str(profile), "-o", str(out)]) == 0  # model from meta.yaml
    text = capsys.readouterr().out
    assert "attention (interpolation)" in text and out.is_file()
    data = json.loads(out.read_text())
    assert data["kind"] == "profile-grid"
    assert data["model"]["name"] == "meta-llama/Llama-3.1-8B" and data["hardware"] == "TESTGPU"
    assert main(["calibrate", str(profile), "--model", "other/model", "-o", str(out)]) == 2
    assert "not 'other/model'" in capsys.readouterr().err
    assert main(["calibrate", str(profile / "tp1" / "dense.csv"), "-o", str(out)]) == 2
    assert "profile directory" in capsys.readouterr().err
    assert main(["calibrate", str(profile), "--tp", "2", "-o", str(out)]) == 2
    assert "tp2" in capsys.readouterr().err


def test_calibrate_checks_its_output_first(tmp_path, capsys):
    profile = write_profile(tmp_path / "profile")
    meta = profile / "meta.yaml"
    before = meta.read_text()
    for target, message in (
        (meta, "it would be overwritten"),
        (tmp_path / "nowhere" / "m.json", "no such directory"),
        (tmp_path, "is a directory"),
    ):
        assert main(["calibrate", str(profile), "-o", str(target)]) == 2
        assert message in capsys.readouterr().err
    assert meta.read_text() == before


def test_calibrate_refuses_bad_skew_axes(tmp_path, capsys):
    # skew_fit.csv with bucket axes whose labels do not match their bins.
    profile = write_profile(tmp_path / "profile")
    (profile / "tp1" / "skew_fit.csv").write_text(
        "pc,n_label,skew_rate_label,kv_big_label,kp_label,alpha,n_samples\n"
        "0,n<=2,sr<=5%,kvB<=1k,kp=0,0.1,3\n"
    )
    meta = profile / "meta.yaml"
    meta.write_text(
        meta.read_text().replace(
            "skew_fit:\n  enabled: true\n",
            "skew_fit:\n  enabled: true\n  bucket_axes:\n    n_bins: [0, 2]\n    n_labels: []\n",
        )
    )
    assert main(["calibrate", str(profile), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "skew_fit.bucket_axes" in err and "n_bins must be increasing edges" in err
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({"speculative_config": {"method": "ngram"}}, "speculative decoding"),
        ({}, "no profile"),  # nothing names a cost model, and the data has no profile
    ],
)
def test_replay_refuses_before_vllm_is_imported(tmp_path, meta, why):
    """A refusal with --engine vllm comes in one line, before vLLM is imported (which
    takes 13 to 71 s on a cold machine)."""
    import subprocess
    import sys

    kwargs = {"max_num_seqs": 8, "max_num_batched_tokens": 64, **meta}
    run = write_run(
        tmp_path / "run",
        [req(10, 3, 5.0, 5.020, 5.040)],
        meta={"model": "Qwen/Qwen3-32B", "engine_kwargs": kwargs},
        config={"nodes": [{"instances": [{"hardware": "RTXPRO6000"}]}]},
    )
    (tmp_path / "data" / "profiles").mkdir(parents=True)
    code = (
        "import sys\nfrom schedlab.cli import main\n"
        f"rc = main(['replay', {str(run.parent)!r}, '--engine', 'vllm', "
        f"'--kv-tokens', '4096', '--data-dir', {str(tmp_path / 'data')!r}])\n"
        "print(rc, 'vllm' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert why in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
