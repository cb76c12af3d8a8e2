"""numba for the compiled kernels: explicit signatures, the on-disk cache where possible.

Only the kernel modules (:mod:`schedlab.offline.compiled_decoder`,
:mod:`schedlab.offline.compiled_evaluation`,
:mod:`schedlab.offline.bounds.compiled_pricing`,
:mod:`schedlab.offline.bounds.compiled_spacing`,
:mod:`schedlab.offline.solvers.compiled_sorted_f`,
:mod:`schedlab.offline.solvers.compiled_left_shift`,
:mod:`schedlab.offline.solvers.compiled_search`,
:mod:`schedlab.calibration.compiled_cost_model`) import this module, and they are
imported inside the functions that run them, so ``import schedlab`` loads neither numba
nor, through it, scipy.

Kernels are compiled when their module is imported, once per signature (numba compiles a
function once per argument type otherwise, and a constant argument such as ``INF`` has
its own literal type, so helpers were compiled twice). The machine code is cached on
disk (numba's ``cache=True``, with the wider key below) in the first writable place
numba finds (``NUMBA_CACHE_DIR``, the package's ``__pycache__``, the user's cache
directory); where none is writable (a read-only install with no writable home) numba
raises ``RuntimeError``, and the kernel is compiled in memory in every process instead.

numba keys a cached kernel on its own source file (a hash of its contents, the bytecode
and the signature; numba 0.68, ``numba/core/caching.py``), not on the options
below nor on the kernels it calls, whose machine code it holds inlined. So after an edit
of ``compiled_decoder.py`` alone, ``late_acceptance_kernel`` (in ``compiled_search.py``)
ran the old ``evaluate_kernel`` from its cache, and the two engines disagreed (a
read-only review, 2026-12-03). :class:`KernelCache` therefore adds a digest of every
kernel module's source and of this module's (:data:`KERNEL_FILES`) to each entry's key:
an edit of any of them recompiles every kernel once. ``tests/test_jit.py`` checks
it with a caller and a callee in two files.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import njit, types
from numba.core.caching import FunctionCache

__all__ = [
    "FLOATS",
    "INT",
    "KERNEL_FILES",
    "MATRIX",
    "READ",
    "READ_FLOATS",
    "READ_MATRIX",
    "VECTOR",
    "KernelCache",
    "kernel",
    "sources_digest",
]

_HERE = Path(__file__).resolve().parent

#: The files whose source keys every kernel's cache entry: this module (its compile
#: options) and every module that defines a kernel (``tests/test_jit.py`` checks
#: that none is missing).
KERNEL_FILES: tuple[Path, ...] = (
    _HERE / "jit.py",
    _HERE / "offline" / "compiled_decoder.py",
    _HERE / "offline" / "compiled_evaluation.py",
    _HERE / "offline" / "bounds" / "compiled_pricing.py",
    _HERE / "offline" / "bounds" / "compiled_spacing.py",
    _HERE / "offline" / "solvers" / "compiled_left_shift.py",
    _HERE / "offline" / "solvers" / "compiled_search.py",
    _HERE / "offline" / "solvers" / "compiled_sorted_f.py",
    _HERE / "calibration" / "compiled_cost_model.py",
)

#: A round, a count or a token load.
INT = types.int64
#: A writable contiguous ``int64`` vector / matrix.
VECTOR = types.Array(INT, 1, "C")
MATRIX = types.Array(INT, 2, "C")
#: The same, read only (a writable array passes too).
READ = types.Array(INT, 1, "C", readonly=True)
READ_MATRIX = types.Array(INT, 2, "C", readonly=True)
#: A writable / read-only contiguous ``float64`` vector (prices, costs).
FLOATS = types.Array(types.float64, 1, "C")
READ_FLOATS = types.Array(types.float64, 1, "C", readonly=True)


@functools.cache
def sources_digest(files: tuple[Path, ...]) -> str:
    """SHA-256 of the files' bytes, each preceded by its name (read once per process)."""
    hasher = hashlib.sha256()
    for path in files:
        hasher.update(path.name.encode())
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


class KernelCache(FunctionCache):
    """numba's on-disk cache of one kernel, with :func:`sources_digest` of
    :data:`KERNEL_FILES` (read when the cache is made) in the key of every entry.

    An entry made before another kernel module changed is then missed, and the kernel is
    compiled again, with the machine code of the kernels it calls as they are now. (The
    index of a file that did not change keeps the old entries beside the new.) Raises
    ``OSError`` where the files cannot be read (a package run from a zip archive).
    """

    def __init__(self, py_func: Callable[..., Any]) -> None:
        self._digest = sources_digest(KERNEL_FILES)
        super().__init__(py_func)

    def _index_key(self, sig: Any, codegen: Any) -> tuple[Any, ...]:
        return (*super()._index_key(sig, codegen), self._digest)


def kernel(signature: Any, *, allocates: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(signature, forceinline=True)`` cached on disk by :class:`KernelCache`
    (in memory only where nothing is writable or the sources cannot be read), without
    numba's runtime unless ``allocates``.

    ``forceinline`` marks the machine code for LLVM to inline wherever another kernel
    calls it (numba's IR stays one function per kernel, so compiling costs about the
    same): the helpers take three or four arrays, each passed as a seven-word struct, and
    a call per position decoded, which inlining removes (``docs/design.md``, "Decision
    record", gives the measurement).

    Unless ``allocates``, the kernel is compiled without numba's runtime (the option
    ``_nrt=False``). The runtime owns the arrays a compiled function creates, and counts
    references to every array passed between compiled functions: an atomic increment
    and decrement (``NRT_incref`` / ``NRT_decref``, a ``lock``-prefixed instruction)
    around each call of a helper that takes arrays, which dominated the local search's
    profile (``docs/design.md``, "Decision record"). Without the runtime there is no
    count, and numba refuses to compile a function that creates an array (``np.empty``,
    ``a.max()``, ``numpy.random.Generator.integers``), so "allocates nothing" is checked
    when it compiles. A view (``a[i:j]``) needs no runtime: it lives only while the call
    that made it runs, and the caller holds its array for the whole call.

    Parameters
    ----------
    signature
        The numba signature (one compiled version).
    allocates
        Whether the kernel creates arrays, and so needs the runtime.
    """

    options: dict[str, Any] = {"_nrt": allocates, "forceinline": True}  # _nrt: not in the stubs

    def compile_(func: Callable[..., Any]) -> Any:
        # compiled as ``njit(signature, cache=True)`` would, but that also registers the
        # dispatcher for type inference while it compiles, which only a kernel calling
        # itself needs (none does)
        dispatcher = njit(**options)(func)  # no signature: nothing compiled yet
        # RuntimeError: nowhere writable; OSError: the sources are unreadable (a zip)
        with contextlib.suppress(RuntimeError, OSError):
            dispatcher._cache = KernelCache(func)  # what ``cache=True`` sets, with our key
        dispatcher.compile(signature)
        dispatcher.disable_compile()
        return dispatcher

    return compile_
