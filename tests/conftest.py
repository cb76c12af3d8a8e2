"""Shared fixtures: where the real data lives, and the shipped instances.

The real data is read from ``$SCHEDLAB_DATA`` when set, else from ``../shared/data``
beside the repository; the tests set ``SCHEDLAB_DATA`` to it for the library, which
never guesses a data directory itself.
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SCHEDLAB_DATA") or ROOT.parent / "shared" / "data")
INSTANCES = ROOT / "instances"

#: The environment variable that multiplies the examples each fuzzing test draws: unset
#: in CI (the short run), set by ``benchmarks/fuzz.py --bad-inputs SCALE`` (the long one).
FUZZ_SCALE_ENV = "SCHEDLAB_FUZZ_SCALE"


def fuzz_examples(count: int) -> int:
    """The examples a fuzzing test draws: its own ``count``, times ``$SCHEDLAB_FUZZ_SCALE``."""
    return count * int(os.environ.get(FUZZ_SCALE_ENV) or 1)


def pytest_configure(config: pytest.Config) -> None:
    """Point the library at the real data (``SCHEDLAB_DATA``) for the whole run, and
    install the example third-party package (:mod:`tests.plugins.installed`) for it and
    its subprocesses, so that every registry's tests cover its entries. Ctrl-C is made
    live again if the run inherited it ignored (a shell's background job does: POSIX
    shells without job control start ``cmd &`` with SIGINT ignored, and a child keeps an
    ignored signal across ``exec``), since the tests of interrupts send it to this
    process and to the commands it starts."""
    from tests.plugins.installed import install

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

    os.environ["SCHEDLAB_DATA"] = str(DATA_DIR)
    site = Path(tempfile.mkdtemp(prefix="schedlab-plugins-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    install(site)
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), str(ROOT), os.environ.get("PYTHONPATH")) if p
    )


@pytest.fixture
def data_dir() -> Path:
    """The real data directory; tests that need it skip where it is absent."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"the real data is not at {DATA_DIR} (set SCHEDLAB_DATA)")
    return DATA_DIR


class TerminalText(io.StringIO):
    """A text stream that says it is a terminal (progress bars draw only on one)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal_stderr(monkeypatch: pytest.MonkeyPatch) -> TerminalText:
    """A terminal-like buffer that every progress bar draws on instead of standard error
    (pytest's own capture of ``sys.stderr`` is no terminal, and is installed after the
    fixtures, so the bars are redirected where they are made)."""
    from tqdm import tqdm

    import schedlab.progress

    stream = TerminalText()
    monkeypatch.setattr(
        schedlab.progress, "_make_bar", lambda **kw: tqdm(**{**kw, "file": stream})
    )
    return stream


def process_alive(pid: str) -> bool:
    """Whether process ``pid`` still runs (Linux ``/proc``; a zombie waiting for its
    reaper does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def verified_rule_objective(instance: Any, rules: tuple[str, ...] = ("svf", "sof")) -> int:
    """The least objective of ``rules``' schedules, each checked by the verifier: an upper
    bound on the optimum that every valid lower bound must stay under."""
    from schedlab.offline.solve import solve
    from schedlab.offline.verify import verify

    results = [solve(instance, rule, bound=None) for rule in rules]
    assert all(verify(instance, result.starts) == [] for result in results)
    return min(result.objective for result in results)


def load_benchmark(name: str) -> Any:
    """The script ``benchmarks/NAME.py`` as a module, for the tests that run it small."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
