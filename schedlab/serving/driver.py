r"""The event loop that serves one request stream on one or more replicas: :class:`Driver`.

The driver makes each request's :class:`~schedlab.serving.request_state.RequestState`,
hands arriving requests to replicas and times their iterations, talking to them only
through the :class:`~schedlab.serving.engine_kinds.Replica` protocol (so schedlab's
engine, :mod:`schedlab.serving.engine`, and vLLM's scheduler,
:mod:`schedlab.integrations.vllm`, run under it alike); :meth:`Driver.result` gathers the
run into an :class:`EngineRun`.

Events sit in a heap keyed by ``(time, kind, sequence number)``. At equal times an
iteration end comes before arrivals, and arrivals before the next iteration start, so a
request arriving exactly when an iteration ends is seen by the next one; the sequence
number orders the rest, and makes every run deterministic.

Replicas
--------
A deployment of ``dp`` data-parallel replicas (vLLM's ``data_parallel_size``) runs one
engine per replica, each with its own scheduler, seats and KV cache, under one
:class:`Driver`. Arriving requests go where vLLM's data-parallel client sends them
(:class:`~schedlab.serving.dp_balancer.DataParallelBalancer`: least ``4 * waiting +
running`` on its view of the ranks, which the ranks of a mixture-of-experts model update
and a dense model's do not, counting the requests it sent since). Replicas of a dense
model step independently (vLLM runs
them as separate engine cores, ``vllm/v1/engine/core.py`` lines 1071–1082). Replicas of
a mixture-of-experts model with expert parallelism step in *lockstep*
(``DPEngineCoreProc``, ``core.py`` lines 1696–1750): every forward pass exchanges the
replicas' tokens, so a replica with nothing to do runs a dummy batch while another has
work, and a step lasts what the cost model's ``lockstep_time`` says for all the batches
together (:func:`~schedlab.serving.cost_model.lockstep_time`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schedlab.errors import ServingError
from schedlab.predictions import Intervals
from schedlab.serving.cost_model import BatchShape, hardware_of
from schedlab.serving.dp_balancer import DataParallelBalancer
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.engine_kinds import Replica
from schedlab.serving.iteration import BatchRecord
from schedlab.serving.metrics import RequestRecord
from schedlab.serving.prediction import predict_outputs
from schedlab.serving.request_state import RequestState
from schedlab.serving.workloads import RequestStream

__all__ = ["EVENT_KINDS", "Driver", "EngineRun", "check_capacity"]

_END, _ARRIVAL, _START = 0, 1, 3
#: Event kinds, in their order at equal times: a subclass's own kinds take the free
#: numbers (a cluster's KV transfer ends, 2, come after arrivals, before starts).
EVENT_KINDS = {"end": _END, "arrival": _ARRIVAL, "start": _START}


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
        Cached KV blocks whose content an allocation overwrote. With prefix caching on,
        every full block of known tokens is cached (a finished request's too), as vLLM's
        ``BlockPool`` counts evictions (:mod:`schedlab.serving.kv_cache`).
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
    predictions
        The predicted output-length intervals policies see, each request's point its
        :meth:`~schedlab.predictions.Intervals.point` (:mod:`schedlab.serving.prediction`;
        default the true lengths).
    """

    def __init__(
        self,
        stream: RequestStream,
        engines: Sequence[Replica],
        *,
        lockstep: bool = False,
        max_violations: int | None = None,
        stop_at_s: float | None = None,
        predictions: Intervals | None = None,
    ) -> None:
        if not engines:
            raise ServingError("driver: needs at least one engine")
        self.engines: Sequence[Replica] = list(engines)
        self.lockstep = lockstep and len(engines) > 1
        if predictions is None:
            predictions = predict_outputs("perfect", stream.output, 0)
        self.requests = [
            RequestState(i, float(a), int(p), int(o), int(q), lower=int(lo), upper=int(hi))
            for i, (a, p, o, q, lo, hi) in enumerate(
                zip(
                    stream.arrival_s,
                    stream.prompt,
                    stream.output,
                    predictions.point(),
                    predictions.lower,
                    predictions.upper,
                    strict=True,
                )
            )
        ]
        if stream.prefix is not None:
            block = stream.prefix.block_tokens
            for req, ids in zip(self.requests, stream.prefix.hash_ids, strict=True):
                req.prefix, req.prefix_block = ids, block
        configs = [e.config for e in engines]
        for k, config in enumerate(configs):
            if config not in configs[:k]:
                check_capacity(stream, config, f"node {k}" if len(engines) > 1 else "")
        self.stop_at_s = math.inf if stop_at_s is None else stop_at_s
        self.max_violations = len(self.requests) if max_violations is None else max_violations
        self.heap: list[tuple[float, int, int, int]] = []
        self.events = 0
        self.finished = self.violations = 0  # over all replicas
        # the ranks of a mixture-of-experts model report their counts; a dense one's do not
        self.balancer = DataParallelBalancer(len(self.engines), reporting=self.lockstep)
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

    def _arrive(self, t: float, req: RequestState) -> None:
        """A request arrives: to the replica vLLM's balancer picks."""
        engines = self.engines
        engine = engines[0] if len(engines) == 1 else engines[self.balancer.choose(t)]
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

    def _planned(self, engine: Replica) -> None:
        """A replica scheduled a step: under asynchronous scheduling vLLM has scheduled it
        by the time the step before it reports (:mod:`schedlab.serving.dp_balancer`)."""
        if engine.config.async_scheduling:
            self.balancer.report(engine.index, engine.counts)

    def _start(self, t: float, index: int) -> None:
        if not self.lockstep:
            engine = self.engines[index]
            shape = engine.plan(t)
            self._planned(engine)
            engine.start_pending = engine.back_to_back = False
            if shape is not None:
                self._push(t + engine.duration(shape), _END, index)
            return
        self.group_pending = False
        shapes = []
        active = []
        for engine in self.engines:
            shape = engine.plan(t)
            self._planned(engine)
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
        self.balancer.report(index, engine.counts)  # as vLLM's rank after its step
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
