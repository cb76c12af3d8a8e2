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

Terms earn their place. The held-out iterations are also predicted without each term in
turn (each op's share; attention looked up at no prior context and the grid's least decode
KV), and an op whose removal does not raise their mean relative error is dropped from the
model (the note names it; one op per layer and one per sequence always stay). The report
gives every such ablation, and ``benchmarks/calibration_evidence.py`` tabulates them over
every shipped profile (``docs/calibration.md``).

The op layout of each architecture (which ops run per layer and how often, per forward
pass, per sequence, and whether a layer runs an expert block) comes from
:mod:`schedlab.calibration.layouts`, by ``meta.yaml``'s ``architecture``.

Skew correction. The decode-KV skew correction (:mod:`schedlab.calibration.skew`) is
kept only where it earns its place on held-out profile rows: with the profile's skewed-batch
measurements (``tp<t>/skew.csv``), our own per-bucket table is fitted on them and the three
variants (no correction, one pooled :math:`\alpha`, per-bucket :math:`\alpha`) are
cross-validated (:func:`schedlab.calibration.held_out.skew_cross_validation`); the variant
of least held-out error is used and the report gives all three. A profile with only the
profiler's ``skew_fit.csv`` gets that table, untested (the note says so), with
``meta.yaml``'s ``skew_fit.per_tp.<t>.alpha_default`` for buckets the table lacks; a
profile with neither gets no correction. The held-out iteration errors use the profile's
uniform-KV rows, so they do not involve :math:`\alpha`.

Scaling. Per-layer times are multiplied by :math:`L / L_0`: :math:`L` from the model shape
table (:mod:`schedlab.llm.models`), :math:`L_0` from ``meta.yaml``'s
``engine_effective.hf_overrides.num_hidden_layers``; a ``tp<t>`` folder holds the times of
one rank of a TP-:math:`t` deployment, which the profiler emulates on one GPU by dividing
the sharded widths by :math:`t`; no width is rescaled (``proofs/profile_scaling.md``, with
the bandwidth and FLOP checks that tell full-width from halved rows). The collectives of
tensor parallelism are not in a kernel profile (the profiler runs one rank on one GPU): they
come from the link between the GPUs (``link``), by default the published measurement for
the profile's GPU (:func:`schedlab.llm.link_evidence.link_for`, an explicit assumption
where none is published).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.calibration.deployment import profile_deployment
from schedlab.calibration.experts import ExpertTable
from schedlab.calibration.held_out import (
    ErrorStats,
    chosen_skew,
    fit_ops,
    held_out_attention,
    iteration_errors,
    skew_cross_validation,
    skew_variant,
    unearned_ops,
)
from schedlab.calibration.layouts import OpLayout, get_layout
from schedlab.calibration.parallelism import Parallelism
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.profiles import (
    LLMServingSimProfile,
    MoERows,
    read_llmservingsim_profile,
)
from schedlab.calibration.skew import SkewTable
from schedlab.errors import CalibrationError
from schedlab.json_files import nan_to_null
from schedlab.llm.interconnect import Link
from schedlab.llm.link_evidence import link_for
from schedlab.llm.models import ModelShape, get_model_shape
from schedlab.tables import to_pandas

__all__ = [
    "CalibrationReport",
    "ErrorStats",
    "calibrate",
    "calibrate_profile",
    "skew_table_of",
]


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
    iteration_every_op: ErrorStats | None = None
    ablations: dict[str, ErrorStats] = field(default_factory=dict)
    experts_without_count: ErrorStats | None = None
    skew_held_out: dict[str, ErrorStats] = field(default_factory=dict)
    skew_choice: str = ""
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return nan_to_null(data)

    def _sets(self) -> list[tuple[str, ErrorStats]]:
        """Each held-out set, by its label, in the table's order."""
        sets = [(f"op {op}", stats) for op, stats in self.ops.items()]
        sets += [
            ("attention (interpolation)", self.attention_interpolation),
            ("attention (extrapolation)", self.attention_extrapolation),
        ]
        if self.experts is not None:
            sets.append(("expert block", self.experts))
        if self.experts_without_count is not None:
            sets.append(("expert block at most experts", self.experts_without_count))
        for variant, stats in self.skew_held_out.items():
            chosen = " (chosen)" if variant == self.skew_choice else ""
            sets.append((f"skewed attention, {variant}{chosen}", stats))
        sets.append(("iteration", self.iteration))
        if self.iteration_every_op is not None:
            sets.append(("iteration, every op", self.iteration_every_op))
        sets += [(f"iteration without {term}", stats) for term, stats in self.ablations.items()]
        return sets

    def rows(self) -> list[dict[str, Any]]:
        """One flat row a held-out set: its size and its errors in percent."""
        return [
            {
                "held_out_set": label,
                "n": s.n,
                "mape_pct": s.mape_pct,
                "median_pct": s.median_pct,
                "p90_pct": s.p90_pct,
                "worst_pct": s.worst_pct,
            }
            for label, s in self._sets()
        ]

    def to_pandas(self) -> Any:
        """:meth:`rows` as a pandas DataFrame (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas(self.rows())

    def to_text(self) -> str:
        """A plain-text table."""
        lines = [f"{'held-out set':<34}{'n':>7}{'MAPE%':>9}{'med%':>8}{'P90%':>8}{'worst%':>9}"]
        for label, s in self._sets():
            lines.append(
                f"{label:<34}{s.n:>7}{s.mape_pct:>9.2f}{s.median_pct:>8.2f}"
                f"{s.p90_pct:>8.2f}{s.worst_pct:>9.2f}"
            )
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


def _skew_term(
    profile: LLMServingSimProfile,
) -> tuple[SkewTable | None, dict[str, ErrorStats], str, str]:
    """The decode-skew correction the profile's evidence supports (module docstring):
    ``(table, held-out errors by variant, chosen variant, note)``."""
    samples = profile.skew_samples
    if samples is None or len(samples) < 5:
        table = skew_table_of(profile)
        return (
            table,
            {},
            "",
            "skew: no skew.csv rows to test a correction on; "
            + (
                "none applied"
                if table is None
                else "the profiler's skew_fit.csv table applied, untested here"
            ),
        )
    fit = profile.meta.get("skew_fit")
    axes = fit.get("bucket_axes") if isinstance(fit, dict) else None
    axes = axes if isinstance(axes, dict) and "n_bins" in axes else None
    try:
        errors = skew_cross_validation(samples, axes)
        table = SkewTable.fit(samples, axes)
    except ValueError as exc:
        where = profile.root / "meta.yaml"
        raise CalibrationError(f"{where}: skew_fit.bucket_axes: {exc}") from None
    choice = chosen_skew(errors)
    summary = ", ".join(f"{v} {e.mape_pct:.2f} %" for v, e in errors.items())
    return (
        skew_variant(table, choice),
        errors,
        choice,
        f"skew: {choice} correction kept, least held-out error on {len(samples):,} skew.csv "
        f"rows (5-fold mean relative error: {summary})",
    )


def _expert_table(rows: MoERows, shape: ModelShape) -> tuple[ExpertTable, ErrorStats, ErrorStats]:
    """The expert table fitted on every row, its error on held-out rows (in each token
    row, every other expert count strictly between the row's least and largest, so each is
    interpolated between measured neighbours), and the error there of the table read at
    the row's largest expert count (the block without its expert-count term)."""
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
    most = {size: rows.activated[rows.tokens == size].max() for size in np.unique(rows.tokens)}
    flat = np.array([fitted.time_us(t, most[t]) for t in rows.tokens[test]])
    return (
        ExpertTable.fit(rows, shape.experts, shape.experts_per_token),
        ErrorStats.of(predicted, rows.time_us[test]),
        ErrorStats.of(flat, rows.time_us[test]),
    )


def _notes(
    profile: LLMServingSimProfile,
    shape: ModelShape,
    holdout_every: int,
    thinned: bool,
    experts: bool,
    skew_note: str,
    dropped: Sequence[str],
) -> list[str]:
    """The calibration report's notes: layers, what was held out, the skew term, the ops
    dropped and the expert block's split."""
    notes = [
        f"layers: {shape.layers} (model config of {shape.name}) / "
        f"{profile.profiled_layers} profiled; tensor parallelism {profile.tp}",
        f"held out: every {holdout_every}th interior op size; "
        + (
            "attention: no profile row lies between the grid's levels, so the rows of "
            "every other level were held out (interpolated over twice the spacing: a "
            "pessimistic estimate) beside the rows off the grid"
            if thinned
            else "attention rows off the declared grid"
        )
        + ("; every other interior expert count of moe.csv" if experts else ""),
        skew_note,
    ]
    if dropped:
        notes.append(
            f"op(s) {', '.join(dropped)} dropped: the held-out iterations are predicted no "
            "worse without them"
        )
    if experts and profile.tp > 1:
        moe_file = next(f.name for f in profile.sources if f.name.endswith("moe.csv"))
        notes.append(
            f"expert block from {moe_file} (whole experts on one GPU), split over the "
            f"{profile.tp} ranks without expert parallelism (proofs/profile_scaling.md)"
        )
    return notes


def _source(profile: LLMServingSimProfile) -> str:
    """Where a model calibrated from ``profile`` comes from: the table ``schedlab profile
    import`` read, or the LLMServingSim profile."""
    hardware, meta = profile.hardware or "gpu", profile.meta
    where = f"{hardware}/{profile.model}"
    if meta.get("source"):  # a profile made by schedlab profile import
        text = f"{meta['source']}, as {where}/tp{profile.tp}"
    else:
        text = (
            f"LLMServingSim profile {where}/{meta.get('variant', '')}/tp{profile.tp} "
            f"({meta.get('gpu', '')}, vLLM {meta.get('vllm_version', '?')})"
        )
    return text + "; fitted by schedlab.calibration"


def calibrate_profile(
    profile: LLMServingSimProfile,
    *,
    holdout_every: int = 4,
    margin_quantile: float = 0.95,
    name: str | None = None,
    link: Link | None = None,
) -> tuple[ProfileCostModel, CalibrationReport]:
    """Fit the cost model to a read profile; see :func:`calibrate`."""
    # Over 100 lines by design: the calibration's steps in their order, each one call; the rest
    # builds the report and the model by keyword, one field a line.
    if holdout_every < 2:
        raise CalibrationError(f"holdout_every: must be >= 2, got {holdout_every}")
    if not 0 < margin_quantile < 1:
        raise CalibrationError(f"margin_quantile: must be in (0, 1), got {margin_quantile}")
    layout = get_layout(profile.architecture, f"{profile.root}/meta.yaml")
    _required(profile, layout)
    shape = get_model_shape(profile.model)
    experts = expert_stats = experts_flat = None
    if layout.experts:
        if profile.moe is None:
            raise CalibrationError(
                f"{profile.root}: no moe.csv (in tp{profile.tp}/ or tp1/) for the "
                f"{profile.architecture!r} expert block"
            )
        experts, expert_stats, experts_flat = _expert_table(profile.moe, shape)
    layers, profiled = shape.layers, profile.profiled_layers
    scale = layers / profiled

    tables = {**profile.dense, **profile.per_sequence}
    op_stats, train_curves, full_curves = fit_ops(tables, holdout_every)

    grid, used, thinned, held = held_out_attention(profile)
    iter_pred, iter_true, predicted_parts, ablations = iteration_errors(
        layout, scale, tables, train_curves, experts, held
    )
    every_op = ErrorStats.of(iter_pred, iter_true)
    dropped = unearned_ops(ablations, every_op, layout)
    iter_pred = iter_pred - sum((predicted_parts[op] for op in dropped), np.zeros(iter_pred.size))
    residual_s = (iter_true - iter_pred) * 1e-6
    margin = max(0.0, float(np.quantile(residual_s, margin_quantile))) if residual_s.size else 0.0
    skew, skew_errors, skew_choice, skew_note = _skew_term(profile)
    notes = _notes(profile, shape, holdout_every, thinned, experts is not None, skew_note, dropped)
    link_evidence = "measured" if link is not None else ""
    if profile.tp > 1 and link is None:
        evidence = link_for(profile.hardware)
        link, link_evidence = evidence.link, evidence.kind
        notes.append(f"collectives of tensor parallelism {profile.tp}: {evidence.note}")
    report = CalibrationReport(
        ops=op_stats,
        attention_interpolation=ErrorStats.of(
            held.predicted[held.inside], held.measured[held.inside]
        ),
        attention_extrapolation=ErrorStats.of(
            held.predicted[~held.inside], held.measured[~held.inside]
        ),
        iteration=ErrorStats.of(iter_pred, iter_true),
        margin_s=margin,
        margin_quantile=margin_quantile,
        attention_grid_rows=int(used.sum()),
        attention_rows=len(profile.attention),
        experts=expert_stats,
        skew_buckets=0 if skew is None else len(skew.buckets),
        iteration_every_op=every_op,
        ablations=ablations,
        experts_without_count=experts_flat,
        skew_held_out=skew_errors,
        skew_choice=skew_choice,
        notes=tuple(notes),
    )
    hardware = profile.hardware or "gpu"
    suffix = f"_tp{profile.tp}" if profile.tp > 1 else ""
    model_name = name or f"{hardware}_{shape.name.split('/')[-1]}{suffix}".lower()
    model = ProfileCostModel(
        name=model_name,
        model=profile.model,
        layers=layers,
        profiled_layers=profiled,
        layer_ops=tuple(
            (op, float(count), full_curves[op])
            for op, count in layout.per_layer.items()
            if op not in dropped
        ),
        forward_ops=tuple((op, full_curves[op]) for op in layout.per_forward if op not in dropped),
        head_ops=tuple((op, full_curves[op]) for op in layout.per_sequence if op not in dropped),
        attention=grid,
        skew=skew,
        experts=experts,
        parallelism=Parallelism(
            profile.tp, shape.hidden, shape.dtype_bytes, link, link_evidence=link_evidence
        ),
        margin_s=margin,
        hardware=profile.hardware,
        source=_source(profile),
        license=str(
            profile.meta.get("license")
            or "Derived figures (isotonic fits, grid values, NNLS coefficients) of profiles "
            "from casys-kaist/LLMServingSim, MIT License"
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
        The link between the GPUs of one engine, for the collectives of ``tp > 1``
        (default: :func:`~schedlab.llm.link_evidence.link_for` the profile's GPU).

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
