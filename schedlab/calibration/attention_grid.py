r"""One decoder layer's attention time on the measured 4-D grid, monotone in the chunk.

LLMServingSim profiles attention for a batch of one prefill chunk of :math:`c` new tokens
on :math:`p` cached tokens plus :math:`n` decodes holding :math:`k` tokens each
(:mod:`schedlab.calibration.profiles`). :class:`AttentionGrid` turns those rows into a
function :math:`A(c, p, n, k)` in microseconds:

1. **Grid.** The largest complete tensor :math:`\{0\} \cup P \times K \times \{0\} \cup N
   \times V` is selected from the rows (greedy: drop the axis value with the largest
   fraction of missing cells until none is missing). On the shared RTX PRO 6000 profile
   this is the doubling grid (chunks 16..2048, contexts 0, 16..16384, decodes 1..128, KV
   16..16384); the rows off it (the interleaved x1.5 grid and 256 decodes) are *not* used,
   which makes them a held-out set. Plane :math:`c = 0` is the decode-only attention
   (no prefill context); plane :math:`n = 0` is the prefill-only attention (any :math:`k`).
2. **Monotone in the chunk.** Along the chunk axis every line of the tensor is replaced by
   its isotonic least-squares fit (scipy ``isotonic_regression``); then along the context
   axis by its running maximum. A running maximum keeps an order between lines, so the
   result is non-decreasing in :math:`c` *and* :math:`p` (proofs/calibrated_monotone.md).
3. **Interpolation** inside the grid is multilinear in :math:`(c, p, n, k)`. A chunk
   shorter than the smallest profiled one costs what the smallest costs (attention of a
   few tokens is launch-bound), and a decode KV below the smallest profiled one is raised
   to it; both are monotone maps.
4. **Extrapolation** outside the grid uses a non-negative least-squares fit (relative
   error weights, on the grid rows only) of the physically meaningful terms

   .. math::

       \phi = \bigl(1,\ [c>0],\ c,\ c\,p,\ c^2,\ [n>0],\ n,\ n\,k,\ n\,k\,[c>0]\bigr)

   (fixed launch costs, per-token work, query-key pairs of the chunk over its context and
   itself, decode reads of every cached token, and the extra cost per decode KV token
   the profile shows when decodes share the kernel with a prefill chunk), added as an
   increment to the grid
   value at the clamped point: :math:`A(x) = G(\bar x) + \Phi(x) - \Phi(\bar x)` with
   :math:`\bar x` the point clamped to the grid's upper bounds. The increment is
   continuous at the boundary and, because every term is a product of non-negative
   non-decreasing factors with a non-negative coefficient, non-decreasing in each
   coordinate even while another coordinate is clamped.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from schedlab.calibration.profiles import AttentionRows
from schedlab.errors import FormatError
from schedlab.json_files import json_number, json_numbers

__all__ = [
    "EXTRAPOLATION_TERMS",
    "AttentionGrid",
    "extrapolation_features",
    "parse_grid_spec",
    "select_grid",
]

#: Names of the extrapolation terms :math:`\phi`, in order.
EXTRAPOLATION_TERMS: tuple[str, ...] = (
    "const",
    "prefill_fixed",
    "prefill_token",
    "prefill_context_pair",
    "prefill_square",
    "decode_fixed",
    "decode_seq",
    "decode_kv",
    "decode_kv_mixed",
)


def extrapolation_features(
    c: np.ndarray, p: np.ndarray, n: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """The design matrix :math:`\\phi` (one row per point) of the extrapolation fit."""
    c, p, n, k = (np.asarray(a, dtype=float) for a in (c, p, n, k))
    return np.column_stack(
        [np.ones_like(c), c > 0, c, c * p, c * c, n > 0, n, n * k, n * k * (c > 0)]
    ).astype(float)


#: The most levels one ``a-b xf`` item of a grid may span.
_MAX_LEVELS = 1000


def parse_grid_spec(spec: str, where: str = "grid") -> list[float]:
    """Axis values of a profiler grid spec such as ``"0, 16-2048 x2"``.

    Items are separated by commas; an item is a number or ``a-b xf``: the geometric
    sequence ``a, a f, a f^2, ...`` (rounded to integers) up to ``b``.
    """
    values: set[float] = set()
    for item in str(spec).split(","):
        item = item.strip()
        try:
            if "-" in item:
                span, _, factor_text = item.partition("x")
                low_text, _, high_text = span.partition("-")
                low, high, factor = float(low_text), float(high_text), float(factor_text)
                if low <= 0 or factor <= 1 or high < low:
                    raise ValueError(item)
                if not math.log(high / low) / math.log(factor) <= _MAX_LEVELS:
                    raise ValueError(item)
                value = low
                while round(value) <= high:
                    values.add(float(round(value)))
                    value *= factor
            else:
                values.add(float(item))
        except ValueError:
            raise FormatError(f"{where}: cannot read grid item {item!r} of {spec!r}") from None
    return sorted(values)


def select_grid(
    rows: AttentionRows,
    declared: tuple[Sequence[float], Sequence[float], Sequence[float]] | None = None,
    *,
    holes_below: float = 0.0,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Axes ``(chunks, contexts, decodes, kvs)`` of the largest complete tensor (step 1).

    ``declared`` = ``(chunks, decodes, kvs)`` restricts the candidates to a grid the
    profile declares (LLMServingSim's ``meta.yaml`` ``attention_grid``; its KV axis serves
    both the prefill context and the decode KV). ``chunks`` and ``decodes`` start with 0;
    ``kvs`` are positive.

    A level is dropped when it lacks points of the grid. One that lacks fewer than the
    share ``holes_below`` of its points is a grid with holes, not a level measured apart
    (the shared profiles' dropped levels lack three quarters or more): with
    ``holes_below > 0`` it is refused, naming a missing point.

    Raises
    ------
    FormatError
        If no complete grid is left, or for a grid with holes.
    """
    pc, kp, n, kv = rows.prefill_chunk, rows.kv_prefill, rows.n_decode, rows.kv_decode
    chunked = pc > 0
    mixed = chunked & (n > 0)
    P = np.unique(pc[chunked])
    K = np.unique(kp[chunked])
    N = np.unique(n[mixed])
    V = np.unique(kv[mixed])
    if declared is not None:
        d_chunks, d_decodes, d_kvs = (np.asarray(a, dtype=float) for a in declared)
        P, K = P[np.isin(P, d_chunks)], K[np.isin(K, d_kvs)]
        N, V = N[np.isin(N, d_decodes)], V[np.isin(V, d_kvs)]
    if not (P.size and K.size and N.size and V.size):
        raise FormatError("attention profile: needs mixed rows (prefill chunk and decodes)")
    present_mixed = np.zeros((P.size, K.size, N.size, V.size), dtype=bool)
    sel = mixed & np.isin(n, N)
    present_mixed[
        np.searchsorted(P, pc[sel]),
        np.searchsorted(K, kp[sel]),
        np.searchsorted(N, n[sel]),
        np.searchsorted(V, kv[sel]),
    ] = True
    present_prefill = np.zeros((P.size, K.size), dtype=bool)
    sel = chunked & (n == 0)
    present_prefill[np.searchsorted(P, pc[sel]), np.searchsorted(K, kp[sel])] = True
    present_decode = np.zeros((N.size, V.size), dtype=bool)
    sel = (pc == 0) & np.isin(n, N) & np.isin(kv, V)
    present_decode[np.searchsorted(N, n[sel]), np.searchsorted(V, kv[sel])] = True
    keep = [np.ones(a.size, dtype=bool) for a in (P, K, N, V)]
    while True:
        idx = np.ix_(*keep)
        ok = (
            present_mixed[idx]
            & present_prefill[np.ix_(keep[0], keep[1])][:, :, None, None]
            & present_decode[np.ix_(keep[2], keep[3])][None, None, :, :]
        )
        if ok.all():
            break
        worst: tuple[float, int, int] = (-1.0, 0, 0)
        for axis in range(4):
            others = tuple(a for a in range(4) if a != axis)
            missing = 1.0 - ok.mean(axis=others)
            j = int(np.argmax(missing))
            if missing[j] > worst[0]:
                worst = (float(missing[j]), axis, j)
        share, axis, j = worst
        if share < holes_below:
            raise FormatError(
                _hole(ok, axis, j, [a[m] for a, m in zip((P, K, N, V), keep, strict=True)])
            )
        positions = np.flatnonzero(keep[axis])
        keep[axis][positions[j]] = False
        if keep[axis].sum() == 0:
            raise FormatError("attention profile: no complete grid of measurements")
    P, K, N, V = (a[m] for a, m in zip((P, K, N, V), keep, strict=True))
    return [0.0, *P.tolist()], K.tolist(), [0.0, *N.tolist()], V.tolist()


def _hole(ok: np.ndarray, axis: int, j: int, axes: list[np.ndarray]) -> str:
    """The refusal of a grid with holes: the first point missing in level ``j`` of
    ``axis`` of the grid ``axes`` (``ok``: which points have all their rows)."""
    point = [int(i) for i in np.argwhere(~ok.take([j], axis=axis))[0]]
    point[axis] = j
    c, p, n, k = (float(a[i]) for a, i in zip(axes, point, strict=True))
    names = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode")
    level = ok.take(j, axis=axis)
    return (
        f"attention profile: a hole in the grid at prefill_chunk {c:g}, kv_prefill {p:g}, "
        f"n_decode {n:g}, kv_decode {k:g} (its mixed, prefill-only or decode-only row is "
        f"missing); {names[axis]} {axes[axis][j]:g} lacks only {int((~level).sum())} of its "
        f"{level.size} points: measure them or leave the level out"
    )


def _axis_weights(axis: Sequence[float], value: float) -> tuple[tuple[int, float], ...]:
    """Indices and linear weights of ``value`` (inside ``[axis[0], axis[-1]]``) on ``axis``."""
    if value <= axis[0]:
        return ((0, 1.0),)
    if value >= axis[-1]:
        return ((len(axis) - 1, 1.0),)
    i = bisect_right(axis, value) - 1
    t = (value - axis[i]) / (axis[i + 1] - axis[i])
    if t == 0.0:
        return ((i, 1.0),)
    return ((i, 1.0 - t), (i + 1, t))


@dataclass(frozen=True)
class AttentionGrid:
    """Attention time of one layer, :math:`A(c, p, n, k)` in microseconds (module docstring).

    Attributes
    ----------
    chunks, contexts, decodes, kvs
        Axes; ``chunks[0] == decodes[0] == 0``.
    values
        Tensor in C order, shape ``(len(chunks), len(contexts), len(decodes), len(kvs))``,
        non-decreasing along ``chunks`` and ``contexts``.
    coefficients
        Extrapolation coefficients (µs) by :data:`EXTRAPOLATION_TERMS`, all ``>= 0``.
    """

    chunks: tuple[float, ...]
    contexts: tuple[float, ...]
    decodes: tuple[float, ...]
    kvs: tuple[float, ...]
    values: tuple[float, ...]
    coefficients: tuple[float, ...]

    def __post_init__(self) -> None:
        shape = (len(self.chunks), len(self.contexts), len(self.decodes), len(self.kvs))
        if len(self.values) != int(np.prod(shape)):
            raise ValueError(f"AttentionGrid: values must have {shape} = {np.prod(shape)} items")
        if self.chunks[0] != 0 or self.decodes[0] != 0 or self.kvs[0] <= 0:
            raise ValueError("AttentionGrid: chunks and decodes start at 0, kvs are positive")
        if len(self.chunks) < 2 or len(self.decodes) < 2:
            raise ValueError("AttentionGrid: chunks and decodes need a measured level above 0")
        for name in ("chunks", "contexts", "decodes", "kvs"):
            axis = getattr(self, name)
            if any(b <= a for a, b in pairwise(axis)):
                raise ValueError(f"AttentionGrid: {name} must be strictly increasing")
        if len(self.coefficients) != len(EXTRAPOLATION_TERMS) or min(self.coefficients) < 0:
            raise ValueError("AttentionGrid: needs one coefficient >= 0 per extrapolation term")
        tensor = np.asarray(self.values).reshape(shape)
        if not np.isfinite(tensor).all() or tensor.min() < 0:
            raise ValueError("AttentionGrid: values must be finite and >= 0")
        if (np.diff(tensor, axis=0) < 0).any() or (np.diff(tensor, axis=1) < 0).any():
            raise ValueError("AttentionGrid: values must be non-decreasing in chunk and context")
        strides = (shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3])
        object.__setattr__(self, "_strides", strides)

    # -- fitting ---------------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        rows: AttentionRows,
        declared: tuple[Sequence[float], Sequence[float], Sequence[float]] | None = None,
    ) -> tuple[AttentionGrid, np.ndarray]:
        """Fit from profile rows; also return the mask of the rows the grid uses.

        ``declared`` is passed to :func:`select_grid`.
        """
        from scipy.optimize import isotonic_regression, nnls

        chunks, contexts, decodes, kvs = select_grid(rows, declared)
        shape = (len(chunks), len(contexts), len(decodes), len(kvs))
        lookup: dict[tuple[float, float, float, float], float] = {}
        for key in zip(
            rows.prefill_chunk.tolist(),
            rows.kv_prefill.tolist(),
            rows.n_decode.tolist(),
            rows.kv_decode.tolist(),
            rows.time_us.tolist(),
            strict=True,
        ):
            lookup[key[:4]] = key[4]
        tensor: np.ndarray = np.zeros(shape)
        for a, c in enumerate(chunks):
            for b, p in enumerate(contexts):
                for i, n in enumerate(decodes):
                    for j, k in enumerate(kvs):
                        if c == 0 and n == 0:
                            value = 0.0
                        elif c == 0:
                            value = lookup[(0.0, 0.0, n, k)]
                        elif n == 0:
                            value = lookup[(c, p, 0.0, 0.0)]
                        else:
                            value = lookup[(c, p, n, k)]
                        tensor[a, b, i, j] = value
        lines = np.moveaxis(tensor, 0, -1).reshape(-1, shape[0])
        monotone = np.array([isotonic_regression(line).x for line in lines])
        tensor = np.moveaxis(monotone.reshape(*shape[1:], shape[0]), -1, 0)
        tensor = np.maximum.accumulate(np.maximum(tensor, 0.0), axis=1)
        # Rounding to 1e-4 us is a non-decreasing map, so it keeps the order; it makes the
        # JSON form (which stores these values) reproduce the fitted model exactly.
        tensor = np.round(tensor, 4)
        used = (
            np.isin(rows.prefill_chunk, chunks)
            & np.isin(rows.kv_prefill, contexts)
            & np.isin(rows.n_decode, decodes)
            & (np.isin(rows.kv_decode, kvs) | (rows.n_decode == 0))
        )
        design = extrapolation_features(
            rows.prefill_chunk[used],
            rows.kv_prefill[used],
            rows.n_decode[used],
            rows.kv_decode[used],
        )
        target = rows.time_us[used]
        coef = nnls(design / target[:, None], np.ones(target.size))[0]
        grid = cls(
            tuple(chunks),
            tuple(contexts),
            tuple(decodes),
            tuple(kvs),
            tuple(tensor.ravel().tolist()),
            tuple(float(v) for v in coef),
        )
        return grid, used

    # -- evaluation ------------------------------------------------------------------------
    def _phi(self, c: float, p: float, n: float, k: float) -> float:
        a = self.coefficients
        value = a[0]
        if c > 0:
            value += a[1] + a[2] * c + a[3] * c * p + a[4] * c * c
        if n > 0:
            value += a[5] + a[6] * n + a[7] * n * k
            if c > 0:
                value += a[8] * n * k
        return value

    def _interpolate(self, c: float, p: float, n: float, k: float) -> float:
        s0, s1, s2 = self._strides  # type: ignore[attr-defined]
        values = self.values
        total = 0.0
        wc = _axis_weights(self.chunks, c)
        wp = _axis_weights(self.contexts, p)
        wn = _axis_weights(self.decodes, n)
        wk = _axis_weights(self.kvs, k)
        for ia, fa in wc:
            for ib, fb in wp:
                fab = fa * fb
                base = ia * s0 + ib * s1
                for ii, fi in wn:
                    f3 = fab * fi
                    row = base + ii * s2
                    for ij, fj in wk:
                        total += f3 * fj * values[row + ij]
        return total

    def __call__(
        self, chunk: float, context: float, n_decode: float, kv_per_decode: float
    ) -> float:
        """Attention time (µs) of one layer; see the module docstring for the rules."""
        c = max(chunk, self.chunks[1]) if chunk > 0 else 0.0
        p = context if c > 0 else 0.0
        k = max(kv_per_decode, self.kvs[0]) if n_decode > 0 else self.kvs[0]
        n = n_decode
        cc, pc_, nc, kc = (
            min(c, self.chunks[-1]),
            min(p, self.contexts[-1]),
            min(n, self.decodes[-1]),
            min(k, self.kvs[-1]),
        )
        value = self._interpolate(cc, pc_, nc, kc)
        if (cc, pc_, nc, kc) != (c, p, n, k):
            value += self._phi(c, p, n, k) - self._phi(cc, pc_, nc, kc)
        return value

    # -- JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": {
                "prefill_chunk": list(self.chunks),
                "kv_prefill": list(self.contexts),
                "n_decode": list(self.decodes),
                "kv_decode": list(self.kvs),
            },
            "time_us": list(self.values),
            "extrapolation_us": dict(zip(EXTRAPOLATION_TERMS, self.coefficients, strict=True)),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> AttentionGrid:
        """Validate and build from :meth:`to_dict`'s form; errors name ``where`` and the
        key (``{where}.time_us[7]``), every value a finite number
        (:func:`~schedlab.json_files.json_number`)."""
        if not isinstance(data, Mapping):
            raise FormatError(f"{where}: expected an object")
        try:
            axes = data["axes"]
            coef = data["extrapolation_us"]
            unknown = sorted(set(coef) - set(EXTRAPOLATION_TERMS))
            if unknown:
                raise ValueError(f"unknown extrapolation term(s) {', '.join(unknown)}")
            chunks, contexts, decodes, kvs = (
                json_numbers(axes[axis], f"{where}.axes.{axis}")
                for axis in ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode")
            )
            return cls(
                chunks,
                contexts,
                decodes,
                kvs,
                json_numbers(data["time_us"], f"{where}.time_us"),
                tuple(
                    json_number(coef[t], f"{where}.extrapolation_us.{t}")
                    for t in EXTRAPOLATION_TERMS
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, FormatError):  # names its place already
                raise
            raise FormatError(f"{where}: {exc}") from None
