"""Readers of the Vidur and Splitwise profile formats, for comparison with the
LLMServingSim profiles the cost models are fitted on (no model is fitted on these).

* **Vidur** (microsoft/vidur, MIT) ``mlp.csv``: ``time_stats.<op>.{min,max,mean,median,std}``
  in milliseconds per op of one layer, against ``num_tokens`` and
  ``num_tensor_parallel_workers``.
* **Splitwise** (Mutinifni/splitwise-sim, MIT) ``perf_model.csv``: iteration-level times
  in ms (``prompt_time``, ``token_time``, ``e2e_time``) per ``model, hardware,
  prompt_size, batch_size, token_size, tensor_parallel``.

Fields are checked as :mod:`schedlab.calibration.profiles` checks them: errors name the
file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab.calibration.profiles import (
    OpTable,
    SourceFile,
    number_field,
    read_csv_rows,
    sha256_of,
    time_field,
)
from schedlab.errors import FormatError

__all__ = [
    "SplitwisePerfModel",
    "VidurMLPProfile",
    "read_splitwise_perf_model",
    "read_vidur_mlp",
]


# -- Vidur ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VidurMLPProfile:
    """A Vidur ``mlp.csv``: per-op statistics (ms) against tokens and TP degree.

    Attributes
    ----------
    ops
        Op names (``attn_pre_proj``, ``mlp_up_proj``...).
    num_tokens, tp
        Per row.
    stats
        ``stats[(op, stat)]`` per row, in milliseconds (stat: min, max, mean, median, std).
    shape
        Model-shape columns of the first row (``n_head``, ``n_embd``...).
    source
        The file read.
    """

    ops: tuple[str, ...]
    num_tokens: np.ndarray
    tp: np.ndarray
    stats: Mapping[tuple[str, str], np.ndarray]
    shape: Mapping[str, str]
    source: SourceFile

    def op_table(self, op: str, *, tp: int = 1, stat: str = "median") -> OpTable:
        """Times of ``op`` at TP degree ``tp`` against tokens, converted to microseconds.

        Vidur's files repeat some ``(num_tokens, tp)`` rows (the shared Llama-2-7B file
        does); repeated measurements are averaged.
        """
        if (op, stat) not in self.stats:
            raise FormatError(
                f"{self.source.name}: no column time_stats.{op}.{stat}; ops: {', '.join(self.ops)}"
            )
        rows = self.tp == tp
        if not rows.any():
            raise FormatError(f"{self.source.name}: no rows with num_tensor_parallel_workers={tp}")
        sizes, inverse = np.unique(self.num_tokens[rows], return_inverse=True)
        totals = np.bincount(inverse, weights=self.stats[(op, stat)][rows])
        counts = np.bincount(inverse)
        return OpTable(op, sizes, totals / counts * 1e3)


_VIDUR_STATS = ("min", "max", "mean", "median", "std")


def read_vidur_mlp(path: str | Path) -> VidurMLPProfile:
    """Read a Vidur ``mlp.csv`` profile (times in ms per op of one layer)."""
    path = Path(path)
    header, rows = read_csv_rows(path, ("num_tokens", "num_tensor_parallel_workers"))
    ops = tuple(
        dict.fromkeys(
            name.split(".")[1]
            for name in header
            if name.startswith("time_stats.") and name.count(".") == 2
        )
    )
    if not ops:
        raise FormatError(f"{path}:1: no time_stats.<op>.<stat> columns")
    stat_cols = {
        (op, stat): header.index(f"time_stats.{op}.{stat}")
        for op in ops
        for stat in _VIDUR_STATS
        if f"time_stats.{op}.{stat}" in header
    }
    i_tokens = header.index("num_tokens")
    i_tp = header.index("num_tensor_parallel_workers")
    values = {key: np.empty(len(rows)) for key in stat_cols}
    tokens = np.empty(len(rows))
    tps = np.empty(len(rows))
    for k, (line, fields_) in enumerate(rows):
        where = f"{path}:{line}"
        tokens[k] = number_field(fields_[i_tokens], "num_tokens", where, integer=True)
        tps[k] = number_field(fields_[i_tp], "num_tensor_parallel_workers", where, integer=True)
        if tokens[k] < 1 or tps[k] < 1:
            raise FormatError(f"{where}: num_tokens and num_tensor_parallel_workers must be >= 1")
        for (op, stat), i in stat_cols.items():
            values[(op, stat)][k] = time_field(fields_[i], f"time_stats.{op}.{stat}", where, 1e-3)
    shape_cols = [c for c in header if not c.startswith("time_stats.")]
    shape = {c: rows[0][1][header.index(c)] for c in shape_cols}
    return VidurMLPProfile(ops, tokens, tps, values, shape, SourceFile(path.name, sha256_of(path)))


# -- Splitwise -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SplitwisePerfModel:
    """Splitwise's iteration-level ``perf_model.csv`` (times in ms).

    ``model`` and ``hardware`` are per-row string arrays; the numeric columns are float
    arrays of the same length.
    """

    model: np.ndarray
    hardware: np.ndarray
    prompt_size: np.ndarray
    batch_size: np.ndarray
    token_size: np.ndarray
    prompt_time_ms: np.ndarray
    token_time_ms: np.ndarray
    e2e_time_ms: np.ndarray
    tensor_parallel: np.ndarray
    source: SourceFile

    def __len__(self) -> int:
        return int(self.model.size)

    def select(self, model: str, hardware: str, tensor_parallel: int) -> np.ndarray:
        """Indices of the rows for ``model`` on ``hardware`` at that TP degree."""
        return np.flatnonzero(
            (self.model == model)
            & (self.hardware == hardware)
            & (self.tensor_parallel == tensor_parallel)
        )


_SPLITWISE_NUMERIC = (
    "prompt_size",
    "batch_size",
    "token_size",
    "prompt_time",
    "token_time",
    "e2e_time",
    "tensor_parallel",
)


def read_splitwise_perf_model(path: str | Path) -> SplitwisePerfModel:
    """Read Splitwise's ``perf_model.csv`` (iteration-level measurements)."""
    path = Path(path)
    header, rows = read_csv_rows(path, ("model", "hardware", *_SPLITWISE_NUMERIC))
    i_model, i_hw = header.index("model"), header.index("hardware")
    numeric = {c: np.empty(len(rows)) for c in _SPLITWISE_NUMERIC}
    models, hardware = [], []
    for k, (line, fields_) in enumerate(rows):
        where = f"{path}:{line}"
        for column in ("model", "hardware"):
            if not fields_[header.index(column)].strip():
                raise FormatError(f"{where}: {column}: empty")
        models.append(fields_[i_model].strip())
        hardware.append(fields_[i_hw].strip())
        for column in _SPLITWISE_NUMERIC:
            text = fields_[header.index(column)]
            numeric[column][k] = (
                time_field(text, column, where, 1e-3)
                if column.endswith("_time")
                else number_field(text, column, where, integer=True)
            )
        if numeric["batch_size"][k] < 1 or numeric["tensor_parallel"][k] < 1:
            raise FormatError(f"{where}: batch_size and tensor_parallel must be >= 1")
    return SplitwisePerfModel(
        np.array(models),
        np.array(hardware),
        numeric["prompt_size"],
        numeric["batch_size"],
        numeric["token_size"],
        numeric["prompt_time"],
        numeric["token_time"],
        numeric["e2e_time"],
        numeric["tensor_parallel"],
        SourceFile(path.name, sha256_of(path)),
    )
