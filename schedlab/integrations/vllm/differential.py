"""Holding schedlab's engine to vLLM's scheduler, step by step.

:func:`differential_run` simulates one request stream twice under the same engine
settings and cost model: on schedlab's engine with the ``vllm`` policy, and on vLLM's
own scheduler (:mod:`schedlab.integrations.vllm.engine`). :func:`first_mismatch`
compares the two runs step by step and returns the first difference, or ``None``:

* per step: its start and end time, the requests decoding, the prefill chunks
  (request, tokens), the requests preempted when it was scheduled, the prefix-cache
  tokens taken back by re-admitted requests, the requests that finished in it, and the
  KV blocks held while it ran;
* per request: its first and last token times, its token segments (so every token's
  time), its preemptions and its prefilled tokens.

Since both runs take every step's duration from the same cost model, equal batches give
equal times, and the first difference of any kind shows up as a mismatch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schedlab.serving.driver import EngineRun
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RequestStream

__all__ = ["Mismatch", "differential_run", "first_mismatch"]


@dataclass(frozen=True)
class Mismatch:
    """The first difference between two runs.

    Attributes
    ----------
    where
        ``step K`` or ``request I`` (or ``run`` for the step count).
    field
        What differs.
    ours, theirs
        The value in schedlab's run and in vLLM's.
    """

    where: str
    field: str
    ours: Any
    theirs: Any

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: schedlab {self.ours!r}, vLLM {self.theirs!r}"


def _finished_by_step(run: EngineRun) -> dict[int, list[int]]:
    done: dict[int, list[int]] = {}
    for record in run.records:
        if record.finished:
            done.setdefault(record.segments[-1][1], []).append(record.index)
    return done


def first_mismatch(ours: EngineRun, theirs: EngineRun) -> Mismatch | None:
    """The first difference between two runs recorded with ``record_batches``, or
    ``None`` when they agree on every step and every request (module docstring)."""
    ours_done, theirs_done = _finished_by_step(ours), _finished_by_step(theirs)
    for k, (a, b) in enumerate(zip(ours.batches, theirs.batches, strict=False)):
        pairs = (
            ("start_s", a.start_s, b.start_s),
            ("end_s", a.end_s, b.end_s),
            ("decodes", sorted(a.decodes), sorted(b.decodes)),
            ("chunks", sorted(a.chunks), sorted(b.chunks)),
            ("preempted", sorted(a.preempted), sorted(b.preempted)),
            ("reused", sorted(a.reused), sorted(b.reused)),
            ("finished", sorted(ours_done.get(k, ())), sorted(theirs_done.get(k, ()))),
            ("used_blocks", a.used_blocks, b.used_blocks),
        )
        for field, x, y in pairs:
            if x != y:
                return Mismatch(f"step {k}", field, x, y)
    if len(ours.batches) != len(theirs.batches):
        return Mismatch("run", "steps", len(ours.batches), len(theirs.batches))
    for r, q in zip(ours.records, theirs.records, strict=True):
        for field in ("first_token_s", "finish_s", "preemptions", "prefilled_tokens"):
            x, y = getattr(r, field), getattr(q, field)
            if x != y and not (x != x and y != y):  # NaN equals NaN here
                return Mismatch(f"request {r.index}", field, x, y)
        if _token_runs(r.segments) != _token_runs(q.segments):
            return Mismatch(f"request {r.index}", "segments", r.segments, q.segments)
    return None


def _token_runs(segments: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """Segments with those that follow each other merged: the steps of every token.
    (schedlab's engine starts a segment at each re-admission, even when the recomputed
    prefill emits its token in the step right after the last one.)"""
    runs: list[tuple[int, int]] = []
    for first, last in segments:
        if runs and runs[-1][1] + 1 == first:
            runs[-1] = (runs[-1][0], last)
        else:
            runs.append((first, last))
    return runs


def differential_run(
    stream: RequestStream, engine: EngineConfig, *, cost_model: Any = None
) -> tuple[EngineRun, EngineRun, Mismatch | None]:
    """Simulate ``stream`` on both engines; both runs and their first mismatch.

    Parameters
    ----------
    stream
        The requests.
    engine
        The engine settings both runs share.
    cost_model
        The cost model of every step's duration (default: :class:`Scenario`'s).
    """
    scenario = Scenario(policy="vllm", engine=engine)
    if cost_model is not None:
        scenario = scenario.with_(cost_model=cost_model)
    ours = run_engine(stream, scenario, record_batches=True)
    theirs = run_engine(stream, scenario.with_(engine_kind="vllm"), record_batches=True)
    return ours, theirs, first_mismatch(ours, theirs)
