"""argparse value types shared by the command lines of schedlab."""

from __future__ import annotations

import argparse

__all__ = ["non_negative_int", "positive_int", "positive_seconds"]


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
