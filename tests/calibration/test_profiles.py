"""Profile readers: the three formats, hashes, and malformed input named by file and line."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from schedlab.calibration.profiles import read_llmservingsim_profile
from schedlab.errors import DataNotFoundError, FormatError
from tests.conftest import DATA_DIR

from .conftest import LAYER_OPS, attention_us


def test_reads_synthetic_profile_with_hashes(synthetic_profile):
    profile = read_llmservingsim_profile(synthetic_profile)
    assert profile.model == "meta-llama/Llama-3.1-8B"
    assert profile.profiled_layers == 1
    assert set(profile.dense) == set(LAYER_OPS)
    qkv = profile.dense["qkv_proj"]
    assert qkv.x.tolist() == [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    assert qkv.time_us[0] == pytest.approx(10.5)
    assert profile.per_sequence["lm_head"].time_us[-1] == pytest.approx(116)
    rows = profile.attention
    k = int(
        np.flatnonzero(
            (rows.prefill_chunk == 32)
            & (rows.n_decode == 2)
            & (rows.kv_prefill == 16)
            & (rows.kv_decode == 64)
        )[0]
    )
    assert rows.time_us[k] == pytest.approx(attention_us(32, 16, 2, 64))
    names = [s.name for s in profile.sources]
    assert names == ["meta.yaml", "tp1/dense.csv", "tp1/attention.csv", "tp1/per_sequence.csv"]
    dense_hash = hashlib.sha256((synthetic_profile / "tp1" / "dense.csv").read_bytes())
    assert profile.sources[1].sha256 == dense_hash.hexdigest()


@pytest.mark.parametrize(
    ("file", "content", "where", "fragment"),
    [
        ("dense.csv", "layer,tokens\nqkv_proj,1\n", ":1:", "missing column"),
        (
            "dense.csv",
            "layer,tokens,time_us\nqkv_proj,1,2\nqkv_proj,2,abc\n",
            ":3:",
            "expected a number",
        ),
        ("dense.csv", "layer,tokens,time_us\nqkv_proj,1,-2\n", ":2:", ">= 0"),
        ("dense.csv", "layer,tokens,time_us\nqkv_proj,1.5,2\n", ":2:", "integer"),
        ("dense.csv", "layer,tokens,time_us\nqkv_proj,1,2\nqkv_proj,1,3\n", ":3:", "duplicate"),
        ("dense.csv", "layer,tokens,time_us\nqkv_proj,1\n", ":2:", "fields"),
        ("dense.csv", "layer,tokens,time_us\nqkv_proj,1,nan\n", ":2:", "finite"),
        # the fit overflowed into a model of 1e304-second iterations
        ("dense.csv", "layer,tokens,time_us\nqkv_proj,1,1e308\n", ":2:", r"at most 3\.6e\+09"),
        ("per_sequence.csv", "layer,sequences,time_us\nlm_head,1,4e9\n", ":2:", "an hour"),
        (
            "attention.csv",
            "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n16,0,0,0,1e300\n",
            ":2:",
            r"time_us: must be at most 3\.6e\+09 \(an hour\)",
        ),
        ("dense.csv", "", ":1:", "empty"),
        ("per_sequence.csv", "layer,sequences,time_us\nlm_head,0,3\n", ":2:", ">= 1"),
        (
            "attention.csv",
            "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,0,0,0,1\n",
            ":2:",
            "empty batch",
        ),
        (  # the fit divided by it: a traceback from nnls
            "attention.csv",
            "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n16,0,0,0,0\n",
            ":2:",
            "time_us: a batch of attention must take time, got 0",
        ),
        (
            "attention.csv",
            "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n16,0,2,0,1\n",
            ":2:",
            "kv_decode must be 0",
        ),
        (
            "attention.csv",
            "prefill_chunk,kv_prefill,n_decode,kv_decode,time_us\n0,16,2,16,1\n",
            ":2:",
            "without a prefill chunk",
        ),
    ],
)
def test_malformed_csv_names_file_and_line(synthetic_profile, file, content, where, fragment):
    path = synthetic_profile / "tp1" / file
    path.write_text(content)
    with pytest.raises(FormatError, match=rf"{file}{where} .*{fragment}"):
        read_llmservingsim_profile(synthetic_profile)


@pytest.mark.parametrize("file", ["dense.csv", "attention.csv", "per_sequence.csv"])
def test_non_utf8_csv_is_named(synthetic_profile, file):
    (synthetic_profile / "tp1" / file).write_bytes(b"layer,tokens,time_us\nqkv\xff,1,2\n")
    with pytest.raises(FormatError, match=rf"{file}: not UTF-8 text"):
        read_llmservingsim_profile(synthetic_profile)


def test_missing_directory_and_file(synthetic_profile, tmp_path):
    with pytest.raises(DataNotFoundError, match="no such profile directory"):
        read_llmservingsim_profile(tmp_path / "nowhere")
    (synthetic_profile / "tp1" / "attention.csv").unlink()
    with pytest.raises(DataNotFoundError, match=r"attention\.csv"):
        read_llmservingsim_profile(synthetic_profile)


def test_meta_without_model_is_refused(synthetic_profile):
    (synthetic_profile / "meta.yaml").write_text("hardware: X\n")
    with pytest.raises(FormatError, match=r"meta\.yaml: model"):
        read_llmservingsim_profile(synthetic_profile)


VIDUR_HEADER = (
    "time_stats.mlp_up_proj.min,time_stats.mlp_up_proj.median,n_head,num_tokens,"
    "num_tensor_parallel_workers"
)


SPLITWISE_HEADER = (
    "model,hardware,prompt_size,batch_size,token_size,prompt_time,token_time,e2e_time,"
    "tensor_parallel"
)


@pytest.mark.skipif(not (DATA_DIR / "profiles").is_dir(), reason="../shared/data absent")
def test_reads_the_shared_profiles():
    root = DATA_DIR / "profiles"
    profile = read_llmservingsim_profile(
        root / "llmservingsim" / "RTXPRO6000" / "meta-llama" / "Llama-3.1-8B" / "bf16"
    )
    assert len(profile.attention) == 19364  # wc -l attention.csv minus the header
    assert profile.dense["gate_up_proj"].x.size == 152
