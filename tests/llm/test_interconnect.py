"""Links between GPUs: point-to-point and ring-collective times, and parsing ``--link``."""

from __future__ import annotations

import pytest

from schedlab.errors import FormatError, ServingError
from schedlab.llm.interconnect import Link, parse_link


def test_times_by_hand():
    link = Link(16e9, 20e-6)  # 16 GB/s, 20 us
    # 1.6 MB point to point: 20 us + 100 us.
    assert link.transfer_s(1.6e6) == pytest.approx(120e-6)
    # Ring all-reduce of 1.6 MB over 2 ranks: 2 steps of (20 us + 0.8 MB / 16 GB/s = 50 us).
    assert link.all_reduce_s(1.6e6, 2) == pytest.approx(2 * 70e-6)
    # Over 4 ranks: 6 steps of (20 us + 0.4 MB / 16 GB/s = 25 us).
    assert link.all_reduce_s(1.6e6, 4) == pytest.approx(6 * 45e-6)
    assert link.all_gather_s(1.6e6, 4) == pytest.approx(3 * 45e-6)
    assert link.all_reduce_s(1.6e6, 1) == 0.0 and link.all_reduce_s(0.0, 4) == 0.0


def test_all_reduce_grows_with_size_and_ranks():
    link = Link(25e9, 5e-6)
    sizes = [1e3, 1e5, 1e7]
    for ranks in (2, 4, 8):
        times = [link.all_reduce_s(s, ranks) for s in sizes]
        assert times == sorted(times)
    assert link.all_reduce_s(1e7, 8) > link.all_reduce_s(1e7, 2)


@pytest.mark.parametrize(
    ("text", "bandwidth", "latency"),
    [
        ("16GB/s,20us", 16e9, 20e-6),
        (" 25 GB/s , 5 us ", 25e9, 5e-6),
        ("100Gb/s,0us", 12.5e9, 0.0),
        ("1TB/s,1000ns", 1e12, 1e-6),
        ("2GiB/s,1ms", 2 * 2**30, 1e-3),
    ],
)
def test_parse_link(text, bandwidth, latency):
    link = parse_link(text)
    assert link.bandwidth_Bps == pytest.approx(bandwidth)
    assert link.latency_s == pytest.approx(latency)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fast", "--link: cannot read link 'fast'"),
        ("16GB,20us", "cannot read link"),
        ("16GB/s,20days", "unknown latency unit 'days'"),
        ("0GB/s,1us", "bandwidth must be a finite number > 0"),
        ("1.2.3GB/s", "cannot read link"),
        ("", "--link: empty"),
        ("  ", "--link: empty"),
        ("25GB/s", r"'25GB/s' gives no latency; .*\(0us for none"),
        ("1e-30GB/s,1us", r"bandwidth must be from 1 MB/s to 10 TB/s"),
        ("11TB/s,1us", r"bandwidth must be from 1 MB/s to 10 TB/s"),
        ("25GB/s,2s", r"latency must be at most 1 s"),
    ],
)
def test_parse_link_errors_name_the_flag(text, message):
    with pytest.raises(ServingError, match=message):
        parse_link(text)


def test_round_trip_and_bad_dict():
    link = Link(16e9, 2e-5)
    assert Link.from_dict(link.to_dict(), "x") == link
    with pytest.raises(FormatError, match=r"model\.json: link"):
        Link.from_dict({"bandwidth_Bps": -1}, "model.json: link")
    with pytest.raises(FormatError, match=r"model\.json"):
        Link.from_dict({}, "model.json")
    with pytest.raises(ServingError, match="latency must be a finite number >= 0"):
        Link(1e9, -1.0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"bandwidth_Bps": 1e9}, "link: expected an object of bandwidth_Bps and latency_s"),
        (
            {"bandwidth_Bps": 1e9, "latency_s": 0, "jitter_s": 0},
            "link: expected an object of bandwidth_Bps and latency_s, and no other key",
        ),
        ({"bandwidth_Bps": "1e9", "latency_s": 0}, r"link\.bandwidth_Bps: expected a finite"),
        ({"bandwidth_Bps": 1e9, "latency_s": True}, r"link\.latency_s: expected a finite"),
        ({"bandwidth_Bps": 1e-30, "latency_s": 0}, "link: bandwidth must be from"),
    ],
)
def test_a_link_of_a_file_names_the_key(data, message):
    with pytest.raises(FormatError, match=rf"^model\.json: {message}"):
        Link.from_dict(data, "model.json: link")


def test_the_physical_range_is_inclusive():
    assert Link(1e6, 1.0).bandwidth_Bps == 1e6 and Link(1e13).latency_s == 0.0
