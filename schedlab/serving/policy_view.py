"""What a policy sees of one :class:`~schedlab.serving.engine.Engine` while it plans.

The engine fills a :class:`PolicyView`'s fields (the decodes, the free blocks and seats,
whether it admits) before each scheduling pass; the view's queue
(:meth:`PolicyView.prefill_candidates`) and :meth:`PolicyView.take` act on the engine
itself, so each chunk a policy takes is applied, and seen by the next look, at once
(:mod:`schedlab.serving.view` states the protocol and its rules).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Protocol

from schedlab.serving import view as rules
from schedlab.serving.decode_cohort import DecodeCohort
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.kv_cache import KVCache
from schedlab.serving.prediction import Estimate
from schedlab.serving.request_state import RequestState
from schedlab.serving.view import RequestView

__all__ = ["PolicyView", "ViewedEngine"]


class ViewedEngine(Protocol):
    """What a :class:`PolicyView` reads of its engine
    (:class:`~schedlab.serving.engine.Engine` is one)."""

    config: EngineConfig
    kv: KVCache
    decodes: DecodeCohort
    iteration: int
    waiting: deque[RequestState]
    running: dict[int, RequestState]
    partials: dict[int, RequestState]
    held: dict[int, tuple[RequestState, int]]

    def look_up(self, req: RequestState) -> None: ...

    def take(self, req: RequestView, c: int) -> bool: ...


class PolicyView(rules.BlockRules):
    """The :class:`~schedlab.serving.view.EngineView` of ``engine`` that its policy gets
    each iteration: the engine sets the fields before each scheduling pass, and the
    queue and :meth:`take` act on the engine itself."""

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

    def __init__(self, engine: ViewedEngine) -> None:
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

    def start_pass(self, i: int, spread: bool, admitting: bool) -> None:
        """Show the engine as a scheduling pass of iteration ``i`` starts: its running
        decodes as that iteration batches them (with the longest and shortest KV if
        ``spread``), and what :meth:`refresh` shows."""
        decodes = self._engine.decodes
        n = self.n_decode = decodes.n
        self.decode_kv = decodes.kv_sum + n * i
        if spread and n:
            self.decode_kv_max, self.decode_kv_min = decodes.extremes(i)
        else:
            self.decode_kv_max = self.decode_kv_min = None
        self.refresh(admitting)

    def refresh(self, admitting: bool) -> None:
        """Show the engine's free blocks and seats now, and whether it still admits."""
        engine = self._engine
        self.free_blocks = engine.kv.free_blocks
        self.free_seats = self.config.max_num_seqs - len(engine.running) - len(engine.held)
        self.admitting = admitting

    @property
    def has_prefill_work(self) -> bool:
        engine = self._engine
        return bool(engine.partials or (self.admitting and engine.waiting))

    def prefill_candidates(self) -> Iterator[RequestState]:
        """Partial prefills in admission order, then (while admitting) the waiting queue,
        each waiting request with its cache hits looked up when it is reached, after the
        chunks taken before it (:meth:`take`)."""
        engine = self._engine
        for req in list(engine.partials.values()):
            if req.admitted:  # not preempted by a chunk taken before it
                yield req
        waiting = engine.waiting
        k = 0
        while self.admitting and k < len(waiting):
            req = waiting[k]
            engine.look_up(req)
            yield req
            if k < len(waiting) and waiting[k] is req:  # not admitted: look further
                k += 1

    def take(self, request: RequestView, chunk: int) -> bool:
        return self._engine.take(request, chunk)

    def projected_kv_peak(self, estimate: Estimate = "point") -> int:
        r"""The most KV tokens the admitted requests will hold at once from this iteration
        on, if each stops at its output as ``estimate`` plans it
        (:func:`~schedlab.serving.view.planned_output`; ``proofs/sloweave_kv.md``),
        counted in whole blocks.

        A decode holding :math:`h` tokens now with :math:`r = \tilde o(g) - g` iterations
        left (``g`` tokens generated, :math:`\tilde o(g) = \max(b, g + 1)` its planned
        output, so :math:`r \ge 1`) holds :math:`h + k` at offset
        :math:`k < r`, plus at most ``block_size - 1`` in its last block; under
        asynchronous scheduling its blocks are freed one iteration late, after the
        next iteration's decodes took theirs, so it counts through offset :math:`r`
        too. A request still
        prefilling is reserved at the blocks of its final size
        (:func:`~schedlab.serving.view.reserved_tokens`) throughout; blocks of requests
        that finished in the last iteration (asynchronous scheduling) count too. The
        maximum over offsets is :func:`~schedlab.serving.view.decode_kv_peak`.
        """
        engine = self._engine
        config = self.config
        i = engine.iteration
        slack = config.block_size - 1
        lag = 1 if config.async_scheduling else 0
        reserved = sum(config.blocks(tokens) for _, tokens in engine.held.values())
        reserved *= config.block_size
        rests: list[int] = []
        holds: list[int] = []
        for req in engine.running.values():
            if req.decoding:
                generated = req.generated_by(i)
                rests.append(rules.planned_output(req, estimate, generated) - generated + lag)
                holds.append(req.kv_offset + i + slack)
            else:
                reserved += rules.reserved_tokens(config, req, estimate)
        return reserved + rules.decode_kv_peak(holds, rests)
