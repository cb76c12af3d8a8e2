r"""Fluid headroom: what chunked-prefill policies can sustain under a linear cost model.

A *fluid* model replaces requests by flows: at arrival rate :math:`\lambda` the engine must
compute :math:`\lambda \bar p` prefill tokens and :math:`\lambda (\bar o - 1)` decode steps
per second (the first output token comes with the prefill). With the linear model of
:class:`~schedlab.serving.cost_model.LinearAttentionCostModel` without attention terms, an
iteration with :math:`n` decodes and :math:`C` prefill tokens lasts

.. math::

    T(n, C) = F + a_d n + a_p C, \qquad F = b + f_d + f_p,

(SLOWeave's default model: :math:`F = 0.35 + 0.90 + 0.40 = 1.65` ms, :math:`a_d = 0.055`,
:math:`a_p = 0.006` ms). Write :math:`A = a_d (\bar o - 1) + a_p \bar p` for the work of one
request. The statements below are proved in ``proofs/fluid_headroom.md``:

* **Deadline-filling capacity.** A policy whose every iteration lasts :math:`\tau` sustains
  :math:`\lambda(\tau) = (1 - F/\tau) / A`; iterations may last at most the deadline, so
  under a per-token SLO the most any policy sustains is :math:`\lambda^* = \lambda(D')`
  with :math:`D' = D - \delta` (SLOWeave's margin :math:`\delta`). This is SLOWeave's
  fluid capacity.
* **The chunk that fills the deadline** is :math:`C^* = \lambda^* \bar p D'`.
* **A fixed chunk** :math:`C \le C^*` is prefill-bound: its iterations last
  :math:`\tau_C = F + C (a_p + a_d (\bar o - 1)/\bar p) \le D'` and it sustains
  :math:`\lambda_C = C / (\bar p \tau_C)`; so for :math:`k = C / C^*`,
  :math:`\lambda^* / \lambda_C = 1 - F/D' + F/(D' k)`. A chunk :math:`C > C^*` is
  deadline-bound: an iteration carrying it keeps :math:`D'` only while
  :math:`n \le n_C = (D' - F - a_p C) / a_d`, which caps the rate at
  :math:`n_C / \bigl((\bar o - 1) F_0 + n_C (\bar p (f_p / C + a_p) + a_d (\bar o - 1))\bigr)`,
  :math:`F_0 = b + f_d` (part of the iterations then run decode-only).
* **KV tokens in use** (Little's law): a request decoding through iterations of length
  :math:`\tau` holds its KV for :math:`\tau \sum_{j=1}^{o-1} (p + j)` token-seconds, so
  the cache holds :math:`L = \lambda \tau\, \mathbb{E}[(o - 1) p + o (o - 1)/2]` tokens
  on average. With a cache of :math:`M` tokens, iterations of length :math:`\tau` are
  limited to :math:`\lambda \le M / (\tau m_2)`, :math:`m_2` that expectation. (Plain
  SLOWeave has no fluid figure with a binding cache: past :math:`M / (D' m_2)` it
  overcommits the cache, and the engine's preemptions then shorten its iterations, which
  no steady state of iterations of :math:`D'` describes.)
* **The best of any policy** prefills in a share :math:`\varphi \le 1` of its
  iterations; its rate, with or without a cache, is a one-dimensional optimum over
  :math:`\varphi` (:func:`_best_rate`, ``proofs/fluid_headroom.md`` Claim 4); when
  prefilling in every iteration is best and the cache does not bind, it is
  :math:`\lambda^*`.

The fluid model ignores queueing variance: real capacities at 90 % attainment lie below
these, and the test ``tests/serving/test_fluid.py`` states by how much.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from schedlab.arguments_check import MAX_COUNT, check_int, check_real, check_types
from schedlab.errors import ServingError
from schedlab.json_files import nan_to_null
from schedlab.serving.cost_model import CostModel, LinearAttentionCostModel, hardware_of
from schedlab.serving.sloweave import check_margin
from schedlab.tables import to_pandas

__all__ = ["FixedChunkHeadroom", "FluidLoad", "Headroom", "headroom"]

#: The fixed chunks reported by default (the comparison table's).
DEFAULT_CHUNKS = (64, 128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class FluidLoad:
    r"""The moments of a workload's lengths the fluid model needs.

    Attributes
    ----------
    mean_prompt, mean_output
        :math:`\bar p`, :math:`\bar o`.
    kv_moment
        :math:`m_2 = \mathbb{E}[(o - 1) p + o (o - 1) / 2]`, KV token-iterations per request.
    n_requests
        The size of the sample they come from.

    Raises
    ------
    InputTypeError, ServingError
        For a moment that is no finite number ``>= 0``, a size that is no integer ``>= 1``.
    """

    mean_prompt: float
    mean_output: float
    kv_moment: float
    n_requests: int

    def __post_init__(self) -> None:
        for name in ("mean_prompt", "mean_output", "kv_moment"):
            check_real(getattr(self, name), f"fluid load: {name}", 0, error=ServingError)
        check_int(self.n_requests, "fluid load: n_requests", 1, error=ServingError)

    @classmethod
    def of(
        cls, prompt: Sequence[int] | np.ndarray, output: Sequence[int] | np.ndarray
    ) -> FluidLoad:
        """The moments of a sample of requests' prompt and output lengths."""
        p = np.asarray(prompt, dtype=float)
        o = np.asarray(output, dtype=float)
        if p.size == 0 or p.shape != o.shape:
            raise ServingError("fluid: need a non-empty sample of prompt and output lengths")
        if (p < 1).any() or (o < 1).any():
            raise ServingError("fluid: prompt and output lengths must be >= 1")
        m2 = float(np.mean((o - 1) * p + o * (o - 1) / 2))
        return cls(float(p.mean()), float(o.mean()), m2, int(p.size))


@dataclass(frozen=True)
class FixedChunkHeadroom:
    """A fixed chunk's fluid capacity (module docstring).

    Attributes
    ----------
    chunk
        :math:`C`.
    capacity_rps
        Its fluid capacity under a per-token SLO (0 if even one decode beside the chunk
        misses the deadline).
    bound
        ``"prefill"`` (:math:`C \\le C^*`) or ``"deadline"``.
    iteration_s
        Its mean iteration length at that rate.
    kv_in_use
        KV tokens in use at that rate (Little's law).
    kv_capacity_rps
        Its fluid capacity when the cache holds ``kv_tokens`` too.
    """

    chunk: int
    capacity_rps: float
    bound: str
    iteration_s: float
    kv_in_use: float
    kv_capacity_rps: float


@dataclass(frozen=True)
class Headroom:
    r"""The fluid figures of one (cost model, workload, deadline); module docstring.

    Attributes
    ----------
    rate_star_rps
        :math:`\lambda^*`, SLOWeave's (and any policy's) fluid capacity under a per-token SLO.
    chunk_star
        :math:`C^*`, the fixed chunk that exactly fills the deadline.
    fixed
        Each fixed chunk's capacity.
    kv_in_use_at_star
        KV tokens in use at :math:`\lambda^*` with iterations of :math:`D'`.
    best_rps, best_prefill_share
        The best fluid rate of any policy under a per-token SLO, and the share
        :math:`\varphi` of its iterations that prefill (:math:`\lambda^*` when
        :math:`\varphi = 1`).
    kv_bound_rps, kv_bound_prefill_share
        The same with a cache of ``kv_tokens`` (``nan`` when none was given).
    """

    cost_model: str
    workload: str
    tpot_s: float
    margin_s: float
    load: FluidLoad
    fixed_s: float
    per_decode_s: float
    per_prefill_token_s: float
    rate_star_rps: float
    chunk_star: float
    fixed: tuple[FixedChunkHeadroom, ...]
    kv_in_use_at_star: float
    best_rps: float
    best_prefill_share: float
    kv_tokens: int | None
    kv_bound_rps: float
    kv_bound_prefill_share: float
    hardware: str = ""

    def ratio(self, chunk: int) -> float:
        r""":math:`\lambda^* / \lambda_C` for a reported chunk."""
        (entry,) = [f for f in self.fixed if f.chunk == chunk]
        return self.rate_star_rps / entry.capacity_rps if entry.capacity_rps else math.inf

    def kv_in_use(self, rate_rps: float, iteration_s: float) -> float:
        """KV tokens in use at ``rate_rps`` with iterations of ``iteration_s`` (Little)."""
        return rate_rps * iteration_s * self.load.kv_moment

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``nan`` becomes ``null``)."""
        return nan_to_null(asdict(self))

    def rows(self) -> list[dict[str, Any]]:
        r"""One flat row a fixed chunk: its capacity without and with the cache, what
        binds it, its mean iteration (seconds), its KV tokens and :math:`\lambda^* /
        \lambda_C`."""
        return [
            {
                "chunk": row.chunk,
                "bound": row.bound,
                "capacity_rps": row.capacity_rps,
                "kv_capacity_rps": row.kv_capacity_rps,
                "iteration_s": row.iteration_s,
                "kv_in_use": row.kv_in_use,
                "rate_star_ratio": self.ratio(row.chunk),
            }
            for row in self.fixed
        ]

    def to_pandas(self) -> Any:
        """:meth:`rows` as a pandas DataFrame (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas(self.rows())


def _fixed_chunk(
    model: LinearAttentionCostModel,
    load: FluidLoad,
    deadline: float,
    chunk: int,
    kv_tokens: int | None,
) -> FixedChunkHeadroom:
    r"""One fixed chunk: at rate :math:`\lambda \le \lambda_C` its mean iteration lasts
    :math:`\bar\tau(\lambda) = F_0 / (1 - \lambda B_C)`, :math:`B_C = \bar p (f_p / C + a_p)
    + a_d (\bar o - 1)`; the deadline (:math:`n \le n_C`) and the cache
    (:math:`L \le M`) both read :math:`\lambda \bar\tau(\lambda) \le X`, i.e.
    :math:`\lambda \le X / (F_0 + X B_C)`."""
    f0 = model.base_s + model.decode_fixed_s
    a_d, a_p, f_p = model.decode_per_seq_s, model.prefill_per_token_s, model.prefill_fixed_s
    p, steps = load.mean_prompt, load.mean_output - 1
    b_c = p * (f_p / chunk + a_p) + a_d * steps
    tau_full = f0 + f_p + chunk * (a_p + a_d * steps / p)  # every iteration prefilling
    rate = chunk / (p * tau_full)
    bound = "prefill"
    if tau_full > deadline:
        n_c = (deadline - f0 - f_p - a_p * chunk) / a_d
        rate = 0.0 if n_c < 1 else min(rate, n_c / (steps * f0 + n_c * b_c))
        bound = "deadline"
    rate_kv = rate
    if kv_tokens is not None:
        x = kv_tokens / load.kv_moment
        rate_kv = min(rate, x / (f0 + x * b_c))
    tau = f0 / (1 - rate * b_c) if rate else math.nan
    kv = rate * tau * load.kv_moment if rate else 0.0
    return FixedChunkHeadroom(chunk, rate, bound, tau, kv, rate_kv)


def _best_rate(
    model: LinearAttentionCostModel, load: FluidLoad, deadline: float, kv_tokens: int | None
) -> tuple[float, float]:
    r"""The best fluid rate of any policy, and its prefill share :math:`\varphi`.

    With :math:`r` iterations per second of which a share :math:`\varphi` prefill, time
    balance reads :math:`r (F_0 + \varphi f_p) + \lambda A = 1`; a prefill iteration keeps
    the deadline iff :math:`r \ge \lambda (a_d (\bar o - 1) + a_p \bar p / \varphi) /
    (D' - F)`, and the cache iff :math:`r \ge \lambda m_2 / M`. So
    :math:`\lambda = 1 / (h(\varphi) + A)` with :math:`h(\varphi) = \rho(\varphi)
    (F_0 + \varphi f_p)`, :math:`\rho` the larger of the two coefficients of :math:`\lambda`.
    Where the deadline binds :math:`h` is convex with its minimum at
    :math:`\varphi_u = \sqrt{a_p \bar p F_0 / (a_d (\bar o - 1) f_p)}`; where the cache
    binds it increases, so its minimum is where the cache starts to bind,
    :math:`\varphi_M`; the optimum is among :math:`\{\varphi_u, \varphi_M, 1\}` clipped
    to :math:`(0, 1]` (``proofs/fluid_headroom.md``)."""
    f0 = model.base_s + model.decode_fixed_s
    a_d, a_p, f_p = model.decode_per_seq_s, model.prefill_per_token_s, model.prefill_fixed_s
    p, steps = load.mean_prompt, load.mean_output - 1
    slack = deadline - f0 - f_p
    work = a_d * steps + a_p * p
    kv_coef = 0.0 if kv_tokens is None else load.kv_moment / kv_tokens

    def h(share: float) -> float:
        return max(kv_coef, (a_d * steps + a_p * p / share) / slack) * (f0 + share * f_p)

    candidates = [1.0]
    if steps > 0 and f_p > 0:
        candidates.append(min(1.0, math.sqrt(a_p * p * f0 / (a_d * steps * f_p))))
    if kv_coef and kv_coef * slack > a_d * steps:
        candidates.append(min(1.0, a_p * p / (kv_coef * slack - a_d * steps)))
    candidates = [phi for phi in candidates if phi > 0]  # the share lies in (0, 1]
    share = min(candidates, key=lambda phi: (h(phi), -phi))
    return 1 / (h(share) + work), share


def _linear_terms(model: CostModel) -> LinearAttentionCostModel:
    if not isinstance(model, LinearAttentionCostModel):
        raise ServingError(
            f"fluid headroom: cost model {model.name!r} is not a linear-attention model; "
            "the closed form needs T(n, C) = F + a_d n + a_p C"
        )
    if model.decode_per_kv_s or model.prefill_attention_s:
        raise ServingError(
            f"fluid headroom: cost model {model.name!r} has attention terms "
            "(decode_per_kv_s, prefill_attention_s); the closed form needs them at 0"
        )
    if model.decode_per_seq_s <= 0 or model.prefill_per_token_s <= 0:
        raise ServingError(
            f"fluid headroom: cost model {model.name!r} needs positive per-decode and "
            "per-prefill-token costs"
        )
    if model.base_s + model.decode_fixed_s <= 0 or model.prefill_fixed_s < 0:
        raise ServingError(
            f"fluid headroom: cost model {model.name!r} needs a positive fixed cost per "
            "iteration (base_s + decode_fixed_s > 0) and prefill_fixed_s >= 0"
        )
    return model


def headroom(
    model: CostModel,
    load: FluidLoad,
    tpot_s: float,
    *,
    workload: str = "",
    margin_s: float | None = None,
    chunks: Sequence[int] = DEFAULT_CHUNKS,
    kv_tokens: int | None = None,
) -> Headroom:
    """The fluid headroom of the module docstring, with a KV budget of ``kv_tokens``
    tokens if given.

    Raises
    ------
    ServingError
        For a model that is not linear without attention terms, a margin not below the
        TPOT (:func:`~schedlab.serving.sloweave.check_margin`), or a deadline that its
        fixed cost :math:`F` (plus the margin) already uses up; a TPOT that is not finite
        and positive, a chunk size or KV budget that is no integer ``>= 1``.
    InputTypeError
        (a ``TypeError``) for an argument of the wrong type.
    """
    check_types(
        "headroom",
        model=(model, (CostModel,)),
        load=(load, (FluidLoad,)),
        workload=(workload, (str,)),
        chunks=(chunks, (tuple, list)),
    )
    check_real(tpot_s, "headroom: tpot_s", 0, error=ServingError, above=True)
    for k, chunk in enumerate(chunks):
        check_int(chunk, f"headroom: chunks[{k}]", 1, MAX_COUNT, error=ServingError)
    if kv_tokens is not None:
        check_int(kv_tokens, "headroom: kv_tokens", 1, MAX_COUNT, error=ServingError)
    linear = _linear_terms(model)
    margin = check_margin(
        linear.margin_s if margin_s is None else margin_s, tpot_s, "fluid headroom: margin"
    )
    b, f_d, f_p = linear.base_s, linear.decode_fixed_s, linear.prefill_fixed_s
    a_d, a_p = linear.decode_per_seq_s, linear.prefill_per_token_s
    fixed = b + f_d + f_p
    deadline = tpot_s - margin
    if deadline <= fixed:
        raise ServingError(
            f"fluid headroom: TPOT {tpot_s * 1e3:g} ms less the margin {margin * 1e3:g} ms "
            f"leaves nothing beyond the fixed cost F = {fixed * 1e3:g} ms of an iteration"
        )
    p, steps = load.mean_prompt, load.mean_output - 1
    if steps <= 0:
        raise ServingError(
            "fluid headroom: every output is one token (no decodes, no per-token deadline)"
        )
    work = a_d * steps + a_p * p
    rate_star = (1 - fixed / deadline) / work
    chunk_star = rate_star * p * deadline
    rows = []
    for chunk in chunks:
        rows.append(_fixed_chunk(linear, load, deadline, chunk, kv_tokens))
    best_rps, best_share = _best_rate(linear, load, deadline, None)
    kv_rate = kv_share = math.nan
    if kv_tokens is not None:
        kv_rate, kv_share = _best_rate(linear, load, deadline, kv_tokens)
    return Headroom(
        hardware=hardware_of(model),
        cost_model=model.name,
        workload=workload,
        tpot_s=tpot_s,
        margin_s=margin,
        load=load,
        fixed_s=fixed,
        per_decode_s=a_d,
        per_prefill_token_s=a_p,
        rate_star_rps=rate_star,
        chunk_star=chunk_star,
        fixed=tuple(rows),
        kv_in_use_at_star=rate_star * deadline * load.kv_moment,
        best_rps=best_rps,
        best_prefill_share=best_share,
        kv_tokens=kv_tokens,
        kv_bound_rps=kv_rate,
        kv_bound_prefill_share=kv_share,
    )
