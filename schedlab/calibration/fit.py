r"""Calibration: fit a :class:`ProfileCostModel` to a GPU profile and report held-out error.

:func:`calibrate` reads an LLMServingSim profile, fits each op and the attention grid, and
measures the error on measurements the fit did not use:

* **per op** (dense and per-sequence ops): every ``holdout_every``-th interior size is
  held out, the curve is fitted on the rest and evaluated there;
* **attention**: the grid uses only the profile's declared doubling grid, so every other
  row (the interleaved x1.5 grid, 256 decodes) is held out — inside the grid's bounds
  (*interpolation*) or outside them (*extrapolation*);
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

The op layout of each architecture (which ops run per layer and how often, per forward
pass, per sequence) is :data:`LAYOUTS`; it follows vLLM's Llama implementation
(``input_layernorm`` and ``post_attention_layernorm`` are both RMSNorm, so ``layernorm``
runs twice per layer) and LLMServingSim's llama catalog.

Skew correction. :math:`\alpha` of the decode-KV skew correction
(:mod:`schedlab.calibration.profile_model`) is the profiler's own pooled fit,
``meta.yaml`` ``skew_fit.per_tp.<tp>.alpha_default`` (:func:`skew_alpha_of`); a profile
without a ``skew_fit`` block gets :math:`\alpha = 0`. The held-out errors above use the
profile's uniform-KV rows, so they do not involve :math:`\alpha`; the profiler reports
the skew fit's own error next to it (``rel_err_p50``, ``rel_err_p90``: 1.2 % and 6.4 % for
its per-bucket table on the shared profile).

Layer count. Per-layer times are multiplied by :math:`L / L_0`: :math:`L` from the model
shape table (:mod:`schedlab.llm.models`), :math:`L_0` from ``meta.yaml``'s
``engine_effective.hf_overrides.num_hidden_layers``. The shared RTX PRO 6000 ``meta.yaml``
also lists halved widths there (intermediate 7168, 16 heads, 4 KV heads, vocabulary
64128: a TP-2 shard, and ``tp_degrees: [1, 2]``), but its ``tp1`` timings are those of the
full-width model — e.g. ``gate_up_proj`` at one token takes 159 µs, the time to stream its
4096 x 28672 bf16 weights (235 MB) at the card's 1.6 TB/s, where a half-width shard would
take about half — so only the layer count is taken from those overrides.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.attention_grid import AttentionGrid, parse_grid_spec
from schedlab.calibration.curves import MonotoneCurve
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.profiles import LLMServingSimProfile, OpTable, read_llmservingsim_profile
from schedlab.errors import CalibrationError
from schedlab.json_files import nan_to_null
from schedlab.llm.models import get_model_shape

__all__ = [
    "LAYOUTS",
    "CalibrationError",
    "CalibrationReport",
    "ErrorStats",
    "OpLayout",
    "calibrate",
    "calibrate_profile",
    "skew_alpha_of",
]


@dataclass(frozen=True)
class OpLayout:
    """Which profiled ops an iteration runs, and how often.

    Attributes
    ----------
    per_layer
        Op name -> runs per decoder layer (scaled by the layer count).
    per_forward
        Ops run once per forward pass over all tokens.
    per_sequence
        Ops run once per iteration over the sequences that produce logits.
    """

    per_layer: dict[str, float]
    per_forward: tuple[str, ...]
    per_sequence: tuple[str, ...]


#: Op layouts by ``meta.yaml`` ``architecture``.
LAYOUTS: dict[str, OpLayout] = {
    "llama": OpLayout(
        per_layer={
            "layernorm": 2,
            "qkv_proj": 1,
            "rotary_emb": 1,
            "o_proj": 1,
            "gate_up_proj": 1,
            "act_fn": 1,
            "down_proj": 1,
        },
        per_forward=("embedding", "final_layernorm"),
        per_sequence=("lm_head", "sampler"),
    ),
}


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
        row("iteration", self.iteration)
        lines.append(
            f"SLOWeave margin delta = {self.margin_s * 1e3:.4f} ms "
            f"(quantile {self.margin_quantile:g} of iteration residuals)"
        )
        lines.append(
            f"attention grid uses {self.attention_grid_rows} of {self.attention_rows} rows"
        )
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
            "layout (add them to schedlab.calibration.fit.LAYOUTS)"
        )


def skew_alpha_of(profile: LLMServingSimProfile) -> float:
    """The pooled skew coefficient ``skew_fit.per_tp.<tp>.alpha_default`` of ``meta.yaml``.

    Returns 0 when the profile has no enabled ``skew_fit`` block or none for its TP degree.

    Raises
    ------
    CalibrationError
        If the value is not a number in ``[0, 1]``.
    """
    fit = profile.meta.get("skew_fit")
    if not isinstance(fit, dict) or fit.get("enabled") is not True:
        return 0.0
    per_tp = fit.get("per_tp")
    entry = (
        per_tp.get(profile.tp, per_tp.get(str(profile.tp))) if isinstance(per_tp, dict) else None
    )
    if not isinstance(entry, dict) or "alpha_default" not in entry:
        return 0.0
    alpha = entry["alpha_default"]
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
        raise CalibrationError(
            f"{profile.root / 'meta.yaml'}: skew_fit.per_tp.{profile.tp}.alpha_default: "
            f"expected a number in [0, 1], got {alpha!r}"
        )
    return float(alpha)


def calibrate_profile(
    profile: LLMServingSimProfile,
    *,
    holdout_every: int = 4,
    margin_quantile: float = 0.95,
    name: str | None = None,
) -> tuple[ProfileCostModel, CalibrationReport]:
    """Fit the cost model to a read profile; see :func:`calibrate`."""
    if holdout_every < 2:
        raise CalibrationError(f"holdout_every: must be >= 2, got {holdout_every}")
    if not 0 < margin_quantile < 1:
        raise CalibrationError(f"margin_quantile: must be in (0, 1), got {margin_quantile}")
    layout = LAYOUTS.get(profile.architecture)
    if layout is None:
        raise CalibrationError(
            f"{profile.root}/meta.yaml: architecture {profile.architecture!r} has no op layout; "
            f"known: {', '.join(sorted(LAYOUTS))}"
        )
    _required(profile, layout)
    shape = get_model_shape(profile.model)
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
    held = ~used
    pc, kp, n, kv = (
        rows.prefill_chunk[held],
        rows.kv_prefill[held],
        rows.n_decode[held],
        rows.kv_decode[held],
    )
    attn_pred = np.array(
        [
            grid(*point)
            for point in zip(pc.tolist(), kp.tolist(), n.tolist(), kv.tolist(), strict=True)
        ]
    )
    inside = (
        (pc <= grid.chunks[-1])
        & (kp <= grid.contexts[-1])
        & (n <= grid.decodes[-1])
        & ((kv <= grid.kvs[-1]) | (n == 0))
    )
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
    iter_true = compose(raw_curves) + scale * measured
    iter_pred = compose(train_curves) + scale * attn_pred
    residual_s = (iter_true - iter_pred) * 1e-6
    margin = max(0.0, float(np.quantile(residual_s, margin_quantile))) if residual_s.size else 0.0

    report = CalibrationReport(
        ops=op_stats,
        attention_interpolation=ErrorStats.of(attn_pred[inside], measured[inside]),
        attention_extrapolation=ErrorStats.of(attn_pred[~inside], measured[~inside]),
        iteration=ErrorStats.of(iter_pred, iter_true),
        margin_s=margin,
        margin_quantile=margin_quantile,
        attention_grid_rows=int(used.sum()),
        attention_rows=len(rows),
        notes=(
            f"layers: {layers} (model config of {shape.name}) / {profiled} profiled",
            f"held out: every {holdout_every}th interior op size; attention rows off the "
            "declared grid",
        ),
    )
    hardware = profile.hardware or "gpu"
    model_name = name or f"{hardware}_{shape.name.split('/')[-1]}".lower()
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
        skew_alpha=skew_alpha_of(profile),
        margin_s=margin,
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
        report={
            "iteration_median_pct": report.iteration.median_pct,
            "iteration_p90_pct": report.iteration.p90_pct,
            "attention_interpolation_mape_pct": report.attention_interpolation.mape_pct,
            "margin_quantile": margin_quantile,
        },
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
        Name of the fitted model (default ``<hardware>_<model>``, lower case).

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
        profile, holdout_every=holdout_every, margin_quantile=margin_quantile, name=name
    )
