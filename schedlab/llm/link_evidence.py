r"""Where a :class:`~schedlab.llm.interconnect.Link`'s figures come from: a measurement.

The collectives of tensor and expert parallelism are not in a kernel profile (the
profiler runs a TP-:math:`t` rank on one GPU with its widths divided by :math:`t`:
``meta.yaml``'s ``engine_effective.tensor_parallel_size`` is 1), so their time needs
evidence of its own. Two kinds are read, first found first used:

1. **A measurement the user supplies**: the text output of nccl-tests' ``all_reduce_perf``
   on the deployment's GPUs (:func:`read_nccl_tests`). Its rows give the out-of-place time
   :math:`t(S)` of an all-reduce of :math:`S` bytes over :math:`N` ranks (one ``# Rank``
   line per rank). The ring model of :mod:`schedlab.llm.interconnect`,
   :math:`t(S) = 2(N-1)\ell + \frac{2(N-1)}{N\beta} S`, is fitted to them by non-negative
   least squares on relative error, and the fit's own error is reported.
2. **Published measurements** for the GPU's link (:data:`PUBLISHED_LINKS`, each with its
   source and the ends of its range).

Where neither exists the link is an *assumption*, and every caller says so in its
output. Published and assumed links carry the ends of their evidence
(:attr:`LinkEvidence.ends`), at which a replay shows every metric as a band. A machine
file (:mod:`schedlab.calibration.machine_file`) ranks between the two kinds: after the
user's measurement, before a published one. LLMServingSim's ``config.json``
``link_bw``/``link_latency`` are settings of that simulator's network model, not
measurements, and are never read as a link.

What vLLM sends (vLLM 0.19.0): each decoder layer all-reduces its activations twice, after
the attention output projection and after the MLP (``RowParallelLinear`` with
``reduce_results``, ``vllm/model_executor/layers/linear.py`` lines 1531–1532; a
mixture-of-experts layer all-reduces its expert block's output instead,
``vllm/model_executor/models/qwen3_moe.py`` lines 249–252), :math:`N h b` bytes for
:math:`N` tokens of hidden size :math:`h` at :math:`b` bytes. With expert parallelism the
default all-to-all (``all2all_backend = "allgather_reducescatter"``,
``vllm/config/parallel.py`` line 160) all-gathers every replica's tokens before the expert
block and reduce-scatters them after it (``AgRsAll2AllManager.dispatch`` and ``combine``,
``vllm/distributed/device_communicators/all2all.py`` lines 218 and 245). On two GPUs over
PCIe with peer-to-peer access the all-reduce is vLLM's own one-shot kernel below 8 MiB,
:math:`\ell + S/\beta` (:meth:`~schedlab.llm.interconnect.Link.tensor_all_reduce_s`);
the expert-parallel all-gather and reduce-scatter go to NCCL over the data-parallel group
(``all2all.py`` lines 159–191 and 233–246).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab.errors import FormatError, ServingError
from schedlab.json_files import read_text
from schedlab.llm.interconnect import Link, parse_link

__all__ = [
    "EVIDENCE_KINDS",
    "PUBLISHED_LINKS",
    "LinkEvidence",
    "PublishedLink",
    "link_for",
    "link_given",
    "read_nccl_tests",
]


@dataclass(frozen=True)
class PublishedLink:
    """Published measurements of a GPU's link, reduced to a :class:`Link` and the ends of
    their range.

    Attributes
    ----------
    link
        Bandwidth :math:`\\beta` and per-step latency :math:`\\ell`: the point estimate.
    slow, fast
        The slow and fast ends of the published range (lowest bandwidth with the highest
        latency, and the reverse).
    what
        The link measured.
    source
        Where the figures were published, and how :math:`\\ell` and :math:`\\beta` follow
        from them.
    """

    link: Link
    slow: Link
    fast: Link
    what: str
    source: str


#: Published link measurements by the ``hardware`` name profiles use. No two-GPU
#: all-reduce of this card is published; the nearest evidence of the operation modelled
#: (an all-reduce's bus bandwidth, not a copy's) is an eight-GPU one, and a copy bounds
#: it from above.
PUBLISHED_LINKS: dict[str, PublishedLink] = {
    "RTXPRO6000": PublishedLink(
        Link(39.65e9, 7.5e-6),
        Link(22.2e9, 28e-6),
        Link(54e9, 7.5e-6),
        "PCIe 5.0 x16 peer-to-peer between RTX PRO 6000 Blackwell GPUs (no NVLink)",
        "voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md (commit 070506f): NCCL "
        "all_reduce_perf bus bandwidth of eight such GPUs 37.6-41.7 GB/s tuned, 22.2 GB/s "
        "with NCCL's defaults at 32 MB; unidirectional P2P copy 53-56 GB/s (a bound from "
        "above); a small all-reduce 7.5 us by a custom peer-to-peer kernel, 24-28 us by "
        "NCCL. beta = 39.65 GB/s (the tuned range's middle), band 22.2-54 GB/s; l = 7.5 us "
        "(vLLM's one-shot kernel's small-message time), band 7.5-28 us",
    ),
}


#: The kinds of evidence of a link, strongest first (:class:`LinkEvidence`).
EVIDENCE_KINDS = ("measured", "machine", "published", "assumed")


@dataclass(frozen=True)
class LinkEvidence:
    """A link and what it rests on.

    Attributes
    ----------
    link
        The link.
    kind
        ``measured`` (the user's table or figures), ``machine`` (a machine file,
        :mod:`schedlab.calibration.machine_file`), ``published`` or ``assumed``.
    note
        One line saying where the figures came from.
    ends
        The slow and fast ends of the evidence (``None``: a measurement, no band).
    """

    link: Link
    kind: str
    note: str
    ends: tuple[Link, Link] | None = None

    def at_ends(self) -> tuple[LinkEvidence, LinkEvidence]:
        """The link at the slow and at the fast end of its evidence (itself at both when
        it has no band)."""
        if self.ends is None:
            return self, self
        slow, fast = self.ends
        return (
            LinkEvidence(slow, self.kind, f"the slow end of: {self.note}"),
            LinkEvidence(fast, self.kind, f"the fast end of: {self.note}"),
        )


_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([0-9.eE+-]+)(?:\s|$)")


def read_nccl_tests(path: str | Path) -> LinkEvidence:
    """The link fitted to an nccl-tests ``all_reduce_perf`` output (module docstring).

    Raises
    ------
    FormatError
        Naming the file, if it has no ``# Rank`` lines, fewer than two data rows of
        distinct sizes, times that are not positive, or a fitted link out of the range
        of :class:`~schedlab.llm.interconnect.Link`.
    """
    path = Path(path)
    text = read_text(path, "nccl-tests output", 2**24)
    ranks = sum(1 for line in text.splitlines() if re.match(r"^#\s*Rank\s+\d+", line))
    lines = enumerate(text.splitlines(), 1)
    rows = [(line_no, m) for line_no, line in lines if (m := _ROW.match(line))]
    if ranks < 2:
        raise FormatError(
            f"{path}: no '#  Rank N ...' lines for two or more ranks: is this the output of "
            "nccl-tests' all_reduce_perf?"
        )
    sizes, times = [], []
    for line_no, match in rows:
        size, seconds = float(match.group(1)), float(match.group(3)) * 1e-6
        if not seconds > 0:
            raise FormatError(f"{path}:{line_no}: time must be > 0, got {match.group(3)}")
        sizes.append(size)
        times.append(seconds)
    if len(set(sizes)) < 2:
        raise FormatError(f"{path}: needs rows of at least two message sizes, found {len(rows)}")
    from scipy.optimize import nnls

    s, t = np.array(sizes), np.array(times)
    weight = 1.0 / t
    (a, b), _ = nnls(np.column_stack([np.ones_like(s), s]) * weight[:, None], t * weight)
    if not (a > 0 and b > 0):
        raise FormatError(
            f"{path}: the times do not grow with the message size as an all-reduce's do"
        )
    steps = 2 * (ranks - 1)
    try:
        link = Link(steps / (ranks * b), a / steps)
    except ServingError as exc:  # a fit out of the physical range
        raise FormatError(f"{path}: the fitted {exc}") from None
    fitted = a + b * s
    worst = float(np.max(np.abs(fitted - t) / t) * 100)
    return LinkEvidence(
        link,
        "measured",
        f"link {link.describe()} a step: fitted to {len(s)} all_reduce_perf rows over "
        f"{ranks} ranks in {path} (worst relative error of the fit {worst:.1f} %)",
    )


def link_for(hardware: str) -> LinkEvidence:
    """The published link of ``hardware``, else the most similar published one as an
    explicit assumption."""
    published = PUBLISHED_LINKS.get(hardware)
    if published is not None:
        return LinkEvidence(
            published.link,
            "published",
            f"link: {published.what}; {published.source}",
            (published.slow, published.fast),
        )
    name, fallback = next(iter(PUBLISHED_LINKS.items()))
    return LinkEvidence(
        fallback.link,
        "assumed",
        f"link ASSUMED: no measurement for {hardware or 'this GPU'}; the published {name} "
        f"figures are used ({fallback.what}): give a measured one with --link (nccl-tests "
        "all_reduce_perf output, or BW,LATENCY) or a machine file with --machine",
        (fallback.slow, fallback.fast),
    )


def link_given(text: str, flag: str = "--link") -> LinkEvidence:
    """A link given on the command line: an nccl-tests output file, or ``BW,LATENCY``
    (:func:`~schedlab.llm.interconnect.parse_link`), the user's own measurement."""
    if Path(text).is_file():
        return read_nccl_tests(text)
    link = parse_link(text, flag)
    return LinkEvidence(
        link,
        "measured",
        f"link {link.describe()} a step ({flag})",
    )
