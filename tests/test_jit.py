"""The kernel decorator: no numba runtime unless a kernel allocates; a cache keyed on every
kernel module."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numba.core.errors import TypingError

from schedlab import jit
from schedlab.jit import INT, KERNEL_FILES, VECTOR, kernel

DOUBLED_SUM = """
import numpy as np

def doubled_sum(a):
    copy = np.empty(len(a), dtype=np.int64)  # an allocation
    for k in range(len(a)):
        copy[k] = 2 * a[k]
    return copy.sum()
"""

SUM_OF_VIEW = """
def sum_of_view(a, lo, hi):
    total = 0
    part = a[lo:hi]  # a view needs no runtime
    for k in range(hi - lo):
        total += part[k]
    return total
"""


def _fresh(tmp_path: Path, source: str, name: str) -> Any:
    """``name`` from a new module file: numba's disk cache keys a function on its file,
    not on the compile options, so each test compiles its own."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_a_kernel_that_allocates_is_refused_without_the_runtime(tmp_path: Path) -> None:
    with pytest.raises(TypingError):
        kernel(INT(VECTOR))(_fresh(tmp_path, DOUBLED_SUM, "doubled_sum"))


def test_a_kernel_may_allocate_when_it_says_so(tmp_path: Path) -> None:
    doubled = kernel(INT(VECTOR), allocates=True)(_fresh(tmp_path, DOUBLED_SUM, "doubled_sum"))
    assert doubled(np.arange(5, dtype=np.int64)) == 20


def test_a_kernel_without_the_runtime_reads_views(tmp_path: Path) -> None:
    summed = kernel(INT(VECTOR, INT, INT))(_fresh(tmp_path, SUM_OF_VIEW, "sum_of_view"))
    assert summed(np.arange(10, dtype=np.int64), 2, 6) == 2 + 3 + 4 + 5


CALLEE = """
from schedlab.jit import INT, kernel

@kernel(INT())
def value():
    return {value}
"""

CALLER = """
from callee import value
from schedlab.jit import INT, kernel

@kernel(INT())
def twice():
    return 2 * value()
"""

RUN_CALLER = """
import sys
from pathlib import Path

folder = Path(sys.argv[1])
sys.path.insert(0, str(folder))
from schedlab import jit

jit.KERNEL_FILES = (folder / "callee.py", folder / "caller.py")
import caller

print(caller.twice())
"""


def _run_caller(folder: Path) -> tuple[int, str]:
    """``twice()`` in a new process (numba's cache reports on stdout), and what it logged."""
    env = {**os.environ, "NUMBA_DEBUG_CACHE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)  # the cache beside the files, in folder/__pycache__
    done = subprocess.run(
        [sys.executable, "-c", RUN_CALLER, str(folder)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return int(done.stdout.split()[-1]), done.stdout


def test_a_kernel_compiles_again_when_a_kernel_it_calls_changes(tmp_path: Path) -> None:
    (tmp_path / "callee.py").write_text(CALLEE.format(value=1))
    (tmp_path / "caller.py").write_text(CALLER)
    assert _run_caller(tmp_path)[0] == 2
    value, log = _run_caller(tmp_path)
    assert value == 2
    assert "data loaded from" in log and "caller.twice" in log  # the cache is used
    # the caller's file is untouched: numba's own key would serve the old machine code
    (tmp_path / "callee.py").write_text(CALLEE.format(value=333))
    assert _run_caller(tmp_path)[0] == 666


def test_every_module_with_a_kernel_keys_the_cache() -> None:
    package = Path(__file__).resolve().parents[1] / "schedlab"
    defining = {path for path in package.rglob("*.py") if "@kernel(" in path.read_text()}
    assert defining
    assert defining <= set(KERNEL_FILES)
    assert package / "jit.py" in KERNEL_FILES


def test_a_kernel_compiles_in_memory_where_the_sources_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as when the package runs from a zip archive: no digest, so no cache, and no error
    monkeypatch.setattr(jit, "KERNEL_FILES", (tmp_path / "absent.py",))
    summed = kernel(INT(VECTOR, INT, INT))(_fresh(tmp_path, SUM_OF_VIEW, "sum_of_view"))
    assert summed(np.arange(10, dtype=np.int64), 2, 6) == 14
    assert not isinstance(summed._cache, jit.KernelCache)
