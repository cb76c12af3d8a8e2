"""The kernel decorator: no numba runtime unless a kernel allocates."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numba.core.errors import TypingError

from schedlab.offline.jit import INT, VECTOR, kernel

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
