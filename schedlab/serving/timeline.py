"""A run's iterations as a timeline in the Chrome trace event format, for Perfetto
(https://ui.perfetto.dev) or ``chrome://tracing``.

Each replica (or cluster node) is a process of the trace; each iteration a complete
event (``"ph": "X"``) on its one thread, from its start to its end, whose arguments say
what it ran: the decodes, the prefill chunks and their tokens, the requests preempted and
handed off, and the scheduler's queues and KV blocks after scheduling it
(:class:`~schedlab.serving.iteration.BatchRecord`). Counter events (``"ph": "C"``) draw
the running and waiting requests and the KV blocks in use over time. Times are in
microseconds of simulated time, as the format asks (the Trace Event Format document,
https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from schedlab.serving.driver import EngineRun
from schedlab.serving.iteration import BatchRecord

__all__ = ["chrome_trace", "write_timeline"]


def _events(batches: Sequence[BatchRecord], pid: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for k, batch in enumerate(batches):
        start, end = batch.start_s * 1e6, batch.end_s * 1e6
        prefill = sum(tokens for _, tokens in batch.chunks)
        events.append(
            {
                "name": "prefill + decode"
                if batch.chunks and batch.decodes
                else ("prefill" if batch.chunks else "decode"),
                "ph": "X",
                "ts": start,
                "dur": end - start,
                "pid": pid,
                "tid": 0,
                "args": {
                    "iteration": k,
                    "decodes": len(batch.decodes),
                    "prefill_chunks": len(batch.chunks),
                    "prefill_tokens": prefill,
                    "chunks": [list(chunk) for chunk in batch.chunks],
                    "preempted": list(batch.preempted),
                    "handed_off": list(batch.handed_off),
                },
            }
        )
        queues = {"running": batch.running, "waiting": batch.waiting}
        events.append({"name": "requests", "ph": "C", "ts": start, "pid": pid, "args": queues})
        blocks = {"used": batch.used_blocks}
        events.append({"name": "KV blocks", "ph": "C", "ts": start, "pid": pid, "args": blocks})
    return events


def chrome_trace(run: EngineRun, names: Sequence[str] = ()) -> dict[str, Any]:
    """The trace of ``run``'s recorded iterations (a run made with ``record_batches``),
    one process per replica, named by ``names`` (default ``replica k``).

    Raises
    ------
    ValueError
        If the run recorded no iterations.
    """
    if not run.batches:
        raise ValueError("timeline: the run recorded no iterations (record_batches=True)")
    counts = run.replica_iterations or (len(run.batches),)
    events: list[dict[str, Any]] = []
    first = 0
    for pid, count in enumerate(counts):
        name = names[pid] if pid < len(names) else f"replica {pid}"
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
        events += _events(run.batches[first : first + count], pid)
        first += count
    title = f"{run.policy} on {run.cost_model}"
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"run": title}}


def write_timeline(run: EngineRun, handle: TextIO, names: Sequence[str] = ()) -> None:
    """Write :func:`chrome_trace` of ``run`` to the text stream ``handle`` as JSON."""
    json.dump(chrome_trace(run, names), handle)
    handle.write("\n")
