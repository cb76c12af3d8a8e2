"""The link's evidence: nccl-tests output read and fitted, published figures, assumptions."""

from __future__ import annotations

import pytest

from schedlab.errors import FormatError
from schedlab.llm.interconnect import Link
from schedlab.llm.link_evidence import PUBLISHED_LINKS, link_for, link_given, read_nccl_tests

HEADER = """# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor)
#
# Using devices
#  Rank  0 Group  0 Pid   1001 on     host device  0 [0x01] GPU
#  Rank  1 Group  0 Pid   1002 on     host device  1 [0x02] GPU
#
#       size         count      type   redop    root     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)
"""


def nccl_output(link: Link, ranks: int = 2) -> str:
    """A made-up all_reduce_perf output whose times follow ``link`` exactly."""
    rows = []
    for exp in range(3, 28, 2):
        size = 2**exp
        us = link.all_reduce_s(size, ranks) * 1e6
        rows.append(
            f"{size:>12} {size // 4:>13}     float     sum      -1 {us:8.2f}   0.00   0.00"
            f"      0 {us:8.2f}   0.00   0.00      0"
        )
    ranks_lines = "".join(
        f"#  Rank {r:2d} Group  0 Pid   100{r} on     host device {r:2d} [0x0{r}] GPU\n"
        for r in range(2, ranks)
    )
    head = HEADER.replace("#\n#    ", ranks_lines + "#\n#    ", 1) if ranks > 2 else HEADER
    return head + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n"


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_fit_recovers_the_link(tmp_path, ranks):
    truth = Link(40e9, 6e-6)
    path = tmp_path / "ar.txt"
    path.write_text(nccl_output(truth, ranks))
    found = read_nccl_tests(path)
    assert found.kind == "measured" and f"over {ranks} ranks" in found.note
    assert found.link.bandwidth_Bps == pytest.approx(truth.bandwidth_Bps, rel=1e-3)
    assert found.link.latency_s == pytest.approx(truth.latency_s, rel=1e-2)
    assert link_given(str(path)).link == found.link


def test_bad_nccl_outputs_are_refused_by_name(tmp_path):
    path = tmp_path / "ar.txt"
    path.write_text("hello\n")
    with pytest.raises(FormatError, match=r"ar.txt: no '#  Rank N"):
        read_nccl_tests(path)
    path.write_text(HEADER + "         8             2     float     sum      -1     0.00\n")
    with pytest.raises(FormatError, match=r"ar.txt:\d+: time must be > 0"):
        read_nccl_tests(path)
    path.write_text(HEADER + "         8             2     float     sum      -1    10.00\n")
    with pytest.raises(FormatError, match="at least two message sizes"):
        read_nccl_tests(path)
    falling = "".join(
        f"{s:>12} 2 float sum -1 {t:8.2f}\n" for s, t in ((8, 50.0), (1 << 20, 10.0))
    )
    path.write_text(HEADER + falling)
    with pytest.raises(FormatError, match="do not grow with the message size"):
        read_nccl_tests(path)


def test_published_and_assumed_links():
    published = link_for("RTXPRO6000")
    assert published.kind == "published" and published.link == PUBLISHED_LINKS["RTXPRO6000"].link
    assert "voipmonitor/rtx6kpro" in published.note
    assumed = link_for("MI300X")
    assert assumed.kind == "assumed" and assumed.note.startswith("link ASSUMED")
    given = link_given("25GB/s,5us")
    assert given.kind == "measured" and given.link.bandwidth_Bps == 25e9
    assert given.link.latency_s == pytest.approx(5e-6)
