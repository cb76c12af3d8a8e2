r"""The KV transfer from a prefill node to a decode node: its size, its time, its queue.

A request prefilled on a prefill-only node of a cluster (:mod:`schedlab.serving.cluster`)
sends the KV of its first :math:`P - 1` prompt tokens to its decode node, which
computes the last prompt token itself and samples the first output token from it. (vLLM's
disaggregated serving does the same: when a decode node has received the whole prompt's
KV, its scheduler counts one token fewer as computed, so that the next step recomputes
it and produces logits: ``Scheduler._update_waiting_for_remote_kv``,
``vllm/v1/core/sched/scheduler.py:2040`` of vLLM 0.19.0, the release the shipped cost
models were calibrated on, with the rollback ``num_computed_tokens = num_tokens - 1`` at
lines 2069-2070; the same function is in the vllm-project/vllm main branch's file at
commit 00024d3. The rest of this model is ours.)

Size and time
    With :math:`b` bytes of KV per token (:func:`~schedlab.llm.models.kv_bytes_per_token`
    of the model's shape) a transfer of :math:`k` tokens moves :math:`S = k b` bytes over a
    :class:`~schedlab.llm.interconnect.Link` of latency :math:`\ell` and bandwidth
    :math:`\beta` in :math:`\tau(k) = \ell + S/\beta`.
Queue
    Each prefill node has one outgoing link; its transfers run one at a time, in the order
    their prefills completed (first come first served). A transfer whose prefill ended at
    :math:`r` starts at :math:`s = \max(r, f)`, :math:`f` being when the link's previous
    transfer ends, and ends at :math:`e = s + \tau(k)`.
Layer-wise pipelining (optional, ``layers = L``)
    The KV of a layer can leave as soon as that layer of the prefill's *last* iteration
    (started at :math:`r_0`) has run, so the transfer may start at
    :math:`s = \max(r_0, f)`; it cannot end before the last layer, computed at
    :math:`r`, has crossed: :math:`e = \max(s + \tau(k),\; r + \tau(k)/L)`. Earlier
    chunks of a chunked prefill could leave even earlier; the model ignores that (it
    errs on the slow side).

The prefill node keeps the request's blocks until its transfer ends
(:meth:`~schedlab.serving.engine.Engine.release`); the decode node allocates them when it
admits the request (:mod:`schedlab.serving.engine`), so between the two the KV is in
flight or staged in the decode node's host memory, outside its KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from schedlab.errors import ServingError
from schedlab.llm.interconnect import Link

__all__ = ["KVLink", "LinkQueue", "Transfer"]


@dataclass(frozen=True)
class KVLink:
    """How KV crosses from a prefill node to a decode node (module docstring).

    Attributes
    ----------
    link
        Bandwidth and latency of each prefill node's outgoing link.
    bytes_per_token
        KV bytes of one token (all layers).
    layers
        Layer-wise pipelining over this many layers; ``None``: the KV leaves after the
        prefill.
    """

    link: Link
    bytes_per_token: int
    layers: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.bytes_per_token, bool) or not (
            isinstance(self.bytes_per_token, int) and self.bytes_per_token >= 1
        ):
            raise ServingError(
                f"KV link: bytes per token must be an integer >= 1, got {self.bytes_per_token!r}"
            )
        if self.layers is not None and (
            isinstance(self.layers, bool) or not isinstance(self.layers, int) or self.layers < 1
        ):
            raise ServingError(f"KV link: layers must be an integer >= 1, got {self.layers!r}")

    def duration_s(self, tokens: int) -> float:
        r""":math:`\tau(k) = \ell + k b / \beta` seconds for ``tokens`` KV tokens."""
        return self.link.transfer_s(tokens * self.bytes_per_token)

    def window(
        self, tokens: int, ready_s: float, link_free_s: float, last_start_s: float
    ) -> tuple[float, float]:
        """``(start, end)`` of a transfer of ``tokens`` whose prefill ended at ``ready_s``
        (its last iteration started at ``last_start_s``) on a link free from
        ``link_free_s``."""
        tau = self.duration_s(tokens)
        if self.layers is None:
            start = max(ready_s, link_free_s)
            return start, start + tau
        start = max(min(last_start_s, ready_s), link_free_s)
        return start, max(start + tau, ready_s + tau / self.layers)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One KV transfer, as it happened.

    Attributes
    ----------
    request, source, target
        The request, its prefill node and its decode node.
    tokens, bytes
        KV tokens and bytes moved.
    ready_s, start_s, end_s
        When its prefill ended, and when the transfer started and ended.
    """

    request: int
    source: int
    target: int
    tokens: int
    bytes: int
    ready_s: float
    start_s: float
    end_s: float


class LinkQueue:
    """The outgoing link of one prefill node: transfers one at a time, first come first
    served (module docstring)."""

    def __init__(self, kv_link: KVLink, source: int) -> None:
        self.kv_link = kv_link
        self.source = source
        self.free_s = 0.0  # when the last transfer queued ends

    def send(
        self, request: int, target: int, tokens: int, ready_s: float, last_start_s: float
    ) -> Transfer:
        """Queue the transfer of ``tokens`` of ``request`` whose prefill ended at
        ``ready_s``; the transfer, with its times."""
        if tokens < 0 or not math.isfinite(ready_s):
            raise ServingError(f"KV transfer of request {request}: {tokens} tokens at {ready_s}")
        start, end = self.kv_link.window(tokens, ready_s, self.free_s, last_start_s)
        self.free_s = end
        size = tokens * self.kv_link.bytes_per_token
        return Transfer(request, self.source, target, tokens, size, ready_s, start, end)

    def estimate_end_s(self, tokens: int, ready_s: float) -> float:
        """When a transfer of ``tokens`` whose prefill ends at ``ready_s`` would end if
        it were queued now (no pipelining credit): a router's estimate."""
        return max(ready_s, self.free_s) + self.kv_link.duration_s(tokens)
