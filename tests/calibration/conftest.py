"""Fixtures: a small synthetic LLMServingSim profile, and the shared real data paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DATA_DIR

PROFILE = (
    DATA_DIR / "profiles" / "llmservingsim" / "RTXPRO6000" / "meta-llama" / "Llama-3.1-8B" / "bf16"
)
RUN = DATA_DIR / "validation" / "vllm-0.19.0_RTXPRO6000_Llama-3.1-8B"

META = """\
# synthetic profile for tests
model: meta-llama/Llama-3.1-8B
hardware: TESTGPU
architecture: llama
variant: bf16
engine_effective:
  block_size: 16
  hf_overrides:
    num_hidden_layers: 1
attention_grid:
  chunks: 0, 16-64 x2
  n_decode: 0, 1-4 x2
  kv: 0, 16-64 x2
skew_fit:
  enabled: true
  per_tp:
    1:
      method: per_bucket_wls_5axis
      alpha_default: 0.25
"""

#: ``alpha_default`` of the synthetic ``skew_fit`` block.
SKEW_ALPHA = 0.25

LAYER_OPS = (
    "layernorm",
    "qkv_proj",
    "rotary_emb",
    "o_proj",
    "gate_up_proj",
    "act_fn",
    "down_proj",
    "embedding",
    "final_layernorm",
)


def attention_us(c: float, p: float, n: float, k: float) -> float:
    """The synthetic ground truth: monotone, with launch costs and quadratic work."""
    return (
        5.0
        + (2.0 + 0.1 * c + 0.001 * c * p + 0.0005 * c * c if c else 0)
        + (1.0 + 0.5 * n + 0.01 * n * k if n else 0)
    )


def write_profile(root: Path, *, extra_rows: bool = True) -> Path:
    """Write a small, exactly known profile under ``root`` and return ``root``."""
    (root / "tp1").mkdir(parents=True, exist_ok=True)
    (root / "meta.yaml").write_text(META)
    tokens = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    lines = ["layer,tokens,time_us"]
    for op in LAYER_OPS:
        lines += [f"{op},{t},{10 + 0.5 * t}" for t in tokens]
    (root / "tp1" / "dense.csv").write_text("\n".join(lines) + "\n")
    lines = ["layer,sequences,time_us"]
    for op in ("lm_head", "sampler"):
        lines += [f"{op},{s},{100 + s}" for s in (1, 2, 3, 4, 6, 8, 12, 16)]
    (root / "tp1" / "per_sequence.csv").write_text("\n".join(lines) + "\n")
    lines = ["prefill_chunk,kv_prefill,n_decode,kv_decode,time_us"]
    chunks, kvs, decodes = [16, 32, 64], [0, 16, 32, 64], [1, 2, 4]
    for n in decodes:
        for k in kvs[1:]:
            lines.append(f"0,0,{n},{k},{attention_us(0, 0, n, k)}")
    for c in chunks:
        for p in kvs:
            lines.append(f"{c},{p},0,0,{attention_us(c, p, 0, 0)}")
            for n in decodes:
                for k in kvs[1:]:
                    lines.append(f"{c},{p},{n},{k},{attention_us(c, p, n, k)}")
    if extra_rows:  # off the declared grid: held out (inside) and one beyond it
        lines.append(f"24,16,2,16,{attention_us(24, 16, 2, 16)}")
        lines.append(f"48,32,0,0,{attention_us(48, 32, 0, 0)}")
        lines.append(f"0,0,8,32,{attention_us(0, 0, 8, 32)}")
    (root / "tp1" / "attention.csv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def synthetic_profile(tmp_path: Path) -> Path:
    return write_profile(tmp_path / "profile")


@pytest.fixture
def real_profile() -> Path:
    if not PROFILE.is_dir():
        pytest.skip("../shared/data profiles are not present")
    return PROFILE


@pytest.fixture
def real_run() -> Path:
    if not RUN.is_dir():
        pytest.skip("../shared/data validation run is not present")
    return RUN / "requests.jsonl"


QWEN = {
    "qwen3": "Qwen/Qwen3-32B",
    "qwen3_moe": "Qwen/Qwen3-30B-A3B-Instruct-2507",
}


@pytest.fixture(scope="session")
def qwen_models():
    """``(architecture, tp) -> (model, report)``: the shared Qwen3 profiles calibrated at
    tp1 and tp2 (tp2 with the 16 GB/s, 20 us link of the recorded runs' config.json)."""
    from schedlab.calibration.fit import calibrate
    from schedlab.llm.interconnect import Link

    root = DATA_DIR / "profiles" / "llmservingsim" / "RTXPRO6000"
    if not root.is_dir():
        pytest.skip("../shared/data profiles are not present")
    return {
        (arch, tp): calibrate(
            root / name / "bf16", name, tp=tp, link=Link(16e9, 20e-6) if tp > 1 else None
        )
        for arch, name in QWEN.items()
        for tp in (1, 2)
    }
