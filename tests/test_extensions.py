"""The extension contract of every registry, over everything registered or installed.

``tests/conftest.py`` installs the example third-party package of ``tests/plugins/example``
(:mod:`tests.plugins.installed`), which declares one entry in each entry-point group, so
every test here that runs over a registry runs over it too. The solver contract is
``tests/offline/solvers/test_contract.py`` and the policy property test
``tests/testing/test_builtin.py``, both over every registered and installed name; this
file holds the contracts of bounds, policies' declared flags, routers, workloads and
profile readers, and shows that the installed entries reach the command line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import schedlab_example_plugin

from schedlab.calibration.profile_table import (
    COLUMNS,
    get_profile_reader,
    profile_reader_names,
    register_profile_reader,
)
from schedlab.errors import (
    DataNotFoundError,
    FormatError,
    InputError,
    InputTypeError,
    RegistrationError,
    UnknownNameError,
)
from schedlab.offline.bounds import available_bounds, get_bound, lower_bound
from schedlab.offline.instance_io import read_instance
from schedlab.offline.solve import solve
from schedlab.offline.solvers import available_solvers, get_solver, register_solver
from schedlab.plugins import installed_names
from schedlab.serving.cluster import Cluster, is_sloweave, kv_link, parse_nodes, run_cluster
from schedlab.serving.cost_model import LinearAttentionCostModel
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.metrics import SLO
from schedlab.serving.policy_registry import get_policy, policy_names, register_policy
from schedlab.serving.router_view import Route
from schedlab.serving.routers import get_router, register_router, router_names
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import get_workload, make_workload, workload_names
from schedlab.testing import check_cluster_conservation
from tests.conftest import INSTANCES, ROOT
from tests.plugins.installed import project, write_dist_info
from tests.serving.streams import ms_stream

#: What the example package declares, by entry-point group.
DECLARED: dict[str, tuple[str, ...]] = {
    group: tuple(points)
    for group, points in project()["entry-points"].items()  # type: ignore[union-attr]
}


def test_the_installed_package_extends_every_registry() -> None:
    listings = {
        "schedlab.solvers": available_solvers(),
        "schedlab.bounds": available_bounds(),
        "schedlab.policies": policy_names(),
        "schedlab.routers": router_names(),
        "schedlab.workloads": workload_names(),
        "schedlab.profile_readers": profile_reader_names(),
    }
    assert set(DECLARED) == set(listings)
    for group, names in DECLARED.items():
        assert set(names) <= set(listings[group]), group


@functools.cache
def _help(*argv: str) -> str:
    """``schedlab ARGV --help`` in a fresh interpreter (it sees the installed package
    through ``PYTHONPATH``, as conftest sets it)."""
    done = subprocess.run(
        [sys.executable, "-m", "schedlab", *argv, "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    return " ".join(done.stdout.split())


@pytest.mark.parametrize("command", ["compare", "cluster"])
def test_installed_solver_and_router_appear_in_help(command: str) -> None:
    text = _help(command)
    if command == "compare":
        assert "example-longest-first" in text
    else:
        assert "example-fewest-queued: fewest queued prefill tokens (per side)" in text
        assert "example-half" in text and "example-short" in text


def test_installed_profile_format_appears_in_help() -> None:
    assert "example-jsonl" in _help("profile", "import")


# -- registering ------------------------------------------------------------------------


def test_a_name_is_registered_once() -> None:
    spec = get_router("round-robin")
    with pytest.raises(RegistrationError, match=r"^router 'round-robin' is already registered$"):
        register_router("round-robin", spec)
    with pytest.raises(RegistrationError, match=r"^policy 'vllm' is already registered$"):
        register_policy("vllm", get_policy("vllm"))
    with pytest.raises(RegistrationError, match=r"^solver 'fcfs' is already registered$"):
        register_solver("fcfs", get_solver("fcfs").fn)
    with pytest.raises(RegistrationError, match=r"^profile format 'timing-table' is already"):
        register_profile_reader("timing-table", get_profile_reader("timing-table"))


def test_an_installed_name_does_not_replace_a_built_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a second package declares the name of a built-in router and of a built-in solver
    groups = {
        "schedlab.routers": {"round-robin": "schedlab_example_plugin:ROUTER"},
        "schedlab.solvers": {"fcfs": "schedlab_example_plugin:SOLVER"},
    }
    write_dist_info(tmp_path, "schedlab-shadow", "1.0", groups)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "round-robin" in installed_names("schedlab.routers")
    assert router_names().count("round-robin") == 1
    assert get_router("round-robin").description.startswith("request k to node k mod N")
    assert available_solvers().count("fcfs") == 1
    assert get_solver("fcfs").fn is not schedlab_example_plugin.SOLVER.fn


def test_an_entry_point_of_the_wrong_kind_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedlab_example_plugin, "ROUTER", get_policy("vllm"))
    with pytest.raises(InputTypeError, match=r"entry point 'example-fewest-queued' .*RouterSpec"):
        get_router("example-fewest-queued")
    renamed = dataclasses.replace(schedlab_example_plugin.SOLVER, name="other")
    monkeypatch.setattr(schedlab_example_plugin, "SOLVER", renamed)
    with pytest.raises(InputTypeError, match="names solver 'other'"):
        get_solver("example-longest-first")


def _schedlab_beside(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``schedlab ARGV`` in a fresh interpreter that also sees the packages of ``site``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    command = [sys.executable, "-m", "schedlab", *argv]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "schedlab_example_plugin:NO_SUCH_SOLVER",
            "AttributeError: module 'schedlab_example_plugin' has no attribute",
        ),
        ("no_such_package:SOLVER", "ModuleNotFoundError: No module named 'no_such_package'"),
        ("schedlab_example_plugin:ROUTER", "expected a SolverInfo, got RouterSpec"),
    ],
)
def test_a_broken_entry_point_fails_politely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    # a package declares a solver that cannot be loaded, or is not a solver: solving with
    # it is one line and exit 2; listing the solvers lists the others and names it
    write_dist_info(tmp_path, "schedlab-broken", "1.0", {"schedlab.solvers": {"broken": target}})
    place = f"entry point 'broken' of group schedlab.solvers ({target})"
    schedlab = functools.partial(_schedlab_beside, tmp_path)
    solved = schedlab("solve", str(INSTANCES / "tiny-1.json"), "--solver", "broken")
    assert solved.returncode == 2 and solved.stdout == ""
    assert solved.stderr.count("\n") == 1 and place in solved.stderr and message in solved.stderr
    listed = schedlab("solvers")
    assert listed.returncode == 0 and "fcfs" in listed.stdout and "broken" not in listed.stdout
    assert listed.stderr.startswith("schedlab: warning: solver 'broken' left out: " + place)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises((InputError, InputTypeError), match=message):
        get_solver("broken")


def test_broken_plug_ins_in_every_group_break_no_other_command(tmp_path: Path) -> None:
    groups = {group: {f"broken-{k}": f"no_such_package:{k}"} for k, group in enumerate(DECLARED)}
    write_dist_info(tmp_path, "schedlab-broken", "1.0", groups)
    schedlab = functools.partial(_schedlab_beside, tmp_path)
    for argv in (["cluster", "--help"], ["simulate", "--help"], ["profile", "import", "--help"]):
        assert schedlab(*argv).returncode == 0, argv
    bounded = schedlab("bound", str(INSTANCES / "tiny-1.json"))
    assert bounded.returncode == 0 and "lower bound 80.0" in bounded.stdout
    (note,) = bounded.stderr.splitlines()
    bound = groups["schedlab.bounds"]
    assert note.startswith(f"schedlab: note: best leaves out bound {next(iter(bound))!r}")
    router = next(iter(groups["schedlab.routers"]))
    routed = schedlab("cluster", "--router", router, "--duration", "1s")
    assert routed.returncode == 2 and routed.stderr.count("\n") == 1
    assert "ModuleNotFoundError: No module named 'no_such_package'" in routed.stderr


def test_unknown_names_list_the_installed_ones() -> None:
    with pytest.raises(UnknownNameError, match="example-fewest-queued"):
        get_router("nonesuch")
    with pytest.raises(UnknownNameError, match="example-half"):
        get_policy("nonesuch")
    with pytest.raises(UnknownNameError, match="example-jsonl"):
        get_profile_reader("nonesuch")


# -- bounds ---------------------------------------------------------------------------------

#: Tiny instances whose optimum is recorded (proven by brute force when they were made).
TINY = [read_instance(path) for path in sorted(INSTANCES.glob("tiny-*.json"))[:3]]


@pytest.mark.parametrize("method", available_bounds())
@pytest.mark.parametrize("index", range(len(TINY)))
def test_every_bound_is_valid_and_deterministic(method: str, index: int) -> None:
    instance = TINY[index]
    bound = lower_bound(instance, method)
    assert bound.value <= instance.meta["optimum"] + 1e-6
    assert lower_bound(instance, method).value == bound.value
    if method != "best":
        assert bound.method == method


def test_best_runs_an_installed_bound_chosen_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    instance = TINY[0]
    assert "example-output-sum" not in lower_bound(instance, "best").stats["values"]
    joined = dataclasses.replace(schedlab_example_plugin.BOUND, in_best=True)
    monkeypatch.setattr(schedlab_example_plugin, "BOUND", joined)
    values = lower_bound(instance, "best").stats["values"]
    assert values["example-output-sum"] == float(instance.output.sum())
    assert get_bound("example-output-sum").in_best is True


def test_an_installed_solver_is_solved_and_certified() -> None:
    instance = TINY[0]
    result = solve(instance, "example-longest-first", bound="example-output-sum")
    assert result.lower_bound == float(instance.output.sum()) <= result.objective


# -- policies: what a spec declares is what the policy does ---------------------------------

#: A flat cost model: 2 ms a step, 0.5 ms a decode, 0.1 ms a prefill token.
MODEL = LinearAttentionCostModel(
    name="flat", base_s=0.002, decode_per_seq_s=0.0005, prefill_per_token_s=0.0001
)
ENGINE = EngineConfig(kv_tokens=640, max_num_seqs=6, max_num_batched_tokens=96)
STREAM = ms_stream(
    [0, 3, 5, 9, 14, 20, 26, 31],
    [60, 200, 35, 90, 150, 40, 120, 70],
    [30, 12, 50, 8, 25, 40, 6, 18],
)


def _records(scenario: Scenario) -> list[tuple[float, float]]:
    run = run_engine(STREAM, scenario)
    return [(r.first_token_s, r.finish_s) for r in run.records]


def _spelling(listed: str) -> str:
    return "fixed:64" if listed == "fixed:C" else listed.partition("[")[0]


def _check_declared_readings(spelling: str) -> None:
    """The command line refuses ``--margin`` and ``--prediction-cv`` when no policy of the
    run declares that it reads them; so one that does not must give the same run with or
    without them."""
    spec = get_policy(spelling)
    base = Scenario(spelling, MODEL, SLO(5.0, 0.008), ENGINE, seed=3)
    if not spec.reads_margin:
        assert _records(base.with_(margin_s=0.004)) == _records(base), "reads the margin"
    if not spec.reads_predictions:
        assert _records(base.with_(prediction_cv=0.8)) == _records(base), "reads predictions"


@pytest.mark.parametrize("spelling", [_spelling(s) for s in policy_names()])
def test_a_policy_that_does_not_declare_a_reading_does_not_read_it(spelling: str) -> None:
    _check_declared_readings(spelling)
    assert is_sloweave(spelling) == get_policy(spelling).deadline_safe


def test_a_policy_that_hides_a_reading_fails_the_contract(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # sloweave-kv reads both; declared as reading neither, the check above catches it
    hidden = dataclasses.replace(
        get_policy("sloweave-kv"), reads_margin=False, reads_predictions=False
    )
    monkeypatch.setattr(schedlab_example_plugin, "POLICY", hidden)
    with pytest.raises(AssertionError, match="reads the margin"):
        _check_declared_readings("example-half")
    monkeypatch.setattr(
        schedlab_example_plugin, "POLICY", dataclasses.replace(hidden, reads_margin=True)
    )
    with pytest.raises(AssertionError, match="reads predictions"):
        _check_declared_readings("example-half")


# -- routers --------------------------------------------------------------------------------


def _cluster(router: str, prediction_cv: float = 0.0) -> Cluster:
    nodes = "2P2D" if get_router(router).disaggregated else "3C"
    scenario = Scenario("vllm", MODEL, SLO(5.0, 0.025), ENGINE, prediction_cv=prediction_cv)
    return Cluster(parse_nodes(nodes), router, scenario, kv_link())


def _check_router(router: str) -> None:
    """A router's run keeps the cluster's conservation laws, routes every request once,
    deterministically, and one declared never to read predicted lengths routes alike
    whatever they are."""
    spec = _cluster(router)
    result = run_cluster(STREAM, spec, record_batches=True)
    assert spec.link is not None
    check_cluster_conservation(
        result,
        STREAM,
        [ENGINE] * len(spec.nodes),
        chunked=[spec.node_scenario(node).build_policy().chunked for node in spec.nodes],
        bytes_per_token=spec.link.bytes_per_token,
    )
    assert len(result.routes) == len(STREAM)
    assert run_cluster(STREAM, spec).routes == result.routes  # deterministic
    if get_router(router).reads_predictions == "never":
        guessed = run_cluster(STREAM, _cluster(router, prediction_cv=0.8))
        assert guessed.routes == result.routes, "reads predicted lengths"


@pytest.mark.parametrize("router", router_names())
def test_every_router_keeps_the_cluster_invariants(router: str) -> None:
    _check_router(router)


def test_a_router_that_hides_a_reading_fails_the_contract(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def longest_to_last(request, cluster):  # type: ignore[no-untyped-def]
        nodes = cluster.nodes
        return Route(nodes[-1].index if request.predicted_output > 20 else nodes[0].index)

    hidden = dataclasses.replace(
        schedlab_example_plugin.ROUTER, router=longest_to_last, reads_predictions="never"
    )
    monkeypatch.setattr(schedlab_example_plugin, "ROUTER", hidden)
    with pytest.raises(AssertionError, match="reads predicted lengths"):
        _check_router("example-fewest-queued")


# -- workloads ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", workload_names())
def test_every_workload_draws_valid_deterministic_streams(name: str, data_dir: Path) -> None:
    spec = get_workload(name)
    assert spec.description
    workload = make_workload(name, data_dir=data_dir)
    first = workload.generate(5.0, 20.0, 7)
    again = workload.generate(5.0, 20.0, 7)
    assert len(first) > 0
    assert np.all(np.diff(first.arrival_s) >= 0)
    assert np.all(first.prompt >= 1) and np.all(first.output >= 1)
    for field in ("arrival_s", "prompt", "output"):
        assert np.array_equal(getattr(first, field), getattr(again, field)), field


# -- profile readers ------------------------------------------------------------------------

#: Measurements of a small table (every kind that a dense model has), by column.
ROWS = [
    {"kind": "dense", "op": "qkv_proj", "tokens": "16", "time_us": "12.5"},
    {"kind": "dense", "op": "qkv_proj", "tokens": "64", "time_us": "20.25"},
    {"kind": "per_sequence", "op": "lm_head", "sequences": "4", "time_us": "40"},
    {
        "kind": "attention",
        "prefill_chunk": "16",
        "kv_prefill": "0",
        "n_decode": "0",
        "kv_decode": "0",
        "time_us": "9.5",
    },
]


def _write(name: str, rows: list[dict[str, str]], folder: Path) -> Path:
    """``rows`` in the format of reader ``name`` (one sample writer per known format)."""
    if name == "timing-table":
        path = folder / "table.csv"
        lines = [",".join(COLUMNS[1:])]
        lines += [",".join(row.get(c, "") for c in COLUMNS[1:]) for row in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path
    if name == "example-jsonl":
        path = folder / "table.jsonl"
        path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
        return path
    raise AssertionError(f"no sample writer for profile format {name!r}: add one here")


@pytest.mark.parametrize("name", profile_reader_names())
def test_every_profile_reader_reads_its_format_alike(name: str, tmp_path: Path) -> None:
    reader = get_profile_reader(name)
    assert reader.description
    table = reader.read(_write(name, ROWS, tmp_path), None)
    assert table.tps == (1,)
    assert [m.key for m in table.rows(1, "dense")] == [("qkv_proj", 16), ("qkv_proj", 64)]
    assert [m.time_us for m in table.rows(1, "dense")] == [12.5, 20.25]
    assert [m.key for m in table.rows(1, "attention")] == [(16, 0, 0, 0)]
    assert len(table) == len(ROWS)
    at_two = reader.read(_write(name, ROWS, tmp_path), 2)
    assert at_two.tps == (2,)


@pytest.mark.parametrize("name", profile_reader_names())
def test_every_profile_reader_refuses_bad_input_by_place(name: str, tmp_path: Path) -> None:
    reader = get_profile_reader(name)
    with pytest.raises(DataNotFoundError):
        reader.read(tmp_path / "missing", None)
    bad = [*ROWS[:2], {**ROWS[2], "time_us": "fast"}]
    path = _write(name, bad, tmp_path)
    with pytest.raises(FormatError, match=rf"^{path}:\d+: time_us: "):
        reader.read(path, None)
    twice = [*ROWS, ROWS[0]]
    with pytest.raises(FormatError, match="measured twice"):
        reader.read(_write(name, twice, tmp_path), None)
    (tmp_path / "garbage").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(FormatError, match="garbage"):
        reader.read(tmp_path / "garbage", None)
