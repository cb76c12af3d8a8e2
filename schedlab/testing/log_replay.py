r"""The replay behind :mod:`schedlab.testing.conservation`: one object, one method a law.

:class:`LogReplay` walks the iterations a run logged (every node's, in time order) with
bookkeeping of its own, sharing no code with the engine: the KV tokens each request holds
and on which node, the prefill progress of its current (re)start, the tokens it took back
from the prefix cache, its hand-off and KV transfer. :meth:`LogReplay.check` runs it; each
law of :mod:`schedlab.testing.conservation`'s docstring is one method, named after it, and
raises :class:`~schedlab.testing.violations.ConservationViolation` naming the node, the
iteration and the request where it broke.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.iteration import BatchRecord
from schedlab.serving.prefix import block_contents
from schedlab.serving.simulator import EngineRun
from schedlab.serving.workloads import RequestStream
from schedlab.testing.violations import ConservationViolation

__all__ = ["LogReplay"]


def _blocks(config: EngineConfig, tokens: int) -> int:
    return -(-tokens // config.block_size)


class LogReplay:
    """A run's logs replayed against the conservation laws.

    Parameters
    ----------
    run
        The run, its batches recorded (every node's, ``run.replica_iterations``).
    stream
        Its requests.
    nodes
        ``(configs, roles, chunked)``: each node's engine limits, role (``colocated``,
        ``prefill``, ``decode``) and whether its policy splits prompts.
    transfers
        The run's KV transfers (a cluster's; none for one engine).
    bytes_per_token
        KV bytes of one token (a transfer's size); ``None`` without transfers.
    """

    def __init__(
        self,
        run: EngineRun,
        stream: RequestStream,
        nodes: tuple[Sequence[EngineConfig], Sequence[str], Sequence[bool]],
        transfers: Sequence[Any] = (),
        bytes_per_token: int | None = None,
    ) -> None:
        self.run, self.stream = run, stream
        self.configs: list[EngineConfig] = list(nodes[0])
        self.roles: list[str] = list(nodes[1])
        self.chunked: list[bool] = list(nodes[2])
        self.transfers, self.bytes_per_token = transfers, bytes_per_token
        n = self.n = len(stream)
        self.prompt = [int(p) for p in stream.prompt]
        self.output = [int(o) for o in stream.output]
        self.held = [0] * n  # KV tokens held (on the node holding them)
        self.where = [-1] * n  # the node holding them
        self.target = list(self.prompt)  # tokens the current (re)start must prefill
        self.done = [0] * n  # tokens of target prefilled (or received) in this (re)start
        self.generated = [0] * n
        self.admitted: list[set[int]] = [set() for _ in self.configs]
        self.finished: set[int] = set()
        self.finished_in: dict[int, tuple[int, int]] = {}  # its node and iteration
        self.prefilled = [0] * n
        self.preempted = [0] * n
        self.completed_starts = [0] * n
        self.decode_preemptions = [0] * n
        self.handed = [0] * n
        self.received_at = [math.nan] * n  # when its KV arrived at its decode node
        self.emit_times: list[list[float]] = [[] for _ in range(n)]
        # the TTFT breakdown from the logs: seconds of the iterations that ran a request's
        # chunks before its first token (all, and those on its prefill node), the
        # hand-off's end, and the first-token iteration's seconds after a transfer
        self.executed = [0.0] * n
        self.executed_there = [0.0] * n
        self.handed_at = [math.nan] * n
        self.first_decode = [0.0] * n
        self.by_request: dict[int, Any] = {}
        for t in transfers:
            if t.request in self.by_request:
                raise ConservationViolation(f"request {t.request}: two KV transfers")
            self.by_request[t.request] = t
        self.pending: list[tuple[float, int]] = []  # (transfer end, request) holding blocks
        # per block size: each request's shared names, cut to those another request has
        # too (only those can be held twice; names are chain ids, so they form a prefix)
        self.sharable: dict[int, list[list[int]]] = {}

    # -- bookkeeping ------------------------------------------------------------------

    def release(self, upto: float, strict: bool) -> None:
        """Free the blocks of the hand-offs whose transfer ended before ``upto`` (or at
        it, unless ``strict``)."""
        pending = self.pending
        while pending and (pending[0][0] < upto or (not strict and pending[0][0] == upto)):
            _, i = heapq.heappop(pending)
            self.held[i] = 0
            self.where[i] = -1
            self.received_at[i] = self.by_request[i].end_s

    def names_at(self, size: int) -> list[list[int]]:
        """Each request's block names another request shares, at ``size`` tokens a block."""
        shares = self.stream.prefix
        if size not in self.sharable:
            assert shares is not None
            every = [
                block_contents(ids, shares.block_tokens, size, p)
                for ids, p in zip(shares.hash_ids, self.prompt, strict=True)
            ]
            seen = Counter((name, j) for names in every for j, name in enumerate(names))
            cut = []
            for names in every:
                j = 0
                while j < len(names) and seen[(names[j], j)] > 1:
                    j += 1
                cut.append(names[:j])
            self.sharable[size] = cut
        return self.sharable[size]

    def used(self, k: int) -> tuple[int, int]:
        """The blocks node ``k``'s requests hold: at least (each shared block once) and at
        most (none shared). Request ``i`` has its block ``j`` under a shared name once its
        first ``(j + 1) B`` tokens are allocated and ``j`` is a full block of its prompt
        (:mod:`schedlab.serving.kv_cache`); two requests may still hold copies of one."""
        config = self.configs[k]
        size = config.block_size
        here = [i for i in range(self.n) if self.where[i] == k]
        most = sum(_blocks(config, self.held[i]) for i in here)
        if self.stream.prefix is None:
            return most, most
        names = self.names_at(size)
        keyed = 0
        distinct: set[tuple[int, int]] = set()
        for i in here:
            length = min(self.held[i] // size, len(names[i]))
            keyed += length
            j = length - 1  # walk its chain up to a block already counted
            while j >= 0 and (names[i][j], j) not in distinct:
                distinct.add((names[i][j], j))
                j -= 1
        return most - keyed + len(distinct), most

    # -- the run -------------------------------------------------------------------------

    def check(self, breakdown: dict[str, Any] | None = None, routes: Sequence[Any] = ()) -> None:
        """Replay every logged iteration, then check what holds at the end, the records
        and (given) the TTFT breakdown against ``routes``."""
        __tracebackhide__ = True
        for k, number, batch in self.logs():
            self.iteration(k, number, batch)
        self.release(math.inf, strict=True)
        self.nothing_lost()
        self.links()
        if breakdown is not None:
            self.ttft_breakdown(breakdown, routes)
        for i in range(self.n):
            self.request_record(i)

    def logs(self) -> list[tuple[int, int, BatchRecord]]:
        """Every node's iterations ``(node, number, batch)`` in time order (ties: by node,
        as the driver's sequence), once the log is whole and each node's is in order."""
        run = self.run
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
                        f"node {k} iteration {j} starts at {batch.start_s} s, before "
                        f"iteration {j - 1} ends"
                    )
                logs.append((batch.end_s, batch.start_s, k, j, batch))
            offset += count
        logs.sort(key=lambda entry: entry[:4])
        return [(k, j, batch) for _, _, k, j, batch in logs]

    def iteration(self, k: int, number: int, batch: BatchRecord) -> None:
        """Node ``k``'s iteration ``number``, law by law in the order the engine acts."""
        here = f"node {k} iteration {number} ({batch.start_s:.6g}..{batch.end_s:.6g} s)"
        if not batch.end_s > batch.start_s:
            raise ConservationViolation(f"{here}: does not last a positive time")
        self.release(batch.start_s, strict=False)
        self.preemption(here, k, number, batch)
        self.prefix_hits(here, k, batch)
        self.kv_received(here, k, batch)
        self.decodes_batched(here, k, batch)
        self.token_budget(here, k, batch)
        self.prefill(here, k, batch)
        completing = [i for i, _ in batch.chunks if self.done[i] == self.target[i]]
        self.time_before_first_token(k, batch, completing)
        self.hand_offs(here, k, batch, completing)
        self.tokens(here, batch, completing)
        self.release(batch.end_s, strict=True)
        self.kv_blocks(here, k, batch)
        self.finishes(k, number)

    # -- one law a method ----------------------------------------------------------------

    def preemption(self, here: str, k: int, number: int, batch: BatchRecord) -> None:
        """Only running requests are preempted (or, under asynchronous scheduling, one
        that finished in the node's previous iteration); each restarts its prefill."""
        config = self.configs[k]
        for i in batch.preempted:
            if (
                i in self.finished
                and config.async_scheduling
                and self.finished_in[i] == (k, number - 1)
            ):
                # planned before the engine knows it finished: vLLM preempts it, and counts it
                self.preempted[i] += 1
                continue
            if i not in self.admitted[k] or i in self.finished:
                raise ConservationViolation(f"{here}: preempts request {i}, not running there")
            self.preempted[i] += 1
            self.decode_preemptions[i] += self.done[i] == self.target[i]
            self.admitted[k].discard(i)
            self.held[i] = 0
            self.where[i] = -1
            self.done[i] = 0
            self.target[i] = self.prompt[i] + self.generated[i]

    def prefix_hits(self, here: str, k: int, batch: BatchRecord) -> None:
        """A request takes tokens back from the prefix cache only when admitted after a
        preemption or from a stream that shares prefixes, in whole blocks, fewer than its
        target."""
        config = self.configs[k]
        for i, tokens in batch.reused:
            if i in self.admitted[k] or not (self.preempted[i] or self.stream.prefix is not None):
                raise ConservationViolation(
                    f"{here}: request {i} takes {tokens} tokens back from the prefix cache, "
                    "but only a request resumed after a preemption, or one of a stream that "
                    "shares prefixes, can"
                )
            if tokens % config.block_size or not 0 < tokens < self.target[i]:
                raise ConservationViolation(
                    f"{here}: request {i} takes {tokens} tokens back from the prefix cache: "
                    f"not whole blocks of {config.block_size} fewer than its {self.target[i]}"
                )

    def kv_received(self, here: str, k: int, batch: BatchRecord) -> None:
        """A decode node admits a handed-off request once, after its transfer ended,
        with its prompt less one token of KV."""
        reused = dict(batch.reused)
        for i, tokens in batch.received:
            if self.roles[k] != "decode" or self.handed[i] != 1:
                raise ConservationViolation(
                    f"{here}: request {i} receives KV on a {self.roles[k]} node after "
                    f"{self.handed[i]} hand-offs"
                )
            if tokens != self.prompt[i] - 1 or i in reused:
                raise ConservationViolation(
                    f"{here}: request {i} receives {tokens} KV tokens, not its prompt less "
                    f"one ({self.prompt[i] - 1})"
                )
            if self.received_at[i] > batch.start_s or self.by_request[i].target != k:
                raise ConservationViolation(
                    f"{here}: request {i} is admitted before its KV arrived here"
                )

    def decodes_batched(self, here: str, k: int, batch: BatchRecord) -> None:
        """Every running decode is batched, and nothing else decodes."""
        decoding = {i for i in self.admitted[k] if self.done[i] == self.target[i]}
        if set(batch.decodes) != decoding:
            raise ConservationViolation(
                f"{here}: batches decodes {sorted(batch.decodes)}, but the running decodes "
                f"are {sorted(decoding)} (every running decode is batched)"
            )
        if self.roles[k] == "prefill" and batch.decodes:
            raise ConservationViolation(f"{here}: a prefill node decodes {list(batch.decodes)}")

    def token_budget(self, here: str, k: int, batch: BatchRecord) -> None:
        """At most ``max_num_batched_tokens`` an iteration, but for one whole prompt under
        a policy that never splits prompts."""
        config = self.configs[k]
        tokens = len(batch.decodes) + sum(c for _, c in batch.chunks)
        whole_alone = not self.chunked[k] and len(batch.chunks) == 1
        if tokens > config.max_num_batched_tokens and not whole_alone:
            raise ConservationViolation(
                f"{here}: {tokens} tokens, over max_num_batched_tokens = "
                f"{config.max_num_batched_tokens}"
            )

    def prefill(self, here: str, k: int, batch: BatchRecord) -> None:
        """Each chunk is of a request that arrived and has not finished, admitted through
        the full-prompt gate, of ``1..left`` tokens (all that is left under a policy that
        never splits prompts), within the blocks free; at most ``max_num_seqs`` run."""
        config = self.configs[k]
        reused, received = dict(batch.reused), dict(batch.received)
        # blocks free once the decodes have grown (an upper bound under async scheduling,
        # where finished requests give their blocks back an iteration late)
        free = config.total_blocks - self.used(k)[0]  # at most (shared blocks count once)
        free -= sum(
            _blocks(config, self.held[i] + 1) - _blocks(config, self.held[i])
            for i in batch.decodes
        )
        for i, c in batch.chunks:
            if i in self.finished:
                raise ConservationViolation(f"{here}: prefills request {i}, already finished")
            if self.stream.arrival_s[i] > batch.start_s:
                raise ConservationViolation(
                    f"{here}: prefills request {i} before its arrival at "
                    f"{self.stream.arrival_s[i]:.6g} s"
                )
            if i not in self.admitted[k]:
                free -= self.admission(here, k, batch, i, free, reused, received)
            left = self.target[i] - self.done[i]
            if not 1 <= c <= left:
                raise ConservationViolation(
                    f"{here}: a chunk of {c} tokens of request {i}, which has {left} left "
                    "to prefill"
                )
            if not self.chunked[k] and c != left:
                raise ConservationViolation(
                    f"{here}: a policy that never splits prompts gives request {i} a chunk "
                    f"of {c} of its {left} tokens"
                )
            free -= _blocks(config, self.held[i] + c) - _blocks(config, self.held[i])
            self.done[i] += c
            self.held[i] += c
            self.prefilled[i] += c
        if free < 0:
            raise ConservationViolation(f"{here}: allocates {-free} KV blocks more than were free")
        if len(self.admitted[k]) > config.max_num_seqs:
            raise ConservationViolation(
                f"{here}: {len(self.admitted[k])} requests admitted, over max_num_seqs = "
                f"{config.max_num_seqs}"
            )

    def admission(
        self,
        here: str,
        k: int,
        batch: BatchRecord,
        i: int,
        free: int,
        reused: dict[int, int],
        received: dict[int, int],
    ) -> int:
        """Request ``i`` admitted on node ``k`` with ``free`` blocks: no admission in an
        iteration that preempted and decodes, none of a request holding KV elsewhere, and
        the full-prompt gate; the blocks it takes."""
        config = self.configs[k]
        if batch.preempted and batch.decodes:
            raise ConservationViolation(
                f"{here}: admits request {i} in an iteration that preempted "
                f"{list(batch.preempted)} and runs decodes"
            )
        if self.where[i] != -1:
            raise ConservationViolation(
                f"{here}: admits request {i}, which still holds KV on node {self.where[i]}"
            )
        # cached blocks another request holds are shared, not taken: at most those of its
        # hits that another request of the stream could hold
        sharing = 0
        if self.stream.prefix is not None:
            hit = reused.get(i, 0) // config.block_size
            sharing = min(hit, len(self.names_at(config.block_size)[i]))
        need = _blocks(config, self.target[i]) - sharing
        if config.reserve_full_prompt and need > free:
            raise ConservationViolation(
                f"{here}: admits request {i}, whose {self.target[i]} tokens need {need} "
                f"blocks with {free} free (the full-prompt gate)"
            )
        self.where[i] = k
        self.admitted[k].add(i)
        if i in received:
            self.done[i] = self.held[i] = received[i]
            return _blocks(config, self.held[i])  # new blocks for the received KV
        self.done[i] = self.held[i] = reused.get(i, 0)
        # it takes its cached blocks: the free ones cost a free block each, those another
        # request holds (at most ``sharing``) none
        return _blocks(config, self.held[i]) - sharing

    def time_before_first_token(self, k: int, batch: BatchRecord, completing: list[int]) -> None:
        """Book the iteration's seconds to the TTFT of each request it prefills (checked
        against the breakdown by :meth:`ttft_breakdown`)."""
        seconds = batch.end_s - batch.start_s
        for i, _ in batch.chunks:
            if self.generated[i]:
                continue
            if self.handed[i] and i in completing:
                self.first_decode[i] = seconds
            else:
                self.executed[i] += seconds
                if self.roles[k] == "prefill":
                    self.executed_there[i] += seconds
        for i in completing:
            self.completed_starts[i] += 1

    def hand_offs(self, here: str, k: int, batch: BatchRecord, completing: list[int]) -> None:
        """A prefill node hands a request off once its prefill completes, with exactly one
        transfer of its prompt less one token to a decode node, ready at the iteration's
        end; it holds the blocks until the transfer ends."""
        for i in batch.handed_off:
            if self.roles[k] != "prefill" or i not in completing:
                raise ConservationViolation(
                    f"{here}: hands request {i} off from a {self.roles[k]} node, or before "
                    "its prefill completed"
                )
            self.handed[i] += 1
            self.handed_at[i] = batch.end_s
            if i not in self.by_request:
                raise ConservationViolation(f"{here}: request {i} handed off with no transfer")
            transfer = self.by_request[i]  # exactly one transfer per hand-off
            if (
                transfer.source != k
                or self.roles[transfer.target] != "decode"
                or transfer.ready_s != batch.end_s
                or transfer.start_s < batch.start_s
                or transfer.tokens != self.prompt[i] - 1
                or transfer.bytes != transfer.tokens * self.bytes_per_token
                or not transfer.end_s > transfer.start_s
            ):
                raise ConservationViolation(
                    f"{here}: request {i}'s transfer {transfer} is not one of its prompt less "
                    f"one token ({self.prompt[i] - 1}, {self.bytes_per_token} bytes each) "
                    "from this node to a decode node, ready at this iteration's end"
                )
            self.admitted[k].discard(i)
            heapq.heappush(self.pending, (transfer.end_s, i))

    def tokens(self, here: str, batch: BatchRecord, completing: list[int]) -> None:
        """A decode computes the KV of the token it emitted last and emits one; a prefill
        that completes (and is not handed off) emits one; none past the output (a request
        listed twice among an iteration's decodes would be)."""
        for i in batch.decodes:
            self.held[i] += 1
        for i in [*batch.decodes, *(i for i in completing if i not in batch.handed_off)]:
            self.generated[i] += 1
            self.emit_times[i].append(batch.end_s)
            if self.generated[i] > self.output[i]:
                raise ConservationViolation(
                    f"{here}: request {i} emits token {self.generated[i]} of {self.output[i]}"
                )

    def kv_blocks(self, here: str, k: int, batch: BatchRecord) -> None:
        """The blocks held fit the engine's, and equal its own count (between the count
        with shared blocks once and without; not under asynchronous scheduling, where
        finished requests free their blocks an iteration late)."""
        config = self.configs[k]
        least, most = self.used(k)
        if least > config.total_blocks:
            raise ConservationViolation(
                f"{here}: {least} KV blocks in use, over the engine's {config.total_blocks}"
            )
        if not config.async_scheduling and not least <= batch.used_blocks <= most:
            held_text = f"{most}" if least == most else f"{least} to {most} (shared prefixes)"
            raise ConservationViolation(
                f"{here}: the engine reports {batch.used_blocks} KV blocks in use, the "
                f"requests hold {held_text}"
            )

    def finishes(self, k: int, number: int) -> None:
        """A request that emitted its last token leaves and frees its blocks."""
        for i in list(self.admitted[k]):
            if self.generated[i] == self.output[i]:
                self.admitted[k].discard(i)
                self.finished.add(i)
                self.finished_in[i] = (k, number)
                self.held[i] = 0
                self.where[i] = -1

    def nothing_lost(self) -> None:
        """Every request emitted all its tokens, every hand-off had one transfer, and no
        block is held when the run ends."""
        unfinished = sorted(set(range(self.n)) - self.finished)
        if unfinished:
            first = unfinished[0]
            raise ConservationViolation(
                f"request(s) {unfinished[:10]} never emitted all their tokens (request "
                f"{first}: {self.generated[first]} of {self.output[first]})"
            )
        if sum(self.handed) != len(self.transfers) or any(h > 1 for h in self.handed):
            raise ConservationViolation(
                f"{len(self.transfers)} transfers for {sum(self.handed)} hand-offs (at most "
                "one a request)"
            )
        holding = [i for i in range(self.n) if self.where[i] != -1 or self.held[i]]
        if holding:
            raise ConservationViolation(f"request(s) {holding[:10]} hold KV blocks after the run")

    def links(self) -> None:
        """One transfer at a time on a link, in the order they became ready."""
        by_link: dict[int, list[Any]] = {}
        for t in self.transfers:
            by_link.setdefault(t.source, []).append(t)
        for link, queue in by_link.items():
            for before, after in itertools.pairwise(queue):
                if after.start_s < before.end_s or after.ready_s < before.ready_s:
                    raise ConservationViolation(
                        f"link of node {link}: request {after.request}'s transfer overlaps or "
                        f"overtakes request {before.request}'s"
                    )

    def request_record(self, i: int) -> None:
        """Request ``i``'s record counts the log's prefill tokens and preemptions, its
        token times are the log's, and each (re)start completes its prefill once."""
        record = self.run.records[i]
        prefilled, preempted = self.prefilled[i], self.preempted[i]
        if record.prefilled_tokens != prefilled or record.preemptions != preempted:
            raise ConservationViolation(
                f"request {i}: its record counts {record.prefilled_tokens} prefill tokens "
                f"and {record.preemptions} preemptions, the log {prefilled} and {preempted}"
            )
        # Prefill exactly once per (re)start: chunks never exceed what is left of the
        # start's target (checked in prefill), and a start completes its prefill exactly
        # once unless preempted before completing (then it started again); a hand-off's
        # decode node completes one more (its one-token chunk).
        if self.completed_starts[i] != 1 + self.decode_preemptions[i] + self.handed[i]:
            raise ConservationViolation(
                f"request {i}: completes its prefill {self.completed_starts[i]} times, after "
                f"{self.decode_preemptions[i]} preemptions while decoding and "
                f"{self.handed[i]} hand-offs"
            )
        ends = self.run.iteration_end_s
        times = [t for a, b in record.segments for t in ends[a : b + 1]]
        if times != self.emit_times[i]:
            raise ConservationViolation(
                f"request {i}: its record's segments {list(record.segments)} give "
                f"{len(times)} token times, the log {len(self.emit_times[i])}; they differ "
                f"from token {_first_difference(times, self.emit_times[i])} on"
            )
        if record.first_token_s != times[0] or record.finish_s != times[-1]:
            raise ConservationViolation(
                f"request {i}: first token at {record.first_token_s} s and finish at "
                f"{record.finish_s} s, its tokens at {times[0]}..{times[-1]} s"
            )

    def ttft_breakdown(self, breakdown: dict[str, Any], routes: Sequence[Any]) -> None:
        """Every component of every request's TTFT breakdown, recomputed from the logs
        (:mod:`schedlab.serving.cluster`'s module docstring gives the definitions)."""
        for i, record in enumerate(self.run.records):
            arrival = float(self.stream.arrival_s[i])
            executed, there = self.executed[i], self.executed_there[i]
            if i in self.by_request:
                if routes[i].then is None:
                    raise ConservationViolation(f"request {i}: a KV transfer off its route")
                ready, arrived = self.handed_at[i], self.by_request[i].end_s
                first = self.first_decode[i]
                want = {
                    "prefill": executed,
                    "transfer": arrived - ready,
                    "first_decode": first,
                    "queue_prefill_side": ready - arrival - there,
                    "queue_decode_side": record.first_token_s
                    - arrived
                    - first
                    - (executed - there),
                }
                if not first > 0:
                    raise ConservationViolation(f"request {i}: no first-token iteration logged")
            else:
                if routes and routes[i].then is not None:
                    raise ConservationViolation(
                        f"request {i}: routed to hand off, but it has no KV transfer"
                    )
                want = {
                    "prefill": executed,
                    "transfer": 0.0,
                    "first_decode": 0.0,
                    "queue_prefill_side": record.first_token_s - arrival - executed,
                    "queue_decode_side": 0.0,
                }
            want["queue"] = want["queue_prefill_side"] + want["queue_decode_side"]
            if not executed > 0:
                raise ConservationViolation(f"request {i}: no prefill iteration logged")
            for name, value in want.items():
                got = float(breakdown[name][i])
                if abs(got - value) > 1e-9 or value < -1e-9:
                    raise ConservationViolation(
                        f"request {i}: TTFT breakdown {name} = {got} s, the log gives {value} "
                        "s (no component may be negative)"
                    )
            parts = ("queue", "prefill", "transfer", "first_decode")
            total = sum(float(breakdown[name][i]) for name in parts)
            ttft = record.first_token_s - arrival
            if abs(total - ttft) > 1e-9:
                raise ConservationViolation(
                    f"request {i}: TTFT breakdown sums to {total} s, its TTFT is {ttft} s"
                )


def _first_difference(a: Sequence[float], b: Sequence[float]) -> int:
    """The first index where ``a`` and ``b`` differ (one may end there)."""
    pairs = itertools.zip_longest(a, b)
    return next((j for j, (x, y) in enumerate(pairs) if x != y), min(len(a), len(b)))
