r"""A link between GPUs or nodes: bandwidth and latency, and the time of what crosses it.

A :class:`Link` moves ``S`` bytes point to point in :math:`\ell + S/\beta` (latency
:math:`\ell`, bandwidth :math:`\beta`). An all-reduce of ``S`` bytes over ``N`` ranks by
the ring algorithm (reduce-scatter, then all-gather; Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009) takes
:math:`2(N-1)` steps, each moving :math:`S/N` bytes over one link:

.. math:: T_{AR}(S, N) = 2 (N - 1) \left(\ell + \frac{S}{N \beta}\right).

An all-gather (or a reduce-scatter) alone is half of it. These are the collectives of
tensor parallelism (an all-reduce after each row-parallel projection, ``o_proj`` and the
MLP's ``down_proj``, in vLLM's ``RowParallelLinear``) and of the KV transfer between
nodes; the link's figures come from a measurement (:mod:`schedlab.llm.link_evidence`).

vLLM 0.19 does not run the ring for every tensor-parallel all-reduce
(:meth:`Link.tensor_all_reduce_s`). On two GPUs whose driver reports peer access, a
bf16 all-reduce of fewer than :data:`CUSTOM_ALL_REDUCE_MAX_BYTES` goes to vLLM's own
kernel (``vllm/distributed/device_communicators/cuda_communicator.py`` lines 209–217;
``custom_all_reduce.py`` line 59, ``max_size``, and lines 244–245, ``should_custom_ar``:
two ranks allowed without NVLink), which on two ranks is always the one-shot kernel
(``csrc/custom_all_reduce.cuh`` lines 589–590): one barrier, then each rank reads the
peer's :math:`S` bytes over the link, :math:`\ell + S/\beta`. Larger messages go to NCCL,
the ring above (:math:`2\ell + S/\beta` on two ranks). With more than two GPUs on PCIe the
custom kernel is off (``custom_all_reduce.py`` lines 152–159) and NCCL's ring runs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from schedlab.errors import FormatError, ServingError
from schedlab.json_files import json_number

__all__ = [
    "CUSTOM_ALL_REDUCE_MAX_BYTES",
    "MAX_BANDWIDTH_BPS",
    "MAX_LATENCY_S",
    "MIN_BANDWIDTH_BPS",
    "Link",
    "parse_link",
]

#: The range of a link's bandwidth (bytes per second). The fastest link between GPUs
#: today moves 1.8 TB/s (NVLink 5, per GPU, both directions), so 10 TB/s is a generous
#: ceiling; the slowest network a serving cluster uses, 1 Gb/s Ethernet, moves 125 MB/s,
#: so 1 MB/s is a generous floor. A figure outside is a unit slip, not a link.
MIN_BANDWIDTH_BPS = 1e6
MAX_BANDWIDTH_BPS = 1e13

#: The largest latency of one message (seconds): a link between machines on two
#: continents answers in about 0.3 s, so a second is beyond any link a cluster has.
MAX_LATENCY_S = 1.0

#: vLLM's custom all-reduce serves messages below this many bytes (``max_size``,
#: ``vllm/distributed/device_communicators/custom_all_reduce.py`` line 59, vLLM 0.19.0).
CUSTOM_ALL_REDUCE_MAX_BYTES = 8192 * 1024

_BANDWIDTH = {"GB/s": 1e9, "GiB/s": 2**30, "MB/s": 1e6, "Gb/s": 1e9 / 8, "TB/s": 1e12}
_LATENCY = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True)
class Link:
    """A link of ``bandwidth_Bps`` bytes per second and ``latency_s`` seconds per message."""

    bandwidth_Bps: float
    latency_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bandwidth_Bps) and self.bandwidth_Bps > 0):
            raise ServingError(
                f"link: bandwidth must be a finite number > 0, got {self.bandwidth_Bps}"
            )
        if not MIN_BANDWIDTH_BPS <= self.bandwidth_Bps <= MAX_BANDWIDTH_BPS:
            raise ServingError(
                f"link: bandwidth must be from {MIN_BANDWIDTH_BPS / 1e6:g} MB/s to "
                f"{MAX_BANDWIDTH_BPS / 1e12:g} TB/s (MIN_BANDWIDTH_BPS, MAX_BANDWIDTH_BPS), "
                f"got {self.bandwidth_Bps:.3g} bytes/s"
            )
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise ServingError(f"link: latency must be a finite number >= 0, got {self.latency_s}")
        if self.latency_s > MAX_LATENCY_S:
            raise ServingError(
                f"link: latency must be at most {MAX_LATENCY_S:g} s (MAX_LATENCY_S), "
                f"got {self.latency_s:g} s"
            )

    def transfer_s(self, size: float) -> float:
        """Seconds to move ``size`` bytes point to point."""
        return self.latency_s + size / self.bandwidth_Bps

    def all_reduce_s(self, size: float, ranks: int) -> float:
        """Seconds of a ring all-reduce of ``size`` bytes over ``ranks`` ranks (0 for one)."""
        if ranks <= 1 or size <= 0:
            return 0.0
        return 2 * (ranks - 1) * (self.latency_s + size / (ranks * self.bandwidth_Bps))

    def tensor_all_reduce_s(self, size: float, ranks: int) -> float:
        """Seconds of a tensor-parallel all-reduce of ``size`` bytes as vLLM 0.19 runs it
        over ``ranks`` GPUs on this link (module docstring): vLLM's one-shot kernel,
        :math:`\\ell + S/\\beta`, on two ranks below :data:`CUSTOM_ALL_REDUCE_MAX_BYTES`;
        NCCL's ring (:meth:`all_reduce_s`) otherwise."""
        if ranks == 2 and 0 < size < CUSTOM_ALL_REDUCE_MAX_BYTES:
            return self.latency_s + size / self.bandwidth_Bps
        return self.all_reduce_s(size, ranks)

    def all_gather_s(self, size: float, ranks: int) -> float:
        """Seconds of a ring all-gather (or reduce-scatter) of ``size`` bytes in all."""
        return self.all_reduce_s(size, ranks) / 2

    def describe(self) -> str:
        """``"25 GB/s, 20 us"``: the figures as a person reads them."""
        return f"{self.bandwidth_Bps / 1e9:.3g} GB/s, {self.latency_s * 1e6:.3g} us"

    def to_dict(self) -> dict[str, float]:
        return {"bandwidth_Bps": self.bandwidth_Bps, "latency_s": self.latency_s}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Link:
        """A link of :meth:`to_dict`'s form; errors name ``where`` and the key.

        Raises
        ------
        FormatError
            If it is not an object with both figures (none is assumed), or a figure is not
            a finite number or out of range.
        """
        if not isinstance(data, dict) or set(data) != {"bandwidth_Bps", "latency_s"}:
            raise FormatError(
                f"{where}: expected an object of bandwidth_Bps and latency_s, and no other key"
            )
        bandwidth = json_number(data["bandwidth_Bps"], f"{where}.bandwidth_Bps")
        latency = json_number(data["latency_s"], f"{where}.latency_s")
        try:
            return cls(bandwidth, latency)
        except ServingError as exc:  # "link: ..." named by its place instead
            raise FormatError(f"{where}: {str(exc).removeprefix('link: ')}") from None


def parse_link(text: str, flag: str = "--link") -> Link:
    """A link from ``BANDWIDTH,LATENCY`` text such as ``54GB/s,4us``: both parts are
    required (a link without latency is written ``...,0us``; none is assumed) and must be
    in range (:data:`MIN_BANDWIDTH_BPS` to :data:`MAX_BANDWIDTH_BPS`, 0 to
    :data:`MAX_LATENCY_S`).

    Raises
    ------
    ServingError
        Naming ``flag``, for empty text, text of another shape, no latency, a unit not
        known or a figure out of range.
    """
    if not text.strip():
        raise ServingError(f"{flag}: empty; give BANDWIDTH,LATENCY, e.g. 25GB/s,20us")
    match = re.fullmatch(
        r"\s*([0-9.eE+-]+)\s*([A-Za-z/]+)\s*(?:,\s*([0-9.eE+-]+)\s*([a-zµ]+))?\s*", text
    )
    if not match or match.group(2) not in _BANDWIDTH:
        raise ServingError(
            f"{flag}: cannot read link {text!r}; use e.g. 25GB/s,20us (units "
            f"{', '.join(_BANDWIDTH)}; latency {', '.join(_LATENCY)})"
        )
    try:
        bandwidth = float(match.group(1)) * _BANDWIDTH[match.group(2)]
        latency = None if match.group(3) is None else float(match.group(3))
    except ValueError:
        raise ServingError(f"{flag}: cannot read link {text!r}") from None
    if latency is None:
        raise ServingError(
            f"{flag}: {text.strip()!r} gives no latency; write BANDWIDTH,LATENCY, e.g. "
            f"{text.strip()},20us (0us for none: no latency is assumed)"
        )
    if match.group(4) not in _LATENCY:
        raise ServingError(
            f"{flag}: unknown latency unit {match.group(4)!r} (known: {', '.join(_LATENCY)})"
        )
    latency *= _LATENCY[match.group(4)]
    try:
        return Link(bandwidth, latency)
    except ServingError as exc:  # "link: ..." named by the flag instead
        raise ServingError(f"{flag}: {str(exc).removeprefix('link: ')}") from None
