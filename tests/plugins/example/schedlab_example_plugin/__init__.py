"""An example third-party extension of schedlab: one entry of every registry, declared as
entry points in ``pyproject.toml`` and found by schedlab without being imported by name.

Each is deliberately simple; the tests hold it to the same contract as the built-ins.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from schedlab.budget import UNLIMITED, Budget
from schedlab.calibration.profile_table import (
    ProfileReader,
    TimingTable,
    timing_table_from_records,
)
from schedlab.errors import FormatError, ServingError
from schedlab.json_files import read_text
from schedlab.offline.bounds import Bound, BoundMethod
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.result import SolverOutput
from schedlab.offline.solvers import SolverInfo
from schedlab.serving.policies import Policy, PolicyContext, TokenQuotaPolicy
from schedlab.serving.policy_registry import PolicySpec
from schedlab.serving.router_view import Arrival, ClusterView, NodeView, Route
from schedlab.serving.routers import RouterSpec
from schedlab.serving.workloads import EmpiricalLengths, RandomWorkload, WorkloadSpec

__all__ = ["BOUND", "POLICY", "PROFILE_READER", "ROUTER", "SOLVER", "WORKLOAD"]


def longest_first(
    instance: Instance, *, budget: Budget = UNLIMITED, seed: int = 0, backfill: bool = True
) -> SolverOutput:
    """List scheduling in order of release, the longest output first among equals."""
    order = np.lexsort((-instance.output, instance.arrival))
    return SolverOutput(list_schedule(instance, order, backfill=backfill))


SOLVER = SolverInfo("example-longest-first", longest_first)


def output_sum(instance: Instance, *, budget: Budget = UNLIMITED) -> Bound:
    """``sum_i o_i``: request ``i`` is active for at least ``o_i`` rounds."""
    return Bound(float(instance.output.sum()), "example-output-sum")


BOUND = BoundMethod("example-output-sum", output_sum, in_best=False)


def half_budget(spec: str, argument: str | None, context: PolicyContext) -> Policy:
    """Prefill chunks of at most half the engine's token budget."""
    if argument is not None:
        raise ServingError(f"policy {spec!r}: takes no ':' argument")
    half = max(1, context.config.max_num_batched_tokens // 2)
    return TokenQuotaPolicy("example-half", prefill_tokens=half)


POLICY = PolicySpec(half_budget)


def fewest_queued(request: Arrival, cluster: ClusterView) -> Route:
    """The node with the fewest queued prefill tokens (lowest index on ties), per side."""

    def pick(nodes: tuple[NodeView, ...] | list[NodeView]) -> int:
        return min(nodes, key=lambda node: node.queued_prefill_tokens).index

    if cluster.prefill_nodes:
        return Route(pick(list(cluster.prefill_nodes)), pick(list(cluster.decode_nodes)))
    return Route(pick(list(cluster.nodes)))


ROUTER = RouterSpec(
    fewest_queued, "fewest queued prefill tokens (per side)", reads_predictions="never"
)

WORKLOAD = WorkloadSpec(
    "short chats: prompts of 32-256 tokens, outputs of 8-64, Poisson arrivals",
    lambda _: RandomWorkload(
        "example-short",
        ((1.0, EmpiricalLengths(np.array([32, 64, 128, 256]), np.array([64, 32, 16, 8]))),),
    ),
)


def read_jsonl(path: Path, tp: int | None) -> TimingTable:
    """A timing table as JSON Lines: one object of column -> value a line."""
    records = []
    for line, text in enumerate(read_text(path, "profile file").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}:{line}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise FormatError(f"{path}:{line}: expected a JSON object")
        records.append((line, {str(k): "" if v is None else str(v) for k, v in row.items()}))
    return timing_table_from_records(path, records, tp)


PROFILE_READER = ProfileReader("a timing table as JSON Lines (one object a line)", read_jsonl)
