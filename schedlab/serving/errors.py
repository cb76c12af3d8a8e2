"""Errors of the online (serving) half of schedlab.

Both derive from :class:`schedlab.errors.SchedlabError`, so the command line turns them
into a one-line message and exit code 2. Messages name the place of the problem, e.g.
``engine.max_num_seqs: must be >= 1, got 0``.
"""

from __future__ import annotations

from schedlab.errors import SchedlabError

__all__ = ["NonMonotoneCostModelError", "ServingError"]


class ServingError(SchedlabError, ValueError):
    """Bad input to the simulator, a policy, a workload, a cost model or the CLI."""


class NonMonotoneCostModelError(ServingError):
    """A cost model decreases when a prefill chunk grows (SLOWeave needs monotonicity)."""
