r"""The online policies: A_max, A_min, MC-SF with predicted lengths, FCFS with preemption.

Each is a :class:`~schedlab.offline.online.engine.Policy` for
:func:`~schedlab.offline.online.engine.run_online`; ``docs/design.md``, "Semi-online
algorithms", says which variant of each paper's algorithm this is and what we chose
where the papers are silent (or could not be read).

===================  ===================  ==================================================
policy               plans with           source
===================  ===================  ==================================================
``a-max``            upper ends           Chen, Ye, Zhou (arXiv 2508.14544), A_max
``a-min``            lower ends, refined  Chen, Ye, Zhou (arXiv 2508.14544), A_min
``mc-sf-predicted``  point predictions    Jaillet et al. (arXiv 2502.07115), MC-SF
``fcfs-preempt``     nothing              vLLM's FCFS scheduler, preemption by recompute
===================  ===================  ==================================================

Estimate policies
-----------------
The first three are one algorithm, :class:`EstimatePolicy`, started from a different
estimate :math:`\tilde o_i` of each output length. Before round :math:`t` a request that
has run :math:`g` rounds without finishing is known to have :math:`o_i \ge g + 1`, and
every request has :math:`o_i \le M - s_i` (each fits alone, a promise of the model), so

.. math:: \tilde o_i \leftarrow \min\bigl(M - s_i, \max(\tilde o_i, g_i + 1)\bigr),

kept when the request is evicted (what was learned stays learned). Admission is MC-SF's:
the waiting requests by increasing :math:`\tilde o_i` (ties by index) start while the
running set, every request taken to end after its estimate, stays within :math:`M` in
every future round, and the first that does not fit stops the others (the test of
:class:`~schedlab.offline.decoder.RunningSet`). If the running requests would hold more
than :math:`M` tokens in round :math:`t` (an estimate was too short), they are evicted
by increasing :math:`\tilde o_i` (ties: fewer rounds done, later start, larger index)
until the rest fit, and nothing starts in that round. With intervals that contain the
true lengths, ``a-max`` never evicts: its estimates are never short.

FCFS with preemption
--------------------
:class:`FcfsPreempt` is vLLM's FCFS scheduler in this model (vLLM 0.19.0,
``vllm/v1/core/sched/scheduler.py``): waiting requests start in order of release (ties
by index) while the coming round's tokens fit, stopping at the first that does not
(lines 757–764), with no look at the future; when the running requests would overflow
memory, the most recently started is preempted first (``self.running.pop()``, line
500), freed and reset to recompute (``_preempt_request``, lines 956–979, which puts it
back at the head of the queue: as it started before every waiting request, that is its
place in release order); and no request starts in a round that preempted one (line 564).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from schedlab.offline.decoder import RunningSet
from schedlab.offline.online.engine import Decision, View
from schedlab.predictions import geometric_mean

__all__ = ["POLICIES", "EstimatePolicy", "FcfsPreempt", "a_max", "a_min", "mc_sf_predicted"]


class EstimatePolicy:
    """MC-SF admission with refined estimates and eviction by least estimate (module
    docs).

    Parameters
    ----------
    name
        Its name.
    initial
        The first estimate of the requests ``new`` (the indices of the newly released)
        from the view: their lower ends, upper ends, or a point of each interval.
    """

    def __init__(self, name: str, initial: Callable[[View, np.ndarray], np.ndarray]) -> None:
        self.name = name
        self.initial = initial
        self.estimate = np.zeros(0, dtype=np.int64)
        self.seen = 0  # requests of ``view.released_in_order()`` seen
        #: The waiting requests as a heap of ``(estimate, index)``: a waiting request's
        #: estimate does not change, so one heap kept across decisions gives the order
        #: of MC-SF's admission without sorting the waiting set at every decision.
        self.waiting: list[tuple[int, int]] = []

    def _refresh(self, view: View, running: np.ndarray) -> None:
        """Estimate the newly released requests and raise those of the ``running`` ones to
        what they have shown; only these change (module docs), so only these are capped
        and the new ones queued."""
        if not self.estimate.size:
            self.estimate = np.zeros(view.n, dtype=np.int64)
        new = view.released_in_order()[self.seen :]
        self.seen += len(new)
        self.estimate[new] = self.initial(view, new)
        learned = view.round - view.run_start[running] + 1
        self.estimate[running] = np.maximum(self.estimate[running], learned)
        for changed in (new, running):
            cap = view.kv_tokens - view.prompt[changed]
            self.estimate[changed] = np.minimum(self.estimate[changed], cap)
        for i in new.tolist():
            if not (view.running[i] or view.finished[i]):  # a view may start mid-run
                heapq.heappush(self.waiting, (int(self.estimate[i]), i))

    def decide(self, view: View) -> Decision:
        """Evict by least estimate if the running requests would overflow, else start
        waiting requests by MC-SF's rule; wake when the first that does not fit might."""
        t, memory = view.round, view.kv_tokens
        running = view.running_indices()
        self._refresh(view, running)
        prompt, start, estimate = view.prompt, view.run_start, self.estimate
        held = prompt[running] + t - start[running] + 1  # tokens in the coming round
        load = int(held.sum())
        if load > memory:
            progress = t - start[running]
            by = np.lexsort((-running, -start[running], progress, estimate[running]))
            evict = []
            for i, tokens in zip(running[by].tolist(), held[by].tolist(), strict=True):
                evict.append(i)
                heapq.heappush(self.waiting, (int(estimate[i]), i))
                load -= tokens
                if load <= memory:
                    break
            return Decision(evict=evict, wake=t + 1)
        # the running set with estimated completions, sorted by (completion, weight)
        completion = start[running] + estimate[running]
        weight = prompt[running] - start[running] + 1
        by_end = np.lexsort((weight, completion))
        plan = RunningSet(memory)
        plan.restore(completion[by_end].tolist(), weight[by_end].tolist())
        starts: list[int] = []
        while self.waiting:  # by increasing estimate, ties by index
            length, k = self.waiting[0]
            deficit = int(prompt[k]) - plan.slack(t, length)
            if deficit > 0:  # the slack grows by at most one a round (decoder docs)
                return Decision(start=starts, wake=t + deficit)
            heapq.heappop(self.waiting)
            plan.add(t, int(prompt[k]), length)
            starts.append(k)
        return Decision(start=starts)


def a_max() -> EstimatePolicy:
    """A_max: plans with each interval's upper end."""
    return EstimatePolicy("a-max", lambda view, new: view.upper[new])


def a_min() -> EstimatePolicy:
    """A_min: plans with each interval's lower end, refined as requests run."""
    return EstimatePolicy("a-min", lambda view, new: view.lower[new])


def mc_sf_predicted() -> EstimatePolicy:
    """MC-SF planning with a point prediction: the interval's geometric mean
    (:meth:`~schedlab.predictions.Intervals.point`; the prediction itself for a point
    model), refined as requests run."""
    return EstimatePolicy(
        "mc-sf-predicted", lambda view, new: geometric_mean(view.lower[new], view.upper[new])
    )


class FcfsPreempt:
    """vLLM's FCFS with preemption of the newest running request (module docs)."""

    name = "fcfs-preempt"

    def __init__(self) -> None:
        self.arrival = np.zeros(0, dtype=np.int64)
        self.seen = 0  # requests of ``view.released_in_order()`` seen
        #: The waiting requests as a heap of ``(round seen released, index)``.
        self.waiting: list[tuple[int, int]] = []

    def decide(self, view: View) -> Decision:
        """Preempt the most recently started while memory would overflow, else start
        waiting requests in release order while the coming round fits."""
        t, memory = view.round, view.kv_tokens
        if not self.arrival.size:
            self.arrival = np.full(view.n, -1, dtype=np.int64)
        new = view.released_in_order()[self.seen :]
        self.seen += len(new)
        self.arrival[new] = t  # seen released at round t
        for i in new.tolist():
            if not (view.running[i] or view.finished[i]):  # a view may start mid-run
                heapq.heappush(self.waiting, (t, i))
        running = view.running_indices()
        held = view.prompt[running] + t - view.run_start[running] + 1
        load = int(held.sum())
        if load > memory:
            arrival = self.arrival[running]
            by = np.lexsort((-running, -arrival, -view.run_start[running]))
            evict = []
            for i, tokens in zip(running[by].tolist(), held[by].tolist(), strict=True):
                evict.append(i)
                heapq.heappush(self.waiting, (int(self.arrival[i]), i))
                load -= tokens
                if load <= memory:
                    break
            return Decision(evict=evict, wake=t + 1)
        starts: list[int] = []
        while self.waiting:  # in release order, ties by index
            k = self.waiting[0][1]
            need = int(view.prompt[k]) + 1
            if load + need > memory:
                break
            heapq.heappop(self.waiting)
            load += need
            starts.append(k)
        return Decision(start=starts)


#: Each policy's constructor, by registry name.
POLICIES: dict[str, Callable[[], EstimatePolicy | FcfsPreempt]] = {
    "a-max": a_max,
    "a-min": a_min,
    "mc-sf-predicted": mc_sf_predicted,
    "fcfs-preempt": FcfsPreempt,
}
