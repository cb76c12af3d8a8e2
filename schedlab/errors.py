"""The one exception hierarchy of schedlab.

Every error that bad input can cause derives from :class:`SchedlabError`, so the
command line can turn it into a one-line message and exit code 2. Messages name
the place of the problem, e.g. ``requests[17].output: must be >= 1, got 0``.

==============================  ==========================================================
class                           raised when
==============================  ==========================================================
:class:`InputError`             an argument or option value is out of its domain
:class:`PredictionError`        a prediction spec, interval or prediction file is bad
                                (an :class:`InputError`)
:class:`InputTypeError`         a Python entry point is given an argument of the wrong type
:class:`InstanceError`          a request or instance violates the offline model
:class:`InfeasibleInstanceError`  a request can never run (``s + o > M``)
:class:`HorizonError`           a time-indexed method's horizon is too long for its arrays
:class:`MemoryBudgetError`      a solver or bound would pass its memory budget
:class:`FormatError`            a file is malformed (names file and place)
:class:`UnknownNameError`       an unknown solver, bound, policy, workload... name
:class:`RegistrationError`      a name a registry cannot take (empty, taken, built in)
:class:`UnknownOptionError`     a solver or bound is given an option it does not take
:class:`ScheduleError`          a schedule does not fit its instance
:class:`DataNotFoundError`      a data file asked for, or the folder of one to write, does
                                not exist
:class:`FileAccessError`        a file cannot be read or written (no permission, too large...)
:class:`SolverError`            a solver returned a schedule the verifier rejects (a bug)
:class:`BoundError`             a lower bound above a verified objective (a bug)
:class:`ServingError`           bad input to the simulator, a policy, workload, cost model
:class:`NonMonotoneCostModelError`  a cost model decreases when a chunk grows
:class:`CalibrationError`       a profile cannot be calibrated
==============================  ==========================================================

Each is also the built-in exception Python's habits expect: an input error is a
``ValueError``, a wrong type a ``TypeError``, a missing file a ``FileNotFoundError``, a
file that cannot be read or written an ``OSError``. :class:`SchedlabNote` is no error: a
warning for what was read and repaired (requests sorted by time), which the command line
shows as one ``schedlab: note:`` line on stderr.
"""

from __future__ import annotations


class SchedlabError(Exception):
    """Base class of every error schedlab raises on purpose."""


class SchedlabNote(UserWarning):
    """A remark on input that was read and repaired (e.g. requests sorted by time), given
    with :func:`warnings.warn`; the command line prints it as one line on stderr."""


class InputError(SchedlabError, ValueError):
    """An argument or option has a value outside its domain (a negative time limit, a
    seed that is not an integer ``>= 0``, an unknown backend)."""


class PredictionError(InputError):
    """Bad output-length predictions (:mod:`schedlab.predictions`): an unknown or malformed
    model spec (``alpha`` outside ``(0, 1]``, a negative ``CV``), an interval with
    ``lower < 1`` or ``lower > upper``, one that excludes the true length though its model
    is declared exact, a prediction file naming an unknown request."""


class InputTypeError(SchedlabError, TypeError):
    """A Python entry point is given an argument of the wrong type (a string where a
    :class:`~schedlab.serving.scenario.Scenario` belongs); checked at the door."""


class InstanceError(SchedlabError, ValueError):
    """A request or instance violates the model of ``docs/design.md``, "Offline model"."""


class InfeasibleInstanceError(InstanceError):
    """Some request can never run: its peak memory ``s + o`` exceeds ``M``."""


class HorizonError(InstanceError):
    """An instance's horizon is too long for a method that keeps arrays over its rounds
    (the time-indexed bounds, the LP-guided solvers, the model export); ``best`` skips
    such methods."""


class FormatError(SchedlabError, ValueError):
    """A file (JSON, CSV, JSONL) is malformed; the message names file and place."""


class UnknownNameError(SchedlabError, ValueError):
    """An unknown solver, rule, bound, workload or policy name; lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]) -> None:
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")
        self.kind = kind
        self.name = name
        self.known = tuple(sorted(known))

    def __reduce__(self) -> tuple[type, tuple[str, str, tuple[str, ...]]]:
        # rebuilt from its own arguments when a worker process sends it back
        return (type(self), (self.kind, self.name, self.known))


class RegistrationError(SchedlabError, ValueError):
    """A name that a registry cannot take: empty, reserved, already registered, or built
    in (:class:`schedlab.registry.Registry`)."""


class ScheduleError(SchedlabError, ValueError):
    """A schedule does not fit its instance (wrong length, non-integer start...)."""


class DataNotFoundError(SchedlabError, FileNotFoundError):
    """A data file (trace, profile) the caller asked for does not exist, or the folder an
    output is to be written in."""


class FileAccessError(SchedlabError, OSError):
    """A file cannot be read or written: no permission, a name too long, larger than the
    size cap of :func:`schedlab.json_files.check_size`; the message names the file."""


class UnknownOptionError(SchedlabError, TypeError):
    """A solver or bound was given an option it does not accept; lists the accepted ones."""

    def __init__(self, owner: str, unknown: list[str], known: list[str] | tuple[str, ...]):
        accepted = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"{owner}: unknown option(s) {', '.join(sorted(unknown))}; accepted: {accepted}"
        )
        self.owner = owner
        self.unknown = tuple(sorted(unknown))
        self.known = tuple(sorted(known))

    def __reduce__(self) -> tuple[type, tuple[str, list[str], tuple[str, ...]]]:
        # rebuilt from its own arguments when a worker process sends it back
        return (type(self), (self.owner, list(self.unknown), self.known))


class SolverError(SchedlabError, RuntimeError):
    """A solver returned a schedule that the independent verifier rejects (a bug)."""


class BoundError(SchedlabError, RuntimeError):
    """A lower bound above an objective the verifier accepted: the bound method (or a
    solver's own bound) is wrong, and no certificate may rest on it."""


class ServingError(SchedlabError, ValueError):
    """Bad input to the simulator, a policy, a workload, a cost model or the CLI."""


class NonMonotoneCostModelError(ServingError):
    """A cost model decreases when a prefill chunk grows (SLOWeave needs monotonicity)."""


class CalibrationError(SchedlabError, ValueError):
    """A profile cannot be calibrated (wrong model name, unknown ops or architecture)."""


class MemoryBudgetError(SchedlabError, MemoryError):
    """A solver or bound would take more memory than its budget (``max_memory``), or ran
    out of memory; names the method and the size. A ``MemoryError``: what a caller that
    handles running out of memory catches, though here nothing was allocated yet."""
