"""The requests an engine has already seen miss their SLO, counted as it runs.

The driver stops a run early once more requests miss the SLO than a capacity search
allows (:class:`~schedlab.serving.driver.Driver`'s ``max_violations``), so each engine
counts the misses it knows of: a first token later than the TTFT target, or, at a
request's end, its token gaps over the TPOT target in the sense of the SLO's kind
(:class:`~schedlab.serving.metrics.SLO`). The comparisons are those of
:mod:`schedlab.serving.metrics` on the same floats, so the tally equals what the run's
summary finds.
"""

from __future__ import annotations

from schedlab.serving.metrics import SLO, allowed_slow_gaps
from schedlab.serving.request_state import RequestState

__all__ = ["SloTally"]


class SloTally:
    """Misses of ``slo`` (``None``: none counted) among one engine's requests; ``ends``
    is the engine's list of iteration end times, which it reads when a request finishes
    (so the engine pays nothing an iteration for it).

    Attributes
    ----------
    violations
        Requests known to miss the SLO.
    """

    __slots__ = ("_ends", "_slow_upto", "slo", "violations")

    def __init__(self, slo: SLO | None, ends: list[float]) -> None:
        self.slo = slo
        self.violations = 0
        # slow_upto[j]: iterations j' <= j whose gap since the previous end exceeds the
        # TPOT target, so a run of tokens (f, l) has slow_upto[l] - slow_upto[f] slow gaps
        self._slow_upto: list[int] = []  # filled up to the ends when a request finishes
        self._ends = ends

    def first_token(self, req: RequestState, now: float) -> None:
        """``req`` emitted its first token at ``now``."""
        slo = self.slo
        if slo is not None and now - req.arrival_s > slo.ttft_limit_s:
            req.violated = True
            self.violations += 1

    def finished(self, req: RequestState, now: float) -> None:
        """``req`` emitted its last token at ``now`` (its ``segments`` complete)."""
        slo = self.slo
        if slo is None or req.violated or req.output == 1:
            return
        if slo.kind == "mean":
            missed = (now - req.first_token_s) / (req.output - 1) > slo.gap_limit_s
        else:
            missed = self._slow_gaps(req.segments) > allowed_slow_gaps(slo, req.output)
        if missed:
            req.violated = True
            self.violations += 1

    def _slow_gaps(self, segments: list[tuple[int, int]]) -> int:
        """Gaps longer than the TPOT target between the tokens of ``segments`` (the same
        comparison of the same floats as :func:`~schedlab.serving.metrics.request_itl`)."""
        upto, ends = self._slow_upto, self._ends
        limit = self.slo.gap_limit_s  # type: ignore[union-attr]
        for j in range(len(upto), len(ends)):  # the iterations ended since the last call
            slow_j = j > 0 and ends[j] - ends[j - 1] > limit
            upto.append((upto[-1] if j else 0) + slow_j)
        slow = 0
        for k, (first, last) in enumerate(segments):
            slow += upto[last] - upto[first]
            if k and ends[first] - ends[segments[k - 1][1]] > limit:
                slow += 1
        return slow
