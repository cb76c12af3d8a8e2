r"""A replica whose scheduler is vLLM's own, on schedlab's virtual clock.

:class:`VllmEngine` implements the driver's :class:`~schedlab.serving.engine_kinds.Replica`
surface with the installed vLLM's ``Scheduler`` (or ``AsyncScheduler``) and its KV cache
manager doing every scheduling decision: admission, chunking, block allocation,
preemption, prefix-cache hits. Only the GPU is replaced: a step lasts what a schedlab
cost model says for its batch, and its "model output" samples one token for every
request whose scheduled tokens reach the end of its sequence.

The loop is vLLM 0.19.0's engine core (``vllm/v1/engine/core.py``):

* **Synchronous** (``EngineCore.step``, lines 380–409): a step schedules
  (``Scheduler.schedule``), runs the batch, and hands the output to
  ``Scheduler.update_from_output``. Requests that arrived while a step ran are added
  (``add_request``) before the next step is scheduled.
* **Asynchronous** (``EngineCore.step_with_batch_queue``, lines 421–537, with a queue of
  two batches, ``multiproc_executor.py`` lines 469–472): the batch of step ``j + 1`` is
  scheduled when step ``j`` starts, after the output of step ``j - 1`` was processed, so
  it sees the requests that arrived by then. An empty batch is completed at once and the
  next is scheduled right away. A batch that was scheduled ahead runs even if all its
  requests finished meanwhile (the real engine runs it too; vLLM then drops its tokens).

A step's batch shape for the cost model is read right after its ``schedule()``: a
request that has sampled a token since it was last (re)admitted decodes, attending to
its computed tokens plus the new one; any other scheduled request runs a prefill chunk
of its scheduled tokens after its computed ones (prefix-cache hits included). Token
times, preemptions and prefilled tokens are written into the driver's request objects,
and a :class:`~schedlab.serving.iteration.BatchRecord` per step is kept on request, so the
records and summaries are those of schedlab's own engine.

Prompts are made of token ids unique to each request (its first token is its index),
and every request samples a token of its own (:data:`FIRST_SAMPLED_TOKEN`), so blocks of
different requests never share content, as in schedlab's engine; a request's own blocks
are found again after a preemption through vLLM's block hashes. A stream with shared
prefixes gives its requests the token ids of
:func:`~schedlab.serving.prefix.prompt_token_ids`, so vLLM's prefix cache finds the
prefixes they share by hashing them (and only those: what they generate is their own).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

from schedlab.errors import ServingError
from schedlab.integrations.vllm.config import VllmSetup, build_scheduler
from schedlab.serving.cost_model import BatchShape
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import Replica
from schedlab.serving.iteration import BatchRecord, IterationClock, IterationTime
from schedlab.serving.metrics import SLO
from schedlab.serving.prefix import prompt_token_ids

__all__ = ["FIRST_SAMPLED_TOKEN", "VllmEngine", "VllmPolicy"]

#: Request ``i``'s simulated sampling steps return token id ``FIRST_SAMPLED_TOKEN + i``:
#: never an end-of-sequence token (requests run with ``ignore_eos`` to exactly their output
#: length), clear of the prompts' token ids (:func:`~schedlab.serving.prefix.prompt_token_ids`
#: draws from 1,000 to 31,000), and its own, so that two requests with the same prompt do
#: not share the blocks of what they generate (real outputs differ; schedlab's engine never
#: shares generated tokens, :mod:`schedlab.serving.prefix`).
FIRST_SAMPLED_TOKEN = 40_000


class VllmPolicy:
    """The policy of a vLLM-driven replica: vLLM's scheduler itself (its name and its
    counters, for the run's summary)."""

    name = "vllm"
    chunked = True

    def __init__(self) -> None:
        self.stats: dict[str, int] = {}

    def plan(self, view: Any) -> Any:
        raise ServingError("engine vllm: batches are formed by vLLM's scheduler")


@dataclass
class _Step:
    """One scheduled batch: vLLM's output and what the run needs of it."""

    output: Any
    shape: BatchShape
    samplers: frozenset[str]
    decodes: tuple[int, ...]
    chunks: tuple[tuple[int, int], ...]
    preempted: tuple[int, ...]
    reused: tuple[tuple[int, int], ...]
    running: int
    waiting: int
    used_blocks: int  # set when the step starts
    start_s: float = 0.0

    @property
    def empty(self) -> bool:
        return self.output.total_num_scheduled_tokens == 0


class VllmEngine:
    """One replica scheduled by vLLM (module docstring).

    Parameters
    ----------
    setup
        The engine settings and the model folder vLLM is configured with.
    timing
        How iteration times are found.
    slo
        Accepted for the driver's interface; no early stop is made on it (every run
        goes to its end).
    index
        The replica's number.
    record_batches
        Keep a :class:`~schedlab.serving.iteration.BatchRecord` per step.
    margin_s
        SLOWeave's margin, for a SLOWeave policy (``None``: the cost model's).
    """

    def __init__(
        self,
        setup: VllmSetup,
        timing: IterationTime,
        *,
        slo: SLO | None = None,
        index: int = 0,
        record_batches: bool = False,
        margin_s: float | None = None,
    ) -> None:
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT, ModelRunnerOutput
        from vllm.v1.request import Request

        self.config: EngineConfig = setup.engine
        self.timing = timing
        self.index = index
        self.slo = slo
        self.clock = IterationClock(timing, index)
        self._now = 0.0  # the virtual clock, as the scheduler reads it
        self.policy: Any = VllmPolicy()
        planning = None
        if setup.policy != "vllm":  # SLOWeaveScheduler plans with our policy
            planning = {
                "policy": setup.policy,
                "model": timing.predicted,
                "tpot_s": (slo or SLO(ttft_s=60.0, tpot_s=0.025)).tpot_s,
                "margin_s": margin_s,
                "clock": lambda: self._now,
            }
        self.scheduler = build_scheduler(setup, planning)
        if planning is not None:
            self.policy = self.scheduler.planner
        self._pool = self.scheduler.kv_cache_manager.block_pool
        self._evicted = 0
        self._count_evictions()
        init_none_hash(sha256)
        self._hasher = get_request_block_hasher(self.config.block_size, sha256)
        self._request_class = Request
        self._sampling = SamplingParams
        self._output_class = ModelRunnerOutput
        self._indexed_output = "req_id_to_index" in {
            f.name for f in dataclass_fields(ModelRunnerOutput)
        }
        self._empty_output = EMPTY_MODEL_RUNNER_OUTPUT
        self.record_batches = record_batches
        self.batches: list[BatchRecord] = []
        self.iteration_end: list[float] = []
        self.busy = self.start_pending = self.back_to_back = False
        self.finished = self.violations = self.reused_tokens = self.peak_blocks = 0
        self._pending: list[Any] = []  # arrived, not yet given to the scheduler
        self._requests: dict[str, Any] = {}  # vLLM request id -> the driver's request
        self._decoding: set[str] = set()  # sampled since their last (re)admission
        self._last_token: dict[str, int] = {}  # the step of each request's last token
        self._current: _Step | None = None
        self._ahead: _Step | None = None  # asynchronous scheduling: scheduled ahead
        self._carried: tuple[int, ...] = ()  # preempted when an empty step was scheduled

    # -- what the driver sees ----------------------------------------------------------------
    @property
    def evicted_blocks(self) -> int:
        """Cached blocks whose content vLLM's block pool dropped for a new allocation."""
        return self._evicted

    @property
    def has_work(self) -> bool:
        return bool(self._pending or self._ahead is not None or self.scheduler.has_requests())

    @property
    def counts(self) -> tuple[int, int]:
        """``(waiting, running)`` as the scheduler reports them to vLLM's data-parallel
        balancer (``Scheduler.get_request_counts``)."""
        running, waiting = self.scheduler.get_request_counts()
        return waiting, running

    def arrive(self, req: Any) -> None:
        """Queue an arriving request; the scheduler gets it before its next ``schedule``."""
        self._pending.append(req)

    def plan(self, now: float) -> BatchShape | None:
        """Schedule the step starting at ``now`` (and, under asynchronous scheduling, the
        one after it); its batch's shape, or ``None`` when nothing can run."""
        self._now = now
        self._take_arrivals()
        step = self._ahead if self._ahead is not None else self._schedule(now)
        self._ahead = None
        if step.empty:
            # an empty batch completes at once, and the engine core schedules again
            self._complete_empty(step)
            if not self.scheduler.has_requests():
                return None
            step = self._schedule(now)
            if step.empty:
                self._complete_empty(step)
                return None  # nothing can run until a request arrives
        # blocks held while the step runs, before the next one allocates (asynchronous
        # scheduling frees the blocks of requests finished in the last step only now)
        step.used_blocks = self._used_blocks()
        if self.config.async_scheduling and self.scheduler.has_requests():
            self._ahead = self._schedule(now)
        step.start_s = now
        if self._carried:
            step.preempted = tuple(sorted(self._carried + step.preempted))
            self._carried = ()
        self._current = step
        self.busy = True
        self.peak_blocks = max(self.peak_blocks, step.used_blocks)
        return step.shape

    def duration(self, shape: BatchShape, group: Sequence[BatchShape] = ()) -> float:
        """How long the step takes (:meth:`~schedlab.serving.iteration.IterationClock.seconds`)."""
        return self.clock.seconds(shape, group)

    def end(self, now: float) -> None:
        """The step that ran ended at ``now``: its sampled tokens go to vLLM."""
        step = self._current
        if step is None:
            raise ServingError("engine vllm: an iteration ended that never started")
        self._current = None
        self._now = now
        ids = list(step.output.num_scheduled_tokens)
        fields: dict[str, Any] = {
            "req_ids": ids,
            "sampled_token_ids": [
                [FIRST_SAMPLED_TOKEN + int(rid)] if rid in step.samplers else [] for rid in ids
            ],
        }
        if self._indexed_output:  # vLLM 0.19's output also maps ids to their rows
            fields["req_id_to_index"] = {rid: k for k, rid in enumerate(ids)}
        output = self._output_class(**fields)
        outputs = self.scheduler.update_from_output(step.output, output)
        j = len(self.iteration_end)
        self.iteration_end.append(now)
        for client in outputs.values():
            for out in client.outputs:
                self._emitted(out, j, now)
        if self.record_batches:
            self.batches.append(
                BatchRecord(
                    step.start_s,
                    now,
                    step.decodes,
                    step.chunks,
                    step.preempted,
                    step.reused,
                    step.running,
                    step.waiting,
                    step.used_blocks,
                    shape=step.shape,
                )
            )

    def close_open_segments(self) -> None:
        """Record the tokens of requests still running when the run stopped."""
        for rid, last in self._last_token.items():
            req = self._requests[rid]
            if math.isnan(req.finish_s):
                req.segments.append((req.seg_start, last))

    # -- inside ------------------------------------------------------------------------------
    def _count_evictions(self) -> None:
        """Count the cached blocks vLLM's pool evicts (its own method, wrapped)."""
        pool = self._pool
        evict = pool._maybe_evict_cached_block

        def counted(block: Any) -> bool:
            evicted = bool(evict(block))
            self._evicted += evicted
            return evicted

        pool._maybe_evict_cached_block = counted

    def _take_arrivals(self) -> None:
        for req in self._pending:
            rid = str(req.index)
            if req.prefix is None:
                prompt = [req.index + 1] + [1] * (req.prompt - 1)  # unique to the request
            else:  # equal prefixes are equal tokens (schedlab.serving.prefix)
                prompt = prompt_token_ids(req.prefix, req.prefix_block, req.prompt)
            request = self._request_class(
                rid,
                prompt,
                self._sampling(max_tokens=req.output, ignore_eos=True, detokenize=False),
                None,
                arrival_time=req.arrival_s,
                block_hasher=self._hasher if self.config.prefix_caching else None,
            )
            self._requests[rid] = req
            self.scheduler.add_request(request)
        self._pending.clear()

    def _schedule(self, now: float) -> _Step:
        """One ``schedule()`` of vLLM's, read at once (later ones change its requests)."""
        scheduler = self.scheduler
        running = {r.request_id: r.num_preemptions for r in scheduler.running}
        output = scheduler.schedule()
        # read from the requests, not the output's fields (which vLLM releases change)
        preempted = [
            rid
            for rid, count in running.items()
            if scheduler.requests[rid].num_preemptions > count
        ]
        for rid in preempted:
            self._decoding.discard(rid)
            self._requests[rid].preemptions += 1
        resumed = set(output.num_scheduled_tokens) - set(running)
        decodes: list[int] = []
        decode_kv: list[int] = []
        chunks: list[tuple[int, int]] = []
        shape_chunks: list[tuple[int, int]] = []
        reused: list[tuple[int, int]] = []
        samplers: set[str] = set()
        for rid, tokens in output.num_scheduled_tokens.items():
            request = scheduler.requests[rid]
            req = self._requests[rid]
            before = request.num_computed_tokens - tokens
            if rid in self._decoding:
                if tokens != 1:
                    raise ServingError(
                        f"engine vllm: request {rid} decodes {tokens} tokens in one step"
                    )
                decodes.append(req.index)
                decode_kv.append(before + 1)
            else:
                if rid in resumed and before:
                    reused.append((req.index, before))
                    self.reused_tokens += before
                chunks.append((req.index, tokens))
                shape_chunks.append((tokens, before))
                req.prefilled += tokens
            if not request.is_prefill_chunk:
                samplers.add(rid)
                self._decoding.add(rid)
        shape = BatchShape(
            len(decodes),
            sum(decode_kv),
            tuple(shape_chunks),
            max(decode_kv) if decode_kv else None,
            min(decode_kv) if decode_kv else None,
        )
        return _Step(
            output,
            shape,
            frozenset(samplers),
            tuple(decodes),
            tuple(chunks),
            tuple(sorted(self._requests[rid].index for rid in preempted)),
            tuple(reused),
            len(scheduler.running),
            len(scheduler.waiting),
            0,
            now,
        )

    def _used_blocks(self) -> int:
        return int(self._pool.num_gpu_blocks - 1 - self._pool.get_num_free_blocks())

    def _complete_empty(self, step: _Step) -> None:
        """An empty batch completes at once with an empty output (vLLM's executor
        returns ``EMPTY_MODEL_RUNNER_OUTPUT`` for it); the preemptions made when it was
        scheduled are recorded with the next step that runs."""
        self.scheduler.update_from_output(step.output, self._empty_output)
        self._carried += step.preempted

    def _emitted(self, out: Any, j: int, now: float) -> None:
        """Record the tokens ``out`` carries, produced by step ``j`` ending at ``now``."""
        rid = out.request_id
        req = self._requests[rid]
        if out.new_token_ids:
            if len(out.new_token_ids) != 1:
                raise ServingError(
                    f"engine vllm: request {rid} emitted {len(out.new_token_ids)} tokens in "
                    "one step"
                )
            last = self._last_token.get(rid)
            if last is None:
                req.first_token_s = now
                req.seg_start = j
            elif last != j - 1:
                req.segments.append((req.seg_start, last))
                req.seg_start = j
            self._last_token[rid] = j
            req.generated += 1
        if out.finish_reason is not None:
            req.finish_s = now
            req.segments.append((req.seg_start, self._last_token[rid]))
            self.finished += 1


#: The engine interface the driver runs: mypy checks that a VllmEngine is one.
_IS_A_REPLICA: type[Replica] = VllmEngine
