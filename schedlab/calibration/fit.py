r"""Calibration: fit a :class:`ProfileCostModel` to a GPU profile and report held-out error.

:func:`calibrate` reads an LLMServingSim profile, fits each op and the attention grid, and
measures the error on measurements the fit did not use:

* **per op** (dense and per-sequence ops): every ``holdout_every``-th interior size is
  held out, the curve is fitted on the rest and evaluated there;
* **attention**: the grid uses only the profile's declared doubling grid, so every other
  row (the interleaved x1.5 grid, 256 decodes) is held out — inside the grid's bounds
  (*interpolation*) or outside them (*extrapolation*). A profile with no row between the
  grid's levels (the RTX 4090 bundle measures the doubling grid alone) would leave the
  interpolation untested and the margin below resting on a few extrapolated rows: there
  the grid is fitted again on every other level, and the rows of the levels left out are
  held out as well, interpolated over twice the real spacing (a pessimistic estimate);
* **per iteration**: for every held-out attention row, a whole iteration of that shape
  (``n`` decodes at ``k`` KV each plus one chunk ``c`` on ``p`` cached tokens; tokens
  :math:`N = n + c`, sequences :math:`S = n + [c>0]`) is predicted by the model fitted on
  the training split and compared with the measured composition: the held-out attention
  time plus the dense and head ops linearly interpolated between their raw measurements.

Errors are relative, :math:`|\hat t - t| / t`, reported as MAPE, median, P90 and worst
case (percent). The SLOWeave margin is the upper quantile of the per-iteration residuals,
:math:`\delta = \max(0, Q_q(t - \hat t))` seconds (default :math:`q = 0.95`): with it a
prediction :math:`\hat t + \delta` covers the held-out iterations in a fraction
:math:`\ge q` of cases.

* **experts** (mixture-of-experts profiles): every ``holdout_every``-th interior row of
  ``moe.csv`` is held out, the table fitted on the rest and evaluated there.

The op layout of each architecture (which ops run per layer and how often, per forward
pass, per sequence, and whether a layer runs an expert block) comes from
:mod:`schedlab.calibration.layouts`, by ``meta.yaml``'s ``architecture``.

Skew correction. :math:`\alpha` of the decode-KV skew correction
(:mod:`schedlab.calibration.skew`) comes from the profile's per-bucket table
``tp<t>/skew_fit.csv``, with ``meta.yaml``'s ``skew_fit.per_tp.<t>.alpha_default`` (the same
fit pooled over every case) for buckets the table lacks; a profile with neither gets no
correction. The table is used whenever the profile has it, whatever ``skew_fit.enabled``
says: the RTX 4090 bundle's ``meta.yaml`` predates its skew files and still says
``false``. The held-out errors above use the profile's uniform-KV rows, so they do not
involve :math:`\alpha`; the profiler reports the skew fit's own error beside it
(``rel_err_p50``, ``rel_err_p90``).

Scaling. Per-layer times are multiplied by :math:`L / L_0`: :math:`L` from the model shape
table (:mod:`schedlab.llm.models`), :math:`L_0` from ``meta.yaml``'s
``engine_effective.hf_overrides.num_hidden_layers``; a ``tp<t>`` folder holds the times of
one rank of a TP-:math:`t` deployment, which the profiler emulates on one GPU by dividing
the sharded widths by :math:`t`; no width is rescaled (``proofs/profile_scaling.md``, with
the bandwidth and FLOP checks that tell full-width from halved rows). The collectives of
tensor parallelism are not in a kernel profile: they come from the link between the GPUs
(``link``), which only the deployment knows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.attention_grid import AttentionGrid, parse_grid_spec
from schedlab.calibration.curves import MonotoneCurve
from schedlab.calibration.deployment import profile_deployment
from schedlab.calibration.experts import ExpertTable
from schedlab.calibration.layouts import OpLayout, get_layout
from schedlab.calibration.profile_model import Parallelism, ProfileCostModel
from schedlab.calibration.profiles import (
    AttentionRows,
    LLMServingSimProfile,
    MoERows,
    OpTable,
    read_llmservingsim_profile,
)
from schedlab.calibration.skew import SkewTable
from schedlab.errors import CalibrationError
from schedlab.json_files import nan_to_null
from schedlab.llm.interconnect import Link
from schedlab.llm.models import ModelShape, get_model_shape

__all__ = [
    "CalibrationReport",
    "ErrorStats",
    "calibrate",
    "calibrate_profile",
    "skew_table_of",
]


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


@dataclass(frozen=True)
class CalibrationReport:
    """Held-out errors of a calibration (module docstring) and the derived margin."""

    ops: dict[str, ErrorStats]
    attention_interpolation: ErrorStats
    attention_extrapolation: ErrorStats
    iteration: ErrorStats
    margin_s: float
    margin_quantile: float
    attention_grid_rows: int
    attention_rows: int
    experts: ErrorStats | None = None
    skew_buckets: int = 0
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return nan_to_null(data)

    def to_text(self) -> str:
        """A plain-text table."""
        lines = [f"{'held-out set':<34}{'n':>7}{'MAPE%':>9}{'med%':>8}{'P90%':>8}{'worst%':>9}"]

        def row(label: str, s: ErrorStats) -> None:
            lines.append(
                f"{label:<34}{s.n:>7}{s.mape_pct:>9.2f}{s.median_pct:>8.2f}"
                f"{s.p90_pct:>8.2f}{s.worst_pct:>9.2f}"
            )

        for op, stats in self.ops.items():
            row(f"op {op}", stats)
        row("attention (interpolation)", self.attention_interpolation)
        row("attention (extrapolation)", self.attention_extrapolation)
        if self.experts is not None:
            row("expert block", self.experts)
        row("iteration", self.iteration)
        lines.append(
            f"SLOWeave margin delta = {self.margin_s * 1e3:.4f} ms "
            f"(quantile {self.margin_quantile:g} of iteration residuals)"
        )
        lines.append(
            f"attention grid uses {self.attention_grid_rows} of {self.attention_rows} rows"
        )
        lines.append(f"skew table: {self.skew_buckets} buckets")
        lines.extend(self.notes)
        return "\n".join(lines)


def _split(table: OpTable, every: int) -> tuple[np.ndarray, np.ndarray]:
    """Masks (train, test): every ``every``-th interior point is a test point."""
    index = np.arange(table.x.size)
    test = (index % every == every // 2) & (index > 0) & (index < table.x.size - 1)
    return ~test, test


def _raw(table: OpTable) -> Any:
    """Linear interpolation of the raw measurements (the 'measured' side of an iteration)."""
    return lambda v: np.interp(v, table.x, table.time_us)


def _required(profile: LLMServingSimProfile, layout: OpLayout) -> None:
    for group, names in (
        ("dense.csv", (*layout.per_layer, *layout.per_forward)),
        ("per_sequence.csv", layout.per_sequence),
    ):
        present = profile.dense if group == "dense.csv" else profile.per_sequence
        missing = sorted(set(names) - set(present))
        if missing:
            raise CalibrationError(
                f"{profile.root}/tp{profile.tp}/{group}: missing op(s) {', '.join(missing)} "
                f"needed by the {profile.architecture!r} layout"
            )
    extra = sorted(
        set(profile.dense) - set(layout.per_layer) - set(layout.per_forward)
        | set(profile.per_sequence) - set(layout.per_sequence)
    )
    if extra:
        raise CalibrationError(
            f"{profile.root}: op(s) {', '.join(extra)} are not in the {profile.architecture!r} "
            "layout (add a layout with schedlab.calibration.layouts.register_layout)"
        )


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


def skew_table_of(profile: LLMServingSimProfile) -> SkewTable | None:
    """The profile's skew table (module docstring), or ``None`` with no skew data at all.

    Raises
    ------
    CalibrationError
        If ``meta.yaml``'s pooled alpha is not a number in ``[0, 1]``.
    """
    fit = profile.meta.get("skew_fit")
    fit = fit if isinstance(fit, dict) else {}
    per_tp = fit.get("per_tp")
    entry = (
        per_tp.get(profile.tp, per_tp.get(str(profile.tp))) if isinstance(per_tp, dict) else None
    )
    pooled = entry.get("alpha_default") if isinstance(entry, dict) else None
    if pooled is not None and (
        isinstance(pooled, bool) or not isinstance(pooled, int | float) or not 0 <= pooled <= 1
    ):
        raise CalibrationError(
            f"{profile.root / 'meta.yaml'}: skew_fit.per_tp.{profile.tp}.alpha_default: "
            f"expected a number in [0, 1], got {pooled!r}"
        )
    axes = fit.get("bucket_axes")
    if profile.skew is not None:
        try:
            return SkewTable.from_rows(
                profile.skew,
                None if pooled is None else float(pooled),
                axes if isinstance(axes, dict) and "n_bins" in axes else None,
            )
        except ValueError as exc:
            raise CalibrationError(
                f"{profile.root / 'meta.yaml'}: skew_fit.bucket_axes: {exc}"
            ) from None
    if pooled is None or fit.get("enabled") is not True:
        return None
    return SkewTable(float(pooled))


def _expert_table(rows: MoERows, shape: ModelShape) -> tuple[ExpertTable, ErrorStats]:
    """The expert table fitted on every row, and its error on held-out rows: in each token
    row, every other expert count strictly between the row's least and largest (so each is
    interpolated between measured neighbours)."""
    if shape.experts < 1 or shape.experts_per_token < 1:
        raise CalibrationError(
            f"model {shape.name}: its shape has no experts (register it with experts and "
            "experts_per_token)"
        )
    test = np.zeros(rows.tokens.size, dtype=bool)
    for size in np.unique(rows.tokens):
        mine = np.flatnonzero(rows.tokens == size)
        mine = mine[np.argsort(rows.activated[mine])]
        test[mine[1:-1:2]] = True
    train = MoERows(rows.tokens[~test], rows.activated[~test], rows.time_us[~test])
    fitted = ExpertTable.fit(train, shape.experts, shape.experts_per_token)
    held = zip(rows.tokens[test], rows.activated[test], strict=True)
    predicted = np.array([fitted.time_us(t, a) for t, a in held])
    stats = ErrorStats.of(predicted, rows.time_us[test])
    return ExpertTable.fit(rows, shape.experts, shape.experts_per_token), stats


def calibrate_profile(
    profile: LLMServingSimProfile,
    *,
    holdout_every: int = 4,
    margin_quantile: float = 0.95,
    name: str | None = None,
    link: Link | None = None,
) -> tuple[ProfileCostModel, CalibrationReport]:
    """Fit the cost model to a read profile; see :func:`calibrate`."""
    if holdout_every < 2:
        raise CalibrationError(f"holdout_every: must be >= 2, got {holdout_every}")
    if not 0 < margin_quantile < 1:
        raise CalibrationError(f"margin_quantile: must be in (0, 1), got {margin_quantile}")
    layout = get_layout(profile.architecture, f"{profile.root}/meta.yaml")
    _required(profile, layout)
    shape = get_model_shape(profile.model)
    experts = expert_stats = None
    if layout.experts:
        if profile.moe is None:
            raise CalibrationError(
                f"{profile.root}: no moe.csv (in tp{profile.tp}/ or tp1/) for the "
                f"{profile.architecture!r} expert block"
            )
        experts, expert_stats = _expert_table(profile.moe, shape)
    layers, profiled = shape.layers, profile.profiled_layers
    scale = layers / profiled

    # 1-D ops: held-out error, then the final fit on every point.
    tables = {**profile.dense, **profile.per_sequence}
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

    # Attention on the declared grid; the other rows are held out.
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
    # Held out: the rows off the grid; if none lies between its levels, the grid is fitted
    # again on every other level and the rows of the levels it leaves out are held out too.
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
    attn_pred = np.array(
        [
            test_grid(*point)
            for point in zip(pc.tolist(), kp.tolist(), n.tolist(), kv.tolist(), strict=True)
        ]
    )
    inside = _inside(test_grid, rows, held)[held]
    measured = rows.time_us[held]

    # Per-iteration held-out error.
    tokens, seqs = n + pc, n + (pc > 0)

    def compose(curves: dict[str, Any]) -> np.ndarray:
        total = np.zeros(tokens.size)
        for op, count in layout.per_layer.items():
            total += scale * count * np.array([curves[op](v) for v in tokens])
        for op in layout.per_forward:
            total += np.array([curves[op](v) for v in tokens])
        for op in layout.per_sequence:
            total += np.array([curves[op](v) for v in seqs])
        return total

    raw_curves = {op: _raw(table) for op, table in tables.items()}
    block = scale * np.array([experts(v) for v in tokens]) if experts else np.zeros(tokens.size)
    iter_true = compose(raw_curves) + scale * measured + block
    iter_pred = compose(train_curves) + scale * attn_pred + block
    residual_s = (iter_true - iter_pred) * 1e-6
    margin = max(0.0, float(np.quantile(residual_s, margin_quantile))) if residual_s.size else 0.0
    skew = skew_table_of(profile)
    notes = [
        f"layers: {layers} (model config of {shape.name}) / {profiled} profiled; "
        f"tensor parallelism {profile.tp}",
        f"held out: every {holdout_every}th interior op size; "
        + (
            "attention: no profile row lies between the grid's levels, so the rows of "
            "every other level were held out (interpolated over twice the spacing: a "
            "pessimistic estimate) beside the rows off the grid"
            if thinned
            else "attention rows off the declared grid"
        )
        + ("; every other interior expert count of moe.csv" if experts else ""),
    ]
    if experts and profile.tp > 1:
        moe_file = next(f.name for f in profile.sources if f.name.endswith("moe.csv"))
        notes.append(
            f"expert block from {moe_file} (whole experts on one GPU), split over the "
            f"{profile.tp} ranks without expert parallelism (proofs/profile_scaling.md)"
        )
    if profile.tp > 1 and link is None:
        notes.append(
            f"collectives of tensor parallelism {profile.tp} NOT modelled: give the link "
            "between the GPUs (link=..., --link BW,LATENCY)"
        )
    report = CalibrationReport(
        ops=op_stats,
        attention_interpolation=ErrorStats.of(attn_pred[inside], measured[inside]),
        attention_extrapolation=ErrorStats.of(attn_pred[~inside], measured[~inside]),
        iteration=ErrorStats.of(iter_pred, iter_true),
        margin_s=margin,
        margin_quantile=margin_quantile,
        attention_grid_rows=int(used.sum()),
        attention_rows=len(rows),
        experts=expert_stats,
        skew_buckets=0 if skew is None else len(skew.buckets),
        notes=tuple(notes),
    )
    hardware = profile.hardware or "gpu"
    suffix = f"_tp{profile.tp}" if profile.tp > 1 else ""
    model_name = name or f"{hardware}_{shape.name.split('/')[-1]}{suffix}".lower()
    variant = profile.meta.get("variant", "")
    model = ProfileCostModel(
        name=model_name,
        model=profile.model,
        layers=layers,
        profiled_layers=profiled,
        layer_ops=tuple(
            (op, float(count), full_curves[op]) for op, count in layout.per_layer.items()
        ),
        forward_ops=tuple((op, full_curves[op]) for op in layout.per_forward),
        head_ops=tuple((op, full_curves[op]) for op in layout.per_sequence),
        attention=grid,
        skew=skew,
        experts=experts,
        parallelism=Parallelism(profile.tp, shape.hidden, shape.dtype_bytes, link),
        margin_s=margin,
        hardware=profile.hardware,
        source=(
            f"LLMServingSim profile {hardware}/{profile.model}/{variant}/tp{profile.tp} "
            f"({profile.meta.get('gpu', '')}, vLLM {profile.meta.get('vllm_version', '?')}); "
            "fitted by schedlab.calibration"
        ),
        license=(
            "Derived figures (isotonic fits, grid values, NNLS coefficients) of profiles from "
            "casys-kaist/LLMServingSim, MIT License"
        ),
        sources=profile.sources,
        deployment=profile_deployment(profile),
        report=nan_to_null(
            {
                "iteration_median_pct": report.iteration.median_pct,
                "iteration_p90_pct": report.iteration.p90_pct,
                "attention_interpolation_mape_pct": report.attention_interpolation.mape_pct,
                "margin_quantile": margin_quantile,
            }
        ),
    )
    return model, report


def calibrate(
    profile_dir: str | Path,
    model: str,
    *,
    tp: int = 1,
    holdout_every: int = 4,
    margin_quantile: float = 0.95,
    name: str | None = None,
    link: Link | None = None,
) -> tuple[ProfileCostModel, CalibrationReport]:
    """Calibrate a cost model from an LLMServingSim profile directory.

    Parameters
    ----------
    profile_dir
        The directory holding ``meta.yaml`` and ``tp<tp>/``.
    model
        The model name as ``meta.yaml`` spells it (checked), e.g. ``meta-llama/Llama-3.1-8B``;
        its layer count comes from :mod:`schedlab.llm.models`.
    tp
        Tensor-parallel degree of the profile to read.
    holdout_every, margin_quantile
        Held-out split of the op curves and the quantile of :math:`\\delta`.
    name
        Name of the fitted model (default ``<hardware>_<model>``, lower case, with
        ``_tp<tp>`` for ``tp > 1``).
    link
        The link between the GPUs of one engine, for the collectives of ``tp > 1``.

    Returns
    -------
    (ProfileCostModel, CalibrationReport)
        The model fitted on every measurement of the declared grid, with ``margin_s`` =
        :math:`\\delta`, and the held-out error report.
    """
    profile = read_llmservingsim_profile(profile_dir, tp=tp)
    if profile.model != model:
        raise CalibrationError(
            f"{Path(profile_dir) / 'meta.yaml'}: profile is for model {profile.model!r}, "
            f"not {model!r}"
        )
    return calibrate_profile(
        profile,
        holdout_every=holdout_every,
        margin_quantile=margin_quantile,
        name=name,
        link=link,
    )
