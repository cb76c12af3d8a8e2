r"""Which data-parallel replica an arriving request goes to, as vLLM 0.19's client decides.

vLLM serves ``data_parallel_size`` replicas (ranks) behind one API server whose engine
client, ``DPLBAsyncMPClient``, picks a rank for each request
(``vllm/v1/engine/core_client.py``, ``get_core_engine_for_request``, lines 1337–1365):

- it scores each rank :math:`4 w + r` on its *view* of the rank's waiting :math:`w` and
  running :math:`r` requests and takes the first rank of least score (the scan starts at
  rank 0 with one API server, lines 1333–1335, so a tie goes to the lowest rank);
- it then adds one to that rank's waiting count in its view (line 1360), so that requests
  sent between two updates spread over the ranks;
- the view is replaced whenever the DP coordinator publishes the ranks' counts
  (line 1273), which it does every 100 ms while they change
  (``vllm/v1/engine/coordinator.py``, ``min_stats_update_interval_ms``, line 154, and
  lines 261–284); each rank reports its scheduler's counts
  (``Scheduler.get_request_counts``, ``vllm/v1/core/sched/scheduler.py`` lines
  1728–1730), which do not include requests still in the rank's input queue.

:class:`DataParallelBalancer` keeps the ranks' reports (:meth:`~DataParallelBalancer.report`)
and the client's view of them. A rank reports when its step's state settles, as vLLM's
busy loop does after each step (``vllm/v1/engine/core.py``, ``DPEngineCoreProc``,
``_maybe_publish_request_counts``): without asynchronous scheduling when the step ends;
with it once the next step is scheduled too, which vLLM does while the step runs and the
simulator at its end (:class:`~schedlab.serving.driver.Driver` calls it). Its one
approximation: the view is refreshed at the first arrival at least
:data:`PUBLISH_INTERVAL_S` after the last refresh, from the ranks' last reports, where
vLLM's coordinator publishes on its own timer. ``tests/serving/test_dp_balancer.py`` runs
vLLM's own ``get_core_engine_for_request`` on the same views and checks every choice.
"""

from __future__ import annotations

import math

__all__ = ["PUBLISH_INTERVAL_S", "DataParallelBalancer"]

#: Seconds between two updates of the client's view (the coordinator's
#: ``min_stats_update_interval_ms``).
PUBLISH_INTERVAL_S = 0.1


class DataParallelBalancer:
    """The ranks' reports, the client's view of them and its choice (module docstring).

    Attributes
    ----------
    reported
        ``[waiting, running]`` each rank last reported (none yet: zeros).
    view
        ``[waiting, running]`` of each rank as the client sees them.
    refreshed_s
        When the view was last replaced (``-inf``: never).
    """

    def __init__(self, ranks: int) -> None:
        self.reported = [[0, 0] for _ in range(ranks)]
        self.view = [[0, 0] for _ in range(ranks)]
        self.refreshed_s = -math.inf

    def report(self, rank: int, counts: tuple[int, int]) -> None:
        """Rank ``rank`` reports its scheduler's ``(waiting, running)``."""
        self.reported[rank] = list(counts)

    def choose(self, t: float) -> int:
        """The rank a request arriving at ``t`` goes to; counts it in the view."""
        if t >= self.refreshed_s + PUBLISH_INTERVAL_S:
            self.view = [list(counts) for counts in self.reported]
            self.refreshed_s = t
        view = self.view
        best = min(range(len(view)), key=lambda k: 4 * view[k][0] + view[k][1])
        view[best][0] += 1
        return best
