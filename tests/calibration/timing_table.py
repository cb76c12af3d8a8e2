"""A small hand-written timing table (synthetic numbers) of a Llama-layout model."""

from __future__ import annotations

from pathlib import Path

from tests.calibration.conftest import LAYER_OPS, attention_us

HEADER = "kind,op,tokens,sequences,prefill_chunk,kv_prefill,n_decode,kv_decode,time_us"
TOKENS = (1, 8, 16, 32, 64)
SEQUENCES = (1, 2, 4, 8)
CHUNKS, CONTEXTS, DECODES, KVS = (16, 32), (0, 16, 32), (1, 2, 4), (16, 32)


def dense_us(tokens: float) -> float:
    """Every dense op's synthetic time: a launch cost and a per-token cost."""
    return 1.0 + 0.5 * tokens


def head_us(sequences: float) -> float:
    """``lm_head``'s and ``sampler``'s synthetic time."""
    return 10.0 + sequences


def table_lines() -> list[str]:
    """The table's lines: header, dense, per-sequence and attention rows (a complete grid)."""
    lines = [HEADER]
    lines += [f"dense,{op},{t},,,,,,{dense_us(t)}" for op in LAYER_OPS for t in TOKENS]
    lines += [
        f"per_sequence,{op},,{s},,,,,{head_us(s)}"
        for op in ("lm_head", "sampler")
        for s in SEQUENCES
    ]
    lines += [f"attention,,,,0,0,{n},{k},{attention_us(0, 0, n, k)}" for n in DECODES for k in KVS]
    for c in CHUNKS:
        for p in CONTEXTS:
            lines.append(f"attention,,,,{c},{p},0,0,{attention_us(c, p, 0, 0)}")
            lines += [
                f"attention,,,,{c},{p},{n},{k},{attention_us(c, p, n, k)}"
                for n in DECODES
                for k in KVS
            ]
    return lines


def write_table(path: Path, lines: list[str] | None = None) -> Path:
    path.write_text("\n".join(table_lines() if lines is None else lines) + "\n")
    return path
