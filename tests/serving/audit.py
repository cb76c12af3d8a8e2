"""An independent check of a simulator run, from its per-iteration batch log.

It shares no code with the engine: it replays the logged batches with its own
bookkeeping (KV tokens held per request, prefill progress per (re)start, tokens taken
back from the prefix cache) and asserts the conservation laws of ``docs/design.md``,
section "Online model": every token produced once, every prompt token prefilled once per
(re)start or taken back from the cache, KV blocks within capacity and equal to what the
engine says it holds.
"""

from __future__ import annotations

import math

from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.simulator import EngineRun
from schedlab.serving.workloads import RequestStream


def audit_run(
    run: EngineRun, stream: RequestStream, config: EngineConfig, *, chunked: bool
) -> None:
    """Assert conservation, capacity and limits over every logged iteration."""

    def blocks(tokens: int) -> int:
        return -(-tokens // config.block_size)

    n = len(stream)
    prompt = [int(p) for p in stream.prompt]
    output = [int(o) for o in stream.output]
    held = [0] * n  # KV tokens held
    target = list(prompt)  # tokens the current (re)start must prefill
    done = [0] * n  # tokens of target prefilled in the current (re)start
    generated = [0] * n
    admitted: set[int] = set()
    finished: set[int] = set()
    prefilled = [0] * n
    preempted = [0] * n
    completed_starts = [0] * n
    decode_preemptions = [0] * n
    emit_times: list[list[float]] = [[] for _ in range(n)]
    assert len(run.batches) == run.iteration_end_s.size
    for number, batch in enumerate(run.batches):
        where = f"iteration {number}"
        assert batch.end_s == run.iteration_end_s[number]
        assert batch.end_s > batch.start_s, where
        if number:
            assert batch.start_s >= run.batches[number - 1].end_s, where
        for i in batch.preempted:
            assert i in admitted and i not in finished, where
            preempted[i] += 1
            decode_preemptions[i] += done[i] == target[i]
            admitted.discard(i)
            held[i] = 0
            done[i] = 0
            target[i] = prompt[i] + generated[i]
        reused = dict(batch.reused)
        for i, tokens in reused.items():
            assert i not in admitted and preempted[i], f"{where}: only resumed requests reuse"
            assert tokens % config.block_size == 0 and 0 < tokens < target[i], where
        decoding = {i for i in admitted if done[i] == target[i]}
        assert set(batch.decodes) == decoding, f"{where}: every running decode is batched"
        tokens = len(batch.decodes) + sum(c for _, c in batch.chunks)
        whole_alone = not chunked and len(batch.chunks) == 1
        assert tokens <= config.max_num_batched_tokens or whole_alone, where
        # blocks free once the decodes have grown (an upper bound under async scheduling,
        # where finished requests give their blocks back an iteration late)
        free = config.total_blocks - sum(blocks(h) for h in held)
        free -= sum(blocks(held[i] + 1) - blocks(held[i]) for i in batch.decodes)
        for i, c in batch.chunks:
            assert i not in finished, where
            assert stream.arrival_s[i] <= batch.start_s, f"{where}: request {i} not arrived"
            if i not in admitted:
                assert not batch.preempted, f"{where}: admits request {i} after preempting"
                if config.reserve_full_prompt:
                    assert blocks(target[i]) <= free, f"{where}: request {i} fails the gate"
                done[i] = held[i] = reused.get(i, 0)
                free += blocks(held[i])  # its cached blocks were free: it takes them back
                admitted.add(i)
            assert 1 <= c <= target[i] - done[i], f"{where}: chunk {c} of request {i}"
            if not chunked:
                assert c == target[i] - done[i], f"{where}: a whole-prompt policy split"
            free -= blocks(held[i] + c) - blocks(held[i])
            done[i] += c
            held[i] += c
            prefilled[i] += c
        assert free >= 0, f"{where}: more KV blocks allocated than free"
        assert len(admitted) <= config.max_num_seqs, where
        completing = [i for i, _ in batch.chunks if done[i] == target[i]]
        for i in completing:
            completed_starts[i] += 1
        for i in batch.decodes:
            held[i] += 1  # a decode computes the KV of the token it emitted last
        for i in list(batch.decodes) + completing:
            generated[i] += 1
            emit_times[i].append(batch.end_s)
        used = sum(blocks(h) for h in held)
        assert used <= config.total_blocks, f"{where}: {used} KV blocks in use"
        if not config.async_scheduling:  # (there, finished requests free blocks late)
            assert used == batch.used_blocks, f"{where}: {used} != {batch.used_blocks}"
        for i in list(admitted):
            assert generated[i] <= output[i], where
            if generated[i] == output[i]:
                admitted.discard(i)
                finished.add(i)
                held[i] = 0
    # Nothing lost, nothing double counted.
    assert finished == set(range(n)), "every request finished"
    for i, record in enumerate(run.records):
        assert generated[i] == output[i]
        assert record.prefilled_tokens == prefilled[i]
        assert record.preemptions == preempted[i]
        # Prefill exactly once per (re)start: chunks never exceed what is left of the
        # start's target (checked above), and a start completes its prefill exactly once
        # unless preempted before completing (then it started again).
        assert completed_starts[i] == 1 + decode_preemptions[i]
        times = [t for a, b in record.segments for t in run.iteration_end_s[a : b + 1]]
        assert times == emit_times[i], f"request {i}: token times"
        assert record.first_token_s == emit_times[i][0]
        assert record.finish_s == emit_times[i][-1]
        assert not math.isnan(record.finish_s)
