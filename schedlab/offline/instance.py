"""Problem data of the offline memory-constrained batching model.

The model is that of ``docs/design.md``, section "Offline model".

An :class:`Instance` is a KV-cache budget ``M`` (tokens; the field ``kv_tokens``) and
requests ``i = 0..n-1``, each a :class:`Request` with prompt length ``s_i >= 0``, output
length ``o_i >= 1`` and release round ``a_i >= 0``. Request ``i`` started in round
``p_i`` is active in rounds ``p_i .. p_i + o_i - 1`` and holds ``s_i + k`` tokens in its
k-th active round, so its peak is ``s_i + o_i``; a request with ``s_i + o_i > M`` can
never run and makes the instance infeasible
(:class:`~schedlab.errors.InfeasibleInstanceError`).

Sources: Jaillet et al., arXiv 2502.07115 (equal prompts); Wang, Ye, Zhou,
arXiv 2508.06133 (heterogeneous prompts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from schedlab.errors import InfeasibleInstanceError, InputTypeError, InstanceError

__all__ = ["MAX_PRODUCT", "MAX_VALUE", "Instance", "Request", "check_instance", "check_int"]


#: Largest token count or round accepted (2**40, about 1.1e12): far beyond any GPU.
MAX_VALUE = 2**40

#: Largest product the 64-bit arithmetic may meet: an instance's serial horizon
#: ``H = max_i a_i + sum_i o_i`` (no list schedule ends later) times ``n`` bounds every
#: objective, times ``M`` every memory-time volume and area, and both must stay below it.
MAX_PRODUCT = 2**62


def check_int(value: Any, where: str, minimum: int, maximum: int = MAX_VALUE) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[minimum, maximum]``.

    Accepts Python and NumPy integers and integral floats (``3.0``); rejects
    booleans, NaN, infinities, fractions and strings with an
    :class:`~schedlab.errors.InstanceError` naming ``where``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InstanceError(f"{where}: must be an integer, got {value!r}")
    if isinstance(value, float | np.floating) and not (
        math.isfinite(value) and value == int(value)
    ):
        raise InstanceError(f"{where}: must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise InstanceError(f"{where}: must be >= {minimum}, got {number}")
    if number > maximum:
        shown = f"{number}" if number < 10**20 else f"a number of {len(str(number))} digits"
        raise InstanceError(f"{where}: must be <= {maximum}, got {shown}")
    return number


def check_instance(value: Any, where: str) -> Instance:
    """``value`` if it is an :class:`Instance`, else an
    :class:`~schedlab.errors.InputTypeError` (a ``TypeError``) naming ``where``."""
    if not isinstance(value, Instance):
        raise InputTypeError(f"{where}: expected an Instance, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class Request:
    """One LLM request: prompt length ``s``, output length ``o``, release round ``a``.

    Parameters
    ----------
    prompt
        Prompt (prefill) length ``s >= 0`` in tokens.
    output
        Output (decode) length ``o >= 1``: the number of rounds the request is active.
    arrival
        Release round ``a >= 0``: the earliest round it may start.
    id
        Optional label, kept through files and results.
    """

    prompt: int
    output: int
    arrival: int = 0
    id: str | None = None

    def __post_init__(self) -> None:
        self._validate("request")

    @classmethod
    def at(
        cls, where: str, prompt: Any, output: Any, arrival: Any = 0, id: str | None = None
    ) -> Request:
        """Build a request whose validation errors name the place ``where``.

        ``Request.at("requests[17]", 5, 0)`` raises
        ``InstanceError("requests[17].output: must be >= 1, got 0")``.
        """
        request = object.__new__(cls)
        for name, value in (("prompt", prompt), ("output", output), ("arrival", arrival)):
            object.__setattr__(request, name, value)
        object.__setattr__(request, "id", id)
        request._validate(where)
        return request

    def _validate(self, where: str) -> None:
        object.__setattr__(self, "prompt", check_int(self.prompt, f"{where}.prompt", 0))
        object.__setattr__(self, "output", check_int(self.output, f"{where}.output", 1))
        object.__setattr__(self, "arrival", check_int(self.arrival, f"{where}.arrival", 0))
        if self.id is not None and not isinstance(self.id, str):
            raise InstanceError(f"{where}.id: must be a string, got {self.id!r}")

    @property
    def peak(self) -> int:
        """Tokens held in the last active round, ``s + o``."""
        return self.prompt + self.output

    @property
    def volume(self) -> int:
        """Memory-time volume ``s*o + o(o+1)/2``: tokens summed over its active rounds."""
        return self.prompt * self.output + self.output * (self.output + 1) // 2


@dataclass(frozen=True)
class Instance:
    """A backlog of requests and a KV-cache budget ``M``; frozen and validated.

    Parameters
    ----------
    kv_tokens
        The KV budget ``M >= 1`` in tokens.
    requests
        The requests; request ``i`` is the i-th entry.
    name
        Free label.
    meta
        Free, JSON-serialisable information (source, proven optimum, ...).

    Raises
    ------
    InstanceError
        On a malformed value, or two requests with the same ``id``; the message names it
        (``requests[3].output: ...``).
    InfeasibleInstanceError
        If some request has ``s + o > M``.
    """

    kv_tokens: int
    requests: tuple[Request, ...]
    name: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kv_tokens", check_int(self.kv_tokens, "kv_tokens", 1))
        if isinstance(self.requests, str | bytes) or not isinstance(self.requests, Sequence):
            raise InstanceError(
                f"requests: must be a sequence, got {type(self.requests).__name__}"
            )
        if not self.requests:
            raise InstanceError("requests: must hold at least one request")
        for i, request in enumerate(self.requests):
            if not isinstance(request, Request):
                raise InstanceError(f"requests[{i}]: must be a Request, got {request!r}")
            if request.peak > self.kv_tokens:
                raise InfeasibleInstanceError(
                    f"requests[{i}]: prompt + output = {request.peak} exceeds the KV budget "
                    f"M = {self.kv_tokens}; it can never run"
                )
        _check_size(self.kv_tokens, self.requests)
        _check_ids(self.requests)
        object.__setattr__(self, "requests", tuple(self.requests))
        if not isinstance(self.name, str):
            raise InstanceError(f"name: must be a string, got {self.name!r}")
        if not isinstance(self.meta, Mapping):
            raise InstanceError(f"meta: must be a mapping, got {type(self.meta).__name__}")
        object.__setattr__(self, "meta", MappingProxyType(dict(self.meta)))

    @classmethod
    def from_arrays(
        cls,
        kv_tokens: int,
        prompt: Sequence[int] | np.ndarray,
        output: Sequence[int] | np.ndarray,
        arrival: Sequence[int] | np.ndarray | None = None,
        name: str = "",
        meta: Mapping[str, Any] | None = None,
    ) -> Instance:
        """Build an instance from equal-length arrays of prompt, output (and arrival)."""
        prompt, output = _values(prompt, "prompt"), _values(output, "output")
        arrival = [0] * len(prompt) if arrival is None else _values(arrival, "arrival")
        if not len(prompt) == len(output) == len(arrival):
            raise InstanceError(
                f"arrays: prompt, output and arrival lengths differ "
                f"({len(prompt)}, {len(output)}, {len(arrival)})"
            )
        requests = tuple(
            Request.at(f"requests[{i}]", s, o, a)
            for i, (s, o, a) in enumerate(zip(prompt, output, arrival, strict=True))
        )
        return cls(kv_tokens, requests, name, meta or {})

    @property
    def n(self) -> int:
        """Number of requests."""
        return len(self.requests)

    def __len__(self) -> int:
        return len(self.requests)

    @cached_property
    def prompt(self) -> np.ndarray:
        """Prompt lengths ``s`` (read-only ``int64`` array)."""
        return _frozen([r.prompt for r in self.requests])

    @cached_property
    def output(self) -> np.ndarray:
        """Output lengths ``o`` (read-only ``int64`` array)."""
        return _frozen([r.output for r in self.requests])

    @cached_property
    def arrival(self) -> np.ndarray:
        """Release rounds ``a`` (read-only ``int64`` array)."""
        return _frozen([r.arrival for r in self.requests])

    @cached_property
    def volume(self) -> np.ndarray:
        """Memory-time volumes ``s*o + o(o+1)/2`` (read-only ``int64`` array)."""
        return _frozen(self.prompt * self.output + self.output * (self.output + 1) // 2)

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"<Instance{label} n={self.n} M={self.kv_tokens}>"


def _values(array: Any, name: str) -> list[Any]:
    """The entries of a one-dimensional array or sequence, or an error naming ``name``."""
    try:
        flat = not isinstance(array, str | bytes | Mapping) and np.ndim(array) == 1
    except ValueError:  # ragged nested sequences
        flat = False
    if not flat:
        raise InstanceError(
            f"arrays: {name} must be a one-dimensional sequence, got {array!r:.60}"
        )
    return list(array)


def _check_ids(requests: Sequence[Request]) -> None:
    """Refuse two requests with the same ``id``: schedules name requests by it."""
    seen: dict[str, int] = {}
    for i, request in enumerate(requests):
        if request.id is None:
            continue
        if request.id in seen:
            raise InstanceError(
                f"requests[{i}].id: {request.id!r:.60} is already the id of "
                f"requests[{seen[request.id]}]"
            )
        seen[request.id] = i


def _check_size(kv_tokens: int, requests: Sequence[Request]) -> None:
    """Refuse an instance whose objectives or volumes could overflow 64-bit integers.

    With ``H`` the serial horizon (:data:`MAX_PRODUCT`), every start a solver returns is
    below ``H`` and every objective below ``n H``; every volume and memory-time area is
    below ``M H``.
    """
    horizon = max(r.arrival for r in requests) + sum(r.output for r in requests)
    n = len(requests)
    if horizon > MAX_VALUE or n * horizon > MAX_PRODUCT or kv_tokens * horizon > MAX_PRODUCT:
        raise InstanceError(
            f"requests: too large for 64-bit arithmetic: the latest arrival plus the total "
            f"output is {horizon:,} rounds, with n = {n:,} and M = {kv_tokens:,} (needed: at "
            f"most 2**40 rounds, and n and M times it at most 2**62)"
        )


def _frozen(values: Any) -> np.ndarray:
    array = np.array(values, dtype=np.int64)
    array.setflags(write=False)
    return array
