"""An independent check of a simulator run, from its per-iteration batch log.

It shares no code with the engine: it replays the logged batches with its own
bookkeeping (KV tokens held per request, prefill progress per (re)start, tokens taken
back from the prefix cache) and asserts the conservation laws of ``docs/design.md``,
section "Online model": every token produced once, every prompt token prefilled once per
(re)start or taken back from the cache, KV blocks within capacity and equal to what the
engine says it holds.

For a cluster (:func:`audit_cluster`) it replays every node's log, in time order, with the
requests moving between nodes: a prefill node's hand-off emits no token and keeps the
request's blocks until its KV transfer ends; each hand-off has exactly one transfer, of
``prompt - 1`` tokens, after the prefill, one at a time on its link; the decode node admits
the request only after the transfer, holding the tokens it received; and over all nodes
every request emits each of its tokens once, at the times its record says.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence

from schedlab.serving.cluster import ClusterRun
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.simulator import EngineRun
from schedlab.serving.workloads import RequestStream


def audit_run(
    run: EngineRun, stream: RequestStream, config: EngineConfig, *, chunked: bool
) -> None:
    """Assert conservation, capacity and limits over every logged iteration of one engine,
    or of each data-parallel replica of ``config`` (``run.replica_iterations``)."""
    nodes = max(1, len(run.replica_iterations))
    _audit(
        run, stream, [config] * nodes, ["colocated"] * nodes, [chunked] * nodes, (), None, None, ()
    )


def audit_cluster(
    cluster_run: ClusterRun,
    stream: RequestStream,
    configs: Sequence[EngineConfig],
    *,
    chunked: Sequence[bool],
    bytes_per_token: int,
) -> None:
    """Assert the same of every node of a cluster, the hand-offs and transfers, the TTFT
    breakdown (each component recomputed from the logs), and that the loads routers saw
    were never negative."""
    records, routes = cluster_run.run.records, cluster_run.routes
    for j, loads in enumerate(cluster_run.loads):
        assert len(loads) == len(configs)
        now = stream.arrival_s[j]
        for k, (queued, outstanding) in enumerate(loads):
            assert 0 <= queued <= outstanding, f"request {j}'s router saw loads {loads}"
            # each request routed to node k (to decode there) that has not finished has
            # at least one token to come there
            present = sum(
                stream.arrival_s[i] < now < records[i].finish_s
                and k == (routes[i].node if routes[i].then is None else routes[i].then)
                for i in range(j)
            )
            assert outstanding >= present, f"request {j}: node {k} loads {loads} < {present}"
    _audit(
        cluster_run.run,
        stream,
        list(configs),
        list(cluster_run.roles),
        list(chunked),
        cluster_run.transfers,
        bytes_per_token,
        cluster_run.breakdown,
        cluster_run.routes,
    )


def _audit(
    run, stream, configs, roles, chunked, transfers, bytes_per_token, breakdown, routes
) -> None:
    n = len(stream)
    nodes = len(configs)
    prompt = [int(p) for p in stream.prompt]
    output = [int(o) for o in stream.output]
    held = [0] * n  # KV tokens held (on the node holding them)
    where = [-1] * n  # the node holding them
    target = list(prompt)  # tokens the current (re)start must prefill
    done = [0] * n  # tokens of target prefilled (or received) in the current (re)start
    generated = [0] * n
    admitted: list[set[int]] = [set() for _ in range(nodes)]
    finished: set[int] = set()
    prefilled = [0] * n
    preempted = [0] * n
    completed_starts = [0] * n
    decode_preemptions = [0] * n
    handed = [0] * n
    received_at = [math.nan] * n  # when its KV arrived at its decode node
    emit_times: list[list[float]] = [[] for _ in range(n)]
    # the TTFT breakdown from the logs: seconds of the iterations that ran a request's
    # chunks before its first token (all, and those on its prefill node), the hand-off's
    # end, and the first-token iteration's seconds after a transfer
    executed = [0.0] * n
    executed_there = [0.0] * n
    handed_at = [math.nan] * n
    first_decode = [0.0] * n
    by_request = {}
    for t in transfers:
        assert t.request not in by_request, f"request {t.request}: two transfers"
        by_request[t.request] = t
    pending: list[tuple[float, int]] = []  # (transfer end, request) still holding blocks

    def release(upto: float, strict: bool) -> None:
        while pending and (pending[0][0] < upto or (not strict and pending[0][0] == upto)):
            _, i = heapq.heappop(pending)
            held[i] = 0
            where[i] = -1
            received_at[i] = by_request[i].end_s

    def blocks(config: EngineConfig, tokens: int) -> int:
        return -(-tokens // config.block_size)

    def used(k: int) -> int:
        config = configs[k]
        return sum(blocks(config, held[i]) for i in range(n) if where[i] == k)

    # every node's iterations, in time order (ties: by node, as the driver's sequence)
    counts = run.replica_iterations or (len(run.batches),)
    assert sum(counts) == len(run.batches) == run.iteration_end_s.size
    logs = []
    offset = 0
    for k, count in enumerate(counts):
        for j in range(count):
            batch = run.batches[offset + j]
            assert batch.end_s == run.iteration_end_s[offset + j]
            if j:
                assert batch.start_s >= run.batches[offset + j - 1].end_s, f"node {k}"
            logs.append((batch.end_s, batch.start_s, k, j, batch))
        offset += count
    logs.sort(key=lambda entry: entry[:4])
    for _, _, k, number, batch in logs:
        config = configs[k]
        here = f"node {k} iteration {number}"
        assert batch.end_s > batch.start_s, here
        release(batch.start_s, strict=False)
        for i in batch.preempted:
            assert i in admitted[k] and i not in finished, here
            preempted[i] += 1
            decode_preemptions[i] += done[i] == target[i]
            admitted[k].discard(i)
            held[i] = 0
            where[i] = -1
            done[i] = 0
            target[i] = prompt[i] + generated[i]
        reused = dict(batch.reused)
        received = dict(batch.received)
        for i, tokens in reused.items():
            assert i not in admitted[k] and preempted[i], f"{here}: only resumed requests reuse"
            assert tokens % config.block_size == 0 and 0 < tokens < target[i], here
        for i, tokens in received.items():
            assert roles[k] == "decode" and handed[i] == 1, f"{here}: request {i} received"
            assert tokens == prompt[i] - 1 and i not in reused, here
            assert received_at[i] <= batch.start_s, f"{here}: request {i} before its KV"
            assert by_request[i].target == k, here
        decoding = {i for i in admitted[k] if done[i] == target[i]}
        assert set(batch.decodes) == decoding, f"{here}: every running decode is batched"
        tokens = len(batch.decodes) + sum(c for _, c in batch.chunks)
        whole_alone = not chunked[k] and len(batch.chunks) == 1
        assert tokens <= config.max_num_batched_tokens or whole_alone, here
        # blocks free once the decodes have grown (an upper bound under async scheduling,
        # where finished requests give their blocks back an iteration late)
        free = config.total_blocks - used(k)
        free -= sum(blocks(config, held[i] + 1) - blocks(config, held[i]) for i in batch.decodes)
        for i, c in batch.chunks:
            assert i not in finished, here
            assert stream.arrival_s[i] <= batch.start_s, f"{here}: request {i} not arrived"
            if i not in admitted[k]:
                assert not batch.preempted, f"{here}: admits request {i} after preempting"
                assert where[i] == -1, f"{here}: request {i} still holds KV on node {where[i]}"
                if config.reserve_full_prompt:
                    assert blocks(config, target[i]) <= free, f"{here}: request {i} fails the gate"
                if i in received:
                    done[i] = held[i] = received[i]
                    free -= blocks(config, held[i])  # new blocks for the received KV
                else:
                    done[i] = held[i] = reused.get(i, 0)
                    free += blocks(config, held[i])  # cached blocks were free: it takes them
                where[i] = k
                admitted[k].add(i)
            assert 1 <= c <= target[i] - done[i], f"{here}: chunk {c} of request {i}"
            if not chunked[k]:
                assert c == target[i] - done[i], f"{here}: a whole-prompt policy split"
            free -= blocks(config, held[i] + c) - blocks(config, held[i])
            done[i] += c
            held[i] += c
            prefilled[i] += c
        assert free >= 0, f"{here}: more KV blocks allocated than free"
        assert len(admitted[k]) <= config.max_num_seqs, here
        completing = [i for i, _ in batch.chunks if done[i] == target[i]]
        seconds = batch.end_s - batch.start_s
        for i, _ in batch.chunks:
            if generated[i]:
                continue
            if handed[i] and i in completing:
                first_decode[i] = seconds
            else:
                executed[i] += seconds
                if roles[k] == "prefill":
                    executed_there[i] += seconds
        for i in completing:
            completed_starts[i] += 1
        for i in batch.handed_off:
            assert roles[k] == "prefill" and i in completing, f"{here}: hand-off of {i}"
            handed[i] += 1
            handed_at[i] = batch.end_s
            transfer = by_request[i]  # exactly one transfer per hand-off
            assert transfer.source == k and roles[transfer.target] == "decode", here
            assert transfer.ready_s == batch.end_s and transfer.start_s >= batch.start_s
            assert transfer.tokens == prompt[i] - 1, here
            assert transfer.bytes == transfer.tokens * bytes_per_token, here
            assert transfer.end_s > transfer.start_s, here
            admitted[k].discard(i)
            heapq.heappush(pending, (transfer.end_s, i))
        assert roles[k] != "prefill" or not batch.decodes, f"{here}: a prefill node decodes"
        for i in batch.decodes:
            held[i] += 1  # a decode computes the KV of the token it emitted last
        for i in [*batch.decodes, *(i for i in completing if i not in batch.handed_off)]:
            generated[i] += 1
            emit_times[i].append(batch.end_s)
        release(batch.end_s, strict=True)
        in_use = used(k)
        assert in_use <= config.total_blocks, f"{here}: {in_use} KV blocks in use"
        if not config.async_scheduling:  # (there, finished requests free blocks late)
            assert in_use == batch.used_blocks, f"{here}: {in_use} != {batch.used_blocks}"
        for i in list(admitted[k]):
            assert generated[i] <= output[i], here
            if generated[i] == output[i]:
                admitted[k].discard(i)
                finished.add(i)
                held[i] = 0
                where[i] = -1
    release(math.inf, strict=True)
    # Nothing lost, nothing double counted.
    assert finished == set(range(n)), "every request finished"
    assert sum(handed) == len(transfers), "every transfer is one hand-off's"
    assert all(h <= 1 for h in handed), "a request handed off twice"
    assert all(where[i] == -1 and held[i] == 0 for i in range(n)), "blocks left held"
    by_link: dict[int, list] = {}
    for t in transfers:
        by_link.setdefault(t.source, []).append(t)
    for queue in by_link.values():  # one transfer at a time on a link, in order
        for before, after in itertools.pairwise(queue):
            assert after.start_s >= before.end_s and after.ready_s >= before.ready_s
    if breakdown is not None:
        _audit_breakdown(
            breakdown,
            run.records,
            stream,
            routes,
            by_request,
            handed_at,
            executed,
            executed_there,
            first_decode,
        )
    for i, record in enumerate(run.records):
        assert generated[i] == output[i]
        assert record.prefilled_tokens == prefilled[i]
        assert record.preemptions == preempted[i]
        # Prefill exactly once per (re)start: chunks never exceed what is left of the
        # start's target (checked above), and a start completes its prefill exactly once
        # unless preempted before completing (then it started again); a hand-off's
        # decode node completes one more (its one-token chunk).
        assert completed_starts[i] == 1 + decode_preemptions[i] + handed[i]
        times = [t for a, b in record.segments for t in run.iteration_end_s[a : b + 1]]
        assert times == emit_times[i], f"request {i}: token times"
        assert record.first_token_s == emit_times[i][0]
        assert record.finish_s == emit_times[i][-1]
        assert not math.isnan(record.finish_s)


def _audit_breakdown(
    breakdown,
    records,
    stream,
    routes,
    by_request,
    handed_at,
    executed,
    executed_there,
    first_decode,
) -> None:
    """Every component of every request's TTFT breakdown, recomputed from the logs
    (``schedlab.serving.cluster``'s module docstring gives the definitions)."""
    for i, record in enumerate(records):
        arrival = float(stream.arrival_s[i])
        ttft = record.first_token_s - arrival
        if i in by_request:
            assert routes[i].then is not None, f"request {i}: a transfer off its route"
            ready, arrived = handed_at[i], by_request[i].end_s
            before = ready - arrival - executed_there[i]
            after = record.first_token_s - arrived - first_decode[i]
            after -= executed[i] - executed_there[i]
            want = {
                "prefill": executed[i],
                "transfer": arrived - ready,
                "first_decode": first_decode[i],
                "queue_prefill_side": before,
                "queue_decode_side": after,
            }
            assert first_decode[i] > 0, f"request {i}: no first-token iteration logged"
        else:
            assert routes is None or not routes or routes[i].then is None
            want = {
                "prefill": executed[i],
                "transfer": 0.0,
                "first_decode": 0.0,
                "queue_prefill_side": ttft - executed[i],
                "queue_decode_side": 0.0,
            }
        want["queue"] = want["queue_prefill_side"] + want["queue_decode_side"]
        assert executed[i] > 0, f"request {i}: no prefill iteration logged"
        for name, value in want.items():
            got = float(breakdown[name][i])
            assert abs(got - value) <= 1e-9, f"request {i}: {name} {got} != {value}"
            assert value >= -1e-9, f"request {i}: {name} = {value} < 0"
        total = sum(
            float(breakdown[name][i]) for name in ("queue", "prefill", "transfer", "first_decode")
        )
        assert abs(total - ttft) <= 1e-9, f"request {i}: breakdown {total} != TTFT {ttft}"
