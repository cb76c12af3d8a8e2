"""``lower_bound``: ``best`` is the largest valid bound, names are checked, time is kept."""

from __future__ import annotations

import time

import pytest

from schedlab.errors import HorizonError, UnknownNameError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import lower_bound
from schedlab.offline.instance import Instance
from schedlab.offline.instance_io import read_instance
from tests.conftest import INSTANCES


def test_best_is_the_largest_method() -> None:
    inst = read_instance(INSTANCES / "tiny-2.json")
    best = lower_bound(inst, "best", time_limit=10)
    values = best.stats["values"]
    assert best.value == max(values.values())
    assert best.method == max(values, key=values.get)
    assert best.value <= inst.meta["optimum"]


def test_unknown_method_lists_known_ones() -> None:
    inst = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(UnknownNameError, match="volume"):
        lower_bound(inst, "nonsense")


def test_best_keeps_a_short_time_limit() -> None:
    inst = mixed_backlog(200, seed=1)
    began = time.perf_counter()
    bound = lower_bound(inst, "best", time_limit=2.0)
    assert time.perf_counter() - began < 6.0  # 2 s, plus one LP solve/pricing in flight
    assert bound.value >= bound.stats["values"]["volume"]


def test_best_goes_on_without_the_methods_a_long_horizon_rules_out() -> None:
    # one request at a time (each peaks above M / 2): 6 million rounds for the LP's arrays
    inst = Instance.from_arrays(2_000_001, [1] * 3, [2_000_000] * 3)
    with pytest.raises(HorizonError, match=r"^time-indexed LP: the horizon is 6,000,000"):
        lower_bound(inst, "completion-spacing")
    best = lower_bound(inst)
    assert best.stats["skipped"] == ["completion-spacing"]
    assert best.value == 12_000_000  # tall-chain: they finish 2, 4 and 6 million rounds in
