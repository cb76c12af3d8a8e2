r"""SLOWeave's per-step guarantee, checked on a recorded run: :func:`check_deadlines`.

Each running decode :math:`i` has the next-token deadline :math:`d_i = \ell_i + D`, its
last token's time plus the TPOT target :math:`D` (``docs/design.md``, "SLOWeave"). An
iteration starting at :math:`s` whose batch :math:`b` carries prefill chunks besides its
decodes :math:`I` must be predicted to end in time,

.. math::

    \hat T(b) + \delta \;\le\; \min_{i \in I} d_i - s,

with :math:`\hat T` the predicted cost model the policy planned with and
:math:`\delta \ge 0` SLOWeave's margin. An iteration of decodes alone is exempt: when even
it misses the budget, SLOWeave runs it and records the miss. ``proofs/sloweave.md``
proves the guarantee for :func:`~schedlab.serving.sloweave.choose_chunk` (and
``proofs/sloweave_kv.md`` for ``sloweave-kv``); every deadline-aware policy can be held
to it. With exact predictions (no noise, no separate actual cost model) the iteration
lasts :math:`\hat T(b)`, so no decode's token gap exceeds :math:`D - \delta` in an
iteration that carries prefill work.

The check uses only the run's log: the decodes, start and batch shape of each iteration
(:class:`~schedlab.serving.iteration.BatchRecord`) and each request's token times (its
record's segments), so it holds any policy to the guarantee, not only SLOWeave.
"""

from __future__ import annotations

import bisect

from schedlab.serving.cost_model import batch_time
from schedlab.testing.runs import ServingRun
from schedlab.testing.violations import DeadlineViolation

__all__ = ["check_deadlines"]

#: Slack, relative to :math:`D`, for the rounding of the policy's own sum of times.
RELATIVE_TOLERANCE = 1e-9


def check_deadlines(run: ServingRun) -> None:
    r"""Check SLOWeave's per-step guarantee (module docstring) on every iteration of ``run``.

    The TPOT target :math:`D` is ``run.scenario.slo.tpot_s``, the predicted model
    ``run.scenario.predicted()``, and the margin ``run.scenario.margin_s`` (``None``: the
    model's ``margin_s``).

    Raises
    ------
    DeadlineViolation
        Naming the replica, the iteration, its start, the decode with the earliest
        deadline and the predicted end, for the first iteration that breaks it.
    """
    __tracebackhide__ = True
    scenario, engine = run.scenario, run.run
    model = scenario.predicted()
    tpot = scenario.slo.tpot_s
    margin = model.margin_s if scenario.margin_s is None else scenario.margin_s
    tolerance = RELATIVE_TOLERANCE * tpot
    token_times = [
        [
            float(t)
            for first, last in record.segments
            for t in engine.iteration_end_s[first : last + 1]
        ]
        for record in engine.records
    ]
    counts = engine.replica_iterations or (len(engine.batches),)
    offset = 0
    for node, count in enumerate(counts):
        for number, batch in enumerate(engine.batches[offset : offset + count]):
            if not batch.decodes or not batch.chunks:
                continue
            here = f"replica {node} iteration {number} (start {batch.start_s:.9g} s)"
            if batch.shape is None:
                raise DeadlineViolation(f"{here}: no batch shape was recorded")
            last = {}
            for i in batch.decodes:
                k = bisect.bisect_right(token_times[i], batch.start_s)
                if k == 0:
                    raise DeadlineViolation(
                        f"{here}: request {i} decodes before it emitted any token"
                    )
                last[i] = token_times[i][k - 1]
            earliest = min(last, key=lambda i: (last[i], i))
            deadline = last[earliest] + tpot
            predicted = batch_time(model, batch.shape)
            if predicted + margin > deadline - batch.start_s + tolerance:
                chunks = ", ".join(f"{_count(c, 'token')} of request {i}" for i, c in batch.chunks)
                decodes = _count(len(batch.decodes), "decode")
                raise DeadlineViolation(
                    f"{here}: prefill chunks ({chunks}) join {decodes}, and the batch is "
                    f"predicted to take {predicted * 1e3:.6g} ms"
                    + (f" plus a margin of {margin * 1e3:.6g} ms" if margin else "")
                    + f", ending at {(batch.start_s + predicted + margin):.9g} s, after request "
                    f"{earliest}'s next-token deadline {deadline:.9g} s (its last token at "
                    f"{last[earliest]:.9g} s plus the TPOT target {tpot * 1e3:g} ms)"
                )
        offset += count


def _count(n: int, noun: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
