"""argparse value types shared by the command lines of schedlab."""

from __future__ import annotations

import argparse

__all__ = ["comma_list", "non_negative_int", "positive_int", "positive_seconds"]


def comma_list(text: str) -> list[str]:
    """Comma-separated names or values, each non-empty (``fcfs,,svf`` is refused rather
    than read as two names) and none twice."""
    items = [x.strip() for x in text.split(",")]
    if not text.strip() or any(not x for x in items):
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list without empty items, got {text!r}"
        )
    twice = sorted({x for x in items if items.count(x) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{', '.join(twice)} given twice in {text!r}")
    return items


def non_negative_int(text: str) -> int:
    """An integer ``>= 0`` (seeds, counts); argparse reports anything else."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """An integer ``>= 1`` (engine limits, parallel degrees)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds ``> 0`` (time limits)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value
