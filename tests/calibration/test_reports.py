"""The generated calibration and fidelity pages: their generators run and say what they must."""

from __future__ import annotations

import pytest

from tests.calibration.conftest import DATA_DIR
from tests.conftest import load_benchmark as benchmark


@pytest.fixture
def shared_data():
    if not (DATA_DIR / "profiles" / "llmservingsim").is_dir():
        pytest.skip("../shared/data profiles are not present")


def test_the_evidence_page_covers_every_term(tmp_path, shared_data, capsys):
    out = tmp_path / "calibration.md"
    assert benchmark("calibration_evidence").main(["--out", str(out)]) == 0
    text = out.read_text()
    for term in (
        "attention by KV length",
        "op sampler",
        "expert count",
        "decode skew",
        "bucket, other models",
        "LLMServingSim's setting",
        "fixed cost per step",
    ):
        assert term in text, term
    # Seven profiles: three models at tp1 and tp2, and the RTX 4090 at tp1.
    assert text.count("| RTXPRO6000 ") >= 5 and "RTX4090 Llama-3.1-8B tp1" in text


def test_the_fidelity_report_lists_every_run(tmp_path, shared_data, capsys):
    out = tmp_path / "fidelity.md"
    code = benchmark("replay_vllm").main(["--report", "--report-out", str(out), "--repeats", "1"])
    assert code == 0
    text = out.read_text()
    runs = sorted(p.name for p in (DATA_DIR / "validation").iterdir() if p.is_dir())
    for run in runs:
        assert f"## {run}" in text and (tmp_path / "fidelity" / f"{run}.png").is_file()
    rows = [line for line in text.splitlines() if line.startswith("| ttft_p95 |")]
    assert len(rows) == len(runs)
    assert "Decode-step throughput" in text and "no skew correction" in text
    assert benchmark("replay_vllm").main(["--runs", str(tmp_path)]) == 2
