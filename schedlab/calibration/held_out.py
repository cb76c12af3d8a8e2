r"""Held-out error of a calibration: relative-error statistics and the skew term's test.

Every term of the calibrated cost model earns its place on profile rows it was not fitted
on (``docs/calibration.md``). :class:`ErrorStats` summarises relative errors
:math:`|\hat t - t| / t` in percent. :func:`skew_cross_validation` tests the decode-skew
correction (:mod:`schedlab.calibration.skew`) on the profiler's skewed-batch measurements
(``skew.csv``) by :math:`k`-fold cross-validation: the rows are dealt into ``folds`` folds
by a seeded permutation, and each row is predicted by tables fitted on the other folds, as

* ``none``: :math:`t_{mean}`, every decode taken at the mean length (no correction);
* ``pooled``: :math:`t_{mean} + \alpha (t_{max} - t_{mean})` with one :math:`\alpha` for
  every batch;
* ``bucket``: the same with the per-bucket :math:`\alpha` (the pooled one where a bucket
  has no training row).

The endpoints :math:`t_{mean}` and :math:`t_{max}` are the row's measured ones, so the test
isolates :math:`\alpha`. :func:`chosen_skew` picks the variant of least held-out mean error,
``none`` on a tie: a correction is kept only where it improves held-out error.

The op curves and the attention grid are held out alike: :func:`fit_ops` fits each op
without every ``holdout_every``-th interior size, :func:`held_out_attention` fits the grid
and predicts the rows off it, :func:`iteration_errors` composes both into held-out
iterations with each term's ablation, and :func:`unearned_ops` names the ops whose
removal predicts those iterations no worse.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.calibration.attention_grid import AttentionGrid, parse_grid_spec
from schedlab.calibration.curves import MonotoneCurve
from schedlab.calibration.experts import ExpertTable
from schedlab.calibration.layouts import OpLayout
from schedlab.calibration.profiles import (
    AttentionRows,
    LLMServingSimProfile,
    OpTable,
    SkewSamples,
)
from schedlab.calibration.skew import SkewTable

__all__ = [
    "SKEW_VARIANTS",
    "ErrorStats",
    "HeldOutAttention",
    "chosen_skew",
    "fit_ops",
    "held_out_attention",
    "iteration_errors",
    "skew_cross_validation",
    "unearned_ops",
]

#: Held-out mean errors (percent) that differ by less than this are a tie.
TIE_PCT = 1e-6

#: The skew variants tested, simplest first.
SKEW_VARIANTS = ("none", "pooled", "bucket")


@dataclass(frozen=True)
class ErrorStats:
    """Relative errors of a held-out set, in percent."""

    n: int
    mape_pct: float
    median_pct: float
    p90_pct: float
    worst_pct: float

    @classmethod
    def of(cls, predicted: np.ndarray, measured: np.ndarray) -> ErrorStats:
        if measured.size == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        rel = np.abs(predicted - measured) / measured * 100.0
        return cls(
            int(rel.size),
            float(rel.mean()),
            float(np.median(rel)),
            float(np.percentile(rel, 90)),
            float(rel.max()),
        )


def skew_variant(table: SkewTable, variant: str) -> SkewTable | None:
    """``table`` as the named variant (``None`` for ``none``)."""
    if variant == "none":
        return None
    if variant == "pooled":
        return SkewTable(table.default, {}, table.axes)
    if variant == "bucket":
        return table
    raise ValueError(f"skew variant: one of {', '.join(SKEW_VARIANTS)}, got {variant!r}")


def predict_skewed_us(table: SkewTable | None, samples: SkewSamples) -> np.ndarray:
    """The predicted time of every row (``None``: no correction, :math:`t_{mean}`)."""
    return samples.t_mean_us.copy() if table is None else table.predict_us(samples)


def skew_cross_validation(
    samples: SkewSamples,
    axes: Mapping[str, Any] | None = None,
    *,
    folds: int = 5,
    seed: int = 0,
) -> dict[str, ErrorStats]:
    """Held-out error of each of :data:`SKEW_VARIANTS` (module docstring)."""
    if folds < 2 or len(samples) < folds:
        raise ValueError(f"skew cross-validation: needs folds >= 2 and >= {folds} rows")
    fold = np.random.default_rng(seed).permutation(len(samples)) % folds
    predicted = {variant: np.empty(len(samples)) for variant in SKEW_VARIANTS}
    for k in range(folds):
        test = fold == k
        table = SkewTable.fit(samples.subset(~test), axes)
        held = samples.subset(test)
        for variant in SKEW_VARIANTS:
            predicted[variant][test] = predict_skewed_us(skew_variant(table, variant), held)
    return {
        variant: ErrorStats.of(values, samples.t_skew_us) for variant, values in predicted.items()
    }


def chosen_skew(errors: Mapping[str, ErrorStats]) -> str:
    """The variant of least held-out mean error, the simplest on a tie (errors equal to
    :data:`TIE_PCT`, below which they are rounding)."""
    return min(
        SKEW_VARIANTS,
        key=lambda v: (round(errors[v].mape_pct / TIE_PCT), SKEW_VARIANTS.index(v)),
    )


def _split(table: OpTable, every: int) -> tuple[np.ndarray, np.ndarray]:
    """Masks (train, test): every ``every``-th interior point is a test point."""
    index = np.arange(table.x.size)
    test = (index % every == every // 2) & (index > 0) & (index < table.x.size - 1)
    return ~test, test


def _raw(table: OpTable) -> Any:
    """Linear interpolation of the raw measurements (the 'measured' side of an iteration)."""
    return lambda v: np.interp(v, table.x, table.time_us)


def _inside(grid: AttentionGrid, rows: AttentionRows, mask: np.ndarray) -> np.ndarray:
    """Which rows (among ``mask``) lie within the grid's bounds (interpolation)."""
    return (
        mask
        & (rows.prefill_chunk <= grid.chunks[-1])
        & (rows.kv_prefill <= grid.contexts[-1])
        & (rows.n_decode <= grid.decodes[-1])
        & ((rows.kv_decode <= grid.kvs[-1]) | (rows.n_decode == 0))
    )


def _every_other_level(grid: AttentionGrid) -> tuple[list[float], list[float], list[float]]:
    """A declared grid ``(chunks, decodes, kvs)`` of every other positive level of
    ``grid`` (the first and the last kept, and 0 where the axis has it)."""

    def thin(*axes: tuple[float, ...]) -> list[float]:
        values = sorted({v for axis in axes for v in axis})
        positive = [v for v in values if v > 0]
        kept = positive[::2] + ([positive[-1]] if len(positive) % 2 == 0 else [])
        return [v for v in values if v <= 0] + kept

    return thin(grid.chunks), thin(grid.decodes), thin(grid.contexts, grid.kvs)


def unearned_ops(
    ablations: dict[str, ErrorStats], full: ErrorStats, layout: OpLayout
) -> tuple[str, ...]:
    """The ops whose removal does not raise the held-out iteration error (mean relative
    error): a term that does not improve held-out error is not used. One op of each
    group the model needs (per layer, per sequence) is always kept: the one whose removal
    costs most."""
    unearned = {
        op
        for op in (*layout.per_layer, *layout.per_forward, *layout.per_sequence)
        if ablations[f"op {op}"].mape_pct <= full.mape_pct
    }
    for group in (layout.per_layer, layout.per_sequence):
        if set(group) <= unearned:
            unearned.discard(max(group, key=lambda op: ablations[f"op {op}"].mape_pct))
    order = (*layout.per_layer, *layout.per_forward, *layout.per_sequence)
    return tuple(op for op in order if op in unearned)


def fit_ops(
    tables: dict[str, Any], holdout_every: int
) -> tuple[dict[str, ErrorStats], dict[str, MonotoneCurve], dict[str, MonotoneCurve]]:
    """Each 1-D op's held-out error, its curve fitted without the held-out sizes, and
    its final curve fitted on every size."""
    op_stats: dict[str, ErrorStats] = {}
    train_curves: dict[str, MonotoneCurve] = {}
    full_curves: dict[str, MonotoneCurve] = {}
    for op, table in tables.items():
        train, test = _split(table, holdout_every)
        curve = MonotoneCurve.fit(table.x[train], table.time_us[train])
        predicted = np.array([curve(v) for v in table.x[test]])
        op_stats[op] = ErrorStats.of(predicted, table.time_us[test])
        train_curves[op] = curve
        full_curves[op] = MonotoneCurve.fit(table.x, table.time_us)
    return op_stats, train_curves, full_curves


@dataclass(frozen=True, eq=False)
class HeldOutAttention:
    """The attention rows held out of the grid's fit, and their prediction (µs)."""

    grid: AttentionGrid  # the grid they are predicted with
    chunk: np.ndarray  # each row's prefill chunk
    decodes: np.ndarray  # each row's decodes
    predicted: np.ndarray
    measured: np.ndarray
    inside: np.ndarray  # whether the row lies within the grid's bounds (interpolated)


def held_out_attention(
    profile: LLMServingSimProfile,
) -> tuple[AttentionGrid, np.ndarray, bool, HeldOutAttention]:
    """The attention grid on the profile's declared levels, the rows it uses, whether
    the held-out grid was thinned, and the held-out rows: those off the grid, or, if no
    row lies between the grid's levels, the grid is fitted again on every other level and
    the rows of the levels it leaves out are held out too (``thinned``)."""
    rows = profile.attention
    declared = None
    grid_meta = profile.meta.get("attention_grid")
    if isinstance(grid_meta, dict) and {"chunks", "n_decode", "kv"} <= set(grid_meta):
        where = f"{profile.root}/meta.yaml: attention_grid"
        declared = (
            parse_grid_spec(grid_meta["chunks"], where),
            parse_grid_spec(grid_meta["n_decode"], where),
            parse_grid_spec(grid_meta["kv"], where),
        )
    grid, used = AttentionGrid.fit(rows, declared)
    test_grid, held = grid, ~used
    thinned = not _inside(grid, rows, held).any()
    if thinned:
        test_grid, thin_used = AttentionGrid.fit(rows, _every_other_level(grid))
        held = ~thin_used
    pc, kp, n, kv = (
        rows.prefill_chunk[held],
        rows.kv_prefill[held],
        rows.n_decode[held],
        rows.kv_decode[held],
    )
    points = zip(pc.tolist(), kp.tolist(), n.tolist(), kv.tolist(), strict=True)
    predicted = np.array([test_grid(*point) for point in points])
    inside = _inside(test_grid, rows, held)[held]
    return (
        grid,
        used,
        thinned,
        HeldOutAttention(test_grid, pc, n, predicted, rows.time_us[held], inside),
    )


def iteration_errors(
    layout: OpLayout,
    scale: float,
    tables: dict[str, Any],
    curves: dict[str, MonotoneCurve],
    experts: ExpertTable | None,
    held: HeldOutAttention,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, ErrorStats]]:
    """The held-out iterations (one a held-out attention row, its ops at its tokens and
    sequences) predicted with the held-out fits and as measured (µs), each op's share of
    the prediction, and the ablations: the error without each term."""
    pc, n = held.chunk, held.decodes
    tokens, seqs = n + pc, n + (pc > 0)

    def parts(fits: dict[str, Any]) -> dict[str, np.ndarray]:
        """Each op's share of the held-out iterations (µs)."""
        share = {
            op: scale * count * np.array([fits[op](v) for v in tokens])
            for op, count in layout.per_layer.items()
        }
        share |= {op: np.array([fits[op](v) for v in tokens]) for op in layout.per_forward}
        share |= {op: np.array([fits[op](v) for v in seqs]) for op in layout.per_sequence}
        return share

    raw_curves = {op: _raw(table) for op, table in tables.items()}
    block = scale * np.array([experts(v) for v in tokens]) if experts else np.zeros(tokens.size)
    predicted_parts = parts(curves)
    iter_true = sum(parts(raw_curves).values()) + scale * held.measured + block
    iter_pred = sum(predicted_parts.values()) + scale * held.predicted + block
    flat_kv = min(level for level in held.grid.kvs if level > 0)
    attn_flat = np.array(
        [
            held.grid(c, 0, d, flat_kv if d > 0 else 0)
            for c, d in zip(pc.tolist(), n.tolist(), strict=True)
        ]
    )
    ablations = {
        f"op {op}": ErrorStats.of(iter_pred - v, iter_true) for op, v in predicted_parts.items()
    }
    ablations["attention by KV length"] = ErrorStats.of(
        iter_pred + scale * (attn_flat - held.predicted), iter_true
    )
    return iter_pred, iter_true, predicted_parts, ablations
