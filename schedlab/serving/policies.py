r"""Batch-formation policies: which prefill chunks join the running decodes.

Every policy here keeps vLLM's decode-first rule: each iteration carries *every* running
decode (one token each; :class:`~schedlab.serving.engine_config.EngineConfig` guarantees
``max_num_batched_tokens >= max_num_seqs``), and the policy only decides the prefill
chunks, taken first-come first-served over the prefill candidates (admitted requests whose
prompt is partly prefilled, in admission order, then the waiting queue) of the engine's
view (:mod:`schedlab.serving.view`). A policy stops at the first candidate it cannot serve
(head-of-line order, as vLLM's scheduler does: ``vllm/v1/core/sched/scheduler.py``
``break``s at a waiting request that does not fit, lines 563–850): a waiting request
that fails the admission gate, or whose chunk does not fit in the free blocks, or that
would need a seat when none is free.

============================  ==============================================================
name                          per-iteration prefill rule
============================  ==============================================================
``whole-prefill``             whole prompts only, while they fit the token budget
``fixed:C``                   at most ``C`` prefill tokens, chunked
``vllm``                      prefill fills the token budget left after decodes
``sarathi[:TAU]``             prefill fills a static token budget ``TAU`` (counting decodes)
``sloweave[:CMAX]``           largest deadline-safe chunks (binary search), at most ``CMAX``
``sloweave-kv[:CMAX]``        ``sloweave``, admitting a request only while the projected KV
                              peak at predicted outputs fits the cache
``sloweave-kv-amin[:CMAX]``   ``sloweave-kv`` planning each output from its predicted
                              interval's lower end, refined as tokens are generated
``sloweave-kv-amax[:CMAX]``   the same from the interval's upper end
``sangam[:Q]``                whole prompts, when a deficit counter growing by ``Q - n``
                              per iteration covers them
============================  ==============================================================

Policies are built by name (:mod:`schedlab.serving.policy_registry`); a custom policy is
any object satisfying :class:`Policy`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from schedlab.arguments_check import check_real, check_types
from schedlab.errors import ServingError
from schedlab.serving.cost_model import Chunk, CostModel, require_monotone
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.prediction import ESTIMATES, Estimate
from schedlab.serving.sloweave import SLOWeaveState, check_margin, deadline_safe_chunk
from schedlab.serving.view import EngineView, Plan, RequestView, reserved_tokens

__all__ = [
    "KV_POLICY_NAMES",
    "Policy",
    "PolicyContext",
    "SLOWeaveKVPolicy",
    "SLOWeavePolicy",
    "SangamPolicy",
    "TokenQuotaPolicy",
    "slo_token_budget",
]


class Policy(Protocol):
    """Chooses the prefill chunks of each iteration."""

    @property
    def name(self) -> str: ...
    @property
    def chunked(self) -> bool:
        """``False`` for policies that only prefill whole prompts (may exceed the budget)."""
        ...

    @property
    def stats(self) -> dict[str, int]:
        """Policy-specific counters reported with the simulation summary."""
        ...

    def plan(self, view: EngineView) -> Plan: ...


@dataclass(frozen=True)
class PolicyContext:
    r"""What policies are built from.

    Attributes
    ----------
    model
        The *predicted* cost model (the one a real scheduler would hold).
    config
        Engine limits.
    tpot_s
        TPOT target :math:`D` (seconds), used by ``sarathi``, ``sloweave``, ``sangam``.
    margin_s
        SLOWeave margin :math:`\delta`; ``None`` takes ``model.margin_s``.

    Raises
    ------
    InputTypeError, ServingError
        For a field of the wrong type, a TPOT that is not finite and positive (the
        policies that read the margin check it: :func:`~.sloweave.check_margin`).
    """

    model: CostModel
    config: EngineConfig
    tpot_s: float
    margin_s: float | None = None

    def __post_init__(self) -> None:
        check_types(
            "policy context",
            model=(self.model, (CostModel,)),
            config=(self.config, (EngineConfig,)),
        )
        check_real(self.tpot_s, "policy context: tpot_s", 0, error=ServingError, above=True)


def _fill(view: EngineView, quota: int, *, whole: bool, head_limit: int | None = None) -> Plan:
    """First-come first-served prefill of at most ``quota`` tokens, as vLLM schedules.

    An admitted, partly prefilled request gets ``min(left, quota)`` tokens, whatever the
    free blocks: the engine preempts the newest requests if they do not suffice, as vLLM's
    running phase does (``scheduler.py`` lines 461–510). A waiting request is admitted
    with the same chunk only if it passes the admission gate, a seat is free and the
    chunk's blocks fit; otherwise the fill stops (vLLM ``break``s; lines 732–764). Each
    chunk is taken (:meth:`~schedlab.serving.view.EngineView.take`) before the next
    candidate is looked at, so it sees the blocks earlier chunks cached or evicted. With
    ``whole`` only complete remainders are taken, and the first one may exceed the quota
    (a prompt longer than the whole budget could never run otherwise), but not
    ``head_limit``.
    """
    plan: Plan = []
    for req in view.prefill_candidates():
        if quota <= 0:
            break
        if not req.admitted and (
            view.free_seats == 0 or not view.admissible(req, view.free_blocks)
        ):
            break
        remaining = req.target - req.done
        if whole:
            if remaining > quota and plan:
                break
            if head_limit is not None and remaining > head_limit:
                break
            chunk = remaining
        else:
            chunk = min(remaining, quota)
        if not req.admitted and view.chunk_blocks(req, chunk) > view.free_blocks:
            break
        plan.append((req, chunk))
        if not view.take(req, chunk):
            break
        quota -= chunk
    return plan


class TokenQuotaPolicy:
    r"""Decode-first batching with a per-iteration prefill quota.

    With ``n`` running decodes and engine budget :math:`T_{\max}`
    (``max_num_batched_tokens``) the prefill quota of an iteration is

    .. math::

        q = \min\bigl(T_{\max} - n,\; \tau - n,\; C\bigr),

    a missing term being :math:`+\infty`. Four named policies are instances:

    * ``whole-prefill`` (no :math:`\tau`, no :math:`C`, whole prompts): iteration-level
      scheduling without chunking, as in Orca (Yu et al., OSDI 2022) and vLLM with chunked
      prefill off.
    * ``fixed:C``: at most :math:`C` prefill tokens per iteration, the fixed chunk size of
      SARATHI (Agrawal et al., arXiv 2308.16369) and vLLM's ``long_prefill_token_threshold``.
    * ``vllm``: decodes first, then prefill chunks up to the engine's token budget, as vLLM
      v1's scheduler does with chunked prefill (vLLM docs, "Optimization and Tuning:
      chunked prefill").
    * ``sarathi[:TAU]``: stall-free batching with a token budget :math:`\tau` counting
      decodes and prefill tokens (Agrawal et al., "Taming Throughput-Latency Tradeoff in
      LLM Inference with Sarathi-Serve", OSDI 2024). Sarathi-Serve picks :math:`\tau` once,
      by profiling, so that an iteration of :math:`\tau` tokens meets the TPOT target; by
      default we derive it from the cost model with :func:`slo_token_budget`.
    """

    def __init__(
        self,
        name: str,
        *,
        prefill_tokens: int | None = None,
        batch_tokens: int | None = None,
        whole: bool = False,
    ) -> None:
        for label, value in (("prefill tokens", prefill_tokens), ("token budget", batch_tokens)):
            if value is not None and value < 1:
                raise ServingError(f"policy {name!r}: {label} must be >= 1, got {value}")
        self._name = name
        self._prefill_tokens = prefill_tokens
        self._batch_tokens = batch_tokens
        self._whole = whole

    @property
    def name(self) -> str:
        return self._name

    @property
    def chunked(self) -> bool:
        return not self._whole

    @property
    def stats(self) -> dict[str, int]:
        return {}

    def plan(self, view: EngineView) -> Plan:
        if not view.has_prefill_work:
            return []
        n = view.n_decode
        quota = view.config.max_num_batched_tokens - n
        if self._batch_tokens is not None:
            quota = min(quota, self._batch_tokens - n)
        if self._prefill_tokens is not None:
            quota = min(quota, self._prefill_tokens)
        return _fill(view, quota, whole=self._whole)


class SLOWeavePolicy:
    r"""SLOWeave: the largest deadline-safe chunks (arXiv 2609.07883).

    The rule is that of ``docs/design.md``, section "SLOWeave".

    All running decodes produced their latest token at the end of the previous iteration,
    so :math:`\min_i d_i = \ell + D` with :math:`\ell` that time. The first candidate gets
    :math:`c^*` of :func:`~schedlab.serving.sloweave.choose_chunk`, capped by the free KV
    blocks, the token budget :math:`T_{\max} - n` and :math:`C_{\max}`; when :math:`c^*`
    finishes its prompt, the next candidate is sized the same way with the chunks chosen
    so far fixed in the batch, until the caps or the budget run out. (``docs/design.md`` states the
    rule for one chunk; continuing to the next prompt is our extension and is safe by the
    same argument, since each step keeps the whole batch within the budget.)

    The constructor refuses a cost model that is not monotone in the chunk length
    (:func:`~schedlab.serving.cost_model.require_monotone`). ``stats["decode_only_misses"]``
    counts iterations with prefill work in which even the decode-only batch misses the
    budget (``docs/design.md``: run decode-only and record the miss).
    """

    def __init__(
        self, model: CostModel, tpot_s: float, *, c_max: int = 4096, margin_s: float | None = None
    ) -> None:
        if c_max < 1:
            raise ServingError(f"policy 'sloweave': C_max must be >= 1, got {c_max}")
        require_monotone(model, c_max=c_max, user="policy 'sloweave'")
        self._model = model
        self._tpot_s = tpot_s
        self._c_max = c_max
        self._margin_s = check_margin(
            model.margin_s if margin_s is None else margin_s, tpot_s, "policy 'sloweave': margin"
        )
        self._misses = 0

    @property
    def name(self) -> str:
        return f"sloweave:{self._c_max}"

    @property
    def chunked(self) -> bool:
        return True

    @property
    def stats(self) -> dict[str, int]:
        return {"decode_only_misses": self._misses}

    def plan(self, view: EngineView) -> Plan:
        if not view.has_prefill_work:
            return []
        config = view.config
        n, kv = view.n_decode, view.decode_kv
        deadline = view.last_token_s + self._tpot_s
        tokens_left = config.max_num_batched_tokens - n
        chunks_left = self._c_max
        fixed: tuple[Chunk, ...] = ()
        plan: Plan = []
        for req in view.prefill_candidates():
            free = view.free_blocks
            if not req.admitted and (view.free_seats == 0 or not view.admissible(req, free)):
                break
            if not req.admitted and not self._may_admit(view, req):
                break
            remaining = req.target - req.done
            state = SLOWeaveState(
                view.now_s,
                deadline,
                n,
                kv,
                remaining,
                req.done,
                fixed,
                view.decode_kv_max,
                view.decode_kv_min,
            )
            cap = min(tokens_left, view.max_chunk(req, free))
            decision = deadline_safe_chunk(
                state, self._model, c_max=chunks_left, margin_s=self._margin_s, cap=cap
            )
            if decision.deadline_miss:
                self._misses += 1
            chunk = decision.chunk
            if chunk == 0:
                break
            plan.append((req, chunk))
            fixed = (*fixed, (chunk, req.done))
            if not view.take(req, chunk):
                break
            tokens_left -= chunk
            chunks_left -= chunk
            if chunk < remaining or chunks_left == 0 or tokens_left <= 0:
                break
        return plan

    def _may_admit(self, view: EngineView, request: RequestView) -> bool:
        """Whether a waiting request that passed the engine's gate may be admitted (plain
        SLOWeave: always; called at most once per admission, in plan order)."""
        return True


class SLOWeaveKVPolicy(SLOWeavePolicy):
    r"""SLOWeave's deadline-safe chunks with KV-safe admission (``sloweave-kv``).

    A waiting request is admitted only if, with it, the projected KV peak still fits the
    cache of :math:`M` tokens (``total_blocks * block_size``):

    .. math::

        \max_{k \ge 0} \Bigl[\sum_{\text{decodes},\, r_j > k} (h_j + k + B - 1)\Bigr]
        + \sum_{\text{prefilling}} B \lceil \hat f_j / B \rceil
        + B \lceil \hat f_{\text{new}} / B \rceil \le M,

    the decodes holding :math:`h_j` tokens with :math:`r_j` predicted iterations left, the
    requests still prefilling (the new one included) reserved at their predicted final
    size :math:`\hat f = P + \hat o - 1`
    (:meth:`~schedlab.serving.policy_view.PolicyView.projected_kv_peak`). It is the memory test of
    the offline MC-SF rule (Jaillet et al., arXiv 2502.07115: the running set stays within
    memory at every future completion), made safe for requests whose decoding starts at an
    unknown later iteration. The waiting queue is served first come first served, so a
    request that does not fit blocks the ones behind it.

    ``proofs/sloweave_kv.md`` shows that with exact predictions no request is ever
    preempted, and every decode's next-token deadline is kept in every iteration whose
    decode-only batch meets it. When predictions are wrong, a request that outlives its
    prediction is projected to finish after the current iteration, and if the cache runs
    out the engine preempts the newest request as vLLM does: a wrong prediction costs
    recomputation, never a stall. ``stats["kv_gated"]`` counts the scheduling passes in which
    the test held a request back (the engine may plan an iteration more than once, e.g.
    when asynchronous scheduling's lagged blocks are released; a later pass may then admit
    the request).

    ``estimate`` chooses what :math:`\hat o` is (:mod:`schedlab.serving.prediction`):
    the point prediction (``point``, the policy ``sloweave-kv``), or the lower
    (``a-min``, ``sloweave-kv-amin``) or upper end (``a-max``, ``sloweave-kv-amax``) of
    the predicted interval, each refined to :math:`\max(\hat o, g + 1)` once a request
    has emitted :math:`g` tokens (:func:`~schedlab.serving.prediction.refined_output`).
    With ``a-min`` the plan is optimistic, as Chen, Ye and Zhou's :math:`\mathcal
    A_{\min}` (arXiv 2508.14544): requests that outlive their lower ends grow the cache
    beyond the plan, and the engine's preemption by recompute evicts the newest.
    """

    def __init__(
        self,
        model: CostModel,
        tpot_s: float,
        *,
        c_max: int = 4096,
        margin_s: float | None = None,
        estimate: Estimate = "point",
    ) -> None:
        super().__init__(model, tpot_s, c_max=c_max, margin_s=margin_s)
        if estimate not in ESTIMATES:
            raise ServingError(
                f"policy 'sloweave-kv': estimate must be one of {', '.join(ESTIMATES)}, "
                f"got {estimate!r}"
            )
        self._estimate = estimate
        self._gated = 0
        self._projected = 0

    @property
    def name(self) -> str:
        return f"{KV_POLICY_NAMES[self._estimate]}:{self._c_max}"

    @property
    def stats(self) -> dict[str, int]:
        return {**super().stats, "kv_gated": self._gated}

    def plan(self, view: EngineView) -> Plan:
        self._projected = -1  # computed at the first waiting candidate of this plan
        return super().plan(view)

    def _may_admit(self, view: EngineView, request: RequestView) -> bool:
        config = view.config
        if self._projected < 0:
            self._projected = view.projected_kv_peak(self._estimate)
        need = reserved_tokens(config, request, self._estimate)
        if self._projected + need > config.total_blocks * config.block_size:
            self._gated += 1
            return False
        self._projected += need
        return True


class SangamPolicy:
    r"""Deficit token budget with whole prompts (Sangam, as ``docs/design.md`` names it).

    The Sangam paper was not available to us; this formalisation is ours. A deficit
    counter :math:`\Delta` (deficit round robin, Shreedhar and Varghese, SIGCOMM 1995)
    grows by :math:`(Q - n)^+` tokens in every iteration that has prefill work, ``n``
    being the running decodes; the waiting prompts are admitted whole, first-come
    first-served, while :math:`\Delta` covers the next one (:math:`\Delta \mathrel{-}= L`).
    When nothing waits the counter resets to 0, so credit is not hoarded across idle
    periods; when no decode runs the head prompt is admitted regardless (no deadline to
    protect). A long prompt thus waits until the light iterations before it have paid for
    its heavy one. The default quantum :math:`Q` is Sarathi's SLO-derived budget
    (:func:`slo_token_budget`).
    """

    def __init__(self, quantum: int) -> None:
        if quantum < 1:
            raise ServingError(f"policy 'sangam': quantum must be >= 1, got {quantum}")
        self._quantum = quantum
        self._deficit = 0

    @property
    def name(self) -> str:
        return f"sangam:{self._quantum}"

    @property
    def chunked(self) -> bool:
        return False

    @property
    def stats(self) -> dict[str, int]:
        return {}

    def plan(self, view: EngineView) -> Plan:
        if not view.has_prefill_work:
            self._deficit = 0
            return []
        n = view.n_decode
        self._deficit += max(0, self._quantum - n)
        if n == 0:
            head = _fill(view, 1, whole=True)
            self._deficit = max(0, self._deficit - sum(c for _, c in head))
            return head
        # a head that alone exceeds the deficit waits
        quota = min(self._deficit, view.config.max_num_batched_tokens - n)
        plan = _fill(view, quota, whole=True, head_limit=self._deficit)
        self._deficit -= sum(c for _, c in plan)
        return plan


def slo_token_budget(model: CostModel, tpot_s: float, config: EngineConfig) -> int:
    r"""Static token budget that keeps every iteration within a TPOT target.

    Sarathi-Serve fixes its token budget once per deployment, by profiling how long a
    forward pass of a given number of tokens takes and keeping the largest count that
    meets the TBT target (Agrawal et al., OSDI 2024, section 4.3; their runs use 512 for a
    strict and 2048 for a relaxed target). A batch of :math:`\tau` tokens may be any mix of
    :math:`n` decodes and :math:`\tau - n` prefill tokens, so the budget must hold for every
    mix that can occur. A mix can occur when its decodes alone meet the target, which bounds
    :math:`n` by the cost model and the target, never by ``max_num_seqs``:

    .. math::

        n_D = \max\{n : T(n, \varnothing) \le D\}, \qquad
        \tau = \max\{\tau \le T_{\max} : T(n, \tau - n) \le D
               \ \text{for all}\ 0 \le n \le \min(n_D, \tau)\},

    with no KV context (contexts are unknown when the budget is fixed) and :math:`T_{\max}`
    = ``max_num_batched_tokens``. The left side grows with :math:`\tau` for a model
    monotone in the chunk length, so :math:`\tau` is found by bisection. (Capping :math:`n`
    by ``max_num_seqs`` instead, as this function once did, made the budget at 25 ms jump
    from 425 to 1,801 tokens when ``max_num_seqs`` went from 512 to 256.)

    Raises
    ------
    ServingError
        If even :math:`\tau = 1` misses the target.
    """
    require_monotone(model, user="token budget from the TPOT target")
    limit = config.max_num_batched_tokens
    n_decodes = 0  # n_D, found by counting up (at most the engine's token budget)
    while n_decodes < limit and model.iteration_time(n_decodes + 1, 0, ()) <= tpot_s:
        n_decodes += 1

    def meets(tau: int) -> bool:
        for n in range(min(n_decodes, tau) + 1):
            chunks = ((tau - n, 0),) if tau > n else ()
            if not model.iteration_time(n, 0, chunks) <= tpot_s:
                return False
        return True

    if not meets(1):
        raise ServingError(
            f"token budget: cost model {model.name!r} misses TPOT {tpot_s * 1e3:g} ms "
            "even with a one-token batch; give the budget explicitly (e.g. sarathi:512)"
        )
    lo, hi = 1, limit + 1  # meets(lo); all tau >= hi fail or exceed
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo


#: The name of ``sloweave-kv`` planning with each estimate.
KV_POLICY_NAMES: dict[Estimate, str] = {
    "point": "sloweave-kv",
    "a-min": "sloweave-kv-amin",
    "a-max": "sloweave-kv-amax",
}
