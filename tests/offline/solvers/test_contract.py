"""The solver contract (``schedlab/offline/solvers/contract.py``), checked on every solver.

Parametrised over :func:`schedlab.available_solvers`, so a solver added to the registry
is held to the same tests: verified schedules with the objective claimed, determinism,
refusal of unknown options, exact optima equal to the brute-force optimum, and a
wall-clock cap that is honoured and recorded.
"""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Optional

import pytest
from hypothesis import example, given, settings

from schedlab import available_solvers, solve
from schedlab.budget import STOPPED_BY
from schedlab.errors import BoundError, SchedlabError, UnknownOptionError
from schedlab.offline.backlogs import jaillet_instance, mixed_backlog
from schedlab.offline.bounds import BOUNDS, Bound, lower_bound, register_bound
from schedlab.offline.instance import Instance, Request
from schedlab.offline.instance_io import read_instance
from schedlab.offline.result import Status
from schedlab.offline.solvers import SOLVERS, SolverInfo, get_solver, register_solver
from schedlab.offline.solvers.brute_force import MAX_REQUESTS as BRUTE_FORCE_MAX
from schedlab.offline.solvers.contract import RESERVED_OPTIONS, check_options, parse_options
from schedlab.offline.solvers.dp import MAX_DP_REQUESTS
from schedlab.offline.verify import verify
from schedlab.testing import instances
from tests.conftest import INSTANCES

TINY = [read_instance(path) for path in sorted(INSTANCES.glob("tiny-*.json"))]

#: Tiny instances with releases (the shipped tiny ones are backlogs).
WITH_RELEASES = [
    Instance.from_arrays(12, [2, 0, 3, 1, 4], [3, 5, 2, 4, 1], [0, 1, 1, 3, 4]),
    Instance.from_arrays(9, [1, 2, 0, 3], [4, 2, 6, 1], [2, 0, 0, 5]),
]


#: Instances every solver is checked on: two backlogs, and the two with releases.
SAMPLE = [TINY[0], TINY[3], *WITH_RELEASES]


@pytest.fixture(scope="module", params=available_solvers())
def solver(request: pytest.FixtureRequest) -> SolverInfo:
    """Each registered solver in turn (PyJobShop's conftest runs every test on every
    backend the same way)."""
    return get_solver(request.param)


@pytest.fixture(scope="module", params=[n for n in available_solvers() if get_solver(n).exact])
def exact_solver(request: pytest.FixtureRequest) -> SolverInfo:
    """Each registered exact solver in turn."""
    return get_solver(request.param)


def _objective(instance: Instance, starts) -> int:  # type: ignore[no-untyped-def]
    return int((starts + instance.output - instance.arrival).sum())


@pytest.mark.parametrize("index", range(len(SAMPLE)))
def test_schedule_is_verified_and_objective_is_its_own(solver: SolverInfo, index: int) -> None:
    instance = SAMPLE[index]
    result = solve(instance, solver.name, time_limit=60, seed=1)
    assert verify(instance, result.starts) == []
    assert result.objective == _objective(instance, result.starts)
    assert result.stats["stopped_by"] in STOPPED_BY
    if result.lower_bound is not None:
        assert result.lower_bound <= result.objective + 1e-9


@pytest.fixture(scope="module")
def bogus_bound() -> Iterator[str]:
    """A registered bound that is wrong on every instance: 10**12 rounds."""

    def bogus(instance: Instance, *, budget: object = None) -> Bound:
        return Bound(1e12, "bogus")

    register_bound("bogus", bogus)
    yield "bogus"
    BOUNDS.unregister("bogus")


def test_a_wrong_bound_is_refused_not_made_a_certificate(
    solver: SolverInfo, bogus_bound: str
) -> None:
    # a bound above an objective the verifier accepts can only be wrong: no OPTIMAL
    # with gap 0 may rest on it, whichever solver found the schedule
    with pytest.raises(BoundError, match=r"lower bound 'bogus' is 1e\+12, above the objective"):
        solve(SAMPLE[0], solver.name, time_limit=60, seed=1, bound=bogus_bound)


def test_same_seed_same_schedule(solver: SolverInfo) -> None:
    instance = jaillet_instance(5, n=8)
    first = solve(instance, solver.name, seed=3, bound=None)
    again = solve(instance, solver.name, seed=3, bound=None)
    assert first.starts.tolist() == again.starts.tolist()
    assert first.stats["stopped_by"] != "time_limit"


@contextlib.contextmanager
def _cpu_load(processes: int = 2) -> Iterator[None]:
    """Busy processes on every core of this machine while the block runs: a solver whose
    work depended on the clock would now do less of it."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        time.sleep(0.2)  # let them reach the CPU
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


def test_same_seed_same_schedule_under_cpu_load(solver: SolverInfo) -> None:
    # large enough that a heuristic's phases take a while; exact ones need a small one
    instance = jaillet_instance(5, n=8) if solver.exact else mixed_backlog(60, seed=4)
    quiet = solve(instance, solver.name, seed=3, bound=None)
    with _cpu_load():
        loaded = solve(instance, solver.name, seed=3, bound=None)
    assert quiet.starts.tolist() == loaded.starts.tolist()
    assert quiet.stats["stopped_by"] == loaded.stats["stopped_by"] != "time_limit"


def test_the_bound_is_the_same_under_cpu_load() -> None:
    instance = mixed_backlog(60, seed=4)
    quiet = lower_bound(instance, "best")
    with _cpu_load():
        loaded = lower_bound(instance, "best")
    assert (quiet.value, quiet.method) == (loaded.value, loaded.method)
    assert quiet.stats["stopped_by"] != "time_limit"


def test_unknown_option_is_refused_by_name(solver: SolverInfo) -> None:
    with pytest.raises(UnknownOptionError, match=rf"^{solver.name}: unknown option\(s\) colour"):
        solve(TINY[0], solver.name, colour="red")


def test_declared_options_are_accepted(solver: SolverInfo) -> None:
    assert "budget" not in solver.options and "seed" not in solver.options
    assert all(name.isidentifier() for name in solver.options)


@functools.cache
def _optimum(index: int) -> int:
    """The brute-force optimum of ``(TINY + WITH_RELEASES)[index]`` (the shipped tiny
    instances record theirs, proven the same way when they were made)."""
    instance = (TINY + WITH_RELEASES)[index]
    oracle = solve(instance, "brute-force", bound=None)
    assert oracle.status is Status.OPTIMAL
    if "optimum" in instance.meta:
        assert oracle.objective == instance.meta["optimum"]
    return oracle.objective


@pytest.mark.parametrize("index", range(len(TINY) + len(WITH_RELEASES)))
def test_exact_optimum_equals_brute_force(exact_solver: SolverInfo, index: int) -> None:
    instance = (TINY + WITH_RELEASES)[index]
    result = solve(instance, exact_solver.name, bound=None)
    assert result.status is Status.OPTIMAL
    assert result.objective == _optimum(index)


# Mixed requests only: brute force, the oracle, does not prove six identical requests
# that each fill the memory optimal within its default 50,000 nodes (it stops with
# TIME_LIMIT after about a minute; found with schedlab.testing's degenerate shapes). Some
# mixed ones need a little more (six requests, M = 8, found by hypothesis: 50,488 nodes),
# so the oracle is given ten times its default.
ORACLE = {"work": 500_000}
NEEDS_MORE_NODES = Instance(
    8, [Request(p, o) for p, o in ((1, 6), (3, 4), (4, 4), (1, 5), (0, 5), (2, 6))]
)


def _proven_optimum(instance: Instance) -> int:
    """The optimum brute force proves, once per instance for all the solvers."""
    key = (instance.kv_tokens, tuple(instance.requests))
    if key not in _ORACLE_RESULTS:
        oracle = solve(instance, "brute-force", bound=None, **ORACLE)
        assert oracle.status is Status.OPTIMAL
        _ORACLE_RESULTS[key] = oracle.objective
    return _ORACLE_RESULTS[key]


_ORACLE_RESULTS: dict[tuple[object, ...], int] = {}


@settings(max_examples=8, deadline=None)
@given(instances(max_n=6, max_kv_tokens=14, max_output=6, max_arrival=3, shapes=("mixed",)))
@example(instance=NEEDS_MORE_NODES)
def test_random_instances_keep_the_contract(solver: SolverInfo, instance: Instance) -> None:
    options = ORACLE if solver.name == "brute-force" else {}
    result = solve(instance, solver.name, bound=None, seed=2, **options)
    assert verify(instance, result.starts) == []
    assert result.objective == _objective(instance, result.starts)
    if solver.exact:
        assert result.status is Status.OPTIMAL and result.objective == _proven_optimum(instance)
    else:
        assert result.status is not Status.INFEASIBLE


def test_time_limit_is_honoured_and_recorded(solver: SolverInfo) -> None:
    # an instance as large as the solver takes, so that exact ones cannot finish
    n = {"brute-force": BRUTE_FORCE_MAX, "dp": MAX_DP_REQUESTS}.get(solver.name, 40)
    instance = jaillet_instance(11, n=n)
    limit = 0.5
    began = time.perf_counter()
    result = solve(instance, solver.name, time_limit=limit, bound=None)
    elapsed = time.perf_counter() - began
    assert verify(instance, result.starts) == []
    # the cap is checked between units of work; the slack covers one unit and the
    # verification, which are far below a second on these sizes
    assert elapsed < limit + 3.0
    assert result.stats["stopped_by"] in STOPPED_BY
    if result.stats["stopped_by"] == "time_limit" and solver.exact:
        assert result.status is Status.TIME_LIMIT


def test_no_option_is_named_like_solve_s_own_keywords(solver: SolverInfo) -> None:
    # such an option could never reach the solver (cpsat's posted bound was one)
    assert not set(solver.options) & set(RESERVED_OPTIONS)


def test_a_plug_in_solver_with_a_reserved_option_is_refused() -> None:
    def rogue(instance, *, budget, seed=0, bound="x"):  # type: ignore[no-untyped-def]
        raise AssertionError("never run")

    with pytest.raises(SchedlabError, match=r"option\(s\) bound, which schedlab\.solve takes"):
        register_solver("rogue", rogue)


def test_options_of_a_plug_in_without_resolvable_annotations_are_untyped() -> None:
    # annotations naming what only a type checker imports cannot be resolved: the
    # options are then passed as given, not refused
    namespace: dict = {}
    exec(
        "from __future__ import annotations\n"
        "def fn(instance, *, budget, seed=0, width: Unknown = 3): ...\n",
        namespace,
    )
    check_options("plug", namespace["fn"], {"width": 5})
    assert parse_options("plug", namespace["fn"], {"width": "5"}) == {"width": "5"}


def test_optional_is_read_like_a_union() -> None:
    def fn(instance, *, budget, seed=0, limit: Optional[int] = None):  # noqa: UP045
        ...

    assert parse_options("plug", fn, {"limit": "7"}) == {"limit": 7}
    assert parse_options("plug", fn, {"limit": "none"}) == {"limit": None}


def test_a_float_option_must_be_finite() -> None:
    fn = get_solver("cpsat").fn
    for text in ("nan", "inf", "-inf"):
        with pytest.raises(SchedlabError, match="work: expected float"):
            parse_options("cpsat", fn, {"work": text})
    assert parse_options("cpsat", fn, {"work": "5"}) == {"work": 5.0}


@pytest.mark.parametrize(
    "name", ["local-search", "alns", "lp-search", "lp-swap", "sorted-lp", "receding-horizon"]
)
def test_a_passed_cap_leaves_out_the_backfilling_decode(name: str) -> None:
    # the solver hands its cap to its last decode: once the cap has passed, the order's
    # backfilling decode (minutes on some orders at n = 10^6) is not made
    instance = mixed_backlog(60, seed=7)
    result = solve(instance, name, time_limit=1e-6, bound=None)
    assert verify(instance, result.starts) == []
    assert "strict" in result.stats["objectives"]
    assert "backfill" not in result.stats["objectives"]
    assert result.stats["stopped_by"] == "time_limit"


@pytest.mark.parametrize("name", sorted(SOLVERS.entries()))
def test_every_option_declares_its_type_and_a_default_of_it(name):
    info = SOLVERS[name]
    for spec in info.option_specs:
        assert spec.types, f"{name}: option {spec.name} has no type annotation"
        check_options(name, info.fn, {spec.name: spec.default})  # the default is accepted


def test_searches_share_one_vocabulary():
    for name in ("local-search", "lp-search", "alns"):
        assert {"work", "width"} <= set(SOLVERS[name].options)
