r"""The event loop of one continuous-batching engine (``docs/design.md``, "Online model").

Events sit in a heap keyed by ``(time, kind, sequence number)``. At equal times an
iteration end comes before arrivals, and arrivals before the next iteration start, so a
request arriving exactly when an iteration ends is seen by the next one; the sequence
number orders the rest, and makes every run deterministic.

Tokens and KV
-------------
A request has ``prompt + generated`` tokens; its KV holds the ones computed so far.
An iteration computes, for every running decode, the token it emitted last (one KV slot)
and samples the next; for a prefill chunk of ``c`` tokens it computes ``c`` more, and the
chunk that completes the sequence also samples a token, emitted at the iteration's end.
So a request that finishes has held at most ``prompt + output - 1`` KV tokens. This is
vLLM v1's accounting: a step schedules ``num_tokens - num_computed_tokens`` tokens and
allocates KV slots for exactly those (``vllm/v1/core/sched/scheduler.py`` lines 404–417;
``kv_cache_manager.py``, ``allocate_slots``, lines 257–427). Blocks, the free pool and the
prefix cache are the :class:`~schedlab.serving.kv_cache.KVCache`'s.

An iteration, in vLLM 0.19.0's order
------------------------------------
1. **Running decodes take their blocks**, oldest admission first; a decode needs a new
   block when its KV crosses a block boundary. While the blocks do not suffice, the
   *newest* admitted request is preempted (``scheduler.py`` line 500, ``running.pop()``
   under FCFS, repeated until the allocation fits, lines 461–510): its blocks are freed
   (full ones stay cached), it forgets its computed tokens and goes to the *front* of the
   waiting queue, keeping the tokens it generated (``_preempt_request``, lines 956–976).
2. **The policy plans prefill chunks** (:mod:`schedlab.serving.policies`) from a view of
   the engine (:mod:`schedlab.serving.view`): chunks of admitted, partly prefilled
   requests first, then waiting requests, first come first served. If a preemption
   happened in step 1, no waiting request is admitted in this iteration (``scheduler.py``
   line 564). A waiting request must pass the admission gate when
   ``reserve_full_prompt`` is set (its whole sequence fits in the free blocks); a
   request resumed after a preemption first takes back its blocks still in the prefix
   cache and prefills only the rest. (What the cache holds is looked up again when the
   request is admitted, after the allocations before it in the iteration, as vLLM does;
   the policy sized its chunk a moment earlier, so the rare chunk whose blocks were
   evicted in between leaves more of the sequence for the next iteration.)
3. **The engine applies the plan**, checking every chunk against the seats, the token
   budget and the free blocks. A chunk of an admitted request that does not fit preempts
   the newest requests until it does — possibly the request itself, as vLLM's running
   phase does for a partial prefill (``scheduler.py`` lines 504–510); the plan's later
   admissions are then dropped, as vLLM admits nothing in an iteration that preempted.
4. The iteration lasts what the cost model says for its batch (the *predicted* model,
   or an *actual* one, or the predicted one times lognormal noise); at its end every
   batched decode and every completed prefill emits a token, and finished requests free
   their blocks.

Asynchronous scheduling
-----------------------
With ``EngineConfig.async_scheduling``, vLLM's engine core keeps two batches in flight
(``EngineCore.step_with_batch_queue``, ``vllm/v1/engine/core.py`` lines 421–537): the
batch of iteration ``j + 1`` is scheduled when iteration ``j`` starts, after processing
the outputs of iteration ``j - 1``. So it cannot contain a request that arrived after
iteration ``j`` started, and the seats and KV blocks of requests that finished in
iteration ``j`` are free only from iteration ``j + 2`` (their blocks are freed by
``update_from_output``, which runs after the next ``schedule``; ``scheduler.py`` lines
1417–1419). Decodes and the next chunks of partial prefills are not delayed: the async
scheduler advances ``num_computed_tokens`` when it schedules and decodes with output
placeholders (``vllm/v1/core/sched/async_scheduler.py`` lines 18–35). The engine models
exactly those two lags; when the lagged plan would run nothing at all, the real engine's
next scheduling pass starts the work immediately, and so does this one. Preemption is
not lagged.

Replicas
--------
A deployment of ``dp`` data-parallel replicas (vLLM's ``data_parallel_size``) runs one
:class:`Engine` per replica, each with its own scheduler, seats and KV cache, under one
:class:`Driver`. Arriving requests go to the replica of least ``4 * waiting + running``
(ties to the lowest index), the score of vLLM's load balancer
(``vllm/v1/engine/core_client.py``, ``DPLBAsyncMPClient.get_core_engine_for_request``,
lines 1337–1365; here with the replicas' counts at the arrival, where vLLM's client sees
them as published every 100 ms). Replicas of a dense model step independently (vLLM runs
them as separate engine cores, ``vllm/v1/engine/core.py`` lines 1071–1082). Replicas of
a mixture-of-experts model with expert parallelism step in *lockstep*
(``DPEngineCoreProc``, ``core.py`` lines 1696–1750): every forward pass exchanges the
replicas' tokens, so a replica with nothing to do runs a dummy batch while another has
work, and a step lasts what the cost model's ``lockstep_time`` says for all the batches
together (:func:`~schedlab.serving.cost_model.lockstep_time`).

Cost
----
Per iteration the work is ``O(1)`` plus the requests that join, finish or are
preempted and the blocks allocated: all decodes advance together, so a decode's KV,
block boundaries and finishing iteration follow from the iteration at which it joined;
decodes are grouped by the phase of their block boundary (``block_size`` buckets), which
gives the new blocks an iteration needs in ``O(1)``. For a cost model that uses the
longest decode's KV (``decode_spread``, see :class:`~schedlab.serving.cost_model.CostModel`)
the maximum is kept in a heap with lazy deletion.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from schedlab.errors import ServingError
from schedlab.serving import view as rules
from schedlab.serving.cost_model import (
    BatchShape,
    Chunk,
    CostModel,
    batch_time,
    hardware_of,
    lockstep_time,
    uses_decode_spread,
)
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import Replica
from schedlab.serving.kv_cache import KVCache
from schedlab.serving.metrics import SLO, RequestRecord, allowed_slow_gaps
from schedlab.serving.policies import Policy
from schedlab.serving.view import Plan, RequestView
from schedlab.serving.workloads import RequestStream

__all__ = [
    "EVENT_KINDS",
    "MAX_ITERATION_S",
    "BatchRecord",
    "Driver",
    "Engine",
    "EngineRun",
    "IterationClock",
    "IterationTime",
    "check_capacity",
    "least_loaded",
]

_END, _ARRIVAL, _START = 0, 1, 3
#: Event kinds, in their order at equal times: a subclass's own kinds take the free
#: numbers (a cluster's KV transfer ends, 2, come after arrivals, before starts).
EVENT_KINDS = {"end": _END, "arrival": _ARRIVAL, "start": _START}
_NOISE_BLOCK = 4096
#: The largest coefficient of variation of the iteration-time noise (a lognormal factor
#: of CV 10 already has a median of 1/10 of its mean).
MAX_NOISE_CV = 10.0


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One iteration, recorded when asked (for audits, tests and time series).

    Attributes
    ----------
    start_s, end_s
        When it ran.
    decodes
        Indices of the requests decoding in it.
    chunks
        ``(request index, tokens)`` prefill chunks.
    preempted
        Requests preempted when it started, in the order they were.
    reused
        ``(request index, tokens)``: KV tokens a (re)admitted request took back from the
        prefix cache.
    running, waiting
        Requests admitted, and arrived but waiting, once the iteration was planned.
    used_blocks
        KV blocks held by requests while it ran.
    handed_off
        Requests whose prefill completed in it and that left for another node (a
        prefill-only node of a cluster, :mod:`schedlab.serving.cluster`): no token was
        emitted for them, and they keep their blocks until :meth:`Engine.release`.
    received
        ``(request index, tokens)``: KV tokens an admitted request brought from another
        node (a transfer), allocated here without being computed here.
    shape
        The batch as the cost model saw it.
    """

    start_s: float
    end_s: float
    decodes: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]
    preempted: tuple[int, ...]
    reused: tuple[tuple[int, int], ...] = ()
    running: int = 0
    waiting: int = 0
    used_blocks: int = 0
    handed_off: tuple[int, ...] = ()
    received: tuple[tuple[int, int], ...] = ()
    shape: BatchShape | None = None


@dataclass(frozen=True)
class EngineRun:
    """Raw outcome of a run (:func:`schedlab.serving.simulator.run_engine`).

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
    evicted_blocks
        Cached KV blocks whose content an allocation overwrote.
    reused_tokens
        KV tokens resumed requests took back from the prefix cache instead of recomputing.
    policy, cost_model, hardware
        Names of the policy and the predicted cost model, and the GPU the model
        describes (:func:`~schedlab.serving.cost_model.hardware_of`).
    peak_kv_tokens
        The most KV blocks one replica had in use at once, in tokens.
    replica_iterations
        Iterations of each replica: ``iteration_end_s`` and ``batches`` hold the first
        replica's, then the second's, ...
    """

    records: tuple[RequestRecord, ...]
    iteration_end_s: np.ndarray
    end_s: float
    policy_stats: dict[str, int]
    batches: tuple[BatchRecord, ...] = ()
    evicted_blocks: int = 0
    reused_tokens: int = 0
    policy: str = ""
    cost_model: str = ""
    replica_iterations: tuple[int, ...] = ()
    peak_kv_tokens: int = 0
    hardware: str = ""


@dataclass(frozen=True)
class IterationTime:
    """How an iteration's duration is found.

    Attributes
    ----------
    predicted
        The model the policy plans with; time advances by it unless one of the others
        is given.
    actual
        A second model for the actual duration.
    noise_cv
        Actual = predicted x lognormal noise of mean 1 and this coefficient of variation
        (seeded by ``seed``); not with ``actual``, which sets the actual time itself
        (:class:`~schedlab.serving.scenario.Scenario` refuses the pair).
    seed
        Seed of the noise.
    """

    predicted: CostModel
    actual: CostModel | None = None
    noise_cv: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.noise_cv <= MAX_NOISE_CV:
            raise ServingError(
                f"noise_cv: must be from 0 to {MAX_NOISE_CV:g}, got {self.noise_cv}"
            )


class IterationClock:
    """The durations of one replica's iterations, as :class:`IterationTime` says.

    Parameters
    ----------
    timing
        The cost models and the noise.
    index
        The replica's number: replica 0 draws its noise from ``timing.seed`` alone (one
        engine's noise does not depend on the replica count), the others from
        independent streams of ``(seed, index)``.
    """

    def __init__(self, timing: IterationTime, index: int = 0) -> None:
        self.timing = timing
        self._sigma = math.sqrt(math.log1p(timing.noise_cv**2))
        self._rng = np.random.default_rng(timing.seed if index == 0 else (timing.seed, index))
        self._noise: list[float] = []

    def seconds(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float:
        """How long the batch ``shape`` takes (predicted, actual, or predicted times the
        next noise factor); with ``group``, the batches of all replicas in lockstep, how
        long their step takes (:func:`~schedlab.serving.cost_model.lockstep_time`).

        Raises
        ------
        ServingError
            If the model's time is not a positive number of at most
            :data:`MAX_ITERATION_S` seconds.
        """
        timing = self.timing
        model = timing.predicted if timing.actual is None else timing.actual
        seconds = _checked(
            lockstep_time(model, group) if group else batch_time(model, shape), shape
        )
        if timing.actual is None and self._sigma > 0:
            seconds *= self._next_noise()  # finite and positive: a lognormal factor
        return seconds

    def _next_noise(self) -> float:
        if not self._noise:
            sigma = self._sigma
            draws = self._rng.lognormal(-sigma * sigma / 2, sigma, _NOISE_BLOCK)
            self._noise = draws.tolist()[::-1]
        return self._noise.pop()


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
        "first_chunk_s",
        "first_decode_s",
        "first_token_s",
        "gen_at_join",
        "generated",
        "hand_off",
        "index",
        "join_iter",
        "kv_offset",
        "output",
        "predicted_output",
        "preemptions",
        "prefill_end_s",
        "prefill_exec_s",
        "prefill_side_exec_s",
        "prefilled",
        "prompt",
        "received",
        "replica",
        "seg_start",
        "segments",
        "seq",
        "target",
        "transferred",
        "violated",
    )

    def __init__(
        self, index: int, arrival_s: float, prompt: int, output: int, predicted: int
    ) -> None:
        self.index = index
        self.arrival_s = arrival_s
        self.prompt = prompt
        self.output = output
        self.predicted_output = predicted  # what policies see of the output length
        self.target = prompt  # tokens this (re)start must have in KV
        self.done = 0  # tokens of target in KV (prefilled, or cached while waiting)
        self.generated = 0  # output tokens emitted (exact while not decoding)
        self.admitted = False
        self.decoding = False
        self.seq = -1  # admission sequence number (newest = largest)
        self.join_iter = 0  # first decode iteration of the current run
        self.gen_at_join = 0
        self.bucket = 0  # block-boundary phase while decoding
        self.kv_offset = 0  # KV tokens attended at decode iteration j: kv_offset + j
        self.epoch = 0  # invalidates a scheduled finish after preemption
        self.first_token_s = math.nan
        self.finish_s = math.nan
        self.seg_start = 0
        self.segments: list[tuple[int, int]] = []
        self.preemptions = 0
        self.prefilled = 0
        self.replica = 0  # the engine serving it
        self.violated = False
        # Clusters (schedlab.serving.cluster): the prefill leaves for another node, and
        # KV tokens that came from one; the times of the TTFT breakdown: seconds of the
        # iterations that ran its prefill chunks before its first token (those on its
        # prefill node, up to the hand-off), and of the iteration that emitted its first
        # token after a transfer.
        self.hand_off = False
        self.received = 0
        self.transferred = False
        self.first_chunk_s = math.nan
        self.prefill_end_s = math.nan
        self.prefill_exec_s = 0.0
        self.prefill_side_exec_s = 0.0
        self.first_decode_s = 0.0

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
            self.replica,
        )


class _View:
    """The :class:`~schedlab.serving.view.EngineView` the policy gets each iteration."""

    __slots__ = (
        "_engine",
        "admitting",
        "config",
        "decode_kv",
        "decode_kv_max",
        "decode_kv_min",
        "free_blocks",
        "free_seats",
        "last_token_s",
        "n_decode",
        "now_s",
    )

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.config = engine.config
        self.now_s = 0.0
        self.n_decode = 0
        self.decode_kv = 0
        self.decode_kv_max: int | None = None
        self.decode_kv_min: int | None = None
        self.last_token_s = 0.0
        self.free_blocks = 0
        self.free_seats = 0
        self.admitting = True

    @property
    def has_prefill_work(self) -> bool:
        engine = self._engine
        return bool(engine.partials or (self.admitting and engine.waiting))

    def prefill_candidates(self) -> Iterator[_Request]:
        engine = self._engine
        if not self.admitting:
            return iter(engine.partials.values())
        return chain(engine.partials.values(), engine.waiting_with_cache())

    def chunk_blocks(self, request: RequestView, chunk: int) -> int:
        return rules.chunk_blocks(self.config, request, chunk)

    def max_chunk(self, request: RequestView, free_blocks: int) -> int:
        return rules.max_chunk(self.config, request, free_blocks)

    def admissible(self, request: RequestView, free_blocks: int) -> bool:
        return rules.admissible(self.config, request, free_blocks)

    def projected_kv_peak(self) -> int:
        return self._engine.projected_kv_peak()


class Engine:
    """One replica's scheduler: its queues, seats, KV cache and iterations (module
    docstring). A :class:`Driver` feeds it requests and times its iterations.

    Parameters
    ----------
    policy
        Batch-formation policy (fresh: policies may keep state).
    config
        Limits and behaviours.
    timing
        How iteration times are found.
    slo
        The SLO whose violations are counted (for the driver's early stop).
    index
        The replica's number.
    record_batches
        Keep a :class:`BatchRecord` per iteration.
    """

    def __init__(
        self,
        policy: Policy,
        config: EngineConfig,
        timing: IterationTime,
        *,
        slo: SLO | None = None,
        index: int = 0,
        record_batches: bool = False,
    ) -> None:
        self.config = config
        self.policy = policy
        self.timing = timing
        self.index = index
        self.kv = KVCache(
            config.total_blocks, config.block_size, prefix_caching=config.prefix_caching
        )
        self.clock = IterationClock(timing, index)
        self.slo = slo
        self.violations = 0
        self.peak_blocks = 0  # most KV blocks in use at once
        # slow_upto[j]: iterations j' <= j whose gap since the previous end exceeds the
        # TPOT target, so a run of tokens (f, l) has slow_upto[l] - slow_upto[f] slow gaps
        self.count_gaps = slo is not None and slo.kind != "mean"
        self.slow_upto: list[int] = []
        self.view = _View(self)
        self.iteration = 0
        self.waiting: deque[_Request] = deque()
        self.running: dict[int, _Request] = {}  # by admission number, oldest first
        self.partials: dict[int, _Request] = {}
        self.n_decode = 0
        self.kv_sum = 0  # sum of kv_offset over running decodes
        self.buckets = [0] * config.block_size
        self.finish_at: dict[int, list[tuple[_Request, int]]] = {}
        self.batch: list[tuple[_Request, int]] = []
        self.iteration_end: list[float] = []
        self.admissions = 0
        self.finished = 0
        self.reused_tokens = 0
        self.start_pending = False
        self.busy = False
        self.last_token_s = 0.0
        self.record_batches = record_batches
        self.batches: list[BatchRecord] = []
        # Longest and shortest decode's KV, for cost models that use them.
        self.model_spread = uses_decode_spread(timing.predicted)
        self.actual_spread = timing.actual is not None and uses_decode_spread(timing.actual)
        self.spread = self.model_spread or self.actual_spread
        self.kv_heap: list[int] = []  # negated offsets, lazily deleted
        self.kv_low: list[int] = []  # offsets, lazily deleted
        self.kv_live: dict[int, int] = {}  # offset -> decodes holding it
        # Asynchronous scheduling (module docstring).
        self.inbox: list[_Request] = []  # arrived while a batch was in flight
        self.back_to_back = False  # the pending start follows an iteration end
        # requests finished in the last iteration, by admission number, with the KV
        # tokens they hold: their seats and blocks are not free yet
        self.held: dict[int, tuple[_Request, int]] = {}
        self._pending: tuple[float, tuple[int, ...], tuple[tuple[int, int], ...]] | None = None
        self._preempted: list[int] = []
        self._reused: list[tuple[int, int]] = []
        self._received: list[tuple[int, int]] = []
        # Clusters: the running iteration (its start and batch), and the requests whose
        # prefill completed and left in the last one (the driver takes them).
        self.started_s = 0.0
        self.shape: BatchShape | None = None
        self.handed_off: list[_Request] = []
        self.held_off = 0  # handed-off requests still holding blocks here

    # -- what the driver sees ----------------------------------------------------------------
    @property
    def evicted_blocks(self) -> int:
        """Cached KV blocks whose content an allocation overwrote."""
        return self.kv.evicted

    @property
    def has_work(self) -> bool:
        """Whether it has requests to serve (running, waiting or just arrived)."""
        return bool(self.running or self.waiting or self.inbox)

    @property
    def load(self) -> int:
        """vLLM's load-balancing score, ``4 * waiting + running``."""
        return 4 * (len(self.waiting) + len(self.inbox)) + len(self.running)

    def arrive(self, req: _Request) -> None:
        """Queue an arriving request (one iteration late under asynchronous scheduling
        while a batch is in flight)."""
        if self.config.async_scheduling and (self.busy or self.back_to_back):
            self.inbox.append(req)
        else:
            self.waiting.append(req)

    # -- the view's queue ------------------------------------------------------------------
    def waiting_with_cache(self) -> Iterator[_Request]:
        """The waiting queue; a request resumed after a preemption first learns how much
        of it the prefix cache still holds (its ``done``)."""
        kv, size = self.kv, self.config.block_size
        for req in self.waiting:
            if req.preemptions and kv.prefix_caching and not req.received:
                req.done = kv.cached_prefix(req.index, req.target) * size
            yield req

    # -- an iteration start ------------------------------------------------------------------
    def plan(self, now: float) -> BatchShape | None:
        """Plan and allocate the iteration starting at ``now`` (steps 1-3 of the module
        docstring); its batch's shape, or ``None`` when there is nothing to run."""
        config, kv, view = self.config, self.kv, self.view
        i = self.iteration
        phase = -i % config.block_size
        need = self.buckets[phase]
        while need > kv.free_blocks:  # step 1: the newest goes until the decodes fit
            need -= self._preempt_newest(i, phase)
        kv.allocate(need)
        if not self.back_to_back:  # the engine was idle: nothing was planned ahead
            self._release_lagged()
        view.now_s = now
        view.last_token_s = self.last_token_s
        admitting = not self._preempted
        for _ in range(2):
            while True:
                view.n_decode = self.n_decode
                view.decode_kv = self.kv_sum + self.n_decode * i
                if self.model_spread and self.n_decode:
                    view.decode_kv_max, view.decode_kv_min = self._decode_extremes(i)
                else:
                    view.decode_kv_max = view.decode_kv_min = None
                view.free_blocks = kv.free_blocks
                view.free_seats = config.max_num_seqs - len(self.running) - len(self.held)
                view.admitting = admitting
                plan = self.policy.plan(view)
                if plan or self.n_decode:
                    break
                if self.held or self.inbox:
                    # An empty lagged batch: the next scheduling pass sees everything.
                    self._release_lagged()
                    continue
                if self.partials:
                    # stuck prefills hold KV they cannot extend: free the newest
                    self._preempt_newest(i, phase)
                    admitting = False
                    continue
                if self.waiting and not admitting:
                    # nothing runs: vLLM's next scheduling pass, right away, admits again
                    admitting = True
                    continue
                if self.waiting and not self.held_off:
                    raise ServingError(
                        f"policy {self.policy.name!r}: empty batch at t={now:.6f} s with "
                        f"{len(self.waiting)} request(s) waiting and none running"
                    )
                return None  # idle until the next arrival (or a hand-off's blocks come back)
            chunks = self._apply(plan, i, phase, admitting)
            if self.batch or self.n_decode:
                break
            # The plan emptied itself: its only chunk's request was preempted to make
            # room for it. vLLM completes the empty batch at once and schedules again,
            # with what it has learnt since and no preemption in that pass.
            self._release_lagged()
            admitting = True
        else:
            return None
        for req, _ in self.batch:
            if math.isnan(req.first_chunk_s):
                req.first_chunk_s = now
        self.peak_blocks = max(self.peak_blocks, kv.used_blocks)
        if config.async_scheduling:
            self._release_lagged()
        self.busy = True
        if self.record_batches:
            decodes = tuple(r.index for r in self.running.values() if r.decoding)
            planned = tuple((r.index, c) for r, c in self.batch)
            self._pending = (now, decodes, planned)
        n = self.n_decode
        kv_max = kv_min = None
        if self.spread and n:
            kv_max, kv_min = self._decode_extremes(i)
        self.started_s = now
        self.shape = BatchShape(n, self.kv_sum + n * i, tuple(chunks), kv_max, kv_min)
        return self.shape

    def duration(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float:
        """How long this replica's batch ``shape`` takes (:meth:`IterationClock.seconds`)."""
        return self.clock.seconds(shape, group)

    def projected_kv_peak(self) -> int:
        r"""The most KV tokens the admitted requests will hold at once from this iteration
        on, if each stops at its predicted output (``proofs/sloweave_kv.md``), counted in
        whole blocks.

        A decode holding :math:`h` tokens now with :math:`r = \max(\hat o - g, 1)`
        iterations left (``g`` tokens generated) holds :math:`h + k` at offset
        :math:`k < r`, plus at most ``block_size - 1`` in its last block; under
        asynchronous scheduling its blocks are freed one iteration late, after the
        next iteration's decodes took theirs, so it counts through offset :math:`r`
        too. A request still
        prefilling is reserved at the blocks of its final size
        (:func:`~schedlab.serving.view.reserved_tokens`) throughout; blocks of requests
        that finished in the last iteration (asynchronous scheduling) count too. The
        maximum over offsets is :func:`~schedlab.serving.view.decode_kv_peak`.
        """
        config = self.config
        i = self.iteration
        slack = config.block_size - 1
        lag = 1 if config.async_scheduling else 0
        reserved = sum(config.blocks(tokens) for _, tokens in self.held.values())
        reserved *= config.block_size
        rests: list[int] = []
        holds: list[int] = []
        for req in self.running.values():
            if req.decoding:
                generated = req.gen_at_join + (i - req.join_iter)
                rests.append(max(req.predicted_output - generated, 1) + lag)
                holds.append(req.kv_offset + i + slack)
            else:
                reserved += rules.reserved_tokens(config, req)
        return reserved + rules.decode_kv_peak(holds, rests)

    def _release_lagged(self) -> None:
        """Make the lagged seats, blocks and arrivals visible to the next plan."""
        for req, tokens in self.held.values():
            self.kv.free(req.index, tokens, keep=False)
        self.held.clear()
        if self.inbox:
            self.waiting.extend(self.inbox)
            self.inbox.clear()

    def _decode_extremes(self, i: int) -> tuple[int, int]:
        """KV tokens of the longest and shortest running decode at iteration ``i``."""
        live = self.kv_live
        high, low = self.kv_heap, self.kv_low
        while -high[0] not in live:
            heapq.heappop(high)
        while low[0] not in live:
            heapq.heappop(low)
        return i - high[0], i + low[0]

    def _forget_decode(self, req: _Request) -> None:
        self.n_decode -= 1
        self.kv_sum -= req.kv_offset
        self.buckets[req.bucket] -= 1
        req.decoding = False
        if self.spread:
            live = self.kv_live
            left = live[req.kv_offset] - 1
            if left:
                live[req.kv_offset] = left
            else:
                del live[req.kv_offset]

    # -- applying a plan -------------------------------------------------------------------
    def _apply(self, plan: Plan, i: int, phase: int, admitting: bool) -> list[Chunk]:
        """Check a policy's plan, admit and allocate for it (step 3 of the module
        docstring); the cost-model chunks. The decodes' blocks are allocated already."""
        config, kv = self.config, self.kv
        name = self.policy.name
        chunks: list[Chunk] = []
        batch: list[tuple[_Request, int]] = []
        tokens = self.n_decode
        preempted = len(self._preempted)
        for planned, c in plan:
            if not isinstance(planned, _Request):
                raise ServingError(
                    f"policy {name!r}: planned {planned!r}, not one of its requests"
                )
            req = planned
            if not req.admitted and not (admitting and len(self._preempted) == preempted):
                break  # vLLM admits nothing in an iteration that preempted
            remaining = req.target - req.done
            if not 1 <= c <= remaining or any(r is req for r, _ in batch):
                raise ServingError(
                    f"policy {name!r}: chunk of {c} tokens for request {req.index} with "
                    f"{remaining} left (or the request twice in one batch)"
                )
            if req.admitted:
                if req.seq not in self.partials:
                    raise ServingError(f"policy {name!r}: request {req.index} is not prefilling")
                cost = config.blocks(req.done + c) - config.blocks(req.done)
                while cost > kv.free_blocks and req.admitted:  # vLLM's running phase
                    self._preempt_newest(i, phase, chunked=batch)
                if not req.admitted:
                    break  # it preempted itself
            else:
                if req.preemptions and kv.prefix_caching and not req.received:
                    # earlier chunks may have evicted its cached blocks
                    req.done = kv.cached_prefix(req.index, req.target) * config.block_size
                cost = config.blocks(req.done + c)
                if not (cost <= kv.free_blocks and self.view.admissible(req, kv.free_blocks)):
                    raise ServingError(
                        f"policy {name!r}: admitting request {req.index} with a chunk of {c} "
                        f"needs {cost} KV blocks (the gate {config.blocks(req.target)}), "
                        f"only {kv.free_blocks} free"
                    )
                self._admit(req)
                hits = 0 if req.received else req.done // config.block_size
                if req.received:  # KV from another node: new blocks, not computed here
                    if self.record_batches:
                        self._received.append((req.index, req.received))
                    req.received = 0
                elif hits:
                    kv.reuse(req.index, hits)
                    self.reused_tokens += req.done
                    if self.record_batches:
                        self._reused.append((req.index, req.done))
                cost -= hits
            kv.allocate(cost)
            chunks.append((c, req.done))
            batch.append((req, c))
            req.done += c
            req.prefilled += c
            tokens += c
        whole_alone = len(batch) == 1 and not self.policy.chunked
        if tokens > config.max_num_batched_tokens and not whole_alone:
            raise ServingError(
                f"policy {name!r}: {tokens} batched tokens exceed max_num_batched_tokens "
                f"{config.max_num_batched_tokens}"
            )
        self.batch = batch
        return chunks

    def _admit(self, req: _Request) -> None:
        name = self.policy.name
        if self.waiting and self.waiting[0] is req:
            self.waiting.popleft()
        elif req in self.waiting:
            self.waiting.remove(req)
        else:
            raise ServingError(f"policy {name!r}: request {req.index} is not waiting")
        if len(self.running) + len(self.held) >= self.config.max_num_seqs:
            raise ServingError(f"policy {name!r}: admits beyond max_num_seqs")
        self.admissions += 1
        req.seq = self.admissions
        req.admitted = True
        self.running[req.seq] = req
        self.partials[req.seq] = req

    def _preempt_newest(
        self, i: int, phase: int, chunked: list[tuple[_Request, int]] | None = None
    ) -> int:
        """Preempt the newest admitted request at the start of iteration ``i``; 1 if it
        was a decode needing a block there.

        With ``chunked`` (the batch so far) the iteration's blocks are allocated already:
        a decode victim gives back its new block too, and a victim given a chunk is taken
        back out of the batch, the chunk's blocks freed without content.

        The blocks that stay cached are the full ones of tokens whose ids the scheduler
        knew. Under asynchronous scheduling, vLLM plans iteration ``i`` before it has
        the token that iteration ``i - 1`` sampled, so a victim that decoded in
        ``i - 1`` has one token computed but not yet known, and not hashed: vLLM caches
        blocks up to ``num_computed_tokens - num_output_placeholders``
        (``vllm/v1/core/sched/async_scheduler.py`` lines 55–58) and, on allocation, up
        to the tokens it knows (``kv_cache_manager.py``, ``allocate_slots``).
        """
        if self.held and (not self.running or max(self.held) > next(reversed(self.running))):
            self._preempt_finished()
            return 0
        _, victim = self.running.popitem()
        saved = 0
        if victim.decoding:
            generated = victim.gen_at_join + (i - victim.join_iter)
            computed = held = victim.prompt + generated - 1
            if self.config.async_scheduling and victim.join_iter < i:
                computed -= 1  # the token of iteration i - 1 is not known yet
            saved = 1 if victim.bucket == phase else 0
            if chunked is not None:
                held += saved
            self._forget_decode(victim)
            victim.segments.append((victim.seg_start, i - 1))
            victim.generated = generated
            victim.epoch += 1
        else:
            computed = held = victim.done
            del self.partials[victim.seq]
            for k, (req, c) in enumerate(chunked or ()):
                if req is victim:  # its chunk was allocated: it does not run
                    del chunked[k]  # type: ignore[union-attr]
                    computed -= c
                    victim.prefilled -= c
                    break
        self.kv.free(victim.index, held, keep=True, computed=computed)
        victim.target = victim.prompt + victim.generated
        victim.done = 0
        victim.admitted = False
        victim.preemptions += 1
        self.waiting.appendleft(victim)
        self._preempted.append(victim.index)
        return saved

    # -- an iteration end --------------------------------------------------------------------
    def end(self, now: float) -> None:
        """Finish the running iteration at ``now``: emit tokens, finish requests."""
        config = self.config
        i = self.iteration
        self.iteration = i + 1
        if self.count_gaps:
            ends = self.iteration_end
            slow = i > 0 and now - ends[-1] > self.slo.gap_limit_s  # type: ignore[union-attr]
            self.slow_upto.append((self.slow_upto[-1] if i else 0) + slow)
        self.iteration_end.append(now)
        self.last_token_s = now
        if self.record_batches and self._pending is not None:
            start, decodes, planned = self._pending
            self.batches.append(
                BatchRecord(
                    start,
                    now,
                    decodes,
                    planned,
                    tuple(self._preempted),
                    tuple(self._reused),
                    len(self.running),
                    len(self.waiting),
                    self.kv.used_blocks,
                    tuple(r.index for r, _ in self.batch if r.hand_off and r.done == r.target),
                    tuple(self._received),
                    self.shape,
                )
            )
            self._reused = []
            self._received = []
        self._preempted.clear()
        finishing = self.finish_at.pop(i, None)
        if finishing:
            for req, epoch in finishing:
                if req.epoch == epoch:
                    self._forget_decode(req)
                    self._finish(req, now, i, req.prompt + req.output - 1)
        seconds = now - self.started_s
        for req, _ in self.batch:
            if math.isnan(req.first_token_s):  # the TTFT breakdown (cluster module)
                if req.transferred and req.done == req.target:
                    req.first_decode_s = seconds  # it emits its first token now
                else:
                    req.prefill_exec_s += seconds
            if req.done < req.target:
                continue
            del self.partials[req.seq]
            if req.hand_off:
                self._hand_off(req, now)
                continue
            req.generated += 1
            req.seg_start = i
            if math.isnan(req.first_token_s):
                req.first_token_s = now
                slo = self.slo
                if slo is not None and now - req.arrival_s > slo.ttft_limit_s:
                    req.violated = True
                    self.violations += 1
            if req.generated == req.output:
                self._finish(req, now, i, req.target)
                continue
            # decode iteration j >= i + 1 attends kv_offset + j tokens and needs a block
            # when it computes token kv_offset + j - 1 at a block boundary
            req.decoding = True
            req.join_iter = i + 1
            req.gen_at_join = req.generated
            req.kv_offset = req.target - i
            req.bucket = (req.kv_offset - 1) % config.block_size
            self.buckets[req.bucket] += 1
            self.n_decode += 1
            self.kv_sum += req.kv_offset
            if self.spread:
                offset = req.kv_offset
                self.kv_live[offset] = self.kv_live.get(offset, 0) + 1
                heapq.heappush(self.kv_heap, -offset)
                heapq.heappush(self.kv_low, offset)
            self.finish_at.setdefault(i + req.output - req.generated, []).append((req, req.epoch))
        self.batch = []

    def _hand_off(self, req: _Request, now: float) -> None:
        """A prefill-only node's request finished its prefill: it leaves its seat, emits
        nothing here, and keeps its ``target`` KV tokens until :meth:`release`."""
        del self.running[req.seq]
        req.admitted = False
        req.hand_off = False
        req.prefill_end_s = now
        req.prefill_side_exec_s = req.prefill_exec_s
        self.handed_off.append(req)
        self.held_off += 1

    def release(self, req: _Request) -> None:
        """Free the blocks of a request handed off to another node, once its KV has left
        (the end of its transfer)."""
        self.kv.free(req.index, req.prompt, keep=False)
        self.held_off -= 1

    def _preempt_finished(self) -> None:
        """Preempt the newest request that finished in the last iteration, under
        asynchronous scheduling: vLLM plans this iteration before it knows that request
        finished, so it is still running there and can be the newest
        (``scheduler.py``, ``_preempt_request``): its seat and blocks are freed now,
        and vLLM counts the preemption."""
        seq = max(self.held)
        req, tokens = self.held.pop(seq)
        self.kv.free(req.index, tokens, keep=False)
        req.preemptions += 1
        self._preempted.append(req.index)

    def _finish(self, req: _Request, now: float, i: int, tokens: int) -> None:
        del self.running[req.seq]
        if self.config.async_scheduling:
            self.held[req.seq] = (req, tokens)
        else:
            self.kv.free(req.index, tokens, keep=False)
        req.generated = req.output
        req.segments.append((req.seg_start, i))
        req.finish_s = now
        req.admitted = False
        self.finished += 1
        slo = self.slo
        if slo is None or req.violated or req.output == 1:
            return
        if slo.kind == "mean":
            missed = (now - req.first_token_s) / (req.output - 1) > slo.gap_limit_s
        else:
            missed = self._slow_gaps(req.segments) > allowed_slow_gaps(slo, req.output)
        if missed:
            req.violated = True
            self.violations += 1

    def _slow_gaps(self, segments: list[tuple[int, int]]) -> int:
        """Gaps longer than the TPOT target between the tokens of ``segments`` (the same
        comparison of the same floats as :func:`~schedlab.serving.metrics.request_itl`)."""
        upto, ends = self.slow_upto, self.iteration_end
        limit = self.slo.gap_limit_s  # type: ignore[union-attr]
        slow = 0
        for k, (first, last) in enumerate(segments):
            slow += upto[last] - upto[first]
            if k and ends[first] - ends[segments[k - 1][1]] > limit:
                slow += 1
        return slow

    def close_open_segments(self) -> None:
        """Record the tokens of requests still decoding when the run stopped."""
        for req in self.running.values():
            if req.decoding:
                req.segments.append((req.seg_start, self.iteration - 1))


#: The longest iteration a cost model may predict, in seconds: an hour, as for the
#: measured times of a GPU profile (:data:`schedlab.calibration.profiles.MAX_TIME_S`).
#: Far beyond any real batch, it keeps the clock's sums far from overflowing to
#: infinity (a coefficient of 1e307 s did, and ``--json`` printed ``Infinity``).
MAX_ITERATION_S = 3600.0


def _checked(seconds: float, shape: BatchShape) -> float:
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_ITERATION_S):
        raise ServingError(
            f"cost model: iteration time {seconds!r} s for {shape.n_decode} decodes and "
            f"chunks {list(shape.chunks)} must be positive and at most "
            f"{MAX_ITERATION_S:g} s"
        )
    return seconds


def check_capacity(stream: RequestStream, config: EngineConfig, where: str = "") -> None:
    """Refuse a stream with a request whose prompt and output, :math:`P + O - 1` KV
    tokens at its last decode, exceed ``config``'s KV cache: it could never run.

    Raises
    ------
    ServingError
        Naming the largest such request, and ``where`` (e.g. ``node 2``) if given.
    """
    if not len(stream):
        return
    sizes = stream.prompt + stream.output - 1
    i = int(np.argmax(sizes))
    if config.blocks(int(sizes[i])) > config.total_blocks:
        place = f" of {where}" if where else ""
        raise ServingError(
            f"request {i}: prompt + output = {int(sizes[i]) + 1} tokens exceeds the KV "
            f"capacity{place} ({config.total_blocks} blocks of {config.block_size}); it "
            "could never run"
        )


def least_loaded(engines: Sequence[Replica]) -> Replica:
    """The replica of least ``4 * waiting + running``, the first on ties (vLLM's score)."""
    return min(engines, key=lambda engine: engine.load)


class Driver:
    """The event loop of one or more replicas serving one request stream.

    Parameters
    ----------
    stream
        The requests.
    engines
        The replicas (one for a plain engine).
    lockstep
        Replicas step together (mixture of experts with expert parallelism; module
        docstring); otherwise each steps on its own.
    slo, max_violations
        Stop as soon as more than ``max_violations`` requests are known to miss ``slo``.
    stop_at_s
        Stop at this simulated time.
    predicted_output
        The output lengths policies see (:mod:`schedlab.serving.prediction`; default the
        true ones).
    """

    def __init__(
        self,
        stream: RequestStream,
        engines: Sequence[Replica],
        *,
        lockstep: bool = False,
        max_violations: int | None = None,
        stop_at_s: float | None = None,
        predicted_output: np.ndarray | None = None,
    ) -> None:
        if not engines:
            raise ServingError("driver: needs at least one engine")
        self.engines: Sequence[Replica] = list(engines)
        self.lockstep = lockstep and len(engines) > 1
        predicted = stream.output if predicted_output is None else predicted_output
        self.requests = [
            _Request(i, float(a), int(p), int(o), int(q))
            for i, (a, p, o, q) in enumerate(
                zip(stream.arrival_s, stream.prompt, stream.output, predicted, strict=True)
            )
        ]
        configs = [e.config for e in engines]
        for k, config in enumerate(configs):
            if config not in configs[:k]:
                check_capacity(stream, config, f"node {k}" if len(engines) > 1 else "")
        self.stop_at_s = math.inf if stop_at_s is None else stop_at_s
        self.max_violations = len(self.requests) if max_violations is None else max_violations
        self.heap: list[tuple[float, int, int, int]] = []
        self.events = 0
        self.finished = self.violations = 0  # over all replicas
        self.group_pending = False  # lockstep: a group start is queued
        self.group_back_to_back = False

    def _push(self, t: float, kind: int, engine: int) -> None:
        self.events += 1
        heapq.heappush(self.heap, (t, kind, self.events, engine))

    def run(self) -> float:
        """Process events until every request finished or a stop rule fires; the end time."""
        requests, heap, engines = self.requests, self.heap, self.engines
        next_arrival = 0
        if requests:
            self._push(requests[0].arrival_s, _ARRIVAL, -1)
        now = 0.0
        total = len(requests)
        while heap:
            t, kind, _, index = heapq.heappop(heap)
            if t > self.stop_at_s:
                now = self.stop_at_s
                break
            now = t
            if kind == _END:
                self._end(t, index)
                if self.finished == total or self.violations > self.max_violations:
                    break
            elif kind == _ARRIVAL:
                req = requests[next_arrival]
                next_arrival += 1
                if next_arrival < total:
                    self._push(requests[next_arrival].arrival_s, _ARRIVAL, -1)
                self._arrive(t, req)
            elif kind == _START:
                self._start(t, index)
            else:
                self._event(t, kind, index)
        for engine in engines:
            engine.close_open_segments()
        return now

    def _arrive(self, t: float, req: _Request) -> None:
        """A request arrives: to the least loaded replica (vLLM's balancer)."""
        engines = self.engines
        engine = engines[0] if len(engines) == 1 else least_loaded(engines)
        req.replica = engine.index
        engine.arrive(req)
        self._wake(t, engine)

    def _event(self, t: float, kind: int, index: int) -> None:
        """An event of a kind a subclass adds (:data:`EVENT_KINDS`); none here."""
        raise ServingError(f"driver: unknown event kind {kind}")

    def _wake(self, t: float, engine: Replica) -> None:
        """An arrival: start an idle replica (or the idle group)."""
        if self.lockstep:
            if not any(e.busy for e in self.engines) and not self.group_pending:
                self.group_pending = True
                self._push(t, _START, -1)
        elif not engine.busy and not engine.start_pending:
            engine.start_pending = True
            self._push(t, _START, engine.index)

    def _start(self, t: float, index: int) -> None:
        if not self.lockstep:
            engine = self.engines[index]
            shape = engine.plan(t)
            engine.start_pending = engine.back_to_back = False
            if shape is not None:
                self._push(t + engine.duration(shape), _END, index)
            return
        self.group_pending = False
        shapes = []
        active = []
        for engine in self.engines:
            shape = engine.plan(t)
            engine.back_to_back = False
            if shape is not None:
                shapes.append(shape)
                active.append(engine)
            else:  # a replica without work runs a dummy batch of one token
                shapes.append(BatchShape(1, 1, ()))
        if not active:
            return
        lead = self.engines.index(active[0])
        seconds = active[0].duration(shapes[lead], shapes)
        for engine in active:
            self._push(t + seconds, _END, engine.index)

    def _end(self, t: float, index: int) -> None:
        engine = self.engines[index]
        finished, violations = engine.finished, engine.violations
        engine.end(t)
        self.finished += engine.finished - finished
        self.violations += engine.violations - violations
        engine.busy = False
        if self.lockstep:
            if any(e.busy for e in self.engines) or self.group_pending:
                return  # the other replicas' ends of the same step come next
            if any(e.has_work for e in self.engines):
                self.group_pending = True
                for e in self.engines:
                    e.back_to_back = True
                self._push(t, _START, -1)
            return
        if engine.has_work:
            engine.start_pending = engine.back_to_back = True
            self._push(t, _START, index)

    def result(self, end_s: float) -> EngineRun:
        """The run's outcome, once :meth:`run` returned ``end_s``: the replicas' iterations
        one after another (a request's segments index into them)."""
        offsets: list[int] = []
        ends: list[list[float]] = []
        batches: list[BatchRecord] = []
        for engine in self.engines:
            offsets.append(sum(len(e) for e in ends))
            ends.append(engine.iteration_end)
            batches.extend(engine.batches)
        records = []
        for req in self.requests:
            shift = offsets[req.replica]
            if shift:
                req.segments = [(a + shift, b + shift) for a, b in req.segments]
            records.append(req.record())
        lead = self.engines[0]
        stats: dict[str, int] = {}
        for engine in self.engines:
            for key, value in engine.policy.stats.items():
                stats[key] = stats.get(key, 0) + value
        return EngineRun(
            tuple(records),
            np.asarray([t for e in ends for t in e], dtype=float),
            end_s,
            stats,
            tuple(batches),
            sum(e.evicted_blocks for e in self.engines),
            sum(e.reused_tokens for e in self.engines),
            lead.policy.name,
            lead.timing.predicted.name,
            tuple(len(e) for e in ends),
            max(e.peak_blocks * e.config.block_size for e in self.engines),
            hardware_of(lead.timing.predicted),
        )
