"""The state of one request while a run serves it: :class:`RequestState`.

The driver (:mod:`schedlab.serving.driver`) makes one per request of the stream and hands
it to a replica (:mod:`schedlab.serving.engine_kinds`); the replica serving it writes its
progress and outcome into it, and :meth:`RequestState.record` turns it into the run's
:class:`~schedlab.serving.metrics.RequestRecord`. A policy reads it as a
:class:`~schedlab.serving.view.RequestView`.
"""

from __future__ import annotations

import math

import numpy as np

from schedlab.serving.metrics import RequestRecord
from schedlab.serving.prefix import block_contents

__all__ = ["RequestState"]


class RequestState:
    """Mutable state of one request during a run.

    Parameters
    ----------
    index, arrival_s, prompt, output
        The request of the stream: its number, arrival time, prompt and output lengths.
    predicted
        Its predicted output length (the point prediction), what policies and routers see
        (:mod:`schedlab.serving.prediction`).
    lower, upper
        The predicted interval around it (``None``: the point itself).

    Attributes
    ----------
    index, arrival_s, prompt, output, predicted_output, predicted_lower, predicted_upper
        The request, as given.
    replica
        The replica serving it (set by the driver when it hands the request over).
    first_token_s, finish_s
        When its first and last tokens were emitted (``nan`` until then).
    generated
        Output tokens emitted (exact while it is not decoding: a decoding request's
        count is :meth:`generated_by`).
    segments, seg_start
        Runs of consecutive iterations in which it emitted a token, ``(first, last)``
        (iteration numbers of its replica), and the first iteration of the run open now.
    preemptions, prefilled
        Times it was preempted, and prompt (and recomputed) tokens it prefilled.
    violated
        Whether it is known to miss the SLO the engine counts.
    target, done, admitted, held_hits
        What a policy reads (:class:`~schedlab.serving.view.RequestView`): the tokens
        this (re)start must have in KV, those of them in KV already, whether it holds a
        seat, and (waiting) how many of its cached blocks other requests hold.
    decoding, seq, join_iter, gen_at_join, bucket, kv_offset, epoch
        The engine's bookkeeping (:mod:`schedlab.serving.engine`): whether it decodes,
        its admission number (newest largest), the first decode iteration of its
        current run and its tokens then, its block-boundary phase, the offset of the KV
        tokens it attends (``kv_offset + i`` at iteration ``i``), and the count of its
        preemptions while decoding (which cancels a finish scheduled before).
    hand_off, received
        In a cluster (:mod:`schedlab.serving.cluster`): it leaves for another node when
        its prefill completes; KV tokens it brings from another node, until admitted.
    prefix, prefix_block, contents
        Its prompt's chain block ids and their tokens per id
        (:mod:`schedlab.serving.prefix`; ``None`` and 0 when it shares nothing), and the
        names of its full blocks at an engine's block size, once an engine asked
        (``(block size, names)``).
    cache_hits
        Prompt tokens its first admission found in a prefix cache instead of computing
        them (re-admissions after a preemption are not counted, as vLLM's hit rate does
        not count them: ``vllm/v1/metrics/stats.py``, ``PrefixCacheStats.record``).
    """

    __slots__ = (
        "admitted",
        "arrival_s",
        "bucket",
        "cache_hits",
        "contents",
        "decoding",
        "done",
        "epoch",
        "finish_s",
        "first_token_s",
        "gen_at_join",
        "generated",
        "hand_off",
        "held_hits",
        "index",
        "join_iter",
        "kv_offset",
        "output",
        "predicted_lower",
        "predicted_output",
        "predicted_upper",
        "preemptions",
        "prefilled",
        "prefix",
        "prefix_block",
        "prompt",
        "received",
        "replica",
        "seg_start",
        "segments",
        "seq",
        "target",
        "violated",
    )

    def __init__(
        self,
        index: int,
        arrival_s: float,
        prompt: int,
        output: int,
        predicted: int,
        prefix: np.ndarray | None = None,
        prefix_block: int = 0,
        *,
        lower: int | None = None,
        upper: int | None = None,
    ) -> None:
        self.index = index
        self.prefix = prefix
        self.prefix_block = prefix_block
        self.contents: tuple[int, list[int]] | None = None
        self.cache_hits = 0
        self.arrival_s = arrival_s
        self.prompt = prompt
        self.output = output
        self.predicted_output = predicted
        self.predicted_lower = predicted if lower is None else lower
        self.predicted_upper = predicted if upper is None else upper
        self.target = prompt
        self.done = 0
        self.held_hits = 0
        self.generated = 0
        self.admitted = False
        self.decoding = False
        self.seq = -1
        self.join_iter = 0
        self.gen_at_join = 0
        self.bucket = 0
        self.kv_offset = 0
        self.epoch = 0
        self.first_token_s = math.nan
        self.finish_s = math.nan
        self.seg_start = 0
        self.segments: list[tuple[int, int]] = []
        self.preemptions = 0
        self.prefilled = 0
        self.replica = 0
        self.violated = False
        self.hand_off = False
        self.received = 0

    def generated_by(self, iteration: int) -> int:
        """Output tokens it emitted before iteration ``iteration`` of its replica starts
        (the replica's next iteration, or one before it)."""
        if self.decoding:
            return self.gen_at_join + (iteration - self.join_iter)
        return self.generated

    def kv_tokens(self, iteration: int) -> int:
        """KV tokens it holds when iteration ``iteration`` of its replica starts, before
        that iteration's allocations: none unless admitted; a decode holds its prompt and
        every token it generated but the last, a prefill the tokens it prefilled."""
        if not self.admitted:
            return 0
        if self.decoding:
            return self.prompt + self.generated_by(iteration) - 1
        return self.done

    def shared_blocks(self, block_size: int) -> list[int] | None:
        """The shared names of its prompt's full blocks of ``block_size`` tokens
        (:func:`~schedlab.serving.prefix.block_contents`), or ``None`` if it shares none."""
        if self.prefix is None:
            return None
        found = self.contents
        if found is None or found[0] != block_size:
            names = block_contents(self.prefix, self.prefix_block, block_size, self.prompt)
            found = self.contents = (block_size, names)
        return found[1]

    def record(self) -> RequestRecord:
        """Its outcome, as the run reports it."""
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
