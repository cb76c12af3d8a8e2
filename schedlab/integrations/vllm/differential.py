"""Holding schedlab's engine to vLLM's scheduler, step by step.

:func:`differential_run` simulates one request stream twice under the same engine
settings and cost model: on schedlab's engine with the ``vllm`` policy, and on vLLM's
own scheduler (:mod:`schedlab.integrations.vllm.engine`). :func:`first_mismatch`
compares the two runs step by step and returns the first difference, or ``None``:

* per step: its start and end time, the requests decoding, the prefill chunks
  (request, tokens), the requests preempted when it was scheduled, the prefix-cache
  tokens taken back by admitted requests, the requests that finished in it, the KV
  blocks held while it ran, and the scheduler's running and waiting queues;
* per request: the rank it was routed to (compared first: a request routed elsewhere
  changes every later step), its first and last token times, its token segments (so
  every token's time), its preemptions and its prefilled tokens;
* per run: the cached blocks evicted and the tokens taken from the prefix cache.

Since both runs take every step's duration from the same cost model, equal batches give
equal times, and the first difference of any kind shows up as a mismatch.

:func:`random_trace` draws the traces both the tests and
``benchmarks/vllm_differential.py`` run, in families shaped like what users serve
(:data:`FAMILIES`): independent requests; chat sessions and agent loops sharing system
prompts and earlier turns while they run; bursts at one instant behind a common system
prompt; shared prefixes under KV pressure, where cached blocks are evicted while others
are shared; and several data-parallel ranks behind vLLM's router. Each draws engine
settings that bind (few seats, small token budgets, caches of one to a few times the
largest request) and synchronous or asynchronous scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from schedlab.serving.driver import EngineRun
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.prefix import SharedPrefixes, SharedPrefixModel
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RequestStream

__all__ = ["FAMILIES", "Mismatch", "Trace", "differential_run", "first_mismatch", "random_trace"]


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
    for r, q in zip(ours.records, theirs.records, strict=True):
        if r.replica != q.replica:  # routed to another rank: every step after differs
            return Mismatch(f"request {r.index}", "replica", r.replica, q.replica)
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
            ("running", a.running, b.running),
            ("waiting", a.waiting, b.waiting),
        )
        for field, x, y in pairs:
            if x != y:
                return Mismatch(f"step {k}", field, x, y)
    if len(ours.batches) != len(theirs.batches):
        return Mismatch("run", "steps", len(ours.batches), len(theirs.batches))
    for field in ("evicted_blocks", "reused_tokens"):
        x, y = getattr(ours, field), getattr(theirs, field)
        if x != y:
            return Mismatch("run", field, x, y)
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


#: The trace families of :func:`random_trace`.
FAMILIES = ("independent", "chat", "burst", "pressure", "ranks", "burst-ranks")


@dataclass(frozen=True)
class Trace:
    """One drawn differential case: its family, requests, engine settings and ranks."""

    family: str
    stream: RequestStream
    engine: EngineConfig
    replicas: int = 1


def random_trace(family: str, rng: np.random.Generator) -> Trace:
    """A random case of ``family`` (:data:`FAMILIES`; module docstring), drawn from ``rng``.

    * ``independent``: 1-40 requests, prompts of 1-800 tokens, no shared prefix, prefix
      caching on or off.
    * ``chat``: 2-40 requests arriving 0-200 ms apart, of which each is, with probability
      0.6, the next turn of one of a few open conversations (it resends that
      conversation's prompt while the earlier turn may still run), else a new one that
      starts with one of 1-3 system prompts (:class:`~schedlab.serving.prefix.SharedPrefixModel`);
      trace blocks of 8, 16 or 48 tokens.
    * ``burst``: 2-30 requests at one to three instants, most behind one system prompt,
      a fifth of them resending an earlier request's prompt (retries).
    * ``pressure``: as ``chat`` with outputs of up to 200 tokens and a cache of one to
      one and a half times the largest request, so requests are preempted and cached
      blocks evicted while others are shared.
    * ``ranks``: as ``pressure`` on 2-4 data-parallel ranks.
    * ``burst-ranks``: as ``burst`` on 2-4 data-parallel ranks, where the one known
      deviation shows (``docs/vllm.md``, "Known deviation: data-parallel routing under
      asynchronous scheduling").
    """
    if family not in FAMILIES:
        raise ValueError(f"differential: unknown family {family!r}")
    name, ranked = family, family.endswith("ranks")
    family = family.removesuffix("-ranks")
    prefix = None
    if family == "independent":
        n = int(rng.integers(1, 41))
        arrival = np.cumsum(rng.integers(0, 41, n)) * 0.005
        prompt = rng.integers(1, 801, n)
        output = rng.integers(1, 121, n)
    else:
        n = int(rng.integers(2, 31 if family == "burst" else 41))
        if family == "burst":
            instants = np.sort(rng.integers(0, 40, int(rng.integers(1, 4)))) * 0.005
            arrival = np.sort(rng.choice(instants, n))
        else:
            arrival = np.cumsum(rng.integers(0, 41, n)) * 0.005
        model = SharedPrefixModel(
            system_prompts=1 if family == "burst" else int(rng.integers(1, 4)),
            system_tokens=int(rng.integers(8, 400)),
            system_share=0.9 if family == "burst" else float(rng.choice([0.5, 0.8])),
            followup=0.0 if family == "burst" else 0.6,
            open_conversations=int(rng.integers(1, 9)),
            block_tokens=int(rng.choice([8, 16, 48])),
            max_prompt=1500,
        )
        prompt, prefix = model.apply(rng.integers(1, 301, n), rng)
        if family == "burst":  # retries: a fifth of the requests resend an earlier prompt
            ids = list(prefix.hash_ids)
            for k in range(1, n):
                if rng.random() < 0.2:
                    copy = int(rng.integers(0, k))
                    prompt[k], ids[k] = prompt[copy], ids[copy]
            prefix = SharedPrefixes(prefix.block_tokens, tuple(ids))
        output = rng.integers(1, 201 if family in ("pressure", "ranks") else 61, n)
    block_size = int(rng.choice([8, 16, 32]))
    seqs = int(rng.integers(1, 17))
    largest = -(-int(np.max(prompt + output - 1)) // block_size)
    tight = family in ("pressure", "ranks")  # ranks: the load is split, so is the cache
    most = largest + largest // 2 + 1 if tight else 4 * largest + 9
    engine = EngineConfig(
        kv_tokens=int(rng.integers(largest, most)) * block_size,
        block_size=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=int(rng.integers(max(seqs, 16), 513)),
        prefix_caching=family != "independent" or bool(rng.integers(0, 2)),
        reserve_full_prompt=bool(rng.integers(0, 2)),
        async_scheduling=bool(rng.integers(0, 2)),
    )
    stream = RequestStream(family, arrival, prompt, output, float(arrival[-1]) + 1.0, prefix)
    replicas = int(rng.integers(2, 5)) if ranked else 1
    return Trace(name, stream, engine, replicas)


def differential_run(
    stream: RequestStream,
    engine: EngineConfig,
    *,
    cost_model: Any = None,
    replicas: int = 1,
    lockstep: bool = False,
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
    replicas
        Data-parallel ranks behind vLLM's router (their steps are compared rank by rank,
        in the order they ended).
    lockstep
        The ranks step together and report their counts to the router, as a
        mixture-of-experts model's do (:mod:`schedlab.serving.dp_balancer`).
    """
    scenario = Scenario(policy="vllm", engine=engine, replicas=replicas, lockstep=lockstep)
    if cost_model is not None:
        scenario = scenario.with_(cost_model=cost_model)
    ours = run_engine(stream, scenario, record_batches=True)
    theirs = run_engine(stream, scenario.with_(engine_kind="vllm"), record_batches=True)
    return ours, theirs, first_mismatch(ours, theirs)
