"""What a cluster simulation gives: the raw run of every node, and its summary with each
request's time to first token broken down into its parts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from schedlab.serving.driver import EngineRun
from schedlab.serving.kv_transfer import Transfer
from schedlab.serving.metrics import Distribution, RequestRecord, Summary
from schedlab.serving.router_view import Route
from schedlab.tables import to_pandas

__all__ = ["BREAKDOWN", "QUEUE_SIDES", "ClusterResult", "ClusterRun"]

#: The components of the TTFT breakdown, in the order they happen.
BREAKDOWN = ("queue", "prefill", "transfer", "first_decode")

#: The queue's two sides (they sum to its ``queue``): before the KV hand-off (waiting
#: for and between prefill chunks), and on the decode node (from the KV's arrival to the
#: first-token iteration's start, less any recomputation after a preemption there).
QUEUE_SIDES = ("queue_prefill_side", "queue_decode_side")


@dataclass(frozen=True)
class ClusterRun:
    """Raw outcome of :func:`~schedlab.serving.cluster.run_cluster`.

    Attributes
    ----------
    run
        The nodes' run as one :class:`~schedlab.serving.driver.EngineRun`: a record's
        ``replica`` is the node that emitted its tokens, and ``iteration_end_s`` and
        ``batches`` hold node 0's iterations, then node 1's, ...
    roles
        Each node's role.
    routes
        Each request's route, in arrival order.
    transfers
        Every KV transfer, in the order they were queued.
    breakdown
        Per-request TTFT breakdown        (:data:`BREAKDOWN`, then :data:`QUEUE_SIDES`), seconds.
    routing_s
        Seconds of each router call, when measured.
    loads
        Per router call, each node's ``(queued prefill, outstanding)`` tokens as the
        router saw them (with ``record_batches``).
    cache_hits
        Per request, the prompt tokens its first admission found in a node's prefix
        cache (:attr:`~schedlab.serving.request_state.RequestState.cache_hits`).
    node_hits
        Per node, the sum of those hits there.
    """

    run: EngineRun
    roles: tuple[str, ...]
    routes: tuple[Route, ...]
    transfers: tuple[Transfer, ...]
    breakdown: dict[str, np.ndarray] = field(repr=False)
    routing_s: np.ndarray = field(repr=False)
    loads: tuple[tuple[tuple[int, int], ...], ...] = field(default=(), repr=False)
    cache_hits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    node_hits: tuple[int, ...] = ()

    @property
    def hit_rate(self) -> float:
        """Prompt tokens found in a prefix cache at first admission over all prompt
        tokens (vLLM's prefix-cache hit rate, ``vllm/v1/metrics/stats.py``,
        ``PrefixCacheStats``: hits over queried tokens of new requests)."""
        prompts = sum(r.prompt for r in self.run.records)
        return float(self.cache_hits.sum()) / prompts if prompts else math.nan


@dataclass(frozen=True)
class ClusterResult:
    """A cluster simulation: records, summary, TTFT breakdown, the raw run.

    Attributes
    ----------
    records, summary
        As for one engine (:class:`~schedlab.serving.simulator.SimulationResult`).
    breakdown
        Each component's distribution over requests that got a first token
        (:data:`BREAKDOWN`, then :data:`QUEUE_SIDES`).
    tail_share
        Each component's share of the TTFT summed over the requests whose TTFT is at
        least the P95 TTFT (the slow first tokens).
    run
        The raw run.
    label
        ``router@nodes``.
    wall_s
        Wall-clock seconds of the simulation.
    """

    records: tuple[RequestRecord, ...]
    summary: Summary
    breakdown: dict[str, Distribution]
    tail_share: dict[str, float]
    run: ClusterRun = field(repr=False)
    label: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """One JSON object: the headline figures, the breakdown (seconds) and the
        summary."""
        s = self.summary

        def number(x: float) -> float | None:
            return None if math.isnan(x) else x

        routing = self.run.routing_s
        hits = self.run.cache_hits
        return {
            "cluster": self.label,
            "nodes": list(self.run.roles),
            "ttft_mean_s": number(s.ttft.mean),
            "ttft_p95_s": number(s.ttft.p95),
            "ttft_p99_s": number(s.ttft.p99),
            "latency_mean_s": number(s.latency.mean),
            "attainment": number(s.attainment),
            "breakdown": {
                name: {
                    "mean": number(d.mean),
                    "p50": number(d.p50),
                    "p95": number(d.p95),
                    "p99": number(d.p99),
                }
                for name, d in self.breakdown.items()
                if name in BREAKDOWN
            },
            "queue_sides": {
                name: {"mean": number(d.mean), "p95": number(d.p95)}
                for name, d in self.breakdown.items()
                if name in QUEUE_SIDES
            },
            "tail_share": {k: number(v) for k, v in self.tail_share.items()},
            "transfers": len(self.run.transfers),
            "deflected": sum(
                r.then is None and self.run.roles[r.node] == "decode" for r in self.run.routes
            ),
            "prefix_cache": {
                "hit_rate": number(self.run.hit_rate),
                "hit_tokens": {
                    "mean": number(float(hits.mean())) if hits.size else None,
                    "p95": number(float(np.percentile(hits, 95))) if hits.size else None,
                },
                "node_hit_tokens": list(self.run.node_hits),
            },
            "routing_ms": _routing_ms(routing),
            "summary": s.to_dict(),
            "wall_s": self.wall_s,
        }

    def row(self) -> dict[str, Any]:
        """One flat row for tables and CSV: the headline figures of :meth:`to_dict`, each
        breakdown component's mean and P95 (``queue_mean_s``...), its share of the tail's
        TTFT (``queue_tail_share``) and the prefix-cache hit rate, in seconds."""
        data = self.to_dict()
        row = {key: data[key] for key in ("cluster", "ttft_mean_s", "ttft_p95_s", "ttft_p99_s")}
        row |= {"latency_mean_s": data["latency_mean_s"], "attainment": data["attainment"]}
        for name, stats in data["breakdown"].items():
            row |= {f"{name}_mean_s": stats["mean"], f"{name}_p95_s": stats["p95"]}
        row |= {f"{name}_tail_share": share for name, share in data["tail_share"].items()}
        routing = data["routing_ms"] or {}
        return row | {
            "routing_median_ms": routing.get("median"),
            "routing_p99_ms": routing.get("p99"),
            "hit_rate": data["prefix_cache"]["hit_rate"],
            "transfers": data["transfers"],
            "deflected": data["deflected"],
        }

    def to_pandas(self) -> Any:
        """:meth:`row` as a pandas DataFrame of one row (pandas is optional:
        :func:`~schedlab.tables.require_pandas`)."""
        return to_pandas([self.row()])


def _routing_ms(seconds: np.ndarray) -> dict[str, float | int] | None:
    """The router's call times in milliseconds: median, P99, largest and the number of
    calls (``None``: not timed)."""
    if not seconds.size:
        return None
    ms = seconds * 1e3
    return {
        "median": float(np.median(ms)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
        "calls": int(ms.size),
    }
