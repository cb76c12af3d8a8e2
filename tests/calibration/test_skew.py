"""The per-bucket decode-skew table: labels, lookup, interpolation in pc, fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from schedlab.calibration.profiles import SkewRows
from schedlab.calibration.skew import DEFAULT_AXES, SkewTable
from schedlab.errors import FormatError


def rows(entries):
    """SkewRows from ``(pc, n, sr, kv, kp, alpha, samples)`` tuples."""
    pc, n, sr, kv, kp, alpha, samples = zip(*entries, strict=True)
    return SkewRows(
        np.array(pc, dtype=float),
        tuple(n),
        tuple(sr),
        tuple(kv),
        tuple(kp),
        np.array(alpha, dtype=float),
        np.array(samples, dtype=float),
    )


def test_labels_by_hand():
    table = SkewTable(0.1)
    # 3 decodes of mean 1,000, shortest 200, longest 2,000: skew rate 800 / 1,800 = 0.44
    # (bin (0.4, 0.7]); n = 3 in (2, 4]; longest 2,000 in (1k, 4k]; no prefill context.
    assert table.labels(3, 1000.0, 200, 2000, 0) == ("n<=4", "sr<=70%", "kvB<=4k", "kp=0")
    # Bins are right-inclusive: n = 2 is "n<=2", kv_big = 1,024 "kvB<=1k", kp = 512
    # "kp<=512"; the rate is 88 / 512 = 0.17, in (0.15, 0.4].
    assert table.labels(2, 600.0, 512, 1024, 512) == ("n<=2", "sr<=40%", "kvB<=1k", "kp<=512")
    # Equal decodes: rate 0.
    assert table.labels(8, 100.0, 100, 100, 9000)[1] == "sr<=5%"


def test_lookup_interpolates_in_pc_and_falls_back():
    labels = ("n<=4", "sr<=70%", "kvB<=4k", "kp<=512")
    table = SkewTable.from_rows(
        rows(
            [
                (0, *labels, 0.3, 5),
                (64, *labels, 0.2, 5),
                (256, *labels, 0.6, 5),
                (128, "n<=8", "sr<=70%", "kvB<=4k", "kp<=512", 0.9, 5),
            ]
        ),
        0.05,
        None,
    )
    batch = (3, 1000.0, 200, 2000)  # n, mean, least, longest: the labels above with kp 100
    assert table.alpha(0, 100, *batch) == 0.3  # decode-only: pc = 0 exactly
    assert table.alpha(64, 100, *batch) == 0.2  # a profiled pc
    # pc = 32 lies between the profiled 0 and 64: 0.3 + (32 / 64) (0.2 - 0.3) = 0.25.
    assert table.alpha(32, 100, *batch) == pytest.approx(0.25)
    # pc = 96 lies between 64 and 128, and only 64 has these labels: its alpha alone;
    # likewise pc = 160 between 128 and 256, and beyond the last profiled pc.
    assert table.alpha(96, 100, *batch) == 0.2
    assert table.alpha(160, 100, *batch) == 0.6
    assert table.alpha(4000, 100, *batch) == 0.6
    # Six decodes ("n<=8"): only pc = 128 has that bucket.
    assert table.alpha(100, 100, 6, 1000.0, 200, 2000) == 0.9
    # No bucket with these labels at all: the pooled alpha.
    assert table.alpha(64, 100, 3, 1000.0, 200, 40000) == 0.05


def test_clipping_and_the_default_alpha():
    labels = ("n<=4", "sr<=70%", "kvB<=4k", "kp<=512")
    data = rows([(0, *labels, -735.0, 2), (64, *labels, 27.0, 6)])
    table = SkewTable.from_rows(data, None, None)
    assert sorted(table.buckets.values()) == [0.0, 1.0]  # clipped to [0, 1]
    # Without a pooled alpha: the clipped alphas' mean weighted by samples, (0*2 + 1*6) / 8.
    assert table.default == pytest.approx(0.75)
    assert SkewTable(0.2).alpha(64, 0, 3, 1000.0, 200, 2000) == 0.2  # no buckets: pooled
    with pytest.raises(ValueError, match=r"default alpha must be in \[0, 1\]"):
        SkewTable(1.5)


def test_round_trip_and_errors():
    labels = ("n<=4", "sr<=70%", "kvB<=4k", "kp<=512")
    table = SkewTable.from_rows(rows([(64, *labels, 0.2, 5)]), 0.05, DEFAULT_AXES)
    again = SkewTable.from_dict(table.to_dict(), "x")
    assert again == table and again.alpha(64, 100, 3, 1000.0, 200, 2000) == 0.2
    assert SkewTable.from_dict({"alpha": 0.3}, "x").default == 0.3  # older files
    with pytest.raises(FormatError, match=r"model\.json: skew"):
        SkewTable.from_dict({"alpha_default": 0.1, "axes": {"n_bins": [0]}}, "model.json: skew")
    with pytest.raises(FormatError, match="expected an object"):
        SkewTable.from_dict([1], "x")
