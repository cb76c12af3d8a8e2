"""The one exception hierarchy of schedlab.

Every error that bad input can cause derives from :class:`SchedlabError`, so the
command line can turn it into a one-line message and exit code 2. Messages name
the place of the problem, e.g. ``requests[17].output: must be >= 1, got 0``.
"""

from __future__ import annotations


class SchedlabError(Exception):
    """Base class of every error schedlab raises on purpose."""


class InstanceError(SchedlabError, ValueError):
    """A request or instance violates the model of DESIGN section 1."""


class InfeasibleInstanceError(InstanceError):
    """Some request can never run: its peak memory ``s + o`` exceeds ``M``."""


class FormatError(SchedlabError, ValueError):
    """A file (JSON, CSV, JSONL) is malformed; the message names file and place."""


class UnknownNameError(SchedlabError, ValueError):
    """An unknown solver, rule, bound, workload or policy name; lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]) -> None:
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")
        self.kind = kind
        self.name = name
        self.known = tuple(sorted(known))


class ScheduleError(SchedlabError, ValueError):
    """A schedule does not fit its instance (wrong length, non-integer start...)."""


class DataNotFoundError(SchedlabError, FileNotFoundError):
    """A data file (trace, profile) the caller asked for does not exist."""
