"""Export the exact time-indexed model of an instance as an LP or MPS file (via PuLP).

The model is the integer programme whose LP relaxation :mod:`schedlab.offline.bounds.time_indexed`
solves, with one binary ``x_{i,τ}`` per start round ``τ`` in the window
``[a_i, a_i + U_i]`` of :func:`schedlab.offline.solvers.cpsat.start_slack` (no schedule as good as
the best list-scheduling rule starts later, ``proofs/cpsat_horizon.md``), so its optimum
is the instance's optimum:

.. math::

    \\min \\sum_{i,τ} (τ + o_i - a_i) x_{i,τ} \\quad\\text{s.t.}\\quad
    \\sum_τ x_{i,τ} = 1, \\qquad
    \\sum_{i} \\sum_{τ = t - o_i + 1}^{t} (s_i + t - τ + 1) x_{i,τ} \\le M \\;(\\forall t).

The coefficient matrix is built vectorised; PuLP only writes the file (for any MILP
solver: CBC, HiGHS, Gurobi, ...). Sizes grow as ``n`` times the window: meant for small
and medium instances.

Command line: ``schedlab export FILE --format lp|mps -o OUT``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pulp
import scipy.sparse as sp

from schedlab.budget import Budget, memory_guard
from schedlab.errors import FormatError, InputError
from schedlab.offline.bounds.time_indexed import check_horizon, column_rows
from schedlab.offline.bounds.volume import start_slack
from schedlab.offline.instance import Instance
from schedlab.offline.priority import best_rule_schedule

__all__ = [
    "FORMATS",
    "MAX_NONZEROS",
    "MODEL_NONZERO_BYTES",
    "NONZEROS_CEILING",
    "export_model",
    "model_nonzeros",
    "time_indexed_model",
]

FORMATS = ("lp", "mps")

#: The largest model :func:`export_model` writes unless told otherwise: an LP file takes
#: about 17 bytes a nonzero (``mixed-n50``: 68.7 million nonzeros, 1.14 GB, 5½ minutes).
MAX_NONZEROS = 5_000_000

#: The most ``max_nonzeros`` may be raised to: twice the largest model written so far
#: (``mixed-n50``'s); beyond it the model is built in memory before anything is written.
NONZEROS_CEILING = 150_000_000

#: Bytes a nonzero of the model takes in memory once PuLP has built it (its variable and
#: its terms in the expressions; peak resident memory over nonzeros, rounded up), checked
#: against the memory budget before the model is built.
MODEL_NONZERO_BYTES = 128


def _windows(instance: Instance) -> np.ndarray:
    """Start rounds each request may take, ``U_i + 1`` (module docstring)."""
    warm, _ = best_rule_schedule(instance)
    upper = int((warm + instance.output - instance.arrival).sum())
    return np.asarray(start_slack(instance, upper), dtype=np.int64) + 1


def model_nonzeros(instance: Instance) -> int:
    """Nonzeros of the model's matrix, counted before building it: a start variable of
    request ``i`` sits in its assignment row and in the ``o_i`` memory rows it spans."""
    return int((_windows(instance) * (instance.output + 1)).sum())


def time_indexed_model(instance: Instance) -> pulp.LpProblem:
    """The exact time-indexed integer programme of ``instance`` as a PuLP problem."""
    width = _windows(instance)
    req = np.repeat(np.arange(instance.n), width)
    offset = np.arange(len(req)) - np.repeat(np.cumsum(width) - width, width)
    tau = instance.arrival[req] + offset
    horizon = int((tau + instance.output[req]).max())
    check_horizon(horizon, "export")
    starts, rows, values = column_rows(instance, np.arange(horizon + 1), req, tau)
    matrix = sp.csc_matrix((values, rows, starts), shape=(horizon, len(req))).tocsr()
    problem = pulp.LpProblem(instance.name or "schedlab", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x_{i}_{t}", cat=pulp.LpBinary) for i, t in zip(req, tau, strict=True)]
    cost = (tau + instance.output[req] - instance.arrival[req]).tolist()
    problem += pulp.lpSum(c * v for c, v in zip(cost, x, strict=True))
    first = np.concatenate(([0], np.cumsum(width)))
    for i in range(instance.n):
        problem += pulp.lpSum(x[first[i] : first[i + 1]]) == 1, f"start_{i}"
    for t in range(horizon):
        lo, hi = matrix.indptr[t], matrix.indptr[t + 1]
        if hi > lo:
            terms = zip(
                (x[j] for j in matrix.indices[lo:hi]), matrix.data[lo:hi].tolist(), strict=True
            )
            problem += pulp.LpAffineExpression(terms) <= instance.kv_tokens, f"memory_{t}"
    return problem


def export_model(
    instance: Instance,
    path: str | Path,
    fmt: str | None = None,
    *,
    max_nonzeros: int = MAX_NONZEROS,
    max_memory: int | None = None,
) -> Path:
    """Write the model of :func:`time_indexed_model` to ``path`` as ``fmt`` (``lp``/``mps``).

    ``max_memory`` is the memory budget in bytes (``None``:
    :func:`~schedlab.budget.default_max_memory`); the model is built in memory, about
    :data:`MODEL_NONZERO_BYTES` a nonzero, only if that fits in it.

    Raises
    ------
    FormatError
        If ``fmt`` (or the file's suffix when ``fmt`` is ``None``) is not a known format,
        or disagrees with the file's suffix.
    InputError
        If the model has more than ``max_nonzeros`` nonzeros (estimated first), or
        ``max_nonzeros`` exceeds :data:`NONZEROS_CEILING`.
    HorizonError
        If the model's horizon exceeds the time-indexed methods' ``MAX_HORIZON``.
    MemoryBudgetError
        If the model would pass the memory budget, or memory runs out while it is built
        or written (:func:`~schedlab.budget.memory_guard`).
    """
    path = Path(path)
    suffix = path.suffix.lstrip(".").lower()
    if fmt is not None and suffix in FORMATS and suffix != fmt.lower():
        raise FormatError(f"export: format {fmt!r} but the file {path.name!r} says {suffix!r}")
    fmt = (fmt or suffix).lower()
    if fmt not in FORMATS:
        raise FormatError(f"export format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if max_nonzeros > NONZEROS_CEILING:
        raise InputError(
            f"export: max_nonzeros = {max_nonzeros:,} is above {NONZEROS_CEILING:,}, the most "
            "a model built in memory may take (about 2.5 GB as LP)"
        )
    budget = Budget(max_memory=max_memory)
    with memory_guard("export"):
        return _export(instance, path, fmt, max_nonzeros, budget)


def _export(instance: Instance, path: Path, fmt: str, max_nonzeros: int, budget: Budget) -> Path:
    """:func:`export_model` once its arguments are checked."""
    nonzeros = model_nonzeros(instance)
    if nonzeros > max_nonzeros:
        raise InputError(
            f"export: the model of {instance.name or 'the instance'} has {nonzeros:,} nonzeros "
            f"(about {nonzeros * 17 / 1e9:.2g} GB as LP), over the limit of {max_nonzeros:,}; "
            "raise it with --max-nonzeros N (Python: max_nonzeros=N)"
        )
    budget.require("export", MODEL_NONZERO_BYTES * nonzeros, f"a model of {nonzeros:,} nonzeros")
    problem = time_indexed_model(instance)
    if fmt == "lp":
        problem.writeLP(str(path))
    else:
        problem.writeMPS(str(path))
    return path
