"""AttentionGrid: grid selection, exact interpolation, monotone chunk/context, extrapolation."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.calibration.attention_grid import AttentionGrid, parse_grid_spec, select_grid
from schedlab.calibration.profiles import read_llmservingsim_profile
from schedlab.errors import FormatError

from .conftest import attention_us

DECLARED = ([0, 16, 32, 64], [0, 1, 2, 4], [0, 16, 32, 64])


def test_parse_grid_spec():
    assert parse_grid_spec("0, 16-2048 x2") == [0, 16, 32, 64, 128, 256, 512, 1024, 2048]
    assert parse_grid_spec("1-10 x1.5") == [1, 2, 3, 5, 8]  # 1, 1.5, 2.25, 3.375, 5.06, 7.6
    for bad in ("0, 16-x2", "16-2048 x1", "16-1e308 x2", "16-inf x2", "16-nan x2", "0-64 x2"):
        with pytest.raises(FormatError, match="cannot read grid item"):
            parse_grid_spec(bad)
    assert len(parse_grid_spec("1-1e300 x2")) == 997  # up to 1,000 levels an item


def test_select_grid_drops_off_grid_rows(synthetic_profile):
    rows = read_llmservingsim_profile(synthetic_profile).attention
    # Without a declaration the rows at chunk 24/48 and 8 decodes make the grid incomplete;
    # the greedy selection drops those values and keeps the complete doubling grid.
    assert select_grid(rows) == ([0, 16, 32, 64], [0, 16, 32, 64], [0, 1, 2, 4], [16, 32, 64])
    assert select_grid(rows, DECLARED) == select_grid(rows)


def test_a_grid_with_a_hole_is_refused_where_asked(synthetic_profile):
    rows = read_llmservingsim_profile(synthetic_profile).attention
    point = (rows.prefill_chunk, rows.kv_prefill, rows.n_decode, rows.kv_decode)
    hole = ~np.logical_and.reduce([a == v for a, v in zip(point, (32, 16, 2, 32), strict=True)])
    assert (~hole).sum() == 1  # one mixed row of the grid left out
    holed = type(rows)(*(np.asarray(a)[hole] for a in dataclasses.astuple(rows)))
    # calibrate keeps the largest complete grid; an import refuses the hole, naming it
    assert select_grid(holed, DECLARED) != select_grid(rows, DECLARED)
    with pytest.raises(
        FormatError,
        match=r"a hole in the grid at prefill_chunk 32, kv_prefill 16, n_decode 2, kv_decode 32",
    ):
        select_grid(holed, DECLARED, holes_below=0.5)
    # levels mostly unmeasured (the 24/48 chunks, 8 decodes) are left out, not holes
    assert select_grid(rows, holes_below=0.5) == select_grid(rows)


def test_grid_is_exact_on_grid_points(synthetic_profile):
    rows = read_llmservingsim_profile(synthetic_profile).attention
    grid, used = AttentionGrid.fit(rows, DECLARED)
    assert (~used).sum() == 3  # the three off-grid rows are held out
    for c, p, n, k in [(16, 0, 0, 0), (32, 16, 2, 64), (64, 64, 4, 16), (0, 0, 1, 32)]:
        assert grid(c, p, n, k) == pytest.approx(attention_us(c, p, n, k))
    # Between grid points the interpolation is linear in each axis: the truth is linear in
    # n and k at fixed (c, p) without a chunk, so n = 3 is exact there.
    assert grid(0, 0, 3, 32) == pytest.approx(attention_us(0, 0, 3, 32))
    # A chunk below the smallest profiled one costs what that one costs.
    assert grid(5, 0, 0, 0) == pytest.approx(attention_us(16, 0, 0, 0))


def test_extrapolation_is_continuous_and_monotone(synthetic_profile):
    rows = read_llmservingsim_profile(synthetic_profile).attention
    grid, _ = AttentionGrid.fit(rows, DECLARED)
    at_edge = grid(64, 32, 2, 32)
    assert grid(64 + 1e-9, 32, 2, 32) == pytest.approx(at_edge)
    values = [grid(c, 32, 2, 32) for c in (64, 65, 100, 500, 5000)]
    assert all(b >= a for a, b in pairwise(values))
    values = [grid(64, 32, n, 32) for n in (4, 5, 8, 100)]
    assert all(b >= a for a, b in pairwise(values))


@settings(max_examples=150, deadline=None)
@given(
    c=st.integers(0, 5000),
    dc=st.integers(1, 3000),
    p=st.integers(0, 40000),
    dp=st.integers(0, 40000),
    n=st.integers(0, 300),
    k=st.floats(0, 40000),
)
def test_non_decreasing_in_chunk_and_context_everywhere(
    synthetic_profile_grid, c, dc, p, dp, n, k
):
    grid = synthetic_profile_grid
    assert grid(c + dc, p, n, k) >= grid(c, p, n, k) - 1e-9
    assert grid(c, p + dp, n, k) >= grid(c, p, n, k) - 1e-9


@pytest.fixture(scope="module")
def synthetic_profile_grid(tmp_path_factory):
    from .conftest import write_profile

    root = write_profile(tmp_path_factory.mktemp("grid") / "p")
    rows = read_llmservingsim_profile(root).attention
    # Perturb the measurements so the monotone projection has something to repair.
    noisy = dataclasses.replace(
        rows, time_us=rows.time_us * np.random.default_rng(0).uniform(0.7, 1.3, len(rows))
    )
    return AttentionGrid.fit(noisy, DECLARED)[0]


def test_round_trip_and_validation(synthetic_profile_grid):
    grid = synthetic_profile_grid
    again = AttentionGrid.from_dict(grid.to_dict(), "g")
    for point in [(0, 0, 3, 20), (40, 10, 2, 50), (3000, 9000, 200, 9000)]:
        assert again(*point) == pytest.approx(grid(*point), rel=1e-6)
    data = grid.to_dict()
    data["time_us"] = data["time_us"][:-1]
    with pytest.raises(FormatError, match="g:"):
        AttentionGrid.from_dict(data, "g")
    data = grid.to_dict()
    data["extrapolation_us"]["bogus"] = 1.0
    with pytest.raises(FormatError, match="bogus"):
        AttentionGrid.from_dict(data, "g")
