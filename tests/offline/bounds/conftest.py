"""Fixtures of the bound tests: a wall-clock cap that passes at a chosen place."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from schedlab.budget import Budget, Expired


class _CutAfter(Budget):
    """No wall-clock limit, but the cap "passes" at the :meth:`~Budget.check` after
    ``checks`` of them (the checks between chunks of a pricing): a cut at a chosen place,
    the same on every machine."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.left = checks

    def check(self) -> None:
        if self.left == 0:
            raise Expired
        self.left -= 1


@pytest.fixture
def cut_after() -> Callable[[int], Budget]:
    """``cut_after(k)``: a budget whose cap passes at its ``k + 1``-th check."""
    return _CutAfter
