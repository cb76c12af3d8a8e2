"""One way to show progress: a tqdm bar on standard error, or nothing.

Every command and benchmark that can run longer than a few seconds reports through
:class:`Progress` (``compare``, ``sweep``, ``capacity``, the benchmarks). The bar shows
the count, the elapsed and the estimated remaining time (tqdm's defaults). It stays
silent when the caller disables it (``--quiet``, ``--json``) and when standard error is
not a terminal (tqdm's ``disable=None``), so piped and logged output holds results only.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

__all__ = ["Progress", "progress_for"]


class Progress:
    """A progress bar of ``total`` steps (``None``: unknown) labelled ``desc``.

    Use it as a context manager; :meth:`doing` says what runs, :meth:`step` counts one
    step done (with an optional note), and calling it as ``progress(done, total)`` sets
    the count and the total (how :func:`~schedlab.jobs.run_jobs` starts a caller's bar,
    jobs read back from a results file counted done).
    """

    def __init__(self, desc: str, total: int | None = None, *, enabled: bool = True) -> None:
        self._bar = _make_bar(
            total=total,
            desc=desc,
            file=sys.stderr,
            disable=None if enabled else True,
            leave=False,
            dynamic_ncols=True,
        )

    def add(self, steps: int) -> None:
        """Make the total ``steps`` larger (work found on the way)."""
        self._bar.total = (self._bar.total or 0) + steps
        self._bar.refresh()

    def doing(self, note: str) -> None:
        """Say what runs now (shown after the count)."""
        self._bar.set_postfix_str(note)

    def step(self, note: str = "") -> None:
        """One more step done; ``note`` says what (shown after the count)."""
        if note:
            self._bar.set_postfix_str(note, refresh=False)
        self._bar.update(1)

    def __call__(self, done: int, total: int) -> None:
        bar = self._bar
        bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        """Draw the final count (tqdm skips redraws within 0.1 s of the last), then clear."""
        self._bar.refresh()
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _make_bar(**options: Any) -> Any:
    """A tqdm bar (imported here: tqdm takes a tenth of a second to import, which
    ``import schedlab`` should not pay)."""
    from tqdm import tqdm

    return tqdm(**options)


@contextmanager
def progress_for(spec: bool | Progress, desc: str, total: int | None = None) -> Iterator[Progress]:
    """The bar a function reports to: the caller's own ``Progress`` (left open), a new
    one when ``spec`` is ``True`` (closed at the end), or a silent one when ``False``."""
    if isinstance(spec, Progress):
        yield spec
        return
    with Progress(desc, total, enabled=spec) as bar:
        yield bar
