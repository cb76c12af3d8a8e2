"""The one registry type, held to the same behaviour in each of schedlab's nine registries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from schedlab.calibration.profile_table import PROFILE_READERS, ProfileReader, read_timing_table
from schedlab.errors import (
    InputTypeError,
    PredictionError,
    RegistrationError,
    UnknownNameError,
)
from schedlab.offline.bounds import BOUNDS, BoundMethod, trivial_bound
from schedlab.offline.solvers import SOLVERS, SolverInfo
from schedlab.predictions import PREDICTION_MODELS, Intervals, PredictionModel, predict
from schedlab.registry import Registry
from schedlab.serving.cost_model import COST_MODEL_KINDS
from schedlab.serving.engine_kinds import BUILTIN_KIND, ENGINE_KINDS, engine_kind_names
from schedlab.serving.policy_registry import POLICIES, PolicySpec
from schedlab.serving.routers import ROUTERS, RouterSpec, round_robin
from schedlab.serving.workloads import WORKLOADS, WorkloadSpec
from tests.plugins.installed import write_dist_info


def _half(true: np.ndarray, fields: tuple[str, ...], seed: int, where: str) -> Intervals:
    """A prediction model of a user's own: half the true length, at least 1."""
    points = np.maximum(true // 2, 1)
    return Intervals(points, points, "half", exact=False)


#: Each registry with a valid new entry for it under a given name.
REGISTRIES: dict[str, tuple[Registry[Any], Callable[[str], Any]]] = {
    "solvers": (SOLVERS, lambda name: SolverInfo(name, SOLVERS["fcfs"].fn)),
    "bounds": (BOUNDS, lambda name: BoundMethod(name, trivial_bound, in_best=False)),
    "policies": (POLICIES, lambda name: PolicySpec(POLICIES["vllm"].factory)),
    "routers": (ROUTERS, lambda name: RouterSpec(round_robin, "test")),
    "workloads": (WORKLOADS, lambda name: WorkloadSpec("test", WORKLOADS["chat"].factory)),
    "cost model kinds": (COST_MODEL_KINDS, lambda name: lambda data, where: None),
    "profile readers": (PROFILE_READERS, lambda name: ProfileReader("test", read_timing_table)),
    "engine kinds": (ENGINE_KINDS, lambda name: lambda scenario, **settings: None),
    "prediction models": (PREDICTION_MODELS, lambda name: PredictionModel(name, (0, 0), _half)),
}


@pytest.fixture(params=sorted(REGISTRIES))
def registry(request: pytest.FixtureRequest) -> tuple[Registry[Any], Callable[[str], Any]]:
    return REGISTRIES[request.param]


def test_every_registry_is_one(registry) -> None:
    table, _ = registry
    assert isinstance(table, Registry) and table.group.startswith("schedlab.")
    assert table.registered() == ()  # no test left an entry behind


def test_register_get_and_unregister(registry) -> None:
    table, make = registry
    entry = make("test-entry")
    table.register("test-entry", entry)
    try:
        assert table.get("test-entry") is entry and table["test-entry"] is entry
        assert "test-entry" in table and "test-entry" in table.names()
        assert table.registered() == ("test-entry",)
        with pytest.raises(RegistrationError, match=r"'test-entry' is already registered$"):
            table.register("test-entry", entry)
    finally:
        assert table.unregister("test-entry") is entry
    assert "test-entry" not in table
    with pytest.raises(UnknownNameError, match=r"unknown registered .* 'test-entry'"):
        table.unregister("test-entry")


def test_a_name_nobody_knows_lists_the_known_ones(registry) -> None:
    table, _ = registry
    with pytest.raises(UnknownNameError) as caught:
        table.get("no-such-entry")
    assert caught.value.known == tuple(sorted(table.names()))
    assert f"unknown {table.kind} 'no-such-entry'; known: " in str(caught.value)


@pytest.mark.parametrize("name", ["", "  ", "a:b"])
def test_a_name_that_cannot_be_spelt_is_refused(registry, name: str) -> None:
    table, make = registry
    with pytest.raises(RegistrationError, match="cannot be registered"):
        table.register(name, make(name))
    with pytest.raises(InputTypeError, match="name: expected a string"):
        table.register(3, make("three"))  # type: ignore[arg-type]


def test_an_entry_of_another_kind_is_refused(registry) -> None:
    table, _ = registry
    with pytest.raises(InputTypeError, match="'test-entry': expected a "):
        table.register("test-entry", 3.5)
    assert "test-entry" not in table


def test_a_temporary_entry_leaves_no_trace(registry) -> None:
    table, make = registry
    before = table.names()
    with table.temporarily("test-entry", make("test-entry")) as entry:
        assert table.get("test-entry") is entry
    assert table.names() == before
    with pytest.raises(ZeroDivisionError), table.temporarily("test-entry", make("test-entry")):
        1 / 0  # noqa: B018
    assert table.names() == before


def test_a_built_in_stays_and_is_only_stood_in_for(registry) -> None:
    table, make = registry
    builtins = table.entries()
    if not builtins:  # engine kinds: the built-in kind is no entry, and no name of one
        assert table is ENGINE_KINDS and engine_kind_names()[0] == BUILTIN_KIND
        with pytest.raises(RegistrationError, match="cannot be registered"):
            table.register(BUILTIN_KIND, make(BUILTIN_KIND))
        return
    name, original = next(iter(builtins.items()))
    with pytest.raises(RegistrationError, match=f"'{name}' is built in: it stays"):
        table.unregister(name)
    stand_in = make(name)
    with table.temporarily(name, stand_in, replace=True):
        assert table.get(name) is stand_in
    assert table.get(name) is original and table.names()[0] == name
    with (
        pytest.raises(UnknownNameError),
        table.temporarily("no-such-entry", stand_in, replace=True),
    ):
        pass


def test_best_is_no_bound_to_register() -> None:
    with pytest.raises(RegistrationError, match="bound name 'best': cannot be registered"):
        BOUNDS.register("best", BoundMethod("best", trivial_bound))


def test_a_registered_prediction_model_is_a_spec_like_the_built_in_ones() -> None:
    outputs = np.array([10, 3, 1])
    with PREDICTION_MODELS.temporarily("half", PredictionModel("half", (0, 0), _half)):
        drawn = predict("half", outputs)
        assert drawn.lower.tolist() == [5, 1, 1] and not drawn.exact
        with pytest.raises(PredictionError, match="expected half, got 'half:2'"):
            predict("half:2", outputs)
    with pytest.raises(PredictionError, match="unknown prediction model 'half'; known: perfect"):
        predict("half", outputs)


def test_an_installed_prediction_model_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the entry-point group works for every registry, the newest too
    package = tmp_path / "schedlab_half_model.py"
    package.write_text(
        "from tests.test_registry import _half\n"
        "from schedlab.predictions import PredictionModel\n"
        "MODEL = PredictionModel('installed-half', (0, 0), _half)\n",
        encoding="utf-8",
    )
    groups = {"schedlab.prediction_models": {"installed-half": "schedlab_half_model:MODEL"}}
    write_dist_info(tmp_path, "schedlab-half-model", "1.0", groups)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "installed-half" in PREDICTION_MODELS.names()
    assert predict("installed-half", [8]).lower.tolist() == [4]
    assert PREDICTION_MODELS.registered() == ()  # installed, not registered


def test_an_installed_entry_cannot_take_a_reserved_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = {"schedlab.bounds": {"best": "schedlab_example_plugin:BOUND"}}
    write_dist_info(tmp_path, "schedlab-best-bound", "1.0", groups)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "best" not in BOUNDS and "best" not in BOUNDS.names()
    with pytest.raises(UnknownNameError, match="unknown bound 'best'"):
        BOUNDS.get("best")


def test_a_temporary_entry_the_block_unregistered_is_no_error(registry) -> None:
    table, make = registry
    with table.temporarily("test-entry", make("test-entry")):
        table.unregister("test-entry")
    assert "test-entry" not in table


def test_an_entry_that_names_itself_is_registered_under_its_own_name() -> None:
    with pytest.raises(InputTypeError, match="'other': the entry names solver 'fcfs'"):
        SOLVERS.register("other", SOLVERS["fcfs"])
    with pytest.raises(InputTypeError, match="the entry names bound 'trivial'"):
        BOUNDS.register("other", BOUNDS["trivial"])
    assert "other" not in SOLVERS and "other" not in BOUNDS
