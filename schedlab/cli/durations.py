"""Durations on the command line: the one reading of every option that takes a time.

``--time-limit``, ``--duration``, ``--tpot``, ``--ttft`` and ``--margin`` all read
``10``, ``10.5``, ``1e-2``, ``10s``, ``250ms``, ``150us``, ``2m`` (or ``2min``) and
``1h``; a bare number is seconds. A value is turned into seconds when the command runs,
so a bad one is a :class:`~schedlab.errors.InputError` naming the option (one line,
exit code 2), as every other bad input is.
"""

from __future__ import annotations

import math
import re

from schedlab.errors import InputError

__all__ = ["UNITS", "optional_duration", "parse_duration"]

#: Seconds per unit; a number without one is seconds.
UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}

_DURATION = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|µs|ms|s|min|m|h)?\s*")


def parse_duration(
    text: str, flag: str = "duration", *, allow_zero: bool = False, maximum: float | None = None
) -> float:
    """Seconds from ``text``: a number with or without a unit of :data:`UNITS`.

    Parameters
    ----------
    text
        ``25ms``, ``5s``, ``2m``, ``1h``, ``150us`` or a bare number of seconds (``10``,
        ``0.025``).
    flag
        The option read, named in any error.
    allow_zero
        Accept zero (``--margin 0``); otherwise the duration must be positive.
    maximum
        The largest number of seconds accepted (``None``: any finite one).

    Raises
    ------
    InputError
        Naming ``flag``, for text that is not a duration, or one out of range.
    """
    match = _DURATION.fullmatch(text)
    if not match:
        raise InputError(
            f"{flag}: cannot read duration {text!r}; use seconds or a unit, e.g. 10, "
            "250ms, 5s, 2m or 1h"
        )
    seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
    if not (math.isfinite(seconds) and (seconds > 0 or (allow_zero and seconds == 0))):
        kind = "non-negative" if allow_zero else "positive"
        raise InputError(f"{flag}: duration must be {kind} and finite, got {text!r}")
    if maximum is not None and seconds > maximum:
        raise InputError(f"{flag}: at most {maximum:.0e} seconds, got {text!r}")
    return seconds


def optional_duration(
    text: str | None, flag: str, *, maximum: float | None = None
) -> float | None:
    """:func:`parse_duration` of a positive duration whose default is ``None`` (not
    given: no limit)."""
    return None if text is None else parse_duration(text, flag, maximum=maximum)
