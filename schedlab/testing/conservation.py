r"""Conservation of tokens and KV blocks in a simulator run, checked from its batch log.

:func:`check_conservation` replays the iterations a run recorded
(:class:`~schedlab.serving.iteration.BatchRecord`) with its own bookkeeping
(:class:`~schedlab.testing.log_replay.LogReplay`, one method a law), sharing no code with
the engine: the KV tokens each request holds and on which node, the prefill
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

from collections.abc import Sequence

from schedlab.serving.cluster_result import ClusterRun
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.workloads import RequestStream
from schedlab.testing.log_replay import LogReplay
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
    LogReplay(
        engine, run.stream, ([config] * nodes, ["colocated"] * nodes, [run.chunked] * nodes)
    ).check()


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
    replay = LogReplay(
        cluster_run.run,
        stream,
        (configs, cluster_run.roles, chunked),
        cluster_run.transfers,
        bytes_per_token,
    )
    replay.check(cluster_run.breakdown, cluster_run.routes)
