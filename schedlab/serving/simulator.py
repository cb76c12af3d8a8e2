r"""Event-driven simulator of one continuous-batching engine (DESIGN section 2).

Events sit in a heap keyed by ``(time, kind, sequence number)``. At equal times an
iteration end comes before arrivals, and arrivals before the next iteration start, so a
request arriving exactly when an iteration ends is seen by the next one; the sequence
number orders the rest, and makes every run deterministic.

An iteration's batch holds every running decode (one token each) and the prefill chunks
its policy chooses (:mod:`schedlab.serving.policies`). A request whose last prompt token is
prefilled emits its next token at that iteration's end. KV memory is paged: a request
holding ``t`` tokens occupies ``ceil(t / block_size)`` blocks, and each iteration reserves
the slots of the tokens it will produce before it runs. When the decodes' new slots do
not fit, the newest admitted request is preempted (vLLM's policy): its blocks are freed,
it returns to the front of the waiting queue, and when readmitted it recomputes its prompt
plus the tokens it had generated, as one prefill, without emitting them again.

Per iteration the work is O(1) plus the requests that join, finish or are preempted:
all decodes advance together, so a decode's token count, block boundaries and finishing
iteration follow from the iteration at which it joined; decodes are grouped by the phase
of their block boundary (``block_size`` buckets), which gives the new blocks an iteration
needs in O(1). For a cost model that uses the longest decode's KV (``decode_spread``, see
:class:`~schedlab.serving.cost_model.CostModel`), a decode's KV at iteration ``j`` is
``j`` plus a per-request offset, so the maximum is ``j`` plus the largest live offset,
kept in a heap with lazy deletion: O(log n) per join, finish or preemption.

**Asynchronous scheduling** (``async_scheduling=True``). vLLM's engine core with async
scheduling (the default since vLLM 0.14.0, release notes: "Async scheduling is now enabled
by default", PR #27614) keeps two batches in flight: ``EngineCore.step_with_batch_queue``
schedules the batch of iteration ``j + 1`` right after processing the outputs of iteration
``j - 1``, i.e. when iteration ``j`` starts, then blocks on iteration ``j``. So the batch of
iteration ``j + 1`` cannot contain a request that arrived after iteration ``j`` started,
and the seats (``max_num_seqs``) and KV blocks of requests that finished in iteration ``j``
are free only from iteration ``j + 2``. Decodes and the next chunks of partial prefills
are not delayed (the async scheduler advances ``num_computed_tokens`` when it schedules
and decodes with output placeholders, ``vllm/v1/core/sched/async_scheduler.py``). The
engine models exactly those two lags; when the lagged plan would run nothing at all, the
real engine's next scheduling pass (after the outputs) starts the work immediately, and so
does this one. Preemption decisions are not lagged.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from schedlab.errors import ServingError
from schedlab.serving.cost_model import Chunk, CostModel, get_cost_model, uses_decode_spread
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO, RequestRecord, Summary, summarize
from schedlab.serving.policies import Plan, Policy, PolicyContext, make_policy
from schedlab.serving.workloads import RequestStream, make_workload

__all__ = ["BatchRecord", "EngineRun", "SimulationResult", "run_engine", "simulate"]

_END, _ARRIVAL, _START = 0, 1, 2
_NOISE_BLOCK = 4096


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One iteration, recorded when ``record_batches=True`` (for audits and tests).

    Attributes
    ----------
    start_s, end_s
        When it ran.
    decodes
        Indices of the requests decoding in it.
    chunks
        ``(request index, tokens)`` prefill chunks.
    preempted
        Requests preempted just before it started.
    """

    start_s: float
    end_s: float
    decodes: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]
    preempted: tuple[int, ...]


def _iteration_time(
    model: CostModel, spread: bool, n: int, kv: int, chunks: list[Chunk], kv_max: int | None
) -> float:
    """``model``'s time for the batch, with the longest decode's KV if it uses it."""
    if spread and kv_max is not None:
        return model.iteration_time(n, kv, chunks, decode_kv_max=kv_max)  # type: ignore[call-arg]
    return model.iteration_time(n, kv, chunks)


class _Request:
    """Mutable state of one request inside the engine (read by policies as RequestView)."""

    __slots__ = (
        "admitted",
        "arrival_s",
        "bucket",
        "decoding",
        "done",
        "epoch",
        "finish_s",
        "first_token_s",
        "gen_at_join",
        "generated",
        "index",
        "join_iter",
        "kv_offset",
        "output",
        "preemptions",
        "prefilled",
        "prompt",
        "seg_start",
        "segments",
        "seq",
        "target",
        "violated",
    )

    def __init__(self, index: int, arrival_s: float, prompt: int, output: int) -> None:
        self.index = index
        self.arrival_s = arrival_s
        self.prompt = prompt
        self.output = output
        self.target = prompt  # tokens this (re)start prefills
        self.done = 0  # tokens of target prefilled so far
        self.generated = 0  # output tokens emitted (exact while not decoding)
        self.admitted = False
        self.decoding = False
        self.seq = -1  # admission sequence number (newest = largest)
        self.join_iter = 0  # first decode iteration of the current run
        self.gen_at_join = 0
        self.bucket = 0  # block-boundary phase while decoding
        self.kv_offset = 0  # KV tokens at decode iteration j are kv_offset + j
        self.epoch = 0  # invalidates a scheduled finish after preemption
        self.first_token_s = math.nan
        self.finish_s = math.nan
        self.seg_start = 0
        self.segments: list[tuple[int, int]] = []
        self.preemptions = 0
        self.prefilled = 0
        self.violated = False

    def record(self) -> RequestRecord:
        return RequestRecord(
            self.index,
            self.arrival_s,
            self.prompt,
            self.output,
            self.first_token_s,
            self.finish_s,
            self.preemptions,
            self.prefilled,
            tuple(self.segments),
        )


@dataclass(frozen=True)
class EngineRun:
    """Raw outcome of :func:`run_engine`.

    Attributes
    ----------
    records
        One per request, in stream order.
    iteration_end_s
        End time of every iteration (token times of :class:`RequestRecord` segments).
    end_s
        Simulated time when the run stopped.
    policy_stats
        The policy's counters.
    batches
        Per-iteration records if requested, else empty.
    """

    records: tuple[RequestRecord, ...]
    iteration_end_s: np.ndarray
    end_s: float
    policy_stats: dict[str, int]
    batches: tuple[BatchRecord, ...] = ()


class _Engine:
    """The engine; also the :class:`~schedlab.serving.policies.EngineView` policies read."""

    def __init__(
        self,
        stream: RequestStream,
        policy: Policy,
        model: CostModel,
        config: EngineConfig,
        *,
        actual_model: CostModel | None,
        noise_cv: float,
        seed: int,
        slo: SLO | None,
        stop_at_s: float,
        max_violations: int,
        record_batches: bool,
        async_scheduling: bool = False,
    ) -> None:
        self.config = config
        self.policy = policy
        self.model = model
        self.actual_model = actual_model
        self.requests = [
            _Request(i, float(a), int(p), int(o))
            for i, (a, p, o) in enumerate(
                zip(stream.arrival_s, stream.prompt, stream.output, strict=True)
            )
        ]
        for req in self.requests:
            if config.blocks(req.prompt + req.output) > config.total_blocks:
                raise ServingError(
                    f"request {req.index}: prompt + output = {req.prompt + req.output} tokens "
                    f"exceeds the KV capacity of {config.total_blocks} blocks of "
                    f"{config.block_size}; it could never run"
                )
        if not (math.isfinite(noise_cv) and noise_cv >= 0):
            raise ServingError(f"noise_cv: must be finite and >= 0, got {noise_cv}")
        self._noise_sigma = math.sqrt(math.log1p(noise_cv**2))
        self._rng = np.random.default_rng(seed)
        self._noise: list[float] = []
        self.slo = slo
        self.stop_at_s = stop_at_s
        self.max_violations = max_violations
        self.violations = 0
        # Engine state read by policies.
        self.now_s = 0.0
        self.n_decode = 0
        self.decode_kv = 0
        self.last_token_s = 0.0
        self.free_blocks = 0
        self.free_seats = config.max_num_seqs
        self.has_prefill_work = False
        # Internal state.
        self.free = config.total_blocks
        self.iteration = 0
        self.waiting: deque[_Request] = deque()
        self.running: dict[int, _Request] = {}
        self.partials: dict[int, _Request] = {}
        self.buckets = [0] * config.block_size
        self.finish_at: dict[int, list[tuple[_Request, int]]] = {}
        self.batch: list[tuple[_Request, int]] = []
        self.iteration_end: list[float] = []
        self.admissions = 0
        self.finished = 0
        self.heap: list[tuple[float, int, int]] = []
        self.events = 0
        self.start_pending = False
        self.busy = False
        self.record_batches = record_batches
        self.batches: list[BatchRecord] = []
        # Longest decode's KV, for cost models that use it (module docstring).
        self.model_spread = uses_decode_spread(model)
        self.actual_spread = actual_model is not None and uses_decode_spread(actual_model)
        self.spread = self.model_spread or self.actual_spread
        self.kv_heap: list[int] = []  # negated offsets, lazily deleted
        self.kv_live: dict[int, int] = {}  # offset -> decodes holding it
        # Asynchronous scheduling (module docstring).
        self.async_scheduling = async_scheduling
        self.inbox: list[_Request] = []  # arrived while a batch was in flight
        self.back_to_back = False  # the pending start follows an iteration end
        self.held_seats = 0  # freed by the last iteration, usable one iteration later
        self.held_blocks = 0
        self._pending_batch: tuple[float, tuple[int, ...], tuple[tuple[int, int], ...]] | None = (
            None
        )
        self._preempted: list[int] = []

    # -- EngineView -------------------------------------------------------------------
    def prefill_candidates(self) -> Iterator[_Request]:
        return chain(self.partials.values(), self.waiting)

    # -- event loop -------------------------------------------------------------------
    def _push(self, t: float, kind: int) -> None:
        self.events += 1
        heapq.heappush(self.heap, (t, kind, self.events))

    def run(self) -> float:
        """Process events until every request finished or a stop rule fires; the end time."""
        requests = self.requests
        heap = self.heap
        next_arrival = 0
        if requests:
            heapq.heappush(heap, (requests[0].arrival_s, _ARRIVAL, 0))
        now = 0.0
        total = len(requests)
        while heap:
            t, kind, _ = heapq.heappop(heap)
            if t > self.stop_at_s:
                now = self.stop_at_s
                break
            now = t
            if kind == _END:
                self._end(t)
                if self.finished == total or self.violations > self.max_violations:
                    break
                self.busy = False
                if self.running or self.waiting or self.inbox:
                    self.start_pending = self.back_to_back = True
                    self._push(t, _START)
            elif kind == _ARRIVAL:
                if self.async_scheduling and (self.busy or self.back_to_back):
                    self.inbox.append(requests[next_arrival])
                else:
                    self.waiting.append(requests[next_arrival])
                next_arrival += 1
                if next_arrival < total:
                    self._push(requests[next_arrival].arrival_s, _ARRIVAL)
                if not self.busy and not self.start_pending:
                    self.start_pending = True
                    self._push(t, _START)
            else:
                self._start(t)
                self.start_pending = self.back_to_back = False
        return now

    def _start(self, now: float) -> None:
        config = self.config
        i = self.iteration
        phase = i % config.block_size
        need = self.buckets[phase]
        while need > self.free:
            need -= self._preempt_newest(i, phase)
        self.now_s = now
        if not self.back_to_back:  # the engine was idle: nothing was planned ahead
            self.held_seats = self.held_blocks = 0
        while True:
            self.free_blocks = self.free - need - self.held_blocks
            self.free_seats = config.max_num_seqs - len(self.running) - self.held_seats
            self.has_prefill_work = bool(self.partials or self.waiting)
            plan = self.policy.plan(self)
            if plan or self.n_decode:
                break
            if self.held_seats or self.held_blocks or self.inbox:
                # An empty lagged batch: the next scheduling pass sees everything.
                self._release_lagged()
                continue
            if self.partials:  # stuck prefills hold the KV they need: free the newest
                self._preempt_newest(i, phase)
                continue
            if self.waiting:
                raise ServingError(
                    f"policy {self.policy.name!r}: empty batch at t={now:.6f} s with "
                    f"{len(self.waiting)} request(s) waiting and none running"
                )
            return  # idle until the next arrival
        chunks = self._apply(plan, need)
        if self.async_scheduling:
            self._release_lagged()
        n = self.n_decode
        kv = self.decode_kv
        kv_max = self._longest_decode(i) if self.spread and n else None
        predicted = _iteration_time(self.model, self.model_spread, n, kv, chunks, kv_max)
        if self.actual_model is not None:
            seconds = _iteration_time(self.actual_model, self.actual_spread, n, kv, chunks, kv_max)
        elif self._noise_sigma > 0:
            seconds = predicted * self._next_noise()
        else:
            seconds = predicted
        if not (math.isfinite(seconds) and seconds > 0):
            raise ServingError(
                f"cost model: iteration time {seconds!r} s for {n} decodes and chunks "
                f"{chunks} must be positive and finite"
            )
        self.busy = True
        if self.record_batches:
            decodes = tuple(r.index for r in self.running.values() if r.decoding)
            planned = tuple((r.index, c) for r, c in self.batch)
            self._pending_batch = (now, decodes, planned)
        self._push(now + seconds, _END)

    def _release_lagged(self) -> None:
        """Make the lagged seats, blocks and arrivals visible to the next plan."""
        self.held_seats = self.held_blocks = 0
        if self.inbox:
            self.waiting.extend(self.inbox)
            self.inbox.clear()

    def _longest_decode(self, i: int) -> int:
        """KV tokens of the longest running decode at iteration ``i`` (some decode runs)."""
        heap, live = self.kv_heap, self.kv_live
        while -heap[0] not in live:
            heapq.heappop(heap)
        return i - heap[0]

    def _forget_decode(self, req: _Request) -> None:
        if self.spread:
            live = self.kv_live
            left = live[req.kv_offset] - 1
            if left:
                live[req.kv_offset] = left
            else:
                del live[req.kv_offset]

    def _apply(self, plan: Plan, need: int) -> list[Chunk]:
        """Validate a policy's plan, admit and allocate for it; the cost-model chunks."""
        config = self.config
        name = self.policy.name
        chunks: list[Chunk] = []
        batch: list[tuple[_Request, int]] = []
        used = 0
        tokens = self.n_decode
        for view, c in plan:
            req = self.requests[view.index]
            remaining = req.target - req.done
            if not 1 <= c <= remaining or any(r is req for r, _ in batch):
                raise ServingError(
                    f"policy {name!r}: chunk of {c} tokens for request {req.index} with "
                    f"{remaining} left (or the request twice in one batch)"
                )
            if not req.admitted:
                if self.waiting and self.waiting[0] is req:
                    self.waiting.popleft()
                elif req in self.waiting:
                    self.waiting.remove(req)
                else:
                    raise ServingError(f"policy {name!r}: request {req.index} is not waiting")
                if len(self.running) >= config.max_num_seqs:
                    raise ServingError(f"policy {name!r}: admits beyond max_num_seqs")
                self.admissions += 1
                req.seq = self.admissions
                req.admitted = True
                self.running[req.seq] = req
                self.partials[req.seq] = req
            elif req.seq not in self.partials:
                raise ServingError(f"policy {name!r}: request {req.index} is not prefilling")
            used += config.chunk_blocks(req.done, req.target, c)
            chunks.append((c, req.done))
            batch.append((req, c))
            req.done += c
            req.prefilled += c
            tokens += c
        if used > self.free - need:
            raise ServingError(
                f"policy {name!r}: plan needs {used} KV blocks, only {self.free - need} free"
            )
        whole_alone = len(batch) == 1 and not self.policy.chunked
        if tokens > config.max_num_batched_tokens and not whole_alone:
            raise ServingError(
                f"policy {name!r}: {tokens} batched tokens exceed max_num_batched_tokens "
                f"{config.max_num_batched_tokens}"
            )
        self.free -= need + used
        self.batch = batch
        return chunks

    def _preempt_newest(self, i: int, phase: int) -> int:
        """Preempt the newest admitted request; 1 if it needed a block this iteration."""
        _, victim = self.running.popitem()
        config = self.config
        saved = 0
        if victim.decoding:
            generated = victim.gen_at_join + (i - victim.join_iter)
            held = victim.prompt + generated
            self.free += config.blocks(held)
            self.n_decode -= 1
            self.decode_kv -= held
            self.buckets[victim.bucket] -= 1
            self._forget_decode(victim)
            saved = 1 if victim.bucket == phase else 0
            victim.segments.append((victim.seg_start, i - 1))
            victim.generated = generated
            victim.decoding = False
            victim.epoch += 1
        else:
            self.free += config.blocks(victim.done)
            del self.partials[victim.seq]
        victim.target = victim.prompt + victim.generated
        victim.done = 0
        victim.admitted = False
        victim.preemptions += 1
        self.waiting.appendleft(victim)
        if self.record_batches:
            self._preempted.append(victim.index)
        return saved

    def _end(self, now: float) -> None:
        config = self.config
        i = self.iteration
        self.iteration = i + 1
        self.iteration_end.append(now)
        self.decode_kv += self.n_decode
        self.last_token_s = now
        if self.record_batches and self._pending_batch is not None:
            start, decodes, planned = self._pending_batch
            self.batches.append(BatchRecord(start, now, decodes, planned, tuple(self._preempted)))
            self._preempted = []
        finishing = self.finish_at.pop(i, None)
        if finishing:
            for req, epoch in finishing:
                if req.epoch == epoch:
                    self.n_decode -= 1
                    self.decode_kv -= req.prompt + req.output
                    self.buckets[req.bucket] -= 1
                    self._forget_decode(req)
                    req.decoding = False
                    self._finish(req, now, i, req.prompt + req.output)
        for req, _ in self.batch:
            if req.done < req.target:
                continue
            del self.partials[req.seq]
            req.generated += 1
            req.seg_start = i
            if math.isnan(req.first_token_s):
                req.first_token_s = now
                slo = self.slo
                if slo is not None and now - req.arrival_s > slo.ttft_s:
                    req.violated = True
                    self.violations += 1
            held = req.target + 1
            if req.generated == req.output:
                self._finish(req, now, i, held)
                continue
            req.decoding = True
            req.join_iter = i + 1
            req.gen_at_join = req.generated
            req.bucket = (i + 1 - held) % config.block_size
            self.buckets[req.bucket] += 1
            self.n_decode += 1
            self.decode_kv += held
            if self.spread:
                offset = held - (i + 1)
                req.kv_offset = offset
                self.kv_live[offset] = self.kv_live.get(offset, 0) + 1
                heapq.heappush(self.kv_heap, -offset)
            self.finish_at.setdefault(i + req.output - req.generated, []).append((req, req.epoch))
        self.batch = []

    def _finish(self, req: _Request, now: float, i: int, held: int) -> None:
        del self.running[req.seq]
        blocks = self.config.blocks(held)
        self.free += blocks
        if self.async_scheduling:
            self.held_seats += 1
            self.held_blocks += blocks
        req.generated = req.output
        req.segments.append((req.seg_start, i))
        req.finish_s = now
        req.admitted = False
        self.finished += 1
        slo = self.slo
        if (
            slo is not None
            and not req.violated
            and req.output > 1
            and (now - req.first_token_s) / (req.output - 1) > slo.tpot_s
        ):
            req.violated = True
            self.violations += 1

    def _next_noise(self) -> float:
        if not self._noise:
            sigma = self._noise_sigma
            draws = self._rng.lognormal(-sigma * sigma / 2, sigma, _NOISE_BLOCK)
            self._noise = draws.tolist()[::-1]
        return self._noise.pop()

    def close_open_segments(self) -> None:
        """Record the tokens of requests still decoding when the run stopped."""
        for req in self.running.values():
            if req.decoding:
                req.segments.append((req.seg_start, self.iteration - 1))


def run_engine(
    stream: RequestStream,
    policy: Policy,
    model: CostModel,
    config: EngineConfig | None = None,
    *,
    actual_model: CostModel | None = None,
    noise_cv: float = 0.0,
    seed: int = 0,
    slo: SLO | None = None,
    stop_at_s: float | None = None,
    max_violations: int | None = None,
    record_batches: bool = False,
    async_scheduling: bool = False,
) -> EngineRun:
    """Simulate ``stream`` on one engine.

    Parameters
    ----------
    stream
        The requests.
    policy
        Batch-formation policy (fresh: policies may keep state).
    model
        Predicted cost model; the policy decides with it and, unless ``actual_model`` or
        ``noise_cv`` is given, time advances by it.
    config
        Engine limits (default :class:`EngineConfig`).
    actual_model
        A second model for the actual iteration time.
    noise_cv
        Actual time = predicted x lognormal noise of mean 1 and this coefficient of
        variation (seeded by ``seed``); ignored when ``actual_model`` is given.
    slo, max_violations
        Stop as soon as more than ``max_violations`` requests are known to miss ``slo``.
    stop_at_s
        Stop at this simulated time.
    record_batches
        Keep a :class:`BatchRecord` per iteration.
    async_scheduling
        Model vLLM's asynchronous scheduling: one iteration of lag before new arrivals
        and freed seats/blocks are used (module docstring).
    """
    engine = _Engine(
        stream,
        policy,
        model,
        config or EngineConfig(),
        actual_model=actual_model,
        noise_cv=noise_cv,
        seed=seed,
        slo=slo,
        stop_at_s=math.inf if stop_at_s is None else stop_at_s,
        max_violations=len(stream) if max_violations is None else max_violations,
        record_batches=record_batches,
        async_scheduling=async_scheduling,
    )
    end_s = engine.run()
    engine.close_open_segments()
    return EngineRun(
        tuple(r.record() for r in engine.requests),
        np.asarray(engine.iteration_end, dtype=float),
        end_s,
        dict(policy.stats),
        tuple(engine.batches),
    )


@dataclass(frozen=True)
class SimulationResult:
    """Per-request records, their summary, and the raw run."""

    records: tuple[RequestRecord, ...]
    summary: Summary
    run: EngineRun = field(repr=False)
    wall_s: float = 0.0


def simulate(
    workload: str | RequestStream = "chat",
    *,
    rate: float | None = None,
    duration_s: float = 60.0,
    policy: str | Policy = "sloweave",
    cost_model: str | CostModel = "sloweave-default",
    slo: SLO | None = None,
    engine: EngineConfig | None = None,
    seed: int = 0,
    actual_cost_model: str | CostModel | None = None,
    noise_cv: float = 0.0,
    margin_s: float | None = None,
    stop_at_s: float | None = None,
    max_violations: int | None = None,
    record_batches: bool = False,
    data_dir: str | None = None,
) -> SimulationResult:
    """Simulate a workload under a policy and summarize it.

    Parameters
    ----------
    workload
        A name of :data:`~schedlab.serving.workloads.WORKLOADS`, a trace path, or a
        ready :class:`RequestStream`.
    rate, duration_s, seed
        Mean arrival rate (requests/s; for a replay, rescales its timestamps), arrival
        window, and the seed of every random draw (same seed, same result).
    policy
        A spelling for :func:`~schedlab.serving.policies.make_policy` or a policy object.
    cost_model
        Built-in name, JSON path or object: the predicted model policies use.
    slo
        SLO for attainment and goodput (default TTFT 5 s, TPOT 25 ms); its TPOT is the
        target of ``sarathi``, ``sloweave`` and ``sangam``.
    engine
        Engine limits.
    actual_cost_model, noise_cv
        Prediction error: see :func:`run_engine`.
    margin_s
        SLOWeave margin (default: the cost model's).
    stop_at_s, max_violations, record_batches
        See :func:`run_engine`.
    data_dir
        Where Azure traces are looked up.
    """
    started = time.perf_counter()
    slo = slo or SLO(ttft_s=5.0, tpot_s=0.025)
    config = engine or EngineConfig()
    model = get_cost_model(cost_model)
    if isinstance(workload, RequestStream):
        stream = workload
    else:
        stream = make_workload(workload, data_dir=data_dir).generate(rate, duration_s, seed)
    if isinstance(policy, str):
        policy = make_policy(policy, PolicyContext(model, config, slo.tpot_s, margin_s))
    actual = None if actual_cost_model is None else get_cost_model(actual_cost_model)
    run = run_engine(
        stream,
        policy,
        model,
        config,
        actual_model=actual,
        noise_cv=noise_cv,
        seed=seed,
        slo=slo,
        stop_at_s=stop_at_s,
        max_violations=max_violations,
        record_batches=record_batches,
    )
    summary = summarize(
        run.records,
        run.iteration_end_s,
        slo=slo,
        duration_s=stream.duration_s,
        end_s=run.end_s,
        policy=policy.name,
        workload=stream.name,
        cost_model=model.name,
        policy_stats=run.policy_stats,
    )
    return SimulationResult(run.records, summary, run, time.perf_counter() - started)
