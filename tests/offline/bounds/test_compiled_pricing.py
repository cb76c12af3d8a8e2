"""The compiled pricing of the time-indexed LP against its NumPy reference.

:mod:`schedlab.offline.bounds.compiled_pricing` claims the same minima and the same
minimising starts, bit for bit, so the column generation adds the same columns and ends
at the same bound.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.budget import Budget, Expired
from schedlab.errors import InputError
from schedlab.offline.bounds.time_indexed import (
    lp_relaxation,
    price_starts,
    uniform_blocks,
)
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from schedlab.testing import instances

SHIPPED = sorted((Path(__file__).resolve().parents[3] / "instances").glob("*.json"))


def _prices(data: st.DataObject, count: int) -> np.ndarray:
    """Block prices: zeros, tiny and large values mixed (ties and flat pieces included)."""
    value = st.one_of(st.just(0.0), st.floats(0, 1e-3), st.floats(0, 5), st.just(0.25))
    return np.array(data.draw(st.lists(value, min_size=count, max_size=count)))


@settings(max_examples=200, deadline=None)
@given(
    instances(max_n=6, max_kv_tokens=40, max_output=30, max_arrival=60),
    st.integers(1, 400),
    st.integers(1, 40),
    st.data(),
)
def test_compiled_pricing_equals_the_reference(
    inst: Instance, horizon: int, blocks: int, data: st.DataObject
) -> None:
    # dense (few rounds a block) and sparse (breakpoints and vertices) cases both arise
    bounds = uniform_blocks(horizon, blocks)
    mu = _prices(data, len(bounds) - 1)
    best, arg = price_starts(inst, bounds, mu, engine="python")
    fast_best, fast_arg = price_starts(inst, bounds, mu, engine="compiled")
    assert fast_best.tolist() == best.tolist()  # bit for bit
    assert fast_arg.tolist() == arg.tolist()


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_compiled_pricing_equals_the_reference_on_shipped_instances(path: Path) -> None:
    inst = read_instance(path)
    horizon = int((inst.arrival + inst.output).max()) * 4
    rng = np.random.default_rng(7)
    for blocks in (3, 300):
        bounds = uniform_blocks(horizon, blocks)
        mu = rng.random(len(bounds) - 1) * (rng.random(len(bounds) - 1) < 0.7)
        reference = price_starts(inst, bounds, mu, engine="python")
        compiled = price_starts(inst, bounds, mu, engine="compiled")
        assert compiled[0].tolist() == reference[0].tolist()
        assert compiled[1].tolist() == reference[1].tolist()


SMALL_SHIPPED = [p for p in SHIPPED if read_instance(p).n <= 200]


@pytest.mark.parametrize("path", SMALL_SHIPPED, ids=[p.stem for p in SMALL_SHIPPED])
def test_the_lp_adds_the_same_columns_and_gives_the_same_bound(path: Path) -> None:
    # mixed-n1000 too in benchmarks/pricing_speed.py (about two minutes by the reference)
    inst = read_instance(path)
    reference = lp_relaxation(inst, max_rounds=400, engine="python")
    compiled = lp_relaxation(inst, max_rounds=400, engine="compiled")
    assert compiled.value == reference.value
    assert compiled.stats["history"] == reference.stats["history"]
    assert compiled.stats["columns"] == reference.stats["columns"]
    assert compiled.mean_start.tolist() == reference.mean_start.tolist()


def test_a_cut_between_chunks_raises_as_the_reference_does(
    cut_after: Callable[[int], Budget],
) -> None:
    inst = Instance.from_arrays(50, [1] * 3000, [2] * 3000)
    bounds = uniform_blocks(4000, 300)  # sparse: 4,515 candidates a request, 885 a chunk
    mu = np.full(len(bounds) - 1, 0.01)
    for engine in ("python", "compiled"):
        with pytest.raises(Expired):
            price_starts(inst, bounds, mu, cut_after(2), engine=engine)


def test_an_unknown_engine_is_refused() -> None:
    inst = Instance.from_arrays(10, [1], [2])
    with pytest.raises(InputError, match="price_starts: engine must be one of"):
        price_starts(inst, uniform_blocks(5, 5), np.zeros(5), engine="fortran")
