"""Signals held back by ``held_interrupts``: noted, never lost, handlers restored."""

from __future__ import annotations

import signal

from schedlab.interrupts import held_interrupts


def test_a_signal_in_the_block_is_noted_not_raised_and_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with held_interrupts() as caught:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C: a KeyboardInterrupt if not held
        assert caught == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_left_at_its_default_is_not_held() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with held_interrupts() as caught:
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        assert caught == []
    finally:
        signal.signal(signal.SIGTERM, previous)
