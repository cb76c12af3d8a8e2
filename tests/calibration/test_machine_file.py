"""Machine files: fitted on a run, recovered from synthetic runs, refused when they do not
apply, and applied by replay and the serving commands."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from schedlab.calibration.deployment import deployment_of
from schedlab.calibration.machine_file import (
    MachineFile,
    machine_terms,
    on_model,
    read_machine_file,
    save_machine_file,
)
from schedlab.calibration.machine_fit import fit_machine
from schedlab.calibration.parallelism import Parallelism
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.calibration.replay import replay
from schedlab.cli import main
from schedlab.errors import CalibrationError, FormatError
from schedlab.llm.interconnect import Link
from schedlab.llm.link_evidence import LinkEvidence
from schedlab.serving.cost_model import get_cost_model, save_cost_model
from tests.calibration.recorded import gpu_config, req, write_run

SHIPPED = "rtxpro6000_llama-3.1-8b"


def _model(tp: int = 1) -> ProfileCostModel:
    model = get_cost_model(SHIPPED)
    assert isinstance(model, ProfileCostModel)
    if tp == 1:
        return model
    return dataclasses.replace(model, parallelism=Parallelism(tp, 4096, 2, None))


def _meta(tp: int = 1, version: str = "0.19.0") -> dict:
    return {
        "model": "meta-llama/Llama-3.1-8B",
        "vllm_version": version,
        "engine_kwargs": {
            "max_num_seqs": 64,
            "max_num_batched_tokens": 2048,
            "tensor_parallel_size": tp,
        },
        "kv_cache": {"num_gpu_blocks": 20_000, "block_size": 16},
    }


def _template(directory: Path, tp: int = 1, n: int = 90, seed: int = 1) -> Path:
    """A run of ``n`` requests whose timestamps are placeholders (arrivals are real)."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / 9.0, n))
    requests = [
        req(int(rng.integers(200, 1800)), int(rng.integers(40, 240)), float(a), a + 1, a + 2)
        for a in arrivals
    ]
    write_run(directory, requests, _meta(tp), gpu_config())
    return directory


def _synthetic(tmp_path: Path, tp: int, host_s: float, link: Link | None) -> Path:
    """A recorded run made by the simulator itself with known machine terms: each
    request's timestamps are the simulated ones, so the terms are the run's truth."""
    template = read_recorded_run(_template(tmp_path / "template", tp))
    deployment = deployment_of(template)
    if link is not None:
        deployment = dataclasses.replace(deployment, link=LinkEvidence(link, "measured", "truth"))
    truth = replay(template, _model(tp).deployed(host_s=host_s), deployment=deployment)
    ttft, tpot = truth.simulated["ttft"], truth.simulated["tpot"]
    queued = template.arrival_s
    requests = [
        req(int(p), int(o), float(q), float(q + f), float(q + f + (t * (o - 1) if o > 1 else 0)))
        for p, o, q, f, t in zip(template.prompt, template.output, queued, ttft, tpot, strict=True)
    ]
    write_run(tmp_path / "run", requests, _meta(tp), gpu_config())
    return tmp_path / "run"


def test_host_time_is_recovered_from_a_synthetic_run(tmp_path):
    run = read_recorded_run(_synthetic(tmp_path, 1, 2.0e-3, None))
    machine = fit_machine(run, _model())
    assert machine.link is None and machine.collective == ""
    assert machine.host_s == pytest.approx(2.0e-3, rel=0.02)
    assert machine.gpu == "RTXPRO6000" and machine.vllm == "0.19"


def test_host_time_and_link_are_recovered_from_a_tensor_parallel_run(tmp_path):
    truth = Link(20e9, 7.5e-6)  # the published latency: the fit keeps it
    run = read_recorded_run(_synthetic(tmp_path, 2, 1.5e-3, truth))
    machine = fit_machine(run, _model(2))
    assert machine.collective == "tensor-parallel all-reduce"
    assert machine.host_s == pytest.approx(1.5e-3, rel=0.02)
    assert machine.link is not None
    assert machine.link.bandwidth_Bps == pytest.approx(20e9, rel=0.02)


def _machine(**changes) -> MachineFile:
    base = MachineFile(
        gpu="RTXPRO6000",
        vllm="0.19",
        host_s=1e-3,
        link=Link(25e9, 7.5e-6),
        collective="expert-parallel all-gather and reduce-scatter",
        run="elsewhere",
        requests_sha256="0" * 64,
        cost_model="m",
        fit={"objective": 0.1, "evaluations": 3.0},
    )
    return dataclasses.replace(base, **changes)


def test_a_machine_file_reads_back_what_was_written(tmp_path):
    machine = _machine()
    save_machine_file(machine, tmp_path / "m.json")
    read = read_machine_file(tmp_path / "m.json")
    assert dataclasses.replace(read, path=None) == machine


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.update(kind="other"), "kind"),
        (lambda d: d.update(gpu="GTX480"), "gpu"),
        (lambda d: d.update(vllm="latest"), "vllm"),
        (lambda d: d.update(host_s=-1e-3), "host_s"),
        (lambda d: d.update(host_s=5.0), "host_s"),
        (lambda d: d.update(host_s="1ms"), "host_s"),
        (lambda d: d["link"].update(latency_s=-1e-6), "link"),
        (lambda d: d["link"].update(bandwidth_Bps=70e9), "link.bandwidth_Bps"),
        # 40 GB/s is above PCIe 4.0 x16's 31.5 GB/s, an RTX 4090's fastest link
        (lambda d: (d.update(gpu="RTX4090"), d["link"].update(bandwidth_Bps=40e9)), "link.b"),
        (lambda d: d.pop("fitted_on"), "fitted_on"),
        (lambda d: d.update(hots_s=1e-3), "unknown key.s. hots_s"),
    ],
)
def test_a_bad_machine_file_is_refused_naming_the_field(tmp_path, change, field):
    data = _machine().to_dict()
    change(data)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=f"{path}: {field}"):
        read_machine_file(path)


def test_a_machine_file_of_another_gpu_or_release_or_of_the_run_itself_is_refused(tmp_path):
    run = read_recorded_run(_template(tmp_path / "a"))
    with pytest.raises(FormatError, match=r"gpu: fitted on RTXPRO6000.*RTX4090"):
        _machine().check("RTX4090", run)
    write_run(tmp_path / "b", [req(100, 10, 0, 1, 2)], _meta(version="0.18.1"), gpu_config())
    older = read_recorded_run(tmp_path / "b")
    recorded = r"vllm: fitted on vLLM 0\.19, the run records vLLM 0\.18"
    with pytest.raises(FormatError, match=recorded):
        _machine().check("RTXPRO6000", older)
    with pytest.raises(FormatError, match=r"vllm: .* the simulator models vLLM 0\.19"):
        _machine(vllm="0.18").check("RTXPRO6000")
    fitted = fit_machine(run, _model(), rounds=3)
    with pytest.raises(FormatError, match=r"fitted_on: .*fitting, not predicting"):
        replay(run, _model(), machine=fitted)


def test_the_link_follows_its_evidence_order(tmp_path):
    deployment = deployment_of(read_recorded_run(_template(tmp_path, tp=2)))
    model = _model(2)
    published = machine_terms(model, deployment)
    assert published.link.ends is not None  # a published link carries its band
    assert published.model.parallelism.link == deployment.link.link
    assert any("NOT MODELLED" in note for note in published.notes)
    machine = machine_terms(model, deployment, _machine())
    assert machine.model.parallelism.link == Link(25e9, 7.5e-6) and machine.link.ends is None
    assert machine.model.host_s == 1e-3
    given = dataclasses.replace(
        deployment, link=LinkEvidence(Link(16e9, 20e-6), "measured", "--link")
    )
    measured = machine_terms(model, given, _machine())
    assert measured.model.parallelism.link == Link(16e9, 20e-6)  # the user's beats the file


def test_replay_acts_on_link_for_a_tensor_parallel_model(tmp_path, capsys):
    # --link was once ignored for a model calibrated at tp 2: every option acts.
    run = _template(tmp_path, tp=2)
    model = _model(2)
    model = model.deployed(link=LinkEvidence(Link(54e9, 3.75e-6), "published", "a test"))
    path = tmp_path / "tp2.json"
    path.write_text(json.dumps(model.to_dict()))
    outputs = []
    for link in ("16GB/s,20us", "25GB/s,20us"):
        assert main(["replay", str(run), "--cost-model", str(path), "--link", link, "--json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out)["metrics"]["tpot_mean"]["simulated"])
    assert outputs[0] > outputs[1]


def test_replay_shows_a_band_where_the_link_is_published(tmp_path):
    report = replay(read_recorded_run(_template(tmp_path, tp=2)), _model(2))
    for key, metric in report.metrics.items():
        assert metric.band is not None, key
        low, high = metric.band
        assert low <= metric.simulated <= high
    assert report.metrics["tpot_mean"].band[1] > report.metrics["tpot_mean"].band[0]
    assert report.to_dict()["metrics"]["tpot_mean"]["band"] == list(
        report.metrics["tpot_mean"].band
    )


def test_on_model_applies_host_time_and_refuses_a_simple_model():
    model, note = on_model(_model(2), _machine())
    assert model.host_s == 1e-3 and model.parallelism.link == Link(25e9, 7.5e-6)
    assert "host time 1 ms" in note
    with pytest.raises(CalibrationError, match="calibrated cost model"):
        on_model(get_cost_model("sloweave-default"), _machine())


def test_calibrate_machine_and_the_serving_commands_use_it(tmp_path, capsys):
    run = _synthetic(tmp_path, 1, 2.0e-3, None)
    out = tmp_path / "machine.json"
    assert main(["calibrate", "machine", str(run), "--cost-model", SHIPPED, "-o", str(out)]) == 0
    assert re.search(r"host time 2(\.0\d)? ms a step", capsys.readouterr().out)
    simulate = ["simulate", "--cost-model", SHIPPED, "--rate", "2", "--duration", "5s", "--json"]
    assert main(simulate) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*simulate, "--machine", str(out)]) == 0
    captured = capsys.readouterr()
    assert "machine: " in captured.err
    assert json.loads(captured.out)["tpot"]["mean"] > plain["tpot"]["mean"]
    profile_only = ["--tp", "2", "-o", str(out)]
    assert main(["calibrate", "machine", str(run), "--cost-model", SHIPPED, *profile_only]) == 2
    assert "--tp: options of a profile's fit" in capsys.readouterr().err


def test_deploying_one_term_keeps_the_others():
    # the band's link ends are put on a model already spread over the replicas' GPUs
    link = LinkEvidence(Link(30e9, 1e-5), "measured", "a test")
    model = _model().deployed(ep=2, host_s=1e-3).deployed(link=link)
    assert model.parallelism.ep == 2 and model.host_s == 1e-3
    assert model.parallelism.link == Link(30e9, 1e-5)
    assert model.parallelism.link_evidence == "measured"  # the link keeps its evidence


def test_simulate_shows_a_band_at_the_ends_of_a_published_link(tmp_path, capsys):
    published = Parallelism(2, 4096, 2, Link(39.65e9, 7.5e-6), link_evidence="published")
    path = tmp_path / "tp2.json"
    save_cost_model(dataclasses.replace(_model(), parallelism=published), path)
    simulate = ["simulate", "--cost-model", str(path), "--rate", "4", "--duration", "5s"]
    assert main([*simulate, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for name in ("ttft", "tpot", "itl", "latency"):
        for stat in ("mean", "p99"):
            low, high = data["band"][name][stat]
            assert low <= data[name][stat] <= high
    assert data["band"]["tpot"]["mean"][1] > data["band"]["tpot"]["mean"][0]
    machine = tmp_path / "machine.json"
    save_machine_file(_machine(), machine)
    assert main([*simulate, "--json", "--machine", str(machine)]) == 0
    assert "band" not in json.loads(capsys.readouterr().out)  # the file's link is used
    assert main(simulate) == 0
    assert "slow and fast ends of the published link" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("tp", "extra", "said"),
    [
        (1, ["--link", "16GB/s,20us"], "--link: this deployment has no collective"),
        (
            2,
            ["--cost-model", "sloweave-default", "--link", "16GB/s,20us", "--allow-mismatch"],
            "--link: only a calibrated",
        ),
        (1, ["--cost-model", SHIPPED, "--data-dir", "."], "--data-dir: read only"),
        (
            2,
            ["--cost-model", SHIPPED, "--allow-mismatch", "--link", "16GB/s,20us"],
            "--link: the cost model rtxpro6000_llama-3.1-8b is of one GPU",
        ),
    ],
)
def test_a_replay_option_that_would_not_act_is_refused(tmp_path, capsys, tp, extra, said):
    run = _template(tmp_path, tp=tp)
    assert main(["replay", str(run), *extra]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
