r"""The decode-skew coefficient :math:`\alpha` of a batch, from the profiler's bucket table.

Decodes holding unequal KV lengths make a real attention kernel slower than decodes all at
the mean length. LLMServingSim's profiler measures it (``skew.csv``: for bimodal batches the
time ``t_skew`` beside ``t_mean``, every decode at the mean, and ``t_max``, every decode at
the longest) and fits :math:`t_{skew} = t_{mean} + \alpha (t_{max} - t_{mean})` per bucket of
batch shape by weighted least squares through the origin (``skew_fit.csv``;
``profiler/core/fit_alpha.py`` of casys-kaist/LLMServingSim, MIT). A bucket is keyed by

* ``pc`` — the prefill tokens of the batch, a profiled value (0 for decode-only);
* ``n`` — the number of decodes, binned by ``skew_fit.bucket_axes.n_bins``;
* the *skew rate* :math:`(\bar k - k_{min}) / (k_{max} - k_{min})` — how far the mean sits
  from the shortest decode toward the longest (``nb / n`` for the profiler's bimodal
  batches), binned by ``skew_rate_bins``;
* ``kv_big`` — the longest decode's KV, binned by ``kv_big_bins``;
* ``kp`` — the prefill chunk's prior context, binned by ``kp_bins``;

each bin right-inclusive, :math:`(b_i, b_{i+1}]`.

Lookup (:meth:`SkewTable.alpha`), our choices where the table does not say:

* a batch's ``pc`` lies between two profiled values: :math:`\alpha` is interpolated
  linearly in ``pc`` between their buckets with the same other labels (one of them alone
  if only one exists); LLMServingSim's own lookup matches ``pc`` exactly and otherwise
  falls back to the pooled value;
* a bucket missing on both sides gets the pooled :math:`\alpha` (``per_tp.<tp>.alpha_default``
  of ``meta.yaml``, the same fit over all cases; without it, the bucket alphas' mean
  weighted by their sample counts);
* every :math:`\alpha` is clipped to :math:`[0, 1]`: outside it a bucket's fit is dominated
  by cases where :math:`t_{max} \approx t_{mean}` (the table holds values from -735 to 27),
  and a skewed batch is neither faster than the uniform one at the mean nor slower than the
  one at the longest length.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.calibration.profiles import SkewRows, SkewSamples
from schedlab.errors import FormatError
from schedlab.json_files import json_number, json_numbers

__all__ = ["DEFAULT_AXES", "SkewTable"]

#: Bin edges and labels of the profiler's bucket axes, as its ``meta.yaml`` gives them.
DEFAULT_AXES: dict[str, Any] = {
    "n_bins": [0, 2, 4, 8, 16, 32, 64, 128, 256, 1_000_000],
    "n_labels": ["n<=2", "n<=4", "n<=8", "n<=16", "n<=32", "n<=64", "n<=128", "n<=256", "n>256"],
    "skew_rate_bins": [-0.01, 0.05, 0.15, 0.4, 0.7, 1.01],
    "skew_rate_labels": ["sr<=5%", "sr<=15%", "sr<=40%", "sr<=70%", "sr>70%"],
    "kv_big_bins": [0, 1024, 4096, 16384, 1_000_000_000],
    "kv_big_labels": ["kvB<=1k", "kvB<=4k", "kvB<=16k", "kvB>16k"],
    "kp_bins": [-1, 0, 512, 1024, 2048, 4096, 8192, 1_000_000_000],
    "kp_labels": ["kp=0", "kp<=512", "kp<=1k", "kp<=2k", "kp<=4k", "kp<=8k", "kp>8k"],
}

_AXES = ("n", "skew_rate", "kv_big", "kp")


def _label(bins: Sequence[float], labels: Sequence[str], value: float) -> str:
    """The label of the right-inclusive bin ``(b_i, b_{i+1}]`` holding ``value``."""
    i = bisect_left(bins, value) - 1
    return labels[min(max(i, 0), len(labels) - 1)]


@dataclass(frozen=True)
class SkewTable:
    """Per-bucket :math:`\\alpha` of the decode-skew correction (module docstring).

    Attributes
    ----------
    default
        The pooled :math:`\\alpha`, for batches whose bucket the table lacks.
    buckets
        ``(pc, n label, skew-rate label, kv_big label, kp label) -> alpha``, clipped to
        :math:`[0, 1]`.
    axes
        Bin edges and labels (:data:`DEFAULT_AXES`'s keys).
    """

    default: float
    buckets: Mapping[tuple[float, str, str, str, str], float] = field(default_factory=dict)
    axes: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_AXES))

    def __post_init__(self) -> None:
        if not 0 <= self.default <= 1:
            raise ValueError(f"SkewTable: default alpha must be in [0, 1], got {self.default}")
        for key, alpha in self.buckets.items():
            if not 0 <= alpha <= 1:
                raise ValueError(
                    f"SkewTable: bucket {list(key)}: alpha must be in [0, 1], got {alpha}"
                )
        for axis in _AXES:
            bins, labels = self.axes.get(f"{axis}_bins"), self.axes.get(f"{axis}_labels")
            ok = isinstance(bins, list | tuple) and isinstance(labels, list | tuple)
            if not ok or len(bins) != len(labels) + 1 or list(bins) != sorted(bins):  # type: ignore[arg-type]
                raise ValueError(
                    f"SkewTable: axes: {axis}_bins must be increasing edges, one more than "
                    f"{axis}_labels"
                )
        pcs = sorted({key[0] for key in self.buckets})
        object.__setattr__(self, "_pcs", pcs)

    @classmethod
    def from_rows(
        cls, rows: SkewRows, default: float | None, axes: Mapping[str, Any] | None
    ) -> SkewTable:
        """The table of a profile's ``skew_fit.csv``; ``default`` the pooled alpha (else
        the bucket alphas' mean weighted by their sample counts)."""
        clipped = np.clip(rows.alpha, 0.0, 1.0)
        buckets = {
            (float(pc), n, sr, kv, kp): float(a)
            for pc, n, sr, kv, kp, a in zip(
                rows.pc,
                rows.n_label,
                rows.skew_rate_label,
                rows.kv_big_label,
                rows.kp_label,
                clipped,
                strict=True,
            )
        }
        if default is None:
            weights = np.maximum(rows.n_samples, 1.0)
            default = float(np.average(clipped, weights=weights))
        return cls(float(min(max(default, 0.0), 1.0)), buckets, dict(axes or DEFAULT_AXES))

    @classmethod
    def fit(cls, samples: SkewSamples, axes: Mapping[str, Any] | None = None) -> SkewTable:
        """Our own per-bucket fit of ``skew.csv`` rows (the profiler's ``skew_fit.csv`` is
        fitted on every row, so it cannot be tested on held-out ones).

        With :math:`x = t_{max} - t_{mean}`, :math:`y = t_{skew} - t_{mean}` and weights
        :math:`w = 1/t_{skew}^2` (relative error), each bucket's :math:`\\alpha` minimises
        :math:`\\sum w (y - \\alpha x)^2`, i.e. :math:`\\alpha = \\sum w x y / \\sum w x^2`,
        clipped to :math:`[0, 1]`; the pooled default is the same fit over every row. A
        bucket whose rows all have :math:`x = 0` is left out (the default serves it).
        """
        axes = dict(axes or DEFAULT_AXES)
        probe = cls(0.0, {}, axes)
        x = samples.t_max_us - samples.t_mean_us
        y = samples.t_skew_us - samples.t_mean_us
        w = 1.0 / samples.t_skew_us**2
        sums: dict[tuple[float, str, str, str, str], list[float]] = {}
        for key, wx, wy in zip(probe.sample_keys(samples), w * x * x, w * x * y, strict=True):
            acc = sums.setdefault(key, [0.0, 0.0])
            acc[0] += wx
            acc[1] += wy
        buckets = {
            key: float(min(max(xy / xx, 0.0), 1.0)) for key, (xx, xy) in sums.items() if xx > 0
        }
        total = float(np.sum(w * x * x))
        pooled = float(np.clip(np.sum(w * x * y) / total, 0.0, 1.0)) if total > 0 else 0.0
        return cls(pooled, buckets, axes)

    def sample_keys(self, samples: SkewSamples) -> list[tuple[float, str, str, str, str]]:
        """The bucket key of every ``skew.csv`` row (its skew rate is ``ratio``)."""
        return [
            (float(pc), *self.labels(int(n), float(mean), int(small), int(big), int(kp)))  # type: ignore[misc]
            for pc, n, mean, small, big, kp in zip(
                samples.pc,
                samples.n,
                samples.kv_mean,
                samples.kv_small,
                samples.kv_big,
                samples.kp,
                strict=True,
            )
        ]

    def predict_us(self, samples: SkewSamples) -> np.ndarray:
        """:math:`t_{mean} + \\alpha (t_{max} - t_{mean})` of each row, with its measured
        endpoints and this table's :math:`\\alpha`."""
        alphas = np.array(
            [
                self.alpha(int(pc), int(kp), int(n), float(mean), int(small), int(big))
                for pc, kp, n, mean, small, big in zip(
                    samples.pc,
                    samples.kp,
                    samples.n,
                    samples.kv_mean,
                    samples.kv_small,
                    samples.kv_big,
                    strict=True,
                )
            ]
        )
        return samples.t_mean_us + alphas * (samples.t_max_us - samples.t_mean_us)

    def labels(self, n: int, kv_mean: float, kv_min: int, kv_max: int, kp: int) -> tuple[str, ...]:
        """The bucket labels of a batch (module docstring)."""
        a = self.axes
        spread = kv_max - kv_min
        rate = min(max((kv_mean - kv_min) / spread, 0.0), 1.0) if spread > 0 else 0.0
        return (
            _label(a["n_bins"], a["n_labels"], n),
            _label(a["skew_rate_bins"], a["skew_rate_labels"], rate),
            _label(a["kv_big_bins"], a["kv_big_labels"], kv_max),
            _label(a["kp_bins"], a["kp_labels"], kp),
        )

    def alpha(self, pc: int, kp: int, n: int, kv_mean: float, kv_min: int, kv_max: int) -> float:
        """:math:`\\alpha` for a batch with ``pc`` prefill tokens on ``kp`` cached ones and
        ``n`` decodes of mean, least and largest KV ``kv_mean``, ``kv_min``, ``kv_max``."""
        if not self.buckets:
            return self.default
        rest = self.labels(n, kv_mean, kv_min, kv_max, kp)
        pcs: list[float] = self._pcs  # type: ignore[attr-defined]
        if pc <= 0 or pc in pcs:
            return self.buckets.get((float(max(pc, 0)), *rest), self.default)  # type: ignore[arg-type]
        i = bisect_left(pcs, pc)
        below = self.buckets.get((pcs[i - 1], *rest)) if i > 0 else None  # type: ignore[arg-type]
        above = self.buckets.get((pcs[i], *rest)) if i < len(pcs) else None  # type: ignore[arg-type]
        if below is not None and above is not None:
            t = (pc - pcs[i - 1]) / (pcs[i] - pcs[i - 1])
            return below + t * (above - below)
        found = below if below is not None else above
        return self.default if found is None else found

    def to_dict(self) -> dict[str, Any]:
        return {
            "alpha_default": self.default,
            "axes": dict(self.axes),
            "buckets": [[*key, value] for key, value in self.buckets.items()],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> SkewTable:
        """Validate and build from :meth:`to_dict`'s form (or an older ``{"alpha": a}``);
        errors name ``where`` and the key (``{where}.buckets[3][5]``), every number finite
        (:func:`~schedlab.json_files.json_number`), every label text."""
        if not isinstance(data, Mapping):
            raise FormatError(f"{where}: expected an object")
        try:
            if "alpha_default" not in data:  # the single pooled alpha of older files
                return cls(json_number(data["alpha"], f"{where}.alpha"))
            buckets = dict(
                _bucket(item, f"{where}.buckets[{k}]")
                for k, item in enumerate(data.get("buckets", []))
            )
            axes = data.get("axes") or DEFAULT_AXES
            if not isinstance(axes, Mapping):
                raise ValueError("axes: expected an object")
            for axis in _AXES:
                json_numbers(axes.get(f"{axis}_bins"), f"{where}.axes.{axis}_bins")
                labels = axes.get(f"{axis}_labels")
                for k, label in enumerate(labels if isinstance(labels, list) else []):
                    _text_label(label, f"{where}.axes.{axis}_labels[{k}]")
            return cls(
                json_number(data["alpha_default"], f"{where}.alpha_default"), buckets, dict(axes)
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FormatError):  # names its place already
                raise
            raise FormatError(f"{where}: {exc}") from None


def _bucket(item: Any, where: str) -> tuple[tuple[float, str, str, str, str], float]:
    """One ``[pc, n label, skew-rate label, kv_big label, kp label, alpha]`` of a
    :class:`SkewTable`'s JSON form, as a key and its alpha."""
    if not isinstance(item, list) or len(item) != 6:
        raise FormatError(f"{where}: expected [pc, 4 labels, alpha], got {item!r:.60}")
    n, rate, kv, kp = (_text_label(item[k], f"{where}[{k}]") for k in range(1, 5))
    return (json_number(item[0], f"{where}[0]"), n, rate, kv, kp), json_number(
        item[5], f"{where}[5]"
    )


def _text_label(value: Any, where: str) -> str:
    """``value`` if it is a bucket's label (text)."""
    if not isinstance(value, str):
        raise FormatError(f"{where}: expected a label (text), got {value!r:.60}")
    return value
