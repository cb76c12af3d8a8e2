r"""When a node's policy would finish prefilling a new prompt: SLOWeave's schedule of the
node's prefill queue replayed, and Sangam's one iteration (the ``deflect`` and ``hybrid``
routers, :func:`~schedlab.serving.routers.prefill_end_s`). A policy offers its estimate as
:attr:`~schedlab.serving.policy_registry.PolicySpec.prefill_end`, so a router asks the node's
policy and never its name.

A decode node running a SLOWeave policy (``sloweave:C``, ``sloweave-kv:C``) prefills its
waiting queue and then a new prompt (last in the queue) in iterations back to back from
``start_s``. In each iteration the queue, then the prompt, get SLOWeave's chunks in turn
(:func:`~schedlab.serving.sloweave.deadline_safe_chunk`, budget :math:`D - \delta`: the
decodes run back to back, so each deadline is the iteration's start plus the TPOT
:math:`D`; the chunks before fixed; capped by :math:`C` and by the token budget less the
decodes), until a chunk is partial or 0. A request whose prompt completes decodes from
the next iteration on; every decode is one token longer per iteration; a running decode
leaves after its predicted tokens (the releases; the longest and shortest KV stay as they
were, for want of the rest). The replay ends with the iteration in which the prompt's
last chunk runs; it is ``inf`` if an iteration gives the queue's head nothing, and, when
the caller only needs to know whether the end beats a time, as soon as it cannot
(:attr:`PrefillReplay.beat_s`).

:func:`replay_end_s` runs the cost model's own replay where it has one (the optional
``replay_prefill_s`` of :class:`~schedlab.serving.cost_model.CostModel`: a compiled model
replays in one call), otherwise :func:`sloweave_replay_s`, the reference, one
chunk search at a time.

Sangam (:class:`~schedlab.serving.policies.SangamPolicy`, deficit budget, whole prompts)
runs the prompt whole in the next iteration with everything queued, which must be one
token each (a transferred request's last): :func:`sangam_prefill_end_s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from schedlab.errors import ServingError
from schedlab.serving.cost_model import BatchShape, Chunk, CostModel, batch_time
from schedlab.serving.sloweave import SLOWeaveState, deadline_safe_chunk

__all__ = ["PrefillReplay", "replay_end_s", "sangam_prefill_end_s", "sloweave_replay_s"]


@dataclass(frozen=True, slots=True)
class PrefillReplay:
    """One replay: a node's state and the prompt (module docstring).

    Attributes
    ----------
    decodes
        The node's running decodes as its next iteration sees them (no chunks).
    queue
        ``(tokens left, tokens done)`` of each request ahead that is not decoding, in the
        policy's order, then the prompt's ``(P, 0)``.
    releases
        ``(iterations left, blocks, final KV tokens)`` of each running decode, sorted:
        it leaves after emitting its predicted tokens.
    start_s
        When the first iteration starts.
    tpot_s, margin_s
        SLOWeave's TPOT target :math:`D` and margin :math:`\\delta`.
    token_budget, chunk_cap
        The engine's tokens per iteration, and the policy's cap on an iteration's chunk
        tokens: SLOWeave's :math:`C_{\\max}`, Sangam's quantum.
    since_s, beat_s
        The replay gives up (``inf``) once an iteration ends at a time :math:`t` with
        :math:`t -` ``since_s`` :math:`\\ge` ``beat_s``: the prompt cannot end sooner
        (the caller needs only an end less than ``beat_s`` after ``since_s``; default:
        never).
    """

    decodes: BatchShape
    queue: tuple[Chunk, ...]
    releases: tuple[tuple[int, int, int], ...]
    start_s: float
    tpot_s: float
    margin_s: float
    token_budget: int
    chunk_cap: int
    since_s: float = 0.0
    beat_s: float = math.inf

    def __post_init__(self) -> None:
        if not self.queue or self.queue[-1][0] < 1:
            raise ServingError(
                "prefill replay: the queue must end with the prompt (1 token or more)"
            )
        if set(map(len, self.queue)) != {2} or set(map(len, self.releases)) - {3}:
            raise ServingError(
                "prefill replay: queue rows are (tokens left, tokens done) and releases "
                "(iterations left, blocks, final KV tokens)"
            )
        if len(self.releases) > self.decodes.n_decode:
            raise ServingError(
                f"prefill replay: {len(self.releases)} releases of {self.decodes.n_decode} decodes"
            )
        if self.token_budget < 1 or self.chunk_cap < 1:
            raise ServingError("prefill replay: the token budget and C_max must be 1 or more")
        if not (self.tpot_s > 0 and self.margin_s >= 0):
            raise ServingError("prefill replay: the TPOT must be positive and the margin >= 0")

    def hopeless(self, t: float) -> bool:
        """Whether a prompt ending at ``t`` or later is past giving up."""
        return t - self.since_s >= self.beat_s


def replay_end_s(job: PrefillReplay, model: CostModel) -> float:
    """The prompt's predicted end: the model's own replay (``replay_prefill_s``) if it has
    one, else :func:`sloweave_replay_s`."""
    own = getattr(model, "replay_prefill_s", None)
    if own is not None:
        return float(own(job))
    return sloweave_replay_s(job, model)


def sangam_prefill_end_s(job: PrefillReplay, model: CostModel) -> float:
    """The end of the one iteration in which Sangam would run the prompt whole, behind
    queued requests of one token each (module docstring): with decodes, it must fit one
    iteration's deficit, :math:`P + k \\le q - n` for :math:`k` queued, and that batch's
    :math:`\\hat T + \\delta \\le D`; it must fit the token budget. ``inf`` otherwise."""
    queued, (prompt, _) = job.queue[:-1], job.queue[-1]
    if any(left != 1 for left, _ in queued):
        return math.inf
    decodes, n = job.decodes, job.decodes.n_decode
    chunks = (*((1, prior) for _, prior in queued), (prompt, 0))
    seconds = batch_time(model, replace(decodes, chunks=chunks))
    over = prompt + len(chunks) - 1 > job.chunk_cap - n or seconds + job.margin_s > job.tpot_s
    if (n and over) or prompt + n + len(chunks) - 1 > job.token_budget:
        return math.inf
    return job.start_s + seconds


def sloweave_replay_s(job: PrefillReplay, model: CostModel) -> float:
    """The replay of the module docstring, in Python (the reference)."""
    decodes, tpot, margin = job.decodes, job.tpot_s, job.margin_s
    n, kv, high, low = (
        decodes.n_decode,
        decodes.decode_kv,
        decodes.decode_kv_max,
        decodes.decode_kv_min,
    )
    queue = list(job.queue)
    for rest, prior in queue:
        if rest == 0:  # its prompt completes in the running iteration: it decodes next
            kv += prior + 1
            high = prior + 1 if high is None else max(high, prior + 1)
            low = prior + 1 if low is None else min(low, prior + 1)
            n += 1
    queue = [item for item in queue if item[0]]
    finishing = iter(job.releases)
    upcoming = next(finishing, None)
    t = job.start_s  # as the engine's clock: each iteration starts where the last ended
    m = 0  # iterations from the next one
    while True:
        while upcoming is not None and upcoming[0] <= m:  # it emitted its last token
            n -= 1
            kv -= upcoming[2] + m - upcoming[0] + 1
            upcoming = next(finishing, None)
        fixed: tuple[Chunk, ...] = ()
        left, chunks_left = job.token_budget - n, job.chunk_cap
        joined: list[int] = []
        for k, (rest, prior) in enumerate(queue):
            state = SLOWeaveState(t, t + tpot, n, kv, rest, prior, fixed, high, low)
            decision = deadline_safe_chunk(
                state, model, c_max=chunks_left, margin_s=margin, cap=left
            )
            c = decision.chunk
            if c == 0:
                break
            fixed = (*fixed, (c, prior))
            queue[k] = (rest - c, prior + c)
            left -= c
            chunks_left -= c
            if c == rest:
                joined.append(prior + c)
            if c < rest or chunks_left == 0 or left <= 0:
                break
        if not fixed:
            return math.inf
        t = t + batch_time(model, BatchShape(n, kv, fixed, high, low))
        if queue[-1][0] == 0:
            return t
        if job.hopeless(t):
            return math.inf
        queue = [item for item in queue if item[0]]
        kv += n  # every decode is one token longer in the next iteration
        high = None if high is None else high + 1
        low = None if low is None else low + 1
        for size in joined:  # a completed prompt decodes from the next iteration on
            kv += size + 1
            high = size + 1 if high is None else max(high, size + 1)
            low = size + 1 if low is None else min(low, size + 1)
        n += len(joined)
        m += 1
