r"""The calibrated cost model: an iteration composed from per-op GPU profile fits.

For a batch of :math:`n` decodes holding :math:`K` KV tokens in total and prefill chunks
:math:`(c_j, p_j)` (DESIGN section 3), with :math:`C = \sum_j c_j`,
:math:`P = \sum_j p_j`, :math:`m` the number of chunks, :math:`N = n + C` tokens and
:math:`S = n + m` sequences,

.. math::

    T = \Bigl[\; \underbrace{\sum_{o \in \text{layer ops}} \tfrac{L}{L_0}\, w_o\, f_o(N)
        + \sum_{o \in \text{forward ops}} f_o(N)}_{\text{dense}(N)}
        + \underbrace{\sum_{o \in \text{head ops}} f_o(S)}_{\text{head}(S)}
        + \tfrac{L}{L_0}\, A_s \Bigr] \cdot 10^{-6}\ \text{s},

    A_s = A\bigl(C, P, n, \bar k\bigr)
          + \alpha \max\bigl(0,\; A(C, P, n, k_{\max}) - A(C, P, n, \bar k)\bigr),
    \qquad \bar k = K/n,

where :math:`f_o` are the :class:`~schedlab.calibration.curves.MonotoneCurve` fits of the
op measurements (µs), :math:`w_o` how often op :math:`o` runs per decoder layer (RMSNorm
twice), :math:`L` the model's layer count, :math:`L_0` the layers the profiler ran, and
:math:`A` the :class:`~schedlab.calibration.attention_grid.AttentionGrid`.

Modelling choices (each one documented, none fitted to a serving run):

* *Several chunks in one batch* are looked up as one chunk of :math:`C` tokens on
  :math:`P` cached tokens, as LLMServingSim does. The query-key work
  :math:`C (P + C/2)` is at least :math:`\sum_j c_j (p_j + c_j/2)`, so this over-estimates
  attention when chunks are split (a safe direction for SLOWeave).
* *Decode attention* is looked up at the mean KV per decode, :math:`\bar k = K/n`: the
  profile measures batches of :math:`n` decodes holding *equal* KV, and a uniform batch at
  the mean reads the same :math:`K` tokens (decode attention is memory-bound: on the
  shared profile, 128 decodes cost 2.7 ns per extra KV token, 4 KiB per token and layer
  at 1.5 TB/s, the card's bandwidth). The grid is nearly affine in :math:`k` above a few
  hundred tokens at fixed :math:`n`, so summing per-request costs would change little
  there; the real departure from the uniform measurement is load imbalance.
* *Skew of decode KV lengths* (:math:`\alpha` term). A batch whose decodes hold uneven KV
  is slower than the uniform batch at the mean (FlashAttention's varlen kernel pays tile
  padding and SM imbalance). LLMServingSim's profiler measures this directly
  (``skew_profile`` in ``meta.yaml``; ``llmservingsim/profiler/core/skew.py``): for
  bimodal batches it times the uniform batch at the mean (:math:`t_{mean}`), the uniform
  batch at the maximum (:math:`t_{max}`) and the skewed batch (:math:`t_{skew}`), and
  fits :math:`t_{skew} = t_{mean} + \alpha (t_{max} - t_{mean})`
  (``fit_alpha.py``, weighted least squares). Its simulator applies exactly this formula
  per batch with the batch's longest decode (``serving/core/trace_generator.py``,
  ``_lookup_attention_with_skew``; the correction is dropped when
  :math:`A(k_{\max}) \le A(\bar k)`). We use the pooled constant ``alpha_default`` of
  ``meta.yaml`` ``skew_fit.per_tp.<tp>`` (0.0543 for the shared RTX PRO 6000 profile,
  12,984 profiled skew cases): the per-bucket table it refers to (``tp1/skew_fit.csv``)
  is not in the shared data, and LLMServingSim's simulator falls back to the same
  constant then. The profiler's own ablation (``fit_alpha.py``) reports that the pooled
  constant removes the bias of :math:`\alpha = 0` (mean signed error -6.2 % to -0.8 %)
  without sharpening per-batch accuracy. The constant is dominated by batches that
  carry a prefill chunk: rebuilt from ``meta.yaml`` ``skew_profile.grid`` by the
  profiler's case construction, decode-only batches are 2.3 % of the skew cases and
  0.56 % of the fit's weight (``python benchmarks/replay_vllm.py --diagnose``), so for
  decode-only batches it is an extrapolation across regimes, not a measurement; the
  profile does not say whether it is too large or too small there. The simulator
  passes :math:`k_{\max}` through the optional ``decode_kv_max`` keyword
  (:class:`~schedlab.serving.cost_model.CostModel`); callers that do not (SLOWeave's
  chunk search) get the uniform value. :math:`\alpha` is a property of the profile,
  fitted on GPU measurements only, never on a serving run.
* *Logits* are computed for every scheduled sequence, partial prefills included (vLLM v1
  computes logits at each request's last scheduled position), hence :math:`S = n + m`.
* Host-side work (scheduling, input preparation, detokenisation) is not in a kernel
  profile and is not modelled.

:math:`T` is non-decreasing in every chunk length (proofs/calibrated_monotone.md).
Installed as cost-model kind ``profile-grid`` (the entry point
``schedlab.cost_model_kinds`` of ``pyproject.toml``; see
:mod:`schedlab.serving.cost_model`), so the simulator and SLOWeave load its JSON like any
other model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schedlab.calibration.attention_grid import AttentionGrid
from schedlab.calibration.curves import MonotoneCurve
from schedlab.calibration.profiles import SourceFile
from schedlab.errors import FormatError
from schedlab.serving.cost_model import Chunk

__all__ = ["KIND", "ProfileCostModel", "load_profile_cost_model"]

#: The ``kind`` of the JSON form.
KIND = "profile-grid"


@dataclass(frozen=True, eq=False)
class ProfileCostModel:
    """Iteration time composed from profile fits (module docstring).

    Attributes
    ----------
    name
        Model name, e.g. ``rtxpro6000_llama-3.1-8b``.
    model
        The served model as the profile spells it.
    layers, profiled_layers
        :math:`L` and :math:`L_0`.
    layer_ops
        ``(op, runs per layer, curve over tokens)``.
    forward_ops
        ``(op, curve over tokens)`` run once per forward pass (embedding, final norm).
    head_ops
        ``(op, curve over sequences)`` (lm_head, sampler).
    attention
        One layer's attention.
    skew_alpha
        :math:`\\alpha \\in [0, 1]` of the skew correction (0: none).
    margin_s
        SLOWeave margin :math:`\\delta \\ge 0`.
    source, license
        Provenance and license of the data the figures derive from.
    sources
        Files fitted on, with SHA-256 hashes.
    report
        Summary of the calibration error report (free-form JSON object).
    """

    name: str
    model: str
    layers: int
    profiled_layers: int
    layer_ops: tuple[tuple[str, float, MonotoneCurve], ...]
    forward_ops: tuple[tuple[str, MonotoneCurve], ...]
    head_ops: tuple[tuple[str, MonotoneCurve], ...]
    attention: AttentionGrid
    skew_alpha: float = 0.0
    margin_s: float = 0.0
    source: str = ""
    license: str = ""
    sources: tuple[SourceFile, ...] = ()
    report: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.layers < 1 or self.profiled_layers < 1:
            raise ValueError(f"cost model {self.name!r}: layer counts must be >= 1")
        if not self.margin_s >= 0:
            raise ValueError(f"cost model {self.name!r}: margin_s must be >= 0")
        if not 0 <= self.skew_alpha <= 1:
            raise ValueError(f"cost model {self.name!r}: skew_alpha must be in [0, 1]")
        if not self.layer_ops or not self.head_ops:
            raise ValueError(f"cost model {self.name!r}: needs layer ops and head ops")
        if any(count < 0 for _, count, _ in self.layer_ops):
            raise ValueError(f"cost model {self.name!r}: op counts must be >= 0")
        scale = self.layers / self.profiled_layers
        dense = MonotoneCurve.combine(
            [(scale * count, curve) for _, count, curve in self.layer_ops]
            + [(1.0, curve) for _, curve in self.forward_ops]
        )
        head = MonotoneCurve.combine([(1.0, curve) for _, curve in self.head_ops])
        object.__setattr__(self, "_dense", dense)
        object.__setattr__(self, "_head", head)
        object.__setattr__(self, "_scale", scale)

    @property
    def decode_spread(self) -> bool:
        """Whether :meth:`iteration_time` uses ``decode_kv_max`` (a skew correction)."""
        return self.skew_alpha > 0

    @property
    def dense_curve(self) -> MonotoneCurve:
        """:math:`\\text{dense}(N)` in µs."""
        return self._dense  # type: ignore[attr-defined]

    @property
    def head_curve(self) -> MonotoneCurve:
        """:math:`\\text{head}(S)` in µs."""
        return self._head  # type: ignore[attr-defined]

    def iteration_time(
        self,
        n_decode: int,
        decode_kv: int,
        chunks: Sequence[Chunk],
        *,
        decode_kv_max: int | None = None,
    ) -> float:
        """Seconds for the batch (module docstring); ``decode_kv_max`` is the longest
        decode's KV (``None``: decodes taken as equal, no skew correction)."""
        tokens = 0
        context = 0
        count = 0
        for c, prior in chunks:
            if c > 0:
                tokens += c
                context += prior
                count += 1
        kv = decode_kv / n_decode if n_decode > 0 else 0.0
        attention = self.attention(tokens, context, n_decode, kv)
        if self.skew_alpha and decode_kv_max is not None and n_decode > 1 and decode_kv_max > kv:
            longest = self.attention(tokens, context, n_decode, decode_kv_max)
            if longest > attention:
                attention += self.skew_alpha * (longest - attention)
        micro = (
            self._dense(n_decode + tokens)  # type: ignore[attr-defined]
            + self._head(n_decode + count)  # type: ignore[attr-defined]
            + self._scale * attention  # type: ignore[attr-defined]
        )
        return micro * 1e-6

    def to_dict(self) -> dict[str, Any]:
        """JSON form, kind ``profile-grid``."""
        return {
            "kind": KIND,
            "name": self.name,
            "margin_s": self.margin_s,
            "source": self.source,
            "license": self.license,
            "model": {
                "name": self.model,
                "layers": self.layers,
                "profiled_layers": self.profiled_layers,
            },
            "sources": [{"file": s.name, "sha256": s.sha256} for s in self.sources],
            "ops": {
                "per_layer": {
                    op: {"runs_per_layer": count, "time_us_vs_tokens": curve.to_dict()}
                    for op, count, curve in self.layer_ops
                },
                "per_forward": {
                    op: {"time_us_vs_tokens": curve.to_dict()} for op, curve in self.forward_ops
                },
                "per_sequence": {
                    op: {"time_us_vs_sequences": curve.to_dict()} for op, curve in self.head_ops
                },
            },
            "attention": self.attention.to_dict(),
            "skew": {
                "alpha": self.skew_alpha,
                "source": "meta.yaml skew_fit.per_tp.<tp>.alpha_default (pooled WLS fit of "
                "t_skew = t_mean + alpha (t_max - t_mean) on the profiler's skew cases)",
            },
            "report": dict(self.report),
        }


def _get(data: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise FormatError(f"{where}: missing {key!r}")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise FormatError(f"{where}: {key}: unexpected value {str(value)[:60]!r}")
    return value


def _skew_alpha(body: Any, where: str) -> float:
    """The ``skew.alpha`` of the JSON form (absent in older files: 0, no correction)."""
    if body is None:
        return 0.0
    if not isinstance(body, Mapping):
        raise FormatError(f"{where}: expected an object")
    return float(_get(body, "alpha", where, (int, float)))


def load_profile_cost_model(data: Mapping[str, Any], where: str) -> ProfileCostModel:
    """Loader of kind ``profile-grid`` (validates; errors name ``where``)."""
    model = _get(data, "model", where, Mapping)
    ops = _get(data, "ops", where, Mapping)
    try:
        layer_ops = tuple(
            (
                op,
                float(_get(body, "runs_per_layer", f"{where}: ops.per_layer.{op}", (int, float))),
                MonotoneCurve.from_dict(
                    body.get("time_us_vs_tokens"), f"{where}: ops.per_layer.{op}"
                ),
            )
            for op, body in _get(ops, "per_layer", f"{where}: ops", Mapping).items()
        )
        forward_ops = tuple(
            (op, MonotoneCurve.from_dict(body.get("time_us_vs_tokens"), f"{where}: {op}"))
            for op, body in _get(ops, "per_forward", f"{where}: ops", Mapping).items()
        )
        head_ops = tuple(
            (op, MonotoneCurve.from_dict(body.get("time_us_vs_sequences"), f"{where}: {op}"))
            for op, body in _get(ops, "per_sequence", f"{where}: ops", Mapping).items()
        )
        sources = tuple(
            SourceFile(str(s["file"]), str(s["sha256"])) for s in data.get("sources", [])
        )
        return ProfileCostModel(
            name=str(data.get("name", KIND)),
            model=str(_get(model, "name", f"{where}: model", str)),
            layers=_get(model, "layers", f"{where}: model", int),
            profiled_layers=_get(model, "profiled_layers", f"{where}: model", int),
            layer_ops=layer_ops,
            forward_ops=forward_ops,
            head_ops=head_ops,
            attention=AttentionGrid.from_dict(data.get("attention"), f"{where}: attention"),
            skew_alpha=_skew_alpha(data.get("skew"), f"{where}: skew"),
            margin_s=float(_get(data, "margin_s", where, (int, float))),
            source=str(data.get("source", "")),
            license=str(data.get("license", "")),
            sources=sources,
            report=dict(data.get("report") or {}),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"{where}: {exc}") from None
