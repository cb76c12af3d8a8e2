"""argparse value types shared by the command lines of schedlab."""

from __future__ import annotations

import argparse

__all__ = ["non_negative_int"]


def non_negative_int(text: str) -> int:
    """An integer ``>= 0`` (seeds, counts); argparse reports anything else."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)
