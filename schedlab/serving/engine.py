r"""One continuous-batching replica: its queues, seats, KV cache and iterations
(``docs/design.md``, "Online model").

An :class:`Engine` is driven by :class:`~schedlab.serving.driver.Driver` through the
:class:`~schedlab.serving.engine_kinds.Replica` protocol (requests arrive, iterations are
planned, timed and ended), and in a cluster through the hand-over part of
:class:`~schedlab.serving.engine_kinds.HandOverReplica` (section "Hand-over" below).
Each request's state is a :class:`~schedlab.serving.request_state.RequestState`; a policy
sees the engine through the :class:`~schedlab.serving.view.EngineView` it gets each
iteration.

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

Hand-over
---------
A cluster (:mod:`schedlab.serving.cluster`) moves requests between engines with their KV.
A request that arrives with ``hand_off`` (:meth:`Engine.arrive`) is served until its
prefill completes; it then leaves its seat without emitting a token, is returned by
:meth:`Engine.take_handed_off` at the end of that iteration, and keeps its prompt's
blocks until :meth:`Engine.release` (its KV has left). A request whose KV comes from
another node joins the waiting queue through :meth:`Engine.receive`; it is admitted like
any other, its blocks allocated then without being computed here, and prefills the rest
of its prompt.

Cost
----
Per iteration the work is ``O(1)`` plus the requests that join, finish or are
preempted and the blocks allocated: all decodes advance together, so a decode's KV,
block boundaries and finishing iteration follow from the iteration at which it joined
(:class:`~schedlab.serving.decode_cohort.DecodeCohort`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

from schedlab.errors import ServingError
from schedlab.serving.cost_model import BatchShape, Chunk, uses_decode_spread
from schedlab.serving.decode_cohort import DecodeCohort
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.iteration import BatchRecord, IterationClock, IterationTime
from schedlab.serving.kv_cache import KVCache
from schedlab.serving.metrics import SLO
from schedlab.serving.policies import Policy
from schedlab.serving.policy_view import PolicyView
from schedlab.serving.request_state import RequestState
from schedlab.serving.slo_tally import SloTally
from schedlab.serving.view import Plan, RequestView

__all__ = ["Engine"]


class Engine:
    """One replica's scheduler: its queues, seats, KV cache and iterations (module
    docstring). A :class:`~schedlab.serving.driver.Driver` feeds it requests and times its
    iterations.

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
        self.peak_blocks = 0  # most KV blocks in use at once
        self.view = PolicyView(self)
        self.iteration = 0
        self.waiting: deque[RequestState] = deque()
        self.running: dict[int, RequestState] = {}  # by admission number, oldest first
        self.partials: dict[int, RequestState] = {}
        self.finish_at: dict[int, list[tuple[RequestState, int]]] = {}
        self.batch: list[tuple[RequestState, int]] = []
        self.iteration_end: list[float] = []
        self.tally = SloTally(slo, self.iteration_end)
        self.admissions = 0
        self.finished = 0
        self.reused_tokens = 0
        self.prefix_hits = 0  # tokens new requests found in the prefix cache
        self.start_pending = False
        self.busy = False
        self.last_token_s = 0.0
        self.record_batches = record_batches
        self.batches: list[BatchRecord] = []
        # The running decodes, with the longest and shortest KV for cost models that use
        # them (the policy's view shows them only if the predicted model does).
        self.model_spread = uses_decode_spread(timing.predicted)
        actual_spread = timing.actual is not None and uses_decode_spread(timing.actual)
        self.decodes = DecodeCohort(config.block_size, self.model_spread or actual_spread)
        # Asynchronous scheduling (module docstring).
        self.inbox: list[RequestState] = []  # arrived while a batch was in flight
        self.back_to_back = False  # the pending start follows an iteration end
        # requests finished in the last iteration, by admission number, with the KV
        # tokens they hold: their seats and blocks are not free yet
        self.held: dict[int, tuple[RequestState, int]] = {}
        self._pending: dict[str, Any] | None = None  # the record of the iteration running
        self._preempted: list[int] = []
        self._preempted_finished = 0  # of them, requests that had finished (async)
        # the scheduling pass being planned: (iteration, its block phase, whether it may
        # admit, preemptions before it), the chunks the policy took, the cost-model
        # chunks, and whether it admits nothing more
        self._pass = (0, 0, True, 0)
        self._taken: list[tuple[RequestState, int]] = []
        self._chunks: list[Chunk] = []
        self._closed = False
        self._reused: list[tuple[int, int]] = []
        self._received: list[tuple[int, int]] = []
        # The running iteration (its start and batch; read by a cluster's routers), and the
        # requests whose prefill completed and left in the last one (take_handed_off).
        self.started_s = 0.0
        self.shape: BatchShape | None = None
        self._handed_off: list[RequestState] = []
        self.held_off = 0  # handed-off requests still holding blocks here

    # -- what the driver sees ----------------------------------------------------------------
    @property
    def evicted_blocks(self) -> int:
        """Cached KV blocks whose content an allocation overwrote."""
        return self.kv.evicted

    @property
    def violations(self) -> int:
        """Requests known to miss the SLO (:class:`~schedlab.serving.slo_tally.SloTally`)."""
        return self.tally.violations

    @property
    def has_work(self) -> bool:
        """Whether it has requests to serve (running, waiting or just arrived)."""
        return bool(self.running or self.waiting or self.inbox)

    @property
    def counts(self) -> tuple[int, int]:
        """``(waiting, running)`` as vLLM's scheduler reports them to its data-parallel
        balancer (:mod:`schedlab.serving.dp_balancer`): requests that arrived while a
        batch was in flight are not counted yet."""
        return len(self.waiting), len(self.running)

    def arrive(self, req: RequestState, *, hand_off: bool = False) -> None:
        """Queue an arriving request (one iteration late under asynchronous scheduling
        while a batch is in flight); with ``hand_off``, it leaves for another node when its
        prefill completes (module docstring, "Hand-over")."""
        req.hand_off = hand_off
        if self.config.async_scheduling and (self.busy or self.back_to_back):
            self.inbox.append(req)
        else:
            self.waiting.append(req)

    # -- what a cluster sees: the hand-over and the load (module docstring) ------------------
    def running_chunks(self) -> list[tuple[RequestState, int]]:
        """The prefill chunks of the iteration running, ``(request, tokens)``."""
        return self.batch

    def take_handed_off(self) -> list[RequestState]:
        """The requests whose prefill completed and that left in the iteration that just
        ended, in the order they did; each holds its blocks here until :meth:`release`."""
        handed, self._handed_off = self._handed_off, []
        return handed

    def release(self, req: RequestState) -> None:
        """Free the blocks of a request handed off to another node, once its KV has left
        (the end of its transfer)."""
        self._free_done(req, req.prompt)
        self.held_off -= 1

    def receive(self, req: RequestState, tokens: int) -> None:
        """A request prefilled on another node arrives with the KV of its first
        ``tokens`` prompt tokens (fewer than its prompt: the rest is prefilled here, and
        emits its first token); its blocks are allocated when it is admitted.

        Raises
        ------
        ServingError
            If ``tokens`` is not from 0 to the prompt less one, or the request emitted a
            token already.
        """
        if not 0 <= tokens < req.prompt or req.generated:
            raise ServingError(
                f"engine {self.index}: request {req.index} with a prompt of {req.prompt} "
                f"tokens and {req.generated} emitted cannot receive {tokens} KV tokens"
            )
        req.target = req.prompt
        req.done = req.received = tokens
        self.arrive(req)

    def requests(self) -> Iterator[RequestState]:
        """The requests it holds: waiting (arrived), then admitted (oldest first); not
        those handed off."""
        return chain(self.waiting, self.inbox, self.running.values())

    @property
    def n_decode(self) -> int:
        """Running decodes."""
        return self.decodes.n

    @property
    def decode_kv(self) -> int:
        """KV tokens the running decodes attend to at the next iteration, in total."""
        return self.decodes.kv(self.iteration)

    def prefill_queue(self) -> Iterator[RequestState]:
        """The requests with prompt left to prefill, in the policy's order: partial
        prefills by admission, then the waiting queue (and, under asynchronous
        scheduling, the arrivals it has not seen yet)."""
        return chain(self.partials.values(), self.waiting, self.inbox)

    def next_decodes(self) -> BatchShape:
        """The running decodes as the next iteration will batch them if none finishes at
        the end of the running one: their count, KV tokens attended, and longest and
        shortest KV when the cost models use them (no chunks)."""
        return self.decodes.shape(self.iteration + 1 if self.busy else self.iteration)

    @property
    def free_blocks(self) -> int:
        """KV blocks free now."""
        return self.kv.free_blocks

    # -- the view's queue ------------------------------------------------------------------
    def look_up(self, req: RequestState) -> None:
        """Set a waiting request's ``done`` and ``held_hits`` to what the prefix cache holds
        of it now (a request resumed after a preemption, or one that shares prefixes)."""
        kv, size = self.kv, self.config.block_size
        if (req.preemptions or req.prefix is not None) and kv.prefix_caching and not req.received:
            hits, req.held_hits = kv.lookup(req.index, req.target, req.shared_blocks(size))
            req.done = hits * size

    # -- an iteration start ------------------------------------------------------------------
    def plan(self, now: float) -> BatchShape | None:
        """Plan and allocate the iteration starting at ``now`` (steps 1-3 of the module
        docstring); its batch's shape, or ``None`` when there is nothing to run."""
        config, kv, view, decodes = self.config, self.kv, self.view, self.decodes
        i = self.iteration
        phase = -i % config.block_size
        need = decodes.buckets[phase]  # the decodes whose next token starts a block
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
                self._start_pass(i, phase, admitting)
                plan = self.policy.plan(view)
                if plan or decodes.n:
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
            chunks = self._finish_plan(plan)
            if self.batch or decodes.n:
                break
            # The plan emptied itself: its only chunk's request was preempted to make
            # room for it. vLLM completes the empty batch at once and schedules again,
            # with what it has learnt since and no preemption in that pass.
            self._release_lagged()
            admitting = True
        else:
            return None
        self.peak_blocks = max(self.peak_blocks, kv.used_blocks)
        # the scheduler's queues once the batch is scheduled (a request that finished in
        # the last iteration is still running for it under asynchronous scheduling)
        # (a finished request it preempted is waiting there until it learns it finished)
        queues = (
            len(self.running) + len(self.held),
            len(self.waiting) + self._preempted_finished,
        )
        if config.async_scheduling:
            self._release_lagged()
        self.busy = True
        if self.record_batches:
            self._pending = {
                "start_s": now,
                "decodes": tuple(r.index for r in self.running.values() if r.decoding),
                "chunks": tuple((r.index, c) for r, c in self.batch),
                "running": queues[0],
                "waiting": queues[1],
            }
        self.started_s = now
        self.shape = decodes.shape(i, chunks)
        return self.shape

    def duration(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float:
        """How long this replica's batch ``shape`` takes
        (:meth:`~schedlab.serving.iteration.IterationClock.seconds`)."""
        return self.clock.seconds(shape, group)

    def _release_lagged(self) -> None:
        """Make the lagged seats, blocks and arrivals visible to the next plan."""
        for req, tokens in self.held.values():
            self._free_done(req, tokens)
        self.held.clear()
        if self.inbox:
            self.waiting.extend(self.inbox)
            self.inbox.clear()

    # -- applying a plan -------------------------------------------------------------------
    def _start_pass(self, i: int, phase: int, admitting: bool) -> None:
        """Open a scheduling pass of iteration ``i``: the view shows the engine as it is,
        and no chunk is taken yet."""
        self._pass = (i, phase, admitting, len(self._preempted))
        self._taken = []
        self._chunks = []
        self._closed = False
        self.batch = []
        self.view.start_pass(i, self.model_spread, admitting)

    def take(self, req: RequestView, c: int) -> bool:
        """Apply one chunk of the plan now (:meth:`~schedlab.serving.view.EngineView.take`)."""
        if self._closed:
            return False
        if not isinstance(req, RequestState):
            raise ServingError(
                f"policy {self.policy.name!r}: took {req!r}, not one of its requests"
            )
        self._taken.append((req, c))
        ran = self._apply_one(req, c)
        # the pass admits while it may and has preempted nothing
        self.view.refresh(self._pass[2] and len(self._preempted) == self._pass[3])
        return ran

    def _finish_plan(self, plan: Plan) -> list[Chunk]:
        """Apply what a policy's plan did not take already (step 3 of the module
        docstring), check the batch's token budget; the cost-model chunks."""
        name = self.policy.name
        taken = self._taken
        if len(plan) < len(taken) or any(
            p is not r or pc != c for (p, pc), (r, c) in zip(plan, taken, strict=False)
        ):
            raise ServingError(f"policy {name!r}: returned a plan other than the chunks it took")
        for planned, c in plan[len(taken) :]:
            if self._closed:
                break
            self._apply_one(planned, c)
        tokens = self.decodes.n + sum(c for _, c in self.batch)
        whole_alone = len(self.batch) == 1 and not self.policy.chunked
        if tokens > self.config.max_num_batched_tokens and not whole_alone:
            raise ServingError(
                f"policy {name!r}: {tokens} batched tokens exceed max_num_batched_tokens "
                f"{self.config.max_num_batched_tokens}"
            )
        return self._chunks

    def _apply_one(self, planned: object, c: int) -> bool:
        """Check one chunk of a plan, admit and allocate for it; whether it runs (when it
        does not, the pass is closed: vLLM stops there). The decodes' blocks are
        allocated already."""
        config, kv = self.config, self.kv
        name = self.policy.name
        i, phase, admitting, preempted = self._pass
        batch = self.batch
        if not isinstance(planned, RequestState):
            raise ServingError(f"policy {name!r}: planned {planned!r}, not one of its requests")
        req = planned
        if not req.admitted and not (admitting and len(self._preempted) == preempted):
            self._closed = True  # vLLM admits nothing in an iteration that preempted
            return False
        if any(r is req for r, _ in batch):
            raise ServingError(f"policy {name!r}: request {req.index} twice in one batch")
        shared = None if req.prefix is None else req.shared_blocks(config.block_size)
        if req.admitted:
            if req.seq not in self.partials:
                raise ServingError(f"policy {name!r}: request {req.index} is not prefilling")
            self._check_chunk(req, c)
            cost = config.blocks(req.done + c) - config.blocks(req.done)
            while cost > kv.free_blocks and req.admitted:  # vLLM's running phase
                self._preempt_newest(i, phase, chunked=batch)
            if not req.admitted:
                self._closed = True  # it preempted itself
                return False
        else:
            shown = req.done
            self.look_up(req)  # earlier chunks may have cached or evicted its blocks
            if shown < req.done and c > req.target - req.done:
                c = req.target - req.done  # a plan made without take saw fewer hits
            self._check_chunk(req, c)
            cost = config.blocks(req.done + c) - req.held_hits
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
                kv.reuse(req.index, hits, shared)
                self.reused_tokens += req.done
                if not req.preemptions:  # a new request's hit (vLLM's hit rate counts these)
                    req.cache_hits = req.done
                    self.prefix_hits += req.done
                if self.record_batches:
                    self._reused.append((req.index, req.done))
            req.held_hits = 0
            cost = config.blocks(req.done + c) - hits
        kv.allocate(cost)
        kv.name(req.index, req.done + c, shared)
        self._chunks.append((c, req.done))
        batch.append((req, c))
        req.done += c
        req.prefilled += c
        return True

    def _check_chunk(self, req: RequestState, c: int) -> None:
        remaining = req.target - req.done
        if not 1 <= c <= remaining:
            raise ServingError(
                f"policy {self.policy.name!r}: chunk of {c} tokens for request {req.index} "
                f"with {remaining} left"
            )

    def _admit(self, req: RequestState) -> None:
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
        self, i: int, phase: int, chunked: list[tuple[RequestState, int]] | None = None
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
            generated = victim.generated_by(i)
            computed = held = victim.prompt + generated - 1
            if self.config.async_scheduling and victim.join_iter < i:
                computed -= 1  # the token of iteration i - 1 is not known yet
            saved = 1 if victim.bucket == phase else 0
            if chunked is not None:
                held += saved
            self.decodes.leave(victim)
            victim.segments.append((victim.seg_start, i - 1))
            victim.generated = generated
            victim.epoch += 1
        else:
            computed = held = victim.done
            del self.partials[victim.seq]
            for k, (req, c) in enumerate(chunked or ()):
                if req is victim:  # its chunk was allocated: it does not run
                    del chunked[k]  # type: ignore[union-attr]
                    del self._chunks[k]
                    computed -= c
                    victim.prefilled -= c
                    # vLLM would not have allocated (nor cached) it: its victim is always
                    # one not yet scheduled in the pass
                    self.kv.unname(victim.index, computed // self.config.block_size)
                    break
        shared = victim.shared_blocks(self.config.block_size)
        self.kv.free(victim.index, held, computed=computed, shared=shared, resumable=True)
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
        i = self.iteration
        self.iteration = i + 1
        self.iteration_end.append(now)
        self.last_token_s = now
        if self.record_batches and self._pending is not None:
            handed_off = (r.index for r, _ in self.batch if r.hand_off and r.done == r.target)
            record = BatchRecord(
                **self._pending,
                end_s=now,
                preempted=tuple(self._preempted),
                reused=tuple(self._reused),
                used_blocks=self.kv.used_blocks,
                handed_off=tuple(handed_off),
                received=tuple(self._received),
                shape=self.shape,
            )
            self.batches.append(record)
            self._reused = []
            self._received = []
        self._preempted.clear()
        self._preempted_finished = 0
        finishing = self.finish_at.pop(i, None)
        if finishing:
            for req, epoch in finishing:
                if req.epoch == epoch:
                    self.decodes.leave(req)
                    self._finish(req, now, i, req.prompt + req.output - 1)
        for req, _ in self.batch:
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
                self.tally.first_token(req, now)
            if req.generated == req.output:
                self._finish(req, now, i, req.target)
                continue
            req.decoding = True
            req.join_iter = i + 1
            req.gen_at_join = req.generated
            self.decodes.join(req, i)
            self.finish_at.setdefault(i + req.output - req.generated, []).append((req, req.epoch))
        self.batch = []

    def _hand_off(self, req: RequestState, now: float) -> None:
        """A prefill-only node's request finished its prefill: it leaves its seat, emits
        nothing here, and keeps its ``target`` KV tokens until :meth:`release`."""
        del self.running[req.seq]
        req.admitted = False
        req.hand_off = False
        self._handed_off.append(req)
        self.held_off += 1

    def _preempt_finished(self) -> None:
        """Preempt the newest request that finished in the last iteration, under
        asynchronous scheduling: vLLM plans this iteration before it knows that request
        finished, so it is still running there and can be the newest
        (``scheduler.py``, ``_preempt_request``): its seat and blocks are freed now,
        and vLLM counts the preemption."""
        seq = max(self.held)
        req, tokens = self.held.pop(seq)
        self._free_done(req, tokens, tokens - 1)  # its last token is not known yet
        self._preempted_finished += 1
        req.preemptions += 1
        self._preempted.append(req.index)

    def _free_done(self, req: RequestState, tokens: int, computed: int | None = None) -> None:
        """Free the ``tokens`` KV tokens of a request that finished or left: its full
        blocks of the first ``computed`` tokens (default all) stay cached, those of its
        prompt that it shares with others reachable, its own ones dead
        (:mod:`schedlab.serving.kv_cache`)."""
        shared = None if req.prefix is None else req.shared_blocks(self.config.block_size)
        done = tokens if computed is None else computed
        self.kv.free(req.index, tokens, computed=done, shared=shared)

    def _finish(self, req: RequestState, now: float, i: int, tokens: int) -> None:
        del self.running[req.seq]
        if self.config.async_scheduling:
            self.held[req.seq] = (req, tokens)
        else:
            self._free_done(req, tokens)
        req.generated = req.output
        req.segments.append((req.seg_start, i))
        req.finish_s = now
        req.admitted = False
        self.finished += 1
        self.tally.finished(req, now)

    def close_open_segments(self) -> None:
        """Record the tokens of requests still decoding when the run stopped."""
        for req in self.running.values():
            if req.decoding:
                req.segments.append((req.seg_start, self.iteration - 1))
