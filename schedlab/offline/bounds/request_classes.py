"""Identical requests as one class with a multiplicity: the time-indexed LP's symmetry.

Requests with the same prompt, output and release have the same columns ``(i, τ)`` in the
time-indexed LP of :mod:`~schedlab.offline.bounds.time_indexed`, the same costs and the
same memory coefficients, so permuting them maps feasible solutions to feasible solutions
of equal cost. The *class LP* has one column ``(c, τ)`` per class of ``m_c`` identical
requests, with ``m_c`` times a request's cost and memory coefficients, and one convexity
row ``sum_τ z_{c,τ} = 1``: ``z_{c,τ}`` is the share of the class that starts at ``τ``.
Giving each request of a class its class's ``z`` maps class solutions to request
solutions, and averaging a request solution over each class maps back, both at equal
cost; so the two LPs have the same optimum, and the Lagrangian dual of the memory rows is
the same function, ``L(μ) = sum_c m_c min_τ f_c(τ) - M sum_k μ_k (b_{k+1} - b_k)``
(``proofs/time_indexed_lagrangian.md``, Claim 4).

On an instance of ``n`` requests in ``C`` classes, column generation on the class LP prices
``C`` requests a round instead of ``n`` and keeps a master with ``C`` convexity rows
instead of ``n``; degenerate instances (many identical requests) are where the request LP
is slowest to converge, and where ``C`` is smallest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from schedlab.offline.instance import Instance

__all__ = ["RequestClasses", "request_classes"]


@dataclass(frozen=True)
class RequestClasses:
    """The classes of identical requests of an instance.

    Attributes
    ----------
    instance
        One request a class, in the order of each class's first request (the instance
        itself when no two requests are identical).
    count
        ``m_c``: how many requests class ``c`` stands for.
    of
        The class of each request of the original instance.
    """

    instance: Instance
    count: np.ndarray
    of: np.ndarray

    @property
    def n(self) -> int:
        """Number of classes ``C``."""
        return self.instance.n

    def per_request(self, values: np.ndarray) -> np.ndarray:
        """A value for each request from one for each class: its class's."""
        return np.asarray(values)[self.of]


def request_classes(instance: Instance) -> RequestClasses:
    """Group the requests of ``instance`` with equal prompt, output and release."""
    keys = np.stack([instance.prompt, instance.output, instance.arrival], axis=1)
    _, first, inverse, count = np.unique(
        keys, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    if len(first) == instance.n:
        return RequestClasses(instance, np.ones(instance.n, np.int64), np.arange(instance.n))
    order = np.argsort(first, kind="stable")  # classes by their first request
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    reps = first[order]
    classes = Instance.from_arrays(
        instance.kv_tokens,
        instance.prompt[reps],
        instance.output[reps],
        instance.arrival[reps],
        name=instance.name,
    )
    return RequestClasses(classes, count[order].astype(np.int64), rank[inverse])
