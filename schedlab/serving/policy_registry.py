"""The named policies: how each is built from its spelling (``NAME`` or ``NAME:ARG``)
and what of a run it reads.

:func:`make_policy` builds a policy by name from the registry :data:`POLICIES` of
:class:`PolicySpec`; :func:`register_policy` adds one, and an installed package adds one
with a :class:`PolicySpec` in the entry-point group :data:`ENTRY_POINTS`. The policies
themselves are in :mod:`schedlab.serving.policies`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from schedlab.arguments_check import check_type, check_types
from schedlab.errors import ServingError, UnknownNameError
from schedlab.registry import Registry
from schedlab.serving.cost_model import CostModel
from schedlab.serving.policies import (
    KV_POLICY_NAMES,
    Policy,
    PolicyContext,
    SangamPolicy,
    SLOWeaveKVPolicy,
    SLOWeavePolicy,
    TokenQuotaPolicy,
    slo_token_budget,
)
from schedlab.serving.prediction import Estimate
from schedlab.serving.prefill_replay import PrefillReplay, replay_end_s, sangam_prefill_end_s

__all__ = [
    "BUILTIN_POLICIES",
    "ENTRY_POINTS",
    "POLICIES",
    "PolicyFactory",
    "PolicySpec",
    "PrefillEnd",
    "get_policy",
    "make_policy",
    "policy_names",
    "register_policy",
]


def _int_arg(spec: str, arg: str | None, default: Callable[[], int]) -> int:
    if arg is None:
        return default()
    try:
        value = int(arg)
    except ValueError:
        raise ServingError(
            f"policy {spec!r}: expected an integer after ':', got {arg!r}"
        ) from None
    if value < 1:
        raise ServingError(f"policy {spec!r}: the number after ':' must be >= 1, got {value}")
    return value


def _no_arg(spec: str, arg: str | None) -> None:
    if arg is not None:
        raise ServingError(f"policy {spec!r}: takes no ':' argument")


def _whole_prefill(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
    _no_arg(spec, arg)
    return TokenQuotaPolicy("whole-prefill", whole=True)


def _fixed(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
    if arg is None:
        raise ServingError(f"policy {spec!r}: give the chunk size, e.g. fixed:512")
    size = _int_arg(spec, arg, lambda: 0)
    return TokenQuotaPolicy(f"fixed:{size}", prefill_tokens=size)


def _vllm(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
    _no_arg(spec, arg)
    return TokenQuotaPolicy("vllm")


def _sarathi(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
    tau = _int_arg(spec, arg, lambda: slo_token_budget(ctx.model, ctx.tpot_s, ctx.config))
    return TokenQuotaPolicy(f"sarathi:{tau}", batch_tokens=tau)


def _sloweave(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
    c_max = _int_arg(spec, arg, lambda: 4096)
    return SLOWeavePolicy(ctx.model, ctx.tpot_s, c_max=c_max, margin_s=ctx.margin_s)


def _sloweave_kv_planning(estimate: Estimate) -> PolicyFactory:
    """The factory of ``sloweave-kv`` planning with ``estimate``."""

    def factory(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
        c_max = _int_arg(spec, arg, lambda: 4096)
        return SLOWeaveKVPolicy(
            ctx.model, ctx.tpot_s, c_max=c_max, margin_s=ctx.margin_s, estimate=estimate
        )

    return factory


def _sangam(spec: str, arg: str | None, ctx: PolicyContext) -> Policy:
    quantum = _int_arg(spec, arg, lambda: slo_token_budget(ctx.model, ctx.tpot_s, ctx.config))
    return SangamPolicy(quantum)


#: A policy factory: ``factory(spec, argument after ':' or None, context) -> Policy``.
PolicyFactory = Callable[[str, str | None, PolicyContext], Policy]

#: A policy's estimate of a prompt's prefill end on a node (:attr:`PolicySpec.prefill_end`).
PrefillEnd = Callable[[PrefillReplay, CostModel], float]


@dataclass(frozen=True)
class PolicySpec:
    """A named policy: how it is built and what of the run it reads.

    The command line, :func:`~schedlab.serving.cluster.is_sloweave` and
    :attr:`~schedlab.serving.cluster.Cluster.reads_predictions` read these flags: an
    option such as ``--margin`` or ``--prediction-cv`` is refused when no policy (or
    router) of the run reads it, since it could not change the run.

    Attributes
    ----------
    factory
        ``factory(spec, argument after ':' or None, context) -> Policy``.
    argument
        How its ``:`` argument is spelt in listings: ``"[:CMAX]"`` (optional),
        ``":C"`` (required), or ``""`` (none).
    reads_margin
        Whether it reads :attr:`PolicyContext.margin_s` (SLOWeave's margin).
    reads_predictions
        Whether it reads predicted output lengths
        (:meth:`~schedlab.serving.view.EngineView.projected_kv_peak`).
    deadline_safe
        Whether its chunks keep every running decode's next-token deadline as SLOWeave's
        do (:func:`~schedlab.serving.sloweave.choose_chunk`): the decode-node policy the
        ``deflect`` router's estimate and guarantee assume (``proofs/deflect.md``).
    prefill_end
        ``prefill_end(job, model) -> seconds``: when it would finish prefilling the prompt
        of a :class:`~schedlab.serving.prefill_replay.PrefillReplay` on a node, by its own
        rule (``inf``: never; :mod:`schedlab.serving.prefill_replay`), which routers that
        send whole requests to decode nodes estimate with; ``None``: it offers none, and
        those routers send it nothing whole.
    in_vllm
        Whether vLLM's own scheduler can run it through
        :class:`~schedlab.integrations.vllm.sloweave.SLOWeaveScheduler`: its plans are ones
        vLLM's token budget reproduces (the partial prefill, then waiting requests first
        come first served, each chunk as large as it may be, stopping at the first that
        does not complete its request), so a step vLLM schedules with the plan's budget
        is the planned one or a smaller one.
    """

    factory: PolicyFactory
    argument: str = ""
    reads_margin: bool = False
    reads_predictions: bool = False
    deadline_safe: bool = False
    prefill_end: PrefillEnd | None = None
    in_vllm: bool = False

    def __post_init__(self) -> None:
        check_types(
            "PolicySpec",
            factory=(self.factory, (Callable,)),
            argument=(self.argument, (str,)),
            reads_margin=(self.reads_margin, (bool,)),
            reads_predictions=(self.reads_predictions, (bool,)),
            deadline_safe=(self.deadline_safe, (bool,)),
            prefill_end=(self.prefill_end, (Callable, type(None))),
            in_vllm=(self.in_vllm, (bool,)),
        )


#: The built-in policies, by name.
BUILTIN_POLICIES: dict[str, PolicySpec] = {
    "whole-prefill": PolicySpec(_whole_prefill),
    "fixed": PolicySpec(_fixed, ":C"),
    "vllm": PolicySpec(_vllm),
    "sarathi": PolicySpec(_sarathi, "[:TAU]"),
    "sloweave": PolicySpec(
        _sloweave,
        "[:CMAX]",
        reads_margin=True,
        deadline_safe=True,
        prefill_end=replay_end_s,
        in_vllm=True,
    ),
    **{
        name: PolicySpec(
            _sloweave_kv_planning(estimate),
            "[:CMAX]",
            reads_margin=True,
            reads_predictions=True,
            deadline_safe=True,
            prefill_end=replay_end_s,
            in_vllm=estimate == "point",  # sloweave-kv (the others untried in vLLM)
        )
        for estimate, name in KV_POLICY_NAMES.items()
    },
    "sangam": PolicySpec(_sangam, "[:Q]", prefill_end=sangam_prefill_end_s),
}

#: Entry-point group of installed policies: ``name = "module:POLICY_SPEC"``.
ENTRY_POINTS = "schedlab.policies"

#: Every policy by name: the built-ins, those added by :func:`register_policy` and the
#: installed ones (:class:`~schedlab.registry.Registry`).
POLICIES: Registry[PolicySpec] = Registry(
    "policy", PolicySpec, ENTRY_POINTS, BUILTIN_POLICIES.items()
)


def register_policy(name: str, spec: PolicySpec) -> None:
    """Add a policy under ``name`` (spelt ``name`` or ``name:ARG`` in :func:`make_policy`;
    ``POLICIES.register(name, spec)``).

    Raises
    ------
    RegistrationError
        If the name is taken, empty or contains ``':'``.
    InputTypeError
        (a ``TypeError``) for a ``name`` that is no string, a ``spec`` that is no
        :class:`PolicySpec`.
    """
    check_types("register_policy", name=(name, (str,)), spec=(spec, (PolicySpec,)))
    POLICIES.register(name, spec)


def policy_names() -> tuple[str, ...]:
    """Spellings accepted by :func:`make_policy`: built-in, registered, then installed."""
    own = POLICIES.entries()
    return tuple(name + own[name].argument if name in own else name for name in POLICIES.names())


def get_policy(spec: str) -> PolicySpec:
    """The policy spelt ``spec`` (``NAME`` or ``NAME:ARG``), registered or installed.

    Raises
    ------
    UnknownNameError
        If no policy is named ``NAME`` (the message lists the spellings).
    InputTypeError
        For an installed entry that is not a :class:`PolicySpec`, a ``spec`` that is no
        string.
    """
    name = check_type(spec, (str,), "policy").partition(":")[0]
    if name not in POLICIES:
        raise UnknownNameError("policy", spec, policy_names())
    return POLICIES.get(name)


def make_policy(spec: str, ctx: PolicyContext) -> Policy:
    """Build a fresh policy from its spelling (``NAME`` or ``NAME:INT``).

    Raises
    ------
    UnknownNameError
        If no policy is named ``NAME`` (:func:`get_policy`).
    ServingError
        On a bad argument, or a non-monotone cost model for ``sloweave``/``sarathi``/``sangam``.
    InputTypeError
        (a ``TypeError``) for a ``spec`` that is no string, a ``ctx`` that is no
        :class:`PolicyContext`.
    """
    found = get_policy(spec)
    check_type(ctx, (PolicyContext,), "make_policy: ctx")
    _, sep, arg = spec.partition(":")
    return found.factory(spec, arg if sep else None, ctx)
