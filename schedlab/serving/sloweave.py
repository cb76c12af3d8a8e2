r"""SLOWeave: the largest deadline-safe prefill chunk, by binary search.

Each running decode :math:`i` has next-token deadline :math:`d_i = \ell_i + D` (its last
token time plus the TPOT target). An iteration starting at :math:`s` has budget
:math:`B = \min_i d_i - s`. SLOWeave (arXiv 2609.07883; ``docs/design.md``, "SLOWeave") chooses

.. math::

    c^* = \max\{\, c \le U : \hat T(n, c) + \delta \le B \,\}, \qquad
    U = \min(C_{\max}, L, \text{engine caps}),

with :math:`L` the remaining prompt of the request being prefilled and :math:`\delta \ge 0`
a one-sided margin for a learned predictor. Edge cases: no decodes (no deadline) gives
:math:`c^* = U`; a decode-only iteration that already misses the budget
(:math:`\hat T(n,0) + \delta > B`) gives :math:`c^* = 0` and a recorded deadline miss.

:func:`choose_chunk` is a pure function (state in, decision out) a real runtime can
call; it checks its arguments at the door, and the simulator's own policies call
:func:`deadline_safe_chunk`, the same search without the checks, once per iteration.
It needs at most :math:`1 + \lceil \log_2(U+1) \rceil` cost evaluations and, for a cost
model non-decreasing in ``c``, returns exactly :func:`linear_scan_chunk`'s answer;
``proofs/sloweave.md`` proves both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schedlab.arguments_check import MAX_COUNT, check_int, check_real, check_type
from schedlab.errors import InputTypeError, ServingError
from schedlab.serving.cost_model import BatchShape, Chunk, CostModel, batch_time

__all__ = [
    "ChunkDecision",
    "SLOWeaveState",
    "check_margin",
    "choose_chunk",
    "deadline_safe_chunk",
    "linear_scan_chunk",
]


@dataclass(frozen=True, slots=True)
class SLOWeaveState:
    """What the chooser needs to know at an iteration start.

    Attributes
    ----------
    now_s
        Iteration start time :math:`s`.
    next_deadline_s
        :math:`\\min_i d_i` over running decodes (ignored when ``n_decode == 0``).
    n_decode, decode_kv
        Running decodes and the KV tokens they hold.
    remaining
        :math:`L`, prompt tokens still to prefill for the candidate request.
    prior
        Tokens of the candidate already in the cache (its chunk's prior context).
    fixed_chunks
        Chunks of other requests already placed in this batch.
    decode_kv_max, decode_kv_min
        KV tokens of the longest and shortest running decode, when the engine tracks them
        (a real scheduler knows every request's computed tokens); a cost model that uses
        the decodes' spread (``decode_spread``) is then evaluated with them, otherwise
        as if the decodes were equal.
    """

    now_s: float
    next_deadline_s: float
    n_decode: int
    decode_kv: int
    remaining: int
    prior: int = 0
    fixed_chunks: tuple[Chunk, ...] = ()
    decode_kv_max: int | None = None
    decode_kv_min: int | None = None


@dataclass(frozen=True, slots=True)
class ChunkDecision:
    """A chunk size and how it was found.

    Attributes
    ----------
    chunk
        :math:`c^*`.
    evaluations
        Cost-model calls made.
    deadline_miss
        ``True`` when even the decode-only iteration misses the budget.
    predicted_s
        Predicted duration (without margin) of the batch with ``chunk``; ``nan`` when the
        model was not called (no decodes).
    """

    chunk: int
    evaluations: int
    deadline_miss: bool
    predicted_s: float


def check_margin(margin_s: float, tpot_s: float, where: str) -> float:
    """``margin_s`` as SLOWeave's margin :math:`\\delta` for the per-token deadline
    ``tpot_s``: a number of seconds from 0 up to, not including, ``tpot_s`` (a margin as
    long as the deadline leaves no budget for any iteration).

    Raises
    ------
    ServingError
        Naming ``where``, for any other margin.
    """
    if isinstance(margin_s, bool) or not (
        isinstance(margin_s, int | float) and 0 <= margin_s < tpot_s
    ):
        raise ServingError(
            f"{where}: must be >= 0 and below the TPOT of {tpot_s * 1e3:g} ms, got {margin_s!r} s"
        )
    return float(margin_s)


def _upper(state: SLOWeaveState, c_max: int, cap: int | None, margin_s: float) -> int:
    if c_max < 1:
        raise ServingError(f"sloweave: c_max must be >= 1, got {c_max}")
    if not margin_s >= 0:
        raise ServingError(f"sloweave: margin must be >= 0 (one-sided), got {margin_s}")
    if state.remaining < 0:
        raise ServingError(f"sloweave: remaining prompt must be >= 0, got {state.remaining}")
    upper = min(c_max, state.remaining)
    return upper if cap is None else max(0, min(upper, cap))


def _predict(model: CostModel, state: SLOWeaveState, c: int) -> float:
    """Predicted seconds of the batch with a chunk of ``c`` tokens of the candidate."""
    chunks = (*state.fixed_chunks, (c, state.prior)) if c > 0 else state.fixed_chunks
    shape = BatchShape(
        state.n_decode, state.decode_kv, tuple(chunks), state.decode_kv_max, state.decode_kv_min
    )
    return batch_time(model, shape)


def _check_state(state: SLOWeaveState, where: str) -> None:
    """Refuse a state whose times are not finite or whose counts are not integers
    ``>= 0`` (a NaN deadline would be no deadline at all)."""
    check_type(state, (SLOWeaveState,), where)
    for name in ("now_s", "next_deadline_s"):
        check_real(getattr(state, name), f"{where}.{name}", error=ServingError)
    counts = ("n_decode", "decode_kv", "remaining", "prior", "decode_kv_max", "decode_kv_min")
    for name in counts:
        value = getattr(state, name)
        if value is not None or not name.startswith("decode_kv_"):  # those two: optional
            check_int(value, f"{where}.{name}", 0, MAX_COUNT, error=ServingError)
    chunks = check_type(state.fixed_chunks, (tuple, list), f"{where}.fixed_chunks")
    for k, chunk in enumerate(chunks):
        if not isinstance(chunk, tuple | list) or len(chunk) != 2:
            raise InputTypeError(
                f"{where}.fixed_chunks[{k}]: expected (tokens, prior), got {chunk!r:.60}"
            )
        for part in chunk:
            check_int(part, f"{where}.fixed_chunks[{k}]", 0, MAX_COUNT, error=ServingError)


def choose_chunk(
    state: SLOWeaveState,
    model: CostModel,
    *,
    c_max: int = 4096,
    margin_s: float | None = None,
    cap: int | None = None,
) -> ChunkDecision:
    """SLOWeave's chunk :math:`c^*` by binary search (see the module docstring), its
    arguments checked first (:func:`deadline_safe_chunk` is the search alone).

    Parameters
    ----------
    state
        Iteration state.
    model
        Predicted cost model; it must be non-decreasing in the chunk length (check it once
        with :func:`~schedlab.serving.cost_model.require_monotone`).
    c_max
        :math:`C_{\\max} \\ge 1`.
    margin_s
        :math:`\\delta \\ge 0`; ``None`` takes ``model.margin_s``.
    cap
        Further engine cap on the chunk (token budget, KV room); ``None`` for none.

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for an argument or a field of ``state`` of the wrong type (a
        model name where a :class:`~schedlab.serving.cost_model.CostModel` belongs).
    ServingError
        For a time of ``state`` that is NaN or infinite, a negative count, ``c_max < 1``,
        a negative or NaN margin: ``choose_chunk: state.next_deadline_s: must be a finite
        number, got nan``.
    """
    check_type(model, (CostModel,), "choose_chunk: model")
    _check_state(state, "choose_chunk: state")
    c_max = check_int(c_max, "choose_chunk: c_max", 1, MAX_COUNT, error=ServingError)
    if margin_s is not None:
        check_real(margin_s, "choose_chunk: margin_s", 0, error=ServingError)
    if cap is not None:
        check_int(cap, "choose_chunk: cap", 0, MAX_COUNT, error=ServingError)
    return deadline_safe_chunk(state, model, c_max=c_max, margin_s=margin_s, cap=cap)


def deadline_safe_chunk(
    state: SLOWeaveState,
    model: CostModel,
    *,
    c_max: int = 4096,
    margin_s: float | None = None,
    cap: int | None = None,
) -> ChunkDecision:
    """The binary search of :func:`choose_chunk`, trusting its arguments: the call of the
    simulator's policies and routers, which make the state themselves, once per iteration.

    Notes
    -----
    Invariant of the search: ``lo`` is known safe (:math:`\\hat T(n, lo) + \\delta \\le B`)
    and every ``c >= hi`` is unsafe or beyond :math:`U` (``hi = U + 1`` at the start). A
    prediction that is NaN counts as unsafe.
    """
    margin = model.margin_s if margin_s is None else margin_s
    upper = _upper(state, c_max, cap, margin)
    if state.n_decode == 0:
        return ChunkDecision(upper, 0, False, math.nan)
    budget = state.next_deadline_s - state.now_s - margin
    own = getattr(model, "largest_safe_chunk", None)
    if own is not None:  # the same search, run by the model (the cost model's protocol)
        return ChunkDecision(*own(state, upper, budget))
    best = _predict(model, state, 0)
    if not best <= budget:  # even decode-only misses: record it (``docs/design.md``, "SLOWeave")
        return ChunkDecision(0, 1, True, best)
    evaluations = 1
    lo, hi = 0, upper + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = _predict(model, state, mid)
        evaluations += 1
        if t <= budget:
            lo, best = mid, t
        else:
            hi = mid
    return ChunkDecision(lo, evaluations, False, best)


def linear_scan_chunk(
    state: SLOWeaveState,
    model: CostModel,
    *,
    c_max: int = 4096,
    margin_s: float | None = None,
    cap: int | None = None,
) -> ChunkDecision:
    """Reference answer: try every ``c = 0..U`` and keep the largest safe one.

    Makes no monotonicity assumption; used by the property tests and by the speed
    benchmark as the baseline of :func:`choose_chunk`.
    """
    margin = model.margin_s if margin_s is None else margin_s
    upper = _upper(state, c_max, cap, margin)
    if state.n_decode == 0:
        return ChunkDecision(upper, 0, False, math.nan)
    budget = state.next_deadline_s - state.now_s - margin
    chosen, predicted = -1, math.nan
    for c in range(upper + 1):
        t = _predict(model, state, c)
        if t <= budget:
            chosen, predicted = c, t
    if chosen < 0:
        return ChunkDecision(0, upper + 1, True, _predict(model, state, 0))
    return ChunkDecision(chosen, upper + 1, False, predicted)
