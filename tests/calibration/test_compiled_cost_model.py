"""The compiled calibrated cost model against its Python reference, and SLOWeave's
compiled search against the generic one (``schedlab.calibration.compiled_cost_model``)."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.calibration import shipped_model_path
from schedlab.calibration.fit import calibrate
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.skew import SkewTable
from schedlab.llm.interconnect import Link
from schedlab.llm.link_evidence import LinkEvidence
from schedlab.serving.cost_model import load_cost_model
from schedlab.serving.sloweave import SLOWeaveState, deadline_safe_chunk

from .conftest import write_profile

SHIPPED = ("rtxpro6000_llama-3.1-8b", "rtx4090_llama-3.1-8b")


@pytest.fixture(scope="module")
def models(tmp_path_factory, qwen_models_or_none):
    """Every shipped model, a calibrated synthetic one, its variants without skew and
    with a pooled skew, and (with the shared profiles) the Qwen3 models at tp1 and tp2,
    the MoE one also with experts spread over two GPUs and a link."""
    shipped = [load_cost_model(shipped_model_path(name)) for name in SHIPPED]
    synthetic = calibrate(
        write_profile(tmp_path_factory.mktemp("m") / "p"), "meta-llama/Llama-3.1-8B"
    )[0]
    found: list[ProfileCostModel] = [
        *shipped,  # type: ignore[list-item]
        synthetic,
        dataclasses.replace(synthetic, skew=None),
        dataclasses.replace(shipped[0], skew=SkewTable(0.4)),  # type: ignore[type-var]
        synthetic.deployed(host_s=1.5e-3),
    ]
    for model, _ in (qwen_models_or_none or {}).values():
        found.append(model)
        if model.experts is not None:
            found.append(
                model.deployed(link=LinkEvidence(Link(25e9, 10e-6), "measured", "a test"), ep=2)
            )
    return found


@pytest.fixture(scope="module")
def qwen_models_or_none(request):
    try:
        return request.getfixturevalue("qwen_models")
    except pytest.skip.Exception:
        return None


def test_the_models_cover_every_part(models, qwen_models_or_none):
    # skew by bucket and pooled, experts with and without expert parallelism, collectives
    assert any(m.skew is not None and m.skew.buckets for m in models)
    assert any(m.skew is not None and not m.skew.buckets for m in models)
    assert any(m.skew is None for m in models)
    assert any(m.host_s > 0 for m in models)
    if qwen_models_or_none is None:
        pytest.skip("../shared/data profiles are not present: no expert block, no tp2")
    assert any(m.experts is not None and m.parallelism.ep > 1 for m in models)
    assert any(m.experts is not None and m.parallelism.ep == 1 for m in models)
    assert any(m.parallelism.tp > 1 and m.parallelism.link is not None for m in models)


batches = st.tuples(
    st.integers(0, 400),  # decodes
    st.integers(0, 60_000),  # KV per decode
    st.lists(st.tuples(st.integers(0, 40_000), st.integers(0, 200_000)), max_size=4),
    st.one_of(st.none(), st.integers(0, 300_000)),  # longest decode's KV
    st.one_of(st.none(), st.integers(0, 60_000)),  # shortest decode's KV
)


@settings(max_examples=400, deadline=None)
@given(pick=st.integers(0, 10**6), batch=batches)
def test_compiled_time_is_the_reference_time(models, pick, batch):
    model = models[pick % len(models)]
    n, kv_each, chunks, longest, least = batch
    args = (n, n * kv_each, chunks)
    spread = {"decode_kv_max": longest, "decode_kv_min": least}
    compiled = model.iteration_time(*args, **spread)
    reference = model.reference_time(*args, **spread)
    assert math.isclose(compiled, reference, rel_tol=1e-9, abs_tol=0.0), (compiled, reference)


def test_compiled_time_on_the_grid_and_beyond_it(models):
    # the points the hypothesis search may miss: on grid lines, at the ends, far out
    for model in models:
        grid = model.attention
        for c in (*grid.chunks, grid.chunks[-1] * 3):
            for n in (*grid.decodes, grid.decodes[-1] * 2):
                for k in (grid.kvs[0], grid.kvs[-1], grid.kvs[-1] * 4):
                    chunks = ((int(c), int(grid.contexts[-1])),)
                    n = int(n)
                    args = (n, n * int(k), chunks)
                    for longest in (None, int(k) * 2):
                        kw = {"decode_kv_max": longest, "decode_kv_min": 1}
                        a, b = model.iteration_time(*args, **kw), model.reference_time(*args, **kw)
                        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0), (model.name, args)


class _OneByOne:
    """A model that only times batches: the generic search runs, probe by probe."""

    def __init__(self, model: ProfileCostModel, *, reference: bool) -> None:
        self.name, self.margin_s, self.decode_spread = model.name, model.margin_s, True
        self._time = model.reference_time if reference else model.iteration_time

    def iteration_time(self, n_decode, decode_kv, chunks, **spread):
        return self._time(n_decode, decode_kv, chunks, **spread)


states = st.builds(
    lambda n, kv_each, remaining, prior, fixed, budget_ms, longest, spread: SLOWeaveState(
        0.0,
        budget_ms / 1e3,
        n,
        n * kv_each,
        remaining,
        prior,
        tuple(fixed),
        None if longest is None else kv_each + longest,
        None if spread is None else max(0, kv_each - spread),
    ),
    st.integers(1, 300),
    st.integers(0, 20_000),
    st.integers(0, 9000),
    st.integers(0, 30_000),
    st.lists(st.tuples(st.integers(0, 2048), st.integers(0, 8192)), max_size=2),
    st.floats(1.0, 400.0),
    st.one_of(st.none(), st.integers(0, 40_000)),
    st.one_of(st.none(), st.integers(0, 20_000)),
)


@settings(max_examples=300, deadline=None)
@given(pick=st.integers(0, 10**6), state=states, c_max=st.integers(1, 8192))
def test_the_compiled_search_is_the_generic_search(models, pick, state, c_max):
    model = models[pick % len(models)]
    compiled = deadline_safe_chunk(state, model, c_max=c_max)
    generic = deadline_safe_chunk(state, _OneByOne(model, reference=False), c_max=c_max)
    assert compiled == generic
    # on the reference's times, the same chunk (a budget within rounding of a probe's time
    # could part them; the budgets drawn here never are) and the same time to rounding
    reference = deadline_safe_chunk(state, _OneByOne(model, reference=True), c_max=c_max)
    assert (reference.chunk, reference.evaluations, reference.deadline_miss) == (
        generic.chunk,
        generic.evaluations,
        generic.deadline_miss,
    )
    assert math.isclose(reference.predicted_s, generic.predicted_s, rel_tol=1e-9)


def test_a_pickled_model_packs_its_own_tables(models):
    # the jobs executor sends models to worker processes: no kernels travel with them
    model = models[0]
    before = model.iteration_time(3, 900, ((100, 50),), decode_kv_max=500, decode_kv_min=100)
    copy = pickle.loads(pickle.dumps(model))
    assert "_kernels" in model.__dict__ and "_kernels" not in copy.__dict__
    assert (
        copy.iteration_time(3, 900, ((100, 50),), decode_kv_max=500, decode_kv_min=100) == before
    )


def test_what_is_no_number_is_refused_in_one_line(models):
    from fractions import Fraction

    import numpy as np

    from schedlab.errors import InputTypeError

    model = models[0]
    # what the reference takes, the compiled model takes: NumPy integers, Fractions
    given = (np.int32(4), Fraction(4001), [(np.int64(100), 50)])
    assert model.iteration_time(*given) == model.reference_time(*given)
    for args, place in (
        (("4", 4000, [(100, 50)]), "n_decode"),
        ((4, 4000, [("a", 50)]), r"chunks\[0\]"),
        ((4, 4000, [(1,)]), r"chunks\[0\]"),
        ((4, 4000, 5), "chunks"),
    ):
        with pytest.raises(InputTypeError, match=f"iteration_time: {place}"):
            model.iteration_time(*args)
    with pytest.raises(InputTypeError, match="decode_kv_max"):
        model.iteration_time(4, 4000, [], decode_kv_max="x")
