r"""The calibrated cost model compiled whole: its tables packed into two arrays, and one
numba kernel for an iteration's time and one for SLOWeave's chunk search.

:class:`~schedlab.calibration.profile_model.ProfileCostModel` states the model (module
docs there): per-op curves, the attention grid with its extrapolation, the decode-skew
correction, the expert block, the tensor-parallel collectives and the host's time. Its
Python form is the reference; :func:`pack` lays the same tables out as one ``float64``
array (every number) and one ``int64`` array (where each table starts, its length, the
skew table's shape and the expert rows' starts), and :data:`iteration_seconds` evaluates
an iteration from a batch's sums

.. math::

    n,\ K,\ C = \sum_j c_j,\ P = \sum_{j: c_j > 0} p_j,\ m = |\{j : c_j > 0\}|,\
    k_{\max},\ k_{\min}

(the reference reads nothing else of the chunks), in one call from Python.
:data:`largest_safe_chunk` is SLOWeave's binary search
(:func:`~schedlab.serving.sloweave.deadline_safe_chunk`) with every evaluation in the
same kernel, so a chunk decision is one call, not one per probe.

Each quantity is computed by the same IEEE operations in the same order as the
reference (numba, like CPython, neither reassociates nor contracts floating-point
operations unless ``fastmath`` is given; ``x ** t`` is ``pow`` in both), so the two agree
to rounding; ``tests/calibration/test_compiled_cost_model.py`` checks 1e-9 relative by
hypothesis on every shipped and calibrated model, and the search's answers against the
generic search exactly. The kernels allocate nothing (:mod:`schedlab.jit`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numba import types

from schedlab.calibration.attention_grid import AttentionGrid
from schedlab.calibration.curves import MonotoneCurve
from schedlab.calibration.experts import ExpertTable
from schedlab.calibration.skew import SkewTable
from schedlab.jit import INT, MATRIX, READ, READ_FLOATS, READ_MATRIX, kernel
from schedlab.llm.interconnect import CUSTOM_ALL_REDUCE_MAX_BYTES, Link

__all__ = [
    "BATCH",
    "Composed",
    "Parallel",
    "iteration_seconds",
    "largest_safe_chunk",
    "pack",
    "replay_prefill_end",
]

_FLOAT = types.float64

#: A batch as its sums: ``(n, K, C, P, m, k_max, k_min)``, the decodes, their KV tokens,
#: the chunks' new tokens, the cached tokens of the chunks with new tokens and their
#: count, and the longest and shortest decode's KV (below 0: not known).
BATCH = types.UniTuple(_FLOAT, 7)

#: The attention grid's context, decodes and KV axes at a point: the clamped values, the
#: values, and each axis's first index, two weights and count (:func:`_fixed_axes`).
AXES = types.UniTuple(_FLOAT, 18)

#: A chunk search's answer: the chunk, the evaluations, whether even no chunk misses the
#: budget, and the predicted seconds (:func:`largest_safe_chunk`).
SEARCH = types.Tuple((INT, INT, types.boolean, _FLOAT))

#: The grid's lines at two neighbouring chunk levels (:func:`_attention`): the lower
#: level, and the line at it and at the next one; :data:`NO_LINES` before any.
LINES = types.UniTuple(_FLOAT, 3)
NO_LINES = (-1.0, 0.0, 0.0)

#: What the times of one batch with any chunk tokens share (:func:`_prepare`).
PREPARED = types.Tuple((types.boolean, AXES, AXES, INT, _FLOAT))

# The tables of the float array, in order; table ``k`` starts at ``ints[2k]`` and has
# ``ints[2k + 1]`` numbers.
(
    _DENSE_X,
    _DENSE_Y,
    _HEAD_X,
    _HEAD_Y,
    _CHUNKS,
    _CONTEXTS,
    _DECODES,
    _KVS,
    _GRID,
    _COEF,
    _SKEW_PCS,
    _SKEW_ALPHA,
    _N_BINS,
    _RATE_BINS,
    _KV_BINS,
    _KP_BINS,
    _EXPERT_SIZES,
    _EXPERT_ACTIVATED,
    _EXPERT_TIMES,
    _SCALARS,
) = range(20)
_TABLES = 20
# After the table directory, the ints hold the skew table's four label counts and then
# the expert rows' starts (one more than the rows) in the activated/times tables.
_SKEW_SHAPE = 2 * _TABLES
_EXPERT_ROWS = _SKEW_SHAPE + 4

# The scalars table.
(
    _DENSE_TAIL,
    _HEAD_TAIL,
    _SCALE,
    _SKEW_DEFAULT,
    _HAS_SKEW,
    _EXPERTS,
    _TOP_K,
    _HAS_EXPERTS,
    _EP,
    _TP,
    _HIDDEN,
    _DTYPE_BYTES,
    _HAS_LINK,
    _BANDWIDTH,
    _LATENCY,
    _LAYERS,
    _HOST,
) = range(17)


class Parallel(Protocol):
    """What :func:`pack` reads of a model's parallelism
    (:class:`~schedlab.calibration.parallelism.Parallelism`)."""

    @property
    def tp(self) -> int: ...

    @property
    def ep(self) -> int: ...

    @property
    def hidden(self) -> int: ...

    @property
    def dtype_bytes(self) -> int: ...

    @property
    def link(self) -> Link | None: ...


class Composed(Protocol):
    """What :func:`pack` reads of a calibrated model
    (:class:`~schedlab.calibration.profile_model.ProfileCostModel`)."""

    @property
    def layers(self) -> int: ...

    @property
    def profiled_layers(self) -> int: ...

    @property
    def attention(self) -> AttentionGrid: ...

    @property
    def skew(self) -> SkewTable | None: ...

    @property
    def experts(self) -> ExpertTable | None: ...

    @property
    def parallelism(self) -> Parallel: ...

    @property
    def host_s(self) -> float: ...

    @property
    def dense_curve(self) -> MonotoneCurve: ...

    @property
    def head_curve(self) -> MonotoneCurve: ...


def _skew_tables(skew: SkewTable) -> tuple[list[float], np.ndarray, list[list[float]]]:
    """The profiled chunk sizes, :math:`\\alpha` by (chunk size, bin of each label axis)
    (NaN where the table has no bucket) and the four axes' bin edges."""
    axes = skew.axes
    names = ("n", "skew_rate", "kv_big", "kp")
    labels = [list(axes[f"{name}_labels"]) for name in names]
    pcs = sorted({key[0] for key in skew.buckets})
    alpha = np.full((len(pcs), *(len(a) for a in labels)), math.nan)
    for index in np.ndindex(*alpha.shape):
        key = (pcs[index[0]], *(a[i] for a, i in zip(labels, index[1:], strict=True)))
        found = skew.buckets.get(key)
        if found is not None:
            alpha[index] = found
    edges = [[float(b) for b in axes[f"{name}_bins"]] for name in names]
    return pcs, alpha, edges


def pack(model: Composed) -> tuple[np.ndarray, np.ndarray]:
    """The model's tables as ``(floats, ints)``, read-only, for the kernels."""
    tables: list[Sequence[float]] = [()] * _TABLES
    dense, head, grid = model.dense_curve, model.head_curve, model.attention
    tables[_DENSE_X], tables[_DENSE_Y] = dense.x, dense.y
    tables[_HEAD_X], tables[_HEAD_Y] = head.x, head.y
    tables[_CHUNKS], tables[_CONTEXTS] = grid.chunks, grid.contexts
    tables[_DECODES], tables[_KVS] = grid.decodes, grid.kvs
    tables[_GRID], tables[_COEF] = grid.values, grid.coefficients
    skew_shape = [0, 0, 0, 0]
    if model.skew is not None:
        pcs, alpha, edges = _skew_tables(model.skew)
        tables[_SKEW_PCS], tables[_SKEW_ALPHA] = pcs, alpha.ravel().tolist()
        tables[_N_BINS], tables[_RATE_BINS], tables[_KV_BINS], tables[_KP_BINS] = edges
        skew_shape = list(alpha.shape[1:])
    row_starts = [0]
    experts = model.experts
    if experts is not None:
        tables[_EXPERT_SIZES] = experts.tokens
        tables[_EXPERT_ACTIVATED] = [a for activated, _ in experts.rows for a in activated]
        tables[_EXPERT_TIMES] = [t for _, times in experts.rows for t in times]
        for activated, _ in experts.rows:
            row_starts.append(row_starts[-1] + len(activated))
    par = model.parallelism
    scalars = [0.0] * 17
    scalars[_DENSE_TAIL], scalars[_HEAD_TAIL] = dense.tail_slope, head.tail_slope
    scalars[_SCALE] = model.layers / model.profiled_layers  # as the model's own scale
    scalars[_LAYERS] = model.layers
    scalars[_HOST] = model.host_s
    if model.skew is not None:
        scalars[_SKEW_DEFAULT], scalars[_HAS_SKEW] = model.skew.default, 1.0
    if experts is not None:
        scalars[_EXPERTS], scalars[_TOP_K], scalars[_HAS_EXPERTS] = (
            experts.experts,
            experts.top_k,
            1.0,
        )
    scalars[_EP], scalars[_TP] = par.ep, par.tp
    scalars[_HIDDEN], scalars[_DTYPE_BYTES] = par.hidden, par.dtype_bytes
    if par.link is not None:
        scalars[_HAS_LINK] = 1.0
        scalars[_BANDWIDTH], scalars[_LATENCY] = par.link.bandwidth_Bps, par.link.latency_s
    tables[_SCALARS] = scalars
    directory: list[int] = []
    start = 0
    for table in tables:
        directory += [start, len(table)]
        start += len(table)
    floats = np.array([float(v) for table in tables for v in table], dtype=np.float64)
    ints = np.array(directory + skew_shape + row_starts, dtype=np.int64)
    floats.flags.writeable = False
    ints.flags.writeable = False
    return floats, ints


@kernel(INT(READ_FLOATS, INT, INT, _FLOAT))
def _bisect_right(f, start, length, value):
    """``bisect.bisect_right`` of ``value`` in ``f[start:start + length]``."""
    lo, hi = 0, length
    while lo < hi:
        mid = (lo + hi) // 2
        if value < f[start + mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@kernel(INT(READ_FLOATS, INT, INT, _FLOAT))
def _bisect_left(f, start, length, value):
    """``bisect.bisect_left`` of ``value`` in ``f[start:start + length]``."""
    lo, hi = 0, length
    while lo < hi:
        mid = (lo + hi) // 2
        if f[start + mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(_FLOAT(READ_FLOATS, READ, INT, INT, _FLOAT, _FLOAT))
def _curve(f, g, xs, ys, tail, value):
    """:meth:`~schedlab.calibration.curves.MonotoneCurve.__call__` of the curve whose
    breakpoints are table ``xs`` and values table ``ys``."""
    x0, n, y0 = g[2 * xs], g[2 * xs + 1], g[2 * ys]
    last = x0 + n - 1
    if value >= f[last]:
        return f[y0 + n - 1] + tail * (value - f[last])
    if value <= f[x0]:
        return f[y0]
    i = _bisect_right(f, x0, n, value)
    a, b = f[x0 + i - 1], f[x0 + i]
    return f[y0 + i - 1] + (f[y0 + i] - f[y0 + i - 1]) * (value - a) / (b - a)


@kernel(types.UniTuple(_FLOAT, 4)(READ_FLOATS, READ, INT, _FLOAT))
def _weights(f, g, axis, value):
    """:func:`~schedlab.calibration.attention_grid._axis_weights` on table ``axis``, as
    ``(first index, its weight, second weight, count)`` (the second index is the first
    plus one; ``count`` 1 or 2, as floats)."""
    start, n = g[2 * axis], g[2 * axis + 1]
    if value <= f[start]:
        return 0.0, 1.0, 0.0, 1.0
    if value >= f[start + n - 1]:
        return float(n - 1), 1.0, 0.0, 1.0
    i = _bisect_right(f, start, n, value) - 1
    t = (value - f[start + i]) / (f[start + i + 1] - f[start + i])
    if t == 0.0:
        return float(i), 1.0, 0.0, 1.0
    return float(i), 1.0 - t, t, 2.0


@kernel(AXES(READ_FLOATS, READ, _FLOAT, _FLOAT, _FLOAT))
def _fixed_axes(f, g, p, n, k):
    """The grid's context, decodes and KV axes at ``(p, n, k)`` (already raised to the
    grid's least KV): the values clamped to the grid, the values, and each axis's
    weights (:func:`_weights`), as :data:`AXES`."""
    pc = min(p, f[g[2 * _CONTEXTS] + g[2 * _CONTEXTS + 1] - 1])
    nc = min(n, f[g[2 * _DECODES] + g[2 * _DECODES + 1] - 1])
    kc = min(k, f[g[2 * _KVS] + g[2 * _KVS + 1] - 1])
    ib0, fb0, fb1, nb = _weights(f, g, _CONTEXTS, pc)
    ii0, fi0, fi1, ni = _weights(f, g, _DECODES, nc)
    ij0, fj0, fj1, nj = _weights(f, g, _KVS, kc)
    return (pc, nc, kc, p, n, k, ib0, fb0, fb1, nb, ii0, fi0, fi1, ni, ij0, fj0, fj1, nj)


@kernel(AXES(READ_FLOATS, READ, _FLOAT, _FLOAT, _FLOAT, _FLOAT))
def _attention_axes(f, g, chunk, context, n_decode, kv_per_decode):
    """:func:`_fixed_axes` of a batch as
    :meth:`~schedlab.calibration.attention_grid.AttentionGrid.__call__` places it: no
    context without a chunk, a decode KV raised to the grid's least."""
    least = f[g[2 * _KVS]]
    p = context if chunk > 0 else 0.0
    k = max(kv_per_decode, least) if n_decode > 0 else least
    return _fixed_axes(f, g, p, n_decode, k)


@kernel(_FLOAT(READ_FLOATS, READ, _FLOAT, _FLOAT, _FLOAT, _FLOAT))
def _phi(f, g, c, p, n, k):
    """The extrapolation terms (``AttentionGrid._phi``)."""
    a = g[2 * _COEF]
    value = f[a]
    if c > 0:
        value += f[a + 1] + f[a + 2] * c + f[a + 3] * c * p + f[a + 4] * c * c
    if n > 0:
        value += f[a + 5] + f[a + 6] * n + f[a + 7] * n * k
        if c > 0:
            value += f[a + 8] * n * k
    return value


@kernel(_FLOAT(READ_FLOATS, READ, INT, AXES))
def _line(f, g, a, axes):
    """The grid at chunk level ``a`` interpolated over the other axes ``axes``:
    :math:`\\sum_{b,i,j} w_b w_i w_j\\, G[a, b, i, j]`, terms in the order ``b``, ``i``,
    ``j``."""
    _, _, _, _, _, _, ib0, fb0, fb1, nb, ii0, fi0, fi1, ni, ij0, fj0, fj1, nj = axes
    sizes = (g[2 * _CONTEXTS + 1], g[2 * _DECODES + 1], g[2 * _KVS + 1])
    s0, s1, s2 = sizes[0] * sizes[1] * sizes[2], sizes[1] * sizes[2], sizes[2]
    base = g[2 * _GRID] + a * s0 + int(ij0)
    total = 0.0
    for db in range(int(nb)):
        fb = fb0 if db == 0 else fb1
        block = base + (int(ib0) + db) * s1
        for di in range(int(ni)):
            f2 = fb * (fi0 if di == 0 else fi1)
            row = block + (int(ii0) + di) * s2
            for dj in range(int(nj)):
                total += f2 * (fj0 if dj == 0 else fj1) * f[row + dj]
    return total


@kernel(types.Tuple((_FLOAT, LINES))(READ_FLOATS, READ, _FLOAT, AXES, LINES))
def _attention(f, g, chunk, axes, lines):
    """:meth:`~schedlab.calibration.attention_grid.AttentionGrid.__call__` of a chunk of
    ``chunk`` tokens at the other axes ``axes`` (:func:`_attention_axes` of it):
    multilinear, as the weighted :func:`_line` of the chunk levels on either side
    (``lines``: those of one pair of levels, known from an earlier call at the same
    axes; computed and handed back when the chunk lies elsewhere), and the
    extrapolation beyond the grid. The reference sums the 16 terms in one order; this
    sums them by chunk level, which is the same sum to rounding."""
    pc, nc, kc, p, n, k = axes[0], axes[1], axes[2], axes[3], axes[4], axes[5]
    chunks, levels = g[2 * _CHUNKS], g[2 * _CHUNKS + 1]
    c = max(chunk, f[chunks + 1]) if chunk > 0 else 0.0
    cc = min(c, f[chunks + levels - 1])
    ia0, fa0, fa1, na = _weights(f, g, _CHUNKS, cc)
    a = int(ia0)
    if lines[0] != a:
        above = _line(f, g, a + 1, axes) if a + 1 < levels else 0.0
        lines = (float(a), _line(f, g, a, axes), above)
    total = fa0 * lines[1]
    if na == 2.0:
        total += fa1 * lines[2]
    if cc != c or pc != p or nc != n or kc != k:
        total += _phi(f, g, c, p, n, k) - _phi(f, g, cc, pc, nc, kc)
    return total, lines


@kernel(INT(READ_FLOATS, READ, INT, INT, _FLOAT))
def _label(f, g, bins, labels, value):
    """``skew._label``: the index of the right-inclusive bin holding ``value``."""
    i = _bisect_left(f, g[2 * bins], g[2 * bins + 1], value) - 1
    return min(max(i, 0), labels - 1)


@kernel(INT(READ_FLOATS, READ, _FLOAT, _FLOAT, _FLOAT, _FLOAT, _FLOAT))
def _skew_cell(f, g, kp, n, kv_mean, kv_min, kv_max):
    """``SkewTable.labels`` of a batch as its place in one chunk size's block of the
    alpha table (0 when the table has no buckets)."""
    if g[2 * _SKEW_PCS + 1] == 0:
        return 0
    ln, lr, lk, lp = g[_SKEW_SHAPE], g[_SKEW_SHAPE + 1], g[_SKEW_SHAPE + 2], g[_SKEW_SHAPE + 3]
    spread = kv_max - kv_min
    rate = min(max((kv_mean - kv_min) / spread, 0.0), 1.0) if spread > 0 else 0.0
    return (
        ((_label(f, g, _N_BINS, ln, n) * lr + _label(f, g, _RATE_BINS, lr, rate)) * lk)
        + _label(f, g, _KV_BINS, lk, kv_max)
    ) * lp + _label(f, g, _KP_BINS, lp, kp)


@kernel(_FLOAT(READ_FLOATS, READ, INT, _FLOAT))
def _alpha(f, g, cell, pc):
    """:meth:`~schedlab.calibration.skew.SkewTable.alpha` of a batch of ``pc`` prefill
    tokens whose labels are ``cell`` (:func:`_skew_cell`)."""
    default = f[g[2 * _SCALARS] + _SKEW_DEFAULT]
    pcs, count = g[2 * _SKEW_PCS], g[2 * _SKEW_PCS + 1]
    if count == 0:
        return default
    per_pc = g[_SKEW_SHAPE] * g[_SKEW_SHAPE + 1] * g[_SKEW_SHAPE + 2] * g[_SKEW_SHAPE + 3]
    table = g[2 * _SKEW_ALPHA] + cell
    target = pc if pc > 0 else 0.0
    i = _bisect_left(f, pcs, count, target)
    if i < count and f[pcs + i] == target:
        found = f[table + i * per_pc]
        return default if math.isnan(found) else found
    if pc <= 0:
        return default
    below = f[table + (i - 1) * per_pc] if i > 0 else math.nan
    above = f[table + i * per_pc] if i < count else math.nan
    if not math.isnan(below) and not math.isnan(above):
        t = (pc - f[pcs + i - 1]) / (f[pcs + i] - f[pcs + i - 1])
        return below + t * (above - below)
    if not math.isnan(below):
        return below
    return default if math.isnan(above) else above


@kernel(_FLOAT(READ_FLOATS, READ, INT, _FLOAT))
def _row_value(f, g, row, activated):
    """``experts._row_value`` of expert row ``row``."""
    start = g[_EXPERT_ROWS + row]
    n = g[_EXPERT_ROWS + row + 1] - start
    a, t = g[2 * _EXPERT_ACTIVATED] + start, g[2 * _EXPERT_TIMES] + start
    if activated <= f[a]:
        return f[t]
    if activated >= f[a + n - 1]:
        return f[t + n - 1]
    j = _bisect_right(f, a, n, activated) - 1
    u = (activated - f[a + j]) / (f[a + j + 1] - f[a + j])
    return f[t + j] + u * (f[t + j + 1] - f[t + j])


@kernel(_FLOAT(READ_FLOATS, READ, _FLOAT, _FLOAT))
def _expert_time(f, g, tokens, activated):
    """:meth:`~schedlab.calibration.experts.ExpertTable.time_us`."""
    sizes, rows = g[2 * _EXPERT_SIZES], g[2 * _EXPERT_SIZES + 1]
    if tokens <= f[sizes]:
        return _row_value(f, g, 0, activated)
    if tokens >= f[sizes + rows - 1]:
        last = _row_value(f, g, rows - 1, activated)
        before = _row_value(f, g, rows - 2, activated)
        slope = max(0.0, (last - before) / (f[sizes + rows - 1] - f[sizes + rows - 2]))
        return last + slope * (tokens - f[sizes + rows - 1])
    i = _bisect_right(f, sizes, rows, tokens) - 1
    low = _row_value(f, g, i, activated)
    high = _row_value(f, g, i + 1, activated)
    u = (tokens - f[sizes + i]) / (f[sizes + i + 1] - f[sizes + i])
    return low + u * (high - low)


@kernel(_FLOAT(READ_FLOATS, READ, _FLOAT))
def _experts(f, g, tokens):
    """``ProfileCostModel._experts_us``: the expert block of ``tokens`` tokens."""
    s = g[2 * _SCALARS]
    if f[s + _HAS_EXPERTS] == 0.0:
        return 0.0
    ep = f[s + _EP]
    if tokens <= 0:
        return 0.0
    experts, top_k = f[s + _EXPERTS], f[s + _TOP_K]
    spread = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    if ep > 1:
        return _expert_time(f, g, max(tokens / ep, 1.0), max(spread / ep, 1.0))
    return _expert_time(f, g, max(tokens / 1.0, 1.0), max(spread / 1.0, 1.0)) / f[s + _TP]


@kernel(PREPARED(READ_FLOATS, READ, BATCH, _FLOAT))
def _prepare(f, g, batch, tokens):
    """What the times of ``batch`` with any number ``>= 1`` of chunk tokens (``tokens >
    0``), or with none, share: whether the skew correction applies, the attention axes at
    the mean and at the longest KV, the skew labels' place and the head's time."""
    n, kv_total, _, context, chunks, kv_max, kv_min = batch
    s = g[2 * _SCALARS]
    kv = kv_total / n if n > 0 else 0.0
    spread = f[s + _HAS_SKEW] != 0.0 and kv_max >= 0 and n > 1 and kv_max > kv
    least = kv_min if kv_min >= 0 else kv_max
    cell = _skew_cell(f, g, context, n, kv, least, kv_max) if spread else 0
    head = _curve(f, g, _HEAD_X, _HEAD_Y, f[s + _HEAD_TAIL], n + chunks)
    return (
        spread,
        _attention_axes(f, g, tokens, context, n, kv),
        _attention_axes(f, g, tokens, context, n, kv_max),
        cell,
        head,
    )


@kernel(
    types.Tuple((_FLOAT, LINES, LINES))(READ_FLOATS, READ, _FLOAT, PREPARED, _FLOAT, LINES, LINES)
)
def _seconds(f, g, n, prepared, tokens, mean_lines, top_lines):
    """:func:`iteration_seconds` of a batch of ``n`` decodes with ``tokens`` chunk tokens,
    from :func:`_prepare` of it, and the attention's lines at the mean and the longest
    KV (:func:`_attention`) for the next call at the same axes."""
    spread, mean, top_axes, cell, head = prepared
    s = g[2 * _SCALARS]
    attention, mean_lines = _attention(f, g, tokens, mean, mean_lines)
    if spread:  # ProfileCostModel._attention_us's skew correction
        top, top_lines = _attention(f, g, tokens, top_axes, top_lines)
        if top > attention:
            attention += _alpha(f, g, cell, tokens) * (top - attention)
    size = n + tokens
    layer = attention + _experts(f, g, size)
    micro = (
        _curve(f, g, _DENSE_X, _DENSE_Y, f[s + _DENSE_TAIL], size) + head + f[s + _SCALE] * layer
    )
    seconds = micro * 1e-6
    tp = f[s + _TP]
    if tp <= 1 or f[s + _HAS_LINK] == 0.0 or size <= 0:
        return seconds + 0.0 + f[s + _HOST], mean_lines, top_lines
    moved = size * f[s + _HIDDEN] * f[s + _DTYPE_BYTES]
    latency, bandwidth = f[s + _LATENCY], f[s + _BANDWIDTH]
    reduce_s = 0.0
    if tp == 2 and 0 < moved < CUSTOM_ALL_REDUCE_MAX_BYTES:  # Link.tensor_all_reduce_s
        reduce_s = latency + moved / bandwidth
    elif moved > 0:
        reduce_s = 2 * (tp - 1) * (latency + moved / (tp * bandwidth))
    return seconds + 2 * f[s + _LAYERS] * reduce_s + f[s + _HOST], mean_lines, top_lines


@kernel(_FLOAT(READ_FLOATS, READ, BATCH))
def iteration_seconds(f, g, batch):
    """Seconds of the iteration of ``batch``
    (:meth:`~schedlab.calibration.profile_model.ProfileCostModel.iteration_time`; the
    tuple :data:`BATCH` describes)."""
    prepared = _prepare(f, g, batch, batch[2])
    return _seconds(f, g, batch[0], prepared, batch[2], NO_LINES, NO_LINES)[0]


@kernel(SEARCH(READ_FLOATS, READ, BATCH, _FLOAT, _FLOAT, INT, _FLOAT))
def _search(f, g, batch, prior, budget, upper, first):
    """:func:`largest_safe_chunk` given its first probe ``first``, the time of ``batch``
    alone."""
    n, kv_total, tokens, context, chunks, kv_max, kv_min = batch
    best = first
    if not best <= budget:
        return 0, 1, True, best
    probe = (n, kv_total, tokens, context + prior, chunks + 1.0, kv_max, kv_min)
    prepared = _prepare(f, g, probe, 1.0)  # every probe has a chunk
    mean_lines = top_lines = NO_LINES
    evaluations = 1
    lo, hi = 0, upper + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t, mean_lines, top_lines = _seconds(f, g, n, prepared, tokens + mid, mean_lines, top_lines)
        evaluations += 1
        if t <= budget:
            lo, best = mid, t
        else:
            hi = mid
    return lo, evaluations, False, best


@kernel(SEARCH(READ_FLOATS, READ, BATCH, _FLOAT, _FLOAT, INT))
def largest_safe_chunk(f, g, batch, prior, budget, upper):
    """SLOWeave's binary search (:func:`~schedlab.serving.sloweave.deadline_safe_chunk`)
    for ``batch`` plus a chunk of ``c <= upper`` tokens of the candidate on ``prior``
    cached tokens, each probe :func:`iteration_seconds`: ``(chunk, evaluations, deadline
    miss, predicted seconds)``, the search's answer step for step. (What the probes share
    is prepared once: the same numbers, in the same order.)"""
    return _search(f, g, batch, prior, budget, upper, iteration_seconds(f, g, batch))


@kernel(
    _FLOAT(
        READ_FLOATS, READ, types.UniTuple(INT, 6), MATRIX, READ_MATRIX, types.UniTuple(_FLOAT, 5)
    )
)
def replay_prefill_end(f, g, counts, queue, releases, times):
    """:func:`~schedlab.serving.prefill_replay.sloweave_replay_s`, step for step, each
    chunk by :func:`largest_safe_chunk` and each iteration by :func:`iteration_seconds`.

    ``counts`` holds the decodes, their KV, their longest and shortest KV (below 0: not
    known), the token budget and :math:`C_{\\max}`; ``queue`` the ``(tokens left, tokens
    done)`` rows, the prompt's last (overwritten); ``releases`` the ``(iterations left,
    blocks, final KV)`` rows, sorted; ``times`` the start, the TPOT, the margin,
    ``since_s`` and ``beat_s`` of
    :class:`~schedlab.serving.prefill_replay.PrefillReplay`.
    """
    n, kv, high, low, token_budget, chunk_cap = counts
    start, tpot, margin, since, beat = times
    size = 0
    for k in range(queue.shape[0]):  # a prompt completing now decodes next; keep the rest
        rest, prior = queue[k, 0], queue[k, 1]
        if rest == 0:
            kv += prior + 1
            high = prior + 1 if high < 0 else max(high, prior + 1)
            low = prior + 1 if low < 0 else min(low, prior + 1)
            n += 1
        else:
            queue[size, 0], queue[size, 1] = rest, prior
            size += 1
    head, leaving, t, m = 0, 0, start, 0
    while True:
        while leaving < releases.shape[0] and releases[leaving, 0] <= m:
            n -= 1
            kv -= releases[leaving, 2] + m - releases[leaving, 0] + 1
            leaving += 1
        tokens = context = chunks = 0
        left, chunks_left = token_budget - n, chunk_cap
        joined, joined_kv, joined_high, joined_low = 0, 0, 0, 0
        current = math.nan  # the time of the chunks placed so far, once a search knows it
        for k in range(head, size):
            rest, prior = queue[k, 0], queue[k, 1]
            upper = max(0, min(min(chunks_left, rest), left))
            c = upper
            if n > 0:
                budget = (t + tpot) - t - margin
                placed = (float(n), float(kv), float(tokens), float(context), float(chunks))
                placed_spread = (*placed, float(high), float(low))
                if math.isnan(current):
                    current = iteration_seconds(f, g, placed_spread)
                # the search's best is the time of the chunks with its own: no probe again
                found = _search(f, g, placed_spread, float(prior), budget, upper, current)
                c, current = found[0], found[3]
            else:
                current = math.nan
            if c == 0:
                break
            tokens, context, chunks = tokens + c, context + prior, chunks + 1
            queue[k, 0], queue[k, 1] = rest - c, prior + c
            left -= c
            chunks_left -= c
            if c == rest:
                joined += 1
                joined_kv += prior + c + 1
                joined_high = max(joined_high, prior + c + 1)
                joined_low = prior + c + 1 if joined == 1 else min(joined_low, prior + c + 1)
            if c < rest or chunks_left == 0 or left <= 0:
                break
        if chunks == 0:
            return math.inf
        if math.isnan(current):
            batch = (float(n), float(kv), float(tokens), float(context), float(chunks))
            current = iteration_seconds(f, g, (*batch, float(high), float(low)))
        t = t + current
        if queue[size - 1, 0] == 0:
            return t
        if t - since >= beat:
            return math.inf
        while head < size and queue[head, 0] == 0:
            head += 1
        kv += n  # every decode is one token longer in the next iteration
        high = high + 1 if high >= 0 else high
        low = low + 1 if low >= 0 else low
        if joined:  # the completed prompts decode from the next iteration on
            kv += joined_kv
            high = joined_high if high < 0 else max(high, joined_high)
            low = joined_low if low < 0 else min(low, joined_low)
            n += joined
        m += 1
