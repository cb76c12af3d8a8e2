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

numba keys a cached kernel on its own source file alone (its modification time and size,
the bytecode and the signature; numba 0.68, ``numba/core/caching.py``), not on the
options below nor on the kernels it calls, whose machine code it holds inlined. After
editing a kernel module or this one, delete the cache of every kernel module
(``find schedlab -name '*.nb[ic]' -delete``): a read-only review (2026-12-03) saw
``late_acceptance_kernel`` run an old ``evaluate_kernel`` from its cache after only
``compiled_decoder.py`` changed, and the engines then disagreed. A fresh install or
clone has no cache.
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


def kernel(signature: Any, *, allocates: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(signature, cache=True, forceinline=True)``, without numba's runtime
    unless ``allocates``, and without the cache where none is writable.

    ``forceinline`` marks the machine code for LLVM to inline wherever another kernel
    calls it (numba's IR stays one function per kernel, so compiling costs about the
    same): the helpers take three or four arrays, each passed as a seven-word struct, and
    a call per position decoded. Inlined, exact late-acceptance moves on the shipped
    mixed n = 1,000 went from 34.8k / 34.9k / 29.5k to 44.3k / 40.2k / 35.3k a second,
    three runs alternating (2026-12-03, 100,000 moves, spacing 8).

    Unless ``allocates``, the kernel is compiled without numba's runtime (the option
    ``_nrt=False``). The runtime owns the arrays a compiled function creates, and counts
    references to every array passed between compiled functions: an atomic increment
    and decrement (``NRT_incref`` / ``NRT_decref``, a ``lock``-prefixed instruction)
    around each call of a helper that takes arrays. In the local search on the shipped
    mixed n = 1,000 those two instructions took 48 % of the samples (``perf record``,
    2026-12-03). Without the runtime there is no count, and numba refuses to compile a
    function that creates an array (``np.empty``, ``a.max()``,
    ``numpy.random.Generator.integers``), so "allocates nothing" is checked when it compiles. A
    view (``a[i:j]``) needs no runtime: it lives only while the call that made it runs,
    and the caller holds its array for the whole call.

    Parameters
    ----------
    signature
        The numba signature (one compiled version).
    allocates
        Whether the kernel creates arrays, and so needs the runtime.
    """

    options: dict[str, Any] = {"_nrt": allocates, "forceinline": True}  # _nrt: not in the stubs

    def compile_(func: Callable[..., Any]) -> Any:
        try:
            return njit(signature, cache=True, **options)(func)
        except RuntimeError:  # no locator: nowhere writable to cache
            return njit(signature, **options)(func)

    return compile_
