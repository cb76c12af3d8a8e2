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
  (line 1274): every 100 ms while a rank's counts changed, else every 5 s
  (``vllm/v1/engine/coordinator.py``, ``min_stats_update_interval_ms``, line 155, and
  lines 261–284).

The ranks' counts are their schedulers' (``Scheduler.get_request_counts``,
``vllm/v1/core/sched/scheduler.py`` lines 1729–1731; requests still in a rank's input
queue are not counted), reported after each step only by the ranks of a mixture-of-experts
model (``vllm/v1/engine/core.py``, ``DPEngineCoreProc._maybe_publish_request_counts``,
lines 1683–1694, called from its busy loop, line 1713). The ranks of a dense model run as
plain engine cores (lines 1071–1082) whose busy loop reports nothing, so the coordinator
publishes zeros every 5 s and the client balances on what it sent itself.

:class:`DataParallelBalancer` keeps the ranks' reports (:meth:`~DataParallelBalancer.report`)
and the client's view of them. A rank reports when its step's state settles, as vLLM's
busy loop does after each step: without asynchronous scheduling when the step ends; with
it once the next step is scheduled too, which vLLM does while the step runs and the
simulator at its end (:class:`~schedlab.serving.driver.Driver` calls it). Its
approximations: the view is refreshed at the first arrival due for it (by the rules
above), from the ranks' latest reports, where vLLM's coordinator publishes on its own
timer a snapshot taken at the start of the newest step's reports
(``coordinator.py`` lines 273–275 and 384–386), one step older under back-to-back
steps. ``tests/serving/test_dp_balancer.py`` runs vLLM's own
``get_core_engine_for_request`` on the same views and checks every choice.
"""

from __future__ import annotations

import math

__all__ = ["PUBLISH_INTERVAL_S", "QUIET_INTERVAL_S", "DataParallelBalancer"]

#: Seconds between two updates of the client's view while the counts change (the
#: coordinator's ``min_stats_update_interval_ms``).
PUBLISH_INTERVAL_S = 0.1
#: Seconds between two updates while they do not (``coordinator.py`` line 265).
QUIET_INTERVAL_S = 5.0


class DataParallelBalancer:
    """The ranks' reports, the client's view of them and its choice (module docstring).

    Parameters
    ----------
    ranks
        How many ranks.
    reporting
        Whether the ranks report their counts (a mixture-of-experts model's do; a dense
        model's do not).

    Attributes
    ----------
    reported
        ``[waiting, running]`` each rank last reported (none yet: zeros).
    view
        ``[waiting, running]`` of each rank as the client sees them.
    published
        The counts the view was last replaced with.
    refreshed_s
        When the view was last replaced (``-inf``: never).
    """

    def __init__(self, ranks: int, *, reporting: bool) -> None:
        self.reporting = reporting
        self.reported = [[0, 0] for _ in range(ranks)]
        self.view = [[0, 0] for _ in range(ranks)]
        self.published = [[0, 0] for _ in range(ranks)]
        self.refreshed_s = -math.inf

    def report(self, rank: int, counts: tuple[int, int]) -> None:
        """Rank ``rank`` reports its scheduler's ``(waiting, running)`` (ignored for
        ranks that do not report)."""
        if self.reporting:
            self.reported[rank] = list(counts)

    def choose(self, t: float) -> int:
        """The rank a request arriving at ``t`` goes to; counts it in the view."""
        since = t - self.refreshed_s
        changed = self.reported != self.published
        if since >= QUIET_INTERVAL_S or (changed and since >= PUBLISH_INTERVAL_S):
            self.published = [list(counts) for counts in self.reported]
            self.view = [list(counts) for counts in self.reported]
            self.refreshed_s = t
        view = self.view
        best = min(range(len(view)), key=lambda k: 4 * view[k][0] + view[k][1])
        view[best][0] += 1
        return best
