"""The strategies draw what they promise: feasible instances and fitting traces, engines
schedlab accepts, monotone cost models, and every degenerate case."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from schedlab import testing
from schedlab.errors import InputError
from schedlab.offline.instance import Instance
from schedlab.serving.cost_model import check_monotone
from schedlab.serving.engine_config import EngineConfig
from schedlab.testing import cost_models, engine_configs, instances, traces


@settings(max_examples=100, deadline=None)
@given(instances(max_n=6, max_kv_tokens=20, max_arrival=4, max_output=7))
def test_instances_fit_their_bounds(instance):
    assert 1 <= instance.n <= 6 and 1 <= instance.kv_tokens <= 20
    assert (instance.prompt + instance.output <= instance.kv_tokens).all()
    assert (instance.output >= 1).all() and (instance.output <= 7).all()
    assert (instance.arrival >= 0).all() and (instance.arrival <= 4).all()


def test_instances_reach_every_degenerate_case():
    find(instances(), lambda i: i.kv_tokens == 1)
    find(instances(), lambda i: i.n == 1)
    find(instances(), lambda i: i.n > 2 and len(set(i.requests)) == 1)
    find(instances(), lambda i: (i.prompt + i.output == i.kv_tokens).all() and i.kv_tokens > 5)
    find(instances(), lambda i: i.n > 2 and (i.arrival == 0).all())
    find(instances(), lambda i: len(set(i.arrival.tolist())) > 2)
    assert not find(instances(max_arrival=0), lambda i: i.n > 3).arrival.any()


@settings(max_examples=100, deadline=None)
@given(engine_configs(), traces(max_tokens=50))
def test_traces_fit_and_engines_are_valid(config, stream):
    assert (stream.prompt + stream.output - 1 <= 50).all()
    assert (np.diff(stream.arrival_s) >= 0).all()
    assert config.max_num_batched_tokens >= config.max_num_seqs
    assert config.total_blocks >= 2


def test_traces_reach_every_degenerate_case():
    find(traces(), lambda s: len(s) == 1)
    find(traces(), lambda s: len(s) > 2 and (s.arrival_s == 0).all())
    find(traces(), lambda s: len(s) > 2 and (s.output == 1).all() and (s.prompt == 1).all())
    find(traces(max_tokens=30), lambda s: len(s) > 1 and (s.prompt + s.output - 1 == 30).all())
    find(engine_configs(), lambda c: c.async_scheduling and not c.reserve_full_prompt)


@settings(max_examples=40, deadline=None)
@given(cost_models())
def test_cost_models_are_monotone(model):
    assert check_monotone(model, c_max=300, n_decodes=(0, 1, 7), priors=(0, 500)) == []
    # and non-decreasing in the decodes and their KV
    times = [
        model.iteration_time(n, kv, ((64, 0),))
        for n, kv in itertools.product((0, 1, 5), (0, 100, 10_000))
    ]
    assert all(t > 0 for t in times)
    for n in range(3):
        row = times[3 * n : 3 * n + 3]
        assert row == sorted(row)
    assert times[0::3] == sorted(times[0::3])


def test_shapes_can_be_chosen():
    largest = find(instances(shapes=["largest"]), lambda i: i.n > 2)
    assert (largest.prompt + largest.output == largest.kv_tokens).all()
    with pytest.raises(InputError, match="shapes: expected some of mixed, identical, largest"):
        find(traces(shapes=["tall"]), lambda s: True)


@given(st.from_type(Instance), st.from_type(EngineConfig))
def test_from_type_draws_the_strategies(instance, config):
    # registered by hypothesis's setup hook (schedlab.testing.registration)
    assert isinstance(instance, Instance) and isinstance(config, EngineConfig)
    assert (instance.prompt + instance.output).max() <= instance.kv_tokens


def test_every_public_name_is_listed():
    assert set(testing.__all__) <= set(dir(testing))


def test_without_hypothesis_a_strategy_says_how_to_get_it():
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import schedlab.testing as t\n"
        "t.check_schedule  # the checks need no hypothesis\n"
        "try:\n"
        "    t.instances\n"
        "except ModuleNotFoundError as error:\n"
        "    print(error.name, '|', error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == (
        "hypothesis | schedlab.testing.instances needs hypothesis, which is not installed: "
        "pip install hypothesis (or schedlab's test extra)"
    )
