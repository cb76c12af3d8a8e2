"""SLOWeave's prefill replay (``schedlab.serving.prefill_replay``): a compiled model's own
replay is the reference's, step for step, on random replays and on every replay a
``deflect`` run asks for; and ``deflect`` routes the same with it as without it."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.calibration import shipped_model_path
from schedlab.errors import ServingError
from schedlab.serving.cluster import Cluster, parse_nodes, run_cluster
from schedlab.serving.cost_model import BatchShape, load_cost_model
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.policies import SLOWeavePolicy
from schedlab.serving.policy_registry import POLICIES, PolicySpec
from schedlab.serving.prefill_replay import PrefillReplay, replay_end_s, sloweave_replay_s
from schedlab.serving.scenario import Scenario
from schedlab.serving.workloads import make_workload

SHIPPED = ("rtxpro6000_llama-3.1-8b", "rtx4090_llama-3.1-8b")


@pytest.fixture(scope="module")
def models():
    """The shipped calibrated models (skew by bucket) and one without skew."""
    shipped = [load_cost_model(shipped_model_path(name)) for name in SHIPPED]
    return [*shipped, dataclasses.replace(shipped[0], skew=None)]  # type: ignore[type-var]


class _Plain:
    """A calibrated model seen only through ``iteration_time``: SLOWeave's search and the
    replay run in Python, one probe at a time."""

    def __init__(self, model) -> None:
        self.name, self.margin_s, self.decode_spread = model.name, model.margin_s, True
        self.hardware, self.deployment = model.hardware, model.deployment
        self._model = model

    def iteration_time(self, n_decode, decode_kv, chunks, **spread):
        return self._model.iteration_time(n_decode, decode_kv, chunks, **spread)

    def to_dict(self):
        return self._model.to_dict()


@st.composite
def replays(draw):
    n = draw(st.integers(0, 120))
    each = draw(st.integers(1, 6000))
    spread = draw(st.booleans())
    releases = sorted(
        (left, -(-final // 16), final)
        for left, final in draw(
            st.lists(st.tuples(st.integers(0, 40), st.integers(1, each + 50)), max_size=min(n, 12))
        )
    )
    queue = draw(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 12_000)), max_size=8))
    return PrefillReplay(
        BatchShape(
            n, n * each, (), each + 200 if spread else None, max(1, each - 200) if spread else None
        ),
        (*queue, (draw(st.integers(1, 6000)), 0)),
        tuple(releases),
        draw(st.floats(0.0, 100.0)),
        draw(st.floats(0.02, 0.3)),
        draw(st.sampled_from([0.0, 0.002])),
        draw(st.sampled_from([512, 2048, 8192])),
        draw(st.sampled_from([256, 1024, 4096])),
        since_s=0.0,
        beat_s=draw(st.sampled_from([math.inf, 1.0, 5.0, 100.5])),
    )


@settings(max_examples=150, deadline=None)
@given(pick=st.integers(0, 2), job=replays())
def test_the_compiled_replay_is_the_reference(models, pick, job):
    model = models[pick]
    reference = sloweave_replay_s(job, _Plain(model))
    assert model.replay_prefill_s(job) == reference
    assert replay_end_s(job, model) == reference
    assert sloweave_replay_s(job, model) == reference  # the compiled search alone


def test_a_replay_that_cannot_be_is_refused():
    decodes = BatchShape(1, 100, ())
    for queue in ((), ((5, 0), (0, 0))):
        with pytest.raises(ServingError, match="end with the prompt"):
            PrefillReplay(decodes, queue, (), 0.0, 0.1, 0.0, 2048, 4096)
    ok = PrefillReplay(decodes, ((5, 0),), ((1, 2, 20),), 0.0, 0.1, 0.0, 2048, 4096)
    for change, message in (
        ({"queue": ((5, 0, 1),)}, "queue rows"),
        ({"releases": ((1, 2),)}, "queue rows"),
        ({"releases": ((1, 2, 20), (2, 2, 30))}, "2 releases of 1 decodes"),
        ({"chunk_cap": 0}, "C_max"),
        ({"token_budget": 0}, "C_max"),
        ({"margin_s": -0.001}, "margin"),
        ({"tpot_s": 0.0}, "TPOT"),
    ):
        with pytest.raises(ServingError, match=message):
            dataclasses.replace(ok, **change)


def _deflect(model):
    """A ``deflect`` run on two decode nodes backed up with ``mixed`` prompts (queues of
    up to 69 requests), and the replays it asked for."""
    asked: list[PrefillReplay] = []

    def spy(job, model):
        asked.append(job)
        return replay_end_s(job, model)

    spied = dataclasses.replace(POLICIES["sloweave"], prefill_end=spy)
    engine = EngineConfig(kv_tokens=400_000, max_num_seqs=256, max_num_batched_tokens=2048)
    scenario = Scenario("sloweave", model, SLO(3.0, 0.1), engine, seed=2)
    spec = Cluster(parse_nodes("1P2D"), "deflect", scenario)
    stream = make_workload("mixed").generate(30.0, 15.0, 2)
    with POLICIES.temporarily("sloweave", spied, replace=True):
        return run_cluster(stream, spec), asked


def test_deflect_routes_the_same_with_the_compiled_replay(models):
    compiled, asked = _deflect(models[0])
    plain, asked_plain = _deflect(_Plain(models[0]))
    assert compiled.routes == plain.routes
    assert compiled.run.records == plain.run.records
    # the run exercised what it checks: long queues replayed, requests deflected
    assert len(asked) == len(asked_plain) and max(len(job.queue) for job in asked) > 50
    assert sum(route.then is None for route in compiled.routes) > 0
    for job in asked:  # every recorded routing replay, one by one
        assert models[0].replay_prefill_s(job) == sloweave_replay_s(job, _Plain(models[0]))


class _Mine(SLOWeavePolicy):
    """SLOWeave under a name of its own, as a policy of a user's package would be."""

    @property
    def name(self) -> str:
        return f"mine:{self._c_max}"


def _mine(estimate):
    def factory(spec, arg, ctx):
        return _Mine(ctx.model, ctx.tpot_s, c_max=int(arg or 2048), margin_s=ctx.margin_s)

    return PolicySpec(
        factory, "[:CMAX]", reads_margin=True, deadline_safe=True, prefill_end=estimate
    )


def _decode_routes(models, decode_policy):
    engine = EngineConfig(kv_tokens=400_000, max_num_seqs=256, max_num_batched_tokens=2048)
    scenario = Scenario("sloweave", models[0], SLO(3.0, 0.1), engine, seed=2)
    spec = Cluster(parse_nodes("1P2D"), "deflect", scenario, decode_policy=decode_policy)
    return run_cluster(make_workload("mixed").generate(30.0, 15.0, 2), spec).routes


def test_a_policy_offers_its_own_prefill_estimate(models):
    # deflect asks the decode node's policy for its estimate, with the cap of its name;
    # it never reads the policy's name otherwise
    caps = []

    def estimate(job, model):
        caps.append(job.chunk_cap)
        return replay_end_s(job, model)

    with POLICIES.temporarily("mine", _mine(estimate)):
        routes = _decode_routes(models, "mine:2048")
    assert caps and set(caps) == {2048}
    assert routes == _decode_routes(models, "sloweave:2048")
    # without an estimate, nothing goes whole to a decode node
    with POLICIES.temporarily("mine", _mine(None)):
        assert all(route.then is not None for route in _decode_routes(models, "mine:2048"))


class _Nameless(_Mine):
    @property
    def name(self) -> str:
        return "mine"


def test_an_estimate_needs_the_cap_in_the_policy_s_name(models):
    def factory(spec, arg, ctx):
        return _Nameless(ctx.model, ctx.tpot_s, c_max=2048, margin_s=ctx.margin_s)

    spec = dataclasses.replace(_mine(replay_end_s), factory=factory)
    with (
        POLICIES.temporarily("mine", spec),
        pytest.raises(ServingError, match="must end in ':CAP'"),
    ):
        _decode_routes(models, "mine")
