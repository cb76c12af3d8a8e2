"""numba for the compiled kernels: explicit signatures, the on-disk cache where possible.

Only the kernel modules (:mod:`schedlab.offline.compiled_decoder`,
:mod:`schedlab.offline.solvers.compiled_sorted_f`,
:mod:`schedlab.offline.solvers.compiled_left_shift`,
:mod:`schedlab.offline.solvers.compiled_search`) import this module, and they are
imported inside the functions that run them, so ``import schedlab`` loads neither numba
nor, through it, scipy.

Kernels are compiled when their module is imported, once per signature (numba compiles a
function once per argument type otherwise, and a constant argument such as ``INF`` has
its own literal type, so helpers were compiled twice). The machine code is cached on
disk (``cache=True``) in the first writable place numba finds (``NUMBA_CACHE_DIR``, the
package's ``__pycache__``, the user's cache directory); where none is writable (a
read-only install with no writable home) numba raises ``RuntimeError``, and the kernel
is compiled in memory in every process instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from numba import njit, types

__all__ = ["INT", "MATRIX", "READ", "READ_MATRIX", "VECTOR", "kernel"]

#: A round, a count or a token load.
INT = types.int64
#: A writable contiguous ``int64`` vector / matrix.
VECTOR = types.Array(INT, 1, "C")
MATRIX = types.Array(INT, 2, "C")
#: The same, read only (a writable array passes too).
READ = types.Array(INT, 1, "C", readonly=True)
READ_MATRIX = types.Array(INT, 2, "C", readonly=True)


def kernel(signature: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(signature, cache=True)``, without the cache where none is writable."""

    def compile_(func: Callable[..., Any]) -> Any:
        try:
            return njit(signature, cache=True)(func)
        except RuntimeError:  # no locator: nowhere writable to cache
            return njit(signature)(func)

    return compile_
