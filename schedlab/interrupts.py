"""Ctrl-C and SIGTERM held back while a block runs, then acted on.

Two places need it: a C++ call that would keep a signal from Python until it ends
(CP-SAT's solve, run in a thread while the main thread waits), and numba's compiler,
which calls back into Python through ``ctypes``, where a ``KeyboardInterrupt`` raised by a
signal handler is printed as "Exception ignored" and lost.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["held_interrupts"]


@contextmanager
def held_interrupts() -> Iterator[list[int]]:
    """Note SIGINT and SIGTERM instead of acting on them while the block runs.

    Yields the list the signals caught are appended to (the block may poll it). Only
    signals that have a Python handler are held (the command line turns SIGTERM into an
    interrupt, Python turns Ctrl-C into one); a signal left at its default or ignored (a
    pool worker's SIGTERM) keeps acting at once, and off the main thread, where no
    handler can be set, nothing is held. The handlers are restored when the block ends;
    the caller decides what a caught signal means (``raise KeyboardInterrupt``).
    """
    caught: list[int] = []
    kinds = [
        kind
        for kind in (signal.SIGINT, signal.SIGTERM)
        if threading.current_thread() is threading.main_thread()
        and callable(signal.getsignal(kind))
    ]
    previous = {
        kind: signal.signal(kind, lambda number, _: caught.append(number)) for kind in kinds
    }
    try:
        yield caught
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)
