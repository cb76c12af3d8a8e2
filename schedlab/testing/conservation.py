r"""Conservation of tokens and KV blocks in a simulator run, checked from its batch log.

:func:`check_conservation` replays the iterations a run recorded
(:class:`~schedlab.serving.iteration.BatchRecord`) with its own bookkeeping, sharing no
code with the engine: the KV tokens each request holds and on which node, the prefill
progress of its current (re)start, the tokens it took back from the prefix cache. With
:math:`B` tokens a block, a request holding :math:`h` KV tokens occupies
:math:`\lceil h / B \rceil` blocks, and over every logged iteration it asserts the laws of
``docs/design.md``, section "Online model":

* **tokens**: request :math:`i` emits each of its :math:`o_i` tokens exactly once, at the
  end of the iterations its record's segments name; a decode computes the KV of the token
  it emitted last, so it grows by one token an iteration;
* **prefill**: every (re)start prefills its target (the prompt plus the tokens generated
  before a preemption) exactly once, in chunks :math:`1 \le c \le` what is left, less
  what it took back from the cache in whole blocks; the records' prefill and preemption
  counts equal the replay's;
* **KV blocks**: at every iteration the blocks held, :math:`\sum_i \lceil h_i/B \rceil`,
  are at most the engine's blocks, equal the engine's own count (``used_blocks``, except
  under asynchronous scheduling, where finished requests return blocks an iteration
  late), and no chunk is allocated more blocks than were free; when the run ends no block
  is held. With shared prefixes a block may be held by several requests: the engine's
  count must lie between the sum with each shared name counted once and the sum, and a
  new request may take blocks from the prefix cache;
* **limits**: every running decode is batched, at most ``max_num_seqs`` requests are
  admitted, an iteration carries at most ``max_num_batched_tokens`` tokens (one whole
  prompt may exceed it under a policy that never splits prompts), a request runs only
  after its arrival, and the full-prompt gate holds (less, with shared prefixes, the
  hits another request may hold);
* **preemption**: only running requests are preempted, and an iteration that preempted
  admits no waiting request, as in vLLM (``vllm/v1/core/sched/scheduler.py`` line 564).
  Two exceptions follow the engine (:mod:`schedlab.serving.engine`): when the preempting
  pass leaves nothing to run, the next pass runs at once and may admit, so an iteration
  without decodes may preempt and admit; and under asynchronous scheduling a request
  that finished in the node's previous iteration may still be preempted (the scheduler
  does not know yet that it finished), which its record counts.

For a cluster (:func:`check_cluster_conservation`) it replays every node's log in time
order, with requests moving between nodes: a prefill node's hand-off emits no token and
keeps the request's blocks until its KV transfer ends; each hand-off has exactly one
transfer, of :math:`s_i - 1` tokens, one at a time on its link; the decode node admits the
request only after the transfer, holding the tokens it received; each component of the
TTFT breakdown is recomputed from the logs; and the loads routers saw are never negative.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from schedlab.serving.cluster_result import ClusterRun
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.prefix import block_contents
from schedlab.serving.simulator import EngineRun
from schedlab.serving.workloads import RequestStream
from schedlab.testing.runs import ServingRun
from schedlab.testing.violations import ConservationViolation

__all__ = ["check_cluster_conservation", "check_conservation"]


def check_conservation(run: ServingRun) -> None:
    """Check the conservation laws of the module docstring over every iteration of ``run``
    (each data-parallel replica's log, ``run.run.replica_iterations``, in time order).

    Raises
    ------
    ConservationViolation
        Naming the replica (node), the iteration and the request where a law broke.
    """
    __tracebackhide__ = True
    engine = run.run
    nodes = max(1, len(engine.replica_iterations))
    config = run.scenario.engine
    _replay(
        engine,
        run.stream,
        [config] * nodes,
        ["colocated"] * nodes,
        [run.chunked] * nodes,
        (),
        None,
        None,
        (),
    )


def check_cluster_conservation(
    cluster_run: ClusterRun,
    stream: RequestStream,
    configs: Sequence[EngineConfig],
    *,
    chunked: Sequence[bool],
    bytes_per_token: int,
) -> None:
    """Check the same laws on every node of a cluster run, and the hand-offs, transfers,
    TTFT breakdown and router loads of the module docstring.

    Parameters
    ----------
    cluster_run
        A :func:`~schedlab.serving.cluster.run_cluster` result with batches recorded.
    stream
        Its requests.
    configs, chunked
        Each node's engine limits, and whether its policy splits prompts.
    bytes_per_token
        KV bytes of one token (a transfer's size).

    Raises
    ------
    ConservationViolation
        Naming the node, the iteration and the request where a law broke.
    """
    __tracebackhide__ = True
    records, routes = cluster_run.run.records, cluster_run.routes
    for j, loads in enumerate(cluster_run.loads):
        if len(loads) != len(configs):
            raise ConservationViolation(
                f"request {j}'s router saw {len(loads)} nodes' loads, the cluster has "
                f"{len(configs)}"
            )
        now = stream.arrival_s[j]
        for k, (queued, outstanding) in enumerate(loads):
            if not 0 <= queued <= outstanding:
                raise ConservationViolation(f"request {j}'s router saw loads {loads}")
            # each request routed to node k (to decode there) that has not finished has
            # at least one token to come there
            present = sum(
                stream.arrival_s[i] < now < records[i].finish_s
                and k == (routes[i].node if routes[i].then is None else routes[i].then)
                for i in range(j)
            )
            if outstanding < present:
                raise ConservationViolation(
                    f"request {j}'s router saw node {k} with {outstanding} outstanding "
                    f"tokens, but {present} earlier requests still had tokens to come there "
                    f"(loads {loads})"
                )
    _replay(
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


def _replay(
    run: EngineRun,
    stream: RequestStream,
    configs: list[EngineConfig],
    roles: list[str],
    chunked: list[bool],
    transfers: Sequence[Any],
    bytes_per_token: int | None,
    breakdown: dict[str, Any] | None,
    routes: Sequence[Any],
) -> None:
    """The replay of the module docstring; raises :class:`ConservationViolation`."""
    __tracebackhide__ = True
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
    finished_in: dict[int, tuple[int, int]] = {}  # the node and iteration it finished in
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
    by_request: dict[int, Any] = {}
    for t in transfers:
        if t.request in by_request:
            raise ConservationViolation(f"request {t.request}: two KV transfers")
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

    shares = stream.prefix
    # per block size: each request's shared names, cut to those another request has too
    # (only those can be held twice; names are chain ids, so they form a prefix)
    sharable: dict[int, list[list[int]]] = {}

    def names_at(size: int) -> list[list[int]]:
        if size not in sharable:
            assert shares is not None
            every = [
                block_contents(ids, shares.block_tokens, size, p)
                for ids, p in zip(shares.hash_ids, prompt, strict=True)
            ]
            seen = Counter((name, j) for names in every for j, name in enumerate(names))
            cut = []
            for names in every:
                j = 0
                while j < len(names) and seen[(names[j], j)] > 1:
                    j += 1
                cut.append(names[:j])
            sharable[size] = cut
        return sharable[size]

    def used(k: int) -> tuple[int, int]:
        """The blocks node ``k``'s requests hold: at least (each shared block once) and at
        most (none shared). Request ``i`` has its block ``j`` under a shared name once its
        first ``(j + 1) B`` tokens are allocated and ``j`` is a full block of its prompt
        (:mod:`schedlab.serving.kv_cache`); two requests may still hold copies of one."""
        config = configs[k]
        size = config.block_size
        here = [i for i in range(n) if where[i] == k]
        most = sum(blocks(config, held[i]) for i in here)
        if shares is None:
            return most, most
        names = names_at(size)
        keyed = 0
        distinct: set[tuple[int, int]] = set()
        for i in here:
            length = min(held[i] // size, len(names[i]))
            keyed += length
            j = length - 1  # walk its chain up to a block already counted
            while j >= 0 and (names[i][j], j) not in distinct:
                distinct.add((names[i][j], j))
                j -= 1
        return most - keyed + len(distinct), most

    # every node's iterations, in time order (ties: by node, as the driver's sequence)
    counts = run.replica_iterations or (len(run.batches),)
    if not sum(counts) == len(run.batches) == run.iteration_end_s.size:
        raise ConservationViolation(
            f"the run logs {len(run.batches)} iterations and {run.iteration_end_s.size} "
            f"iteration ends, its replicas {sum(counts)}: record every batch "
            "(record_batches=True)"
        )
    logs = []
    offset = 0
    for k, count in enumerate(counts):
        for j in range(count):
            batch = run.batches[offset + j]
            if batch.end_s != run.iteration_end_s[offset + j]:
                raise ConservationViolation(
                    f"node {k} iteration {j}: logged end {batch.end_s} s, the run's "
                    f"{run.iteration_end_s[offset + j]} s"
                )
            if j and batch.start_s < run.batches[offset + j - 1].end_s:
                raise ConservationViolation(
                    f"node {k} iteration {j} starts at {batch.start_s} s, before iteration "
                    f"{j - 1} ends"
                )
            logs.append((batch.end_s, batch.start_s, k, j, batch))
        offset += count
    logs.sort(key=lambda entry: entry[:4])
    for _, _, k, number, batch in logs:
        config = configs[k]
        here = f"node {k} iteration {number} ({batch.start_s:.6g}..{batch.end_s:.6g} s)"
        if not batch.end_s > batch.start_s:
            raise ConservationViolation(f"{here}: does not last a positive time")
        release(batch.start_s, strict=False)
        for i in batch.preempted:
            if i in finished and config.async_scheduling and finished_in[i] == (k, number - 1):
                # planned before the engine knows it finished: vLLM preempts it, and counts it
                preempted[i] += 1
                continue
            if i not in admitted[k] or i in finished:
                raise ConservationViolation(f"{here}: preempts request {i}, not running there")
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
            if i in admitted[k] or not (preempted[i] or shares is not None):
                raise ConservationViolation(
                    f"{here}: request {i} takes {tokens} tokens back from the prefix cache, "
                    "but only a request resumed after a preemption, or one of a stream that "
                    "shares prefixes, can"
                )
            if tokens % config.block_size or not 0 < tokens < target[i]:
                raise ConservationViolation(
                    f"{here}: request {i} takes {tokens} tokens back from the prefix cache: "
                    f"not whole blocks of {config.block_size} fewer than its {target[i]}"
                )
        for i, tokens in received.items():
            if roles[k] != "decode" or handed[i] != 1:
                raise ConservationViolation(
                    f"{here}: request {i} receives KV on a {roles[k]} node after "
                    f"{handed[i]} hand-offs"
                )
            if tokens != prompt[i] - 1 or i in reused:
                raise ConservationViolation(
                    f"{here}: request {i} receives {tokens} KV tokens, not its prompt less "
                    f"one ({prompt[i] - 1})"
                )
            if received_at[i] > batch.start_s or by_request[i].target != k:
                raise ConservationViolation(
                    f"{here}: request {i} is admitted before its KV arrived here"
                )
        decoding = {i for i in admitted[k] if done[i] == target[i]}
        if set(batch.decodes) != decoding:
            raise ConservationViolation(
                f"{here}: batches decodes {sorted(batch.decodes)}, but the running decodes "
                f"are {sorted(decoding)} (every running decode is batched)"
            )
        tokens = len(batch.decodes) + sum(c for _, c in batch.chunks)
        whole_alone = not chunked[k] and len(batch.chunks) == 1
        if tokens > config.max_num_batched_tokens and not whole_alone:
            raise ConservationViolation(
                f"{here}: {tokens} tokens, over max_num_batched_tokens = "
                f"{config.max_num_batched_tokens}"
            )
        # blocks free once the decodes have grown (an upper bound under async scheduling,
        # where finished requests give their blocks back an iteration late)
        free = config.total_blocks - used(k)[0]  # at most (shared blocks count once)
        free -= sum(blocks(config, held[i] + 1) - blocks(config, held[i]) for i in batch.decodes)
        for i, c in batch.chunks:
            if i in finished:
                raise ConservationViolation(f"{here}: prefills request {i}, already finished")
            if stream.arrival_s[i] > batch.start_s:
                raise ConservationViolation(
                    f"{here}: prefills request {i} before its arrival at "
                    f"{stream.arrival_s[i]:.6g} s"
                )
            if i not in admitted[k]:
                if batch.preempted and batch.decodes:
                    raise ConservationViolation(
                        f"{here}: admits request {i} in an iteration that preempted "
                        f"{list(batch.preempted)} and runs decodes"
                    )
                if where[i] != -1:
                    raise ConservationViolation(
                        f"{here}: admits request {i}, which still holds KV on node {where[i]}"
                    )
                # cached blocks another request holds are shared, not taken: at most
                # those of its hits that another request of the stream could hold
                sharing = 0
                if shares is not None:
                    hit = reused.get(i, 0) // config.block_size
                    sharing = min(hit, len(names_at(config.block_size)[i]))
                need = blocks(config, target[i]) - sharing
                if config.reserve_full_prompt and need > free:
                    raise ConservationViolation(
                        f"{here}: admits request {i}, whose {target[i]} tokens need "
                        f"{need} blocks with {free} free (the full-prompt gate)"
                    )
                if i in received:
                    done[i] = held[i] = received[i]
                    free -= blocks(config, held[i])  # new blocks for the received KV
                else:
                    done[i] = held[i] = reused.get(i, 0)
                    # it takes its cached blocks: the free ones cost a free block each,
                    # those another request holds (at most ``sharing``) none
                    free -= blocks(config, held[i]) - sharing
                where[i] = k
                admitted[k].add(i)
            if not 1 <= c <= target[i] - done[i]:
                raise ConservationViolation(
                    f"{here}: a chunk of {c} tokens of request {i}, which has "
                    f"{target[i] - done[i]} left to prefill"
                )
            if not chunked[k] and c != target[i] - done[i]:
                raise ConservationViolation(
                    f"{here}: a policy that never splits prompts gives request {i} a chunk "
                    f"of {c} of its {target[i] - done[i]} tokens"
                )
            free -= blocks(config, held[i] + c) - blocks(config, held[i])
            done[i] += c
            held[i] += c
            prefilled[i] += c
        if free < 0:
            raise ConservationViolation(f"{here}: allocates {-free} KV blocks more than were free")
        if len(admitted[k]) > config.max_num_seqs:
            raise ConservationViolation(
                f"{here}: {len(admitted[k])} requests admitted, over max_num_seqs = "
                f"{config.max_num_seqs}"
            )
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
            if roles[k] != "prefill" or i not in completing:
                raise ConservationViolation(
                    f"{here}: hands request {i} off from a {roles[k]} node, or before its "
                    "prefill completed"
                )
            handed[i] += 1
            handed_at[i] = batch.end_s
            if i not in by_request:
                raise ConservationViolation(f"{here}: request {i} handed off with no transfer")
            transfer = by_request[i]  # exactly one transfer per hand-off
            if (
                transfer.source != k
                or roles[transfer.target] != "decode"
                or transfer.ready_s != batch.end_s
                or transfer.start_s < batch.start_s
                or transfer.tokens != prompt[i] - 1
                or transfer.bytes != transfer.tokens * bytes_per_token
                or not transfer.end_s > transfer.start_s
            ):
                raise ConservationViolation(
                    f"{here}: request {i}'s transfer {transfer} is not one of its prompt less "
                    f"one token ({prompt[i] - 1}, {bytes_per_token} bytes each) from this "
                    "node to a decode node, ready at this iteration's end"
                )
            admitted[k].discard(i)
            heapq.heappush(pending, (transfer.end_s, i))
        if roles[k] == "prefill" and batch.decodes:
            raise ConservationViolation(f"{here}: a prefill node decodes {list(batch.decodes)}")
        for i in batch.decodes:
            held[i] += 1  # a decode computes the KV of the token it emitted last
        for i in [*batch.decodes, *(i for i in completing if i not in batch.handed_off)]:
            generated[i] += 1
            emit_times[i].append(batch.end_s)
        release(batch.end_s, strict=True)
        least, most = used(k)
        if least > config.total_blocks:
            raise ConservationViolation(
                f"{here}: {least} KV blocks in use, over the engine's {config.total_blocks}"
            )
        # (under async scheduling, finished requests free their blocks an iteration late)
        if not config.async_scheduling and not least <= batch.used_blocks <= most:
            held_text = f"{most}" if least == most else f"{least} to {most} (shared prefixes)"
            raise ConservationViolation(
                f"{here}: the engine reports {batch.used_blocks} KV blocks in use, the "
                f"requests hold {held_text}"
            )
        for i in list(admitted[k]):
            if generated[i] > output[i]:
                raise ConservationViolation(
                    f"{here}: request {i} emits token {generated[i]} of {output[i]}"
                )
            if generated[i] == output[i]:
                admitted[k].discard(i)
                finished.add(i)
                finished_in[i] = (k, number)
                held[i] = 0
                where[i] = -1
    release(math.inf, strict=True)
    # Nothing lost, nothing double counted.
    unfinished = sorted(set(range(n)) - finished)
    if unfinished:
        raise ConservationViolation(
            f"request(s) {unfinished[:10]} never emitted all their tokens (request "
            f"{unfinished[0]}: {generated[unfinished[0]]} of {output[unfinished[0]]})"
        )
    if sum(handed) != len(transfers) or any(h > 1 for h in handed):
        raise ConservationViolation(
            f"{len(transfers)} transfers for {sum(handed)} hand-offs (at most one a request)"
        )
    holding = [i for i in range(n) if where[i] != -1 or held[i]]
    if holding:
        raise ConservationViolation(f"request(s) {holding[:10]} hold KV blocks after the run")
    by_link: dict[int, list[Any]] = {}
    for t in transfers:
        by_link.setdefault(t.source, []).append(t)
    for link, queue in by_link.items():  # one transfer at a time on a link, in order
        for before, after in itertools.pairwise(queue):
            if after.start_s < before.end_s or after.ready_s < before.ready_s:
                raise ConservationViolation(
                    f"link of node {link}: request {after.request}'s transfer overlaps or "
                    f"overtakes request {before.request}'s"
                )
    if breakdown is not None:
        _check_breakdown(
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
        if record.prefilled_tokens != prefilled[i] or record.preemptions != preempted[i]:
            raise ConservationViolation(
                f"request {i}: its record counts {record.prefilled_tokens} prefill tokens "
                f"and {record.preemptions} preemptions, the log {prefilled[i]} and "
                f"{preempted[i]}"
            )
        # Prefill exactly once per (re)start: chunks never exceed what is left of the
        # start's target (checked above), and a start completes its prefill exactly once
        # unless preempted before completing (then it started again); a hand-off's
        # decode node completes one more (its one-token chunk).
        if completed_starts[i] != 1 + decode_preemptions[i] + handed[i]:
            raise ConservationViolation(
                f"request {i}: completes its prefill {completed_starts[i]} times, after "
                f"{decode_preemptions[i]} preemptions while decoding and {handed[i]} hand-offs"
            )
        times = [t for a, b in record.segments for t in run.iteration_end_s[a : b + 1]]
        if times != emit_times[i]:
            raise ConservationViolation(
                f"request {i}: its record's segments {list(record.segments)} give "
                f"{len(times)} token times, the log {len(emit_times[i])}; they differ from "
                f"token {_first_difference(times, emit_times[i])} on"
            )
        if record.first_token_s != times[0] or record.finish_s != times[-1]:
            raise ConservationViolation(
                f"request {i}: first token at {record.first_token_s} s and finish at "
                f"{record.finish_s} s, its tokens at {times[0]}..{times[-1]} s"
            )


def _first_difference(a: Sequence[float], b: Sequence[float]) -> int:
    """The first index where ``a`` and ``b`` differ (one may end there)."""
    pairs = itertools.zip_longest(a, b)
    return next((j for j, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))


def _check_breakdown(
    breakdown: dict[str, Any],
    records: Sequence[Any],
    stream: RequestStream,
    routes: Sequence[Any],
    by_request: dict[int, Any],
    handed_at: list[float],
    executed: list[float],
    executed_there: list[float],
    first_decode: list[float],
) -> None:
    """Every component of every request's TTFT breakdown, recomputed from the logs
    (:mod:`schedlab.serving.cluster`'s module docstring gives the definitions)."""
    __tracebackhide__ = True
    for i, record in enumerate(records):
        arrival = float(stream.arrival_s[i])
        ttft = record.first_token_s - arrival
        if i in by_request:
            if routes[i].then is None:
                raise ConservationViolation(f"request {i}: a KV transfer off its route")
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
            if not first_decode[i] > 0:
                raise ConservationViolation(f"request {i}: no first-token iteration logged")
        else:
            if routes and routes[i].then is not None:
                raise ConservationViolation(
                    f"request {i}: routed to hand off, but it has no KV transfer"
                )
            want = {
                "prefill": executed[i],
                "transfer": 0.0,
                "first_decode": 0.0,
                "queue_prefill_side": ttft - executed[i],
                "queue_decode_side": 0.0,
            }
        want["queue"] = want["queue_prefill_side"] + want["queue_decode_side"]
        if not executed[i] > 0:
            raise ConservationViolation(f"request {i}: no prefill iteration logged")
        for name, value in want.items():
            got = float(breakdown[name][i])
            if abs(got - value) > 1e-9 or value < -1e-9:
                raise ConservationViolation(
                    f"request {i}: TTFT breakdown {name} = {got} s, the log gives {value} s "
                    "(no component may be negative)"
                )
        total = sum(
            float(breakdown[name][i]) for name in ("queue", "prefill", "transfer", "first_decode")
        )
        if abs(total - ttft) > 1e-9:
            raise ConservationViolation(
                f"request {i}: TTFT breakdown sums to {total} s, its TTFT is {ttft} s"
            )
