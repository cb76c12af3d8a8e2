"""Every row of the offline-performance table (issue 13) in one run, each next to its target.

Run: ``python benchmarks/offline_targets.py`` (all rows, about two and a half hours on a 2-core
machine), or some rows: ``--rows gap200,moves`` ; ``--scale 0.1`` divides every time
limit by ten for a smoke run (the targets then do not apply). Rows:

``gap200``
    Certified gap on the shipped mixed n = 200 backlog and two fresh seeds
    (``mixed_backlog(200, seed=1, 2)``), 60 s per solver: ``lp-search`` with its default
    work budget and with the long one of :data:`LONG_LP_SEARCH`, ``alns`` (work budget)
    and ``alns`` governed by the time limit (:data:`ALNS_BY_TIME`). Target <= 1.0 %.
``gap1000``
    Mixed n = 1,000 (shipped) at 30 s and 300 s: ``local-search``, ``lp-swap``,
    ``lp-search``, ``alns`` (work budgets), ``alns`` governed by the limit, and, at
    300 s only, ``local-search`` with the long work budget of :data:`LONG_SEARCH` and
    ``lp-search`` with that of :data:`LONG_LP_SEARCH`; the two long runs also on
    ``mixed_backlog(1000, seed=1)``. Targets: <= 1.5 % at 300 s; no solver worse than
    ``local-search`` at either limit.
``gap10000``
    ``mixed_backlog(10_000, seed=0)`` at 600 s: ``local-search`` (its default work budget
    and the long one of :data:`LONG_SEARCH`), ``alns`` governed by the limit; seed 1 with
    both ``local-search`` runs. Target <= 3 %.
``moves``
    ``improve_order`` with exact evaluations (``screen=None``) from the best rule's
    order on mixed n = 1,000 with no work budget, at 30 s and 120 s: first improvement
    within 20 positions (the row's search before late acceptance became the default),
    and the default late acceptance within 5 positions with each engine (compiled, and
    the reference ``engine="python"``): moves per second
    (target >= 30,000) and the strict objective (target: lower at 120 s than at 30 s);
    with the cost of a move: positions decoded per move (a full decode is ``n``), the
    share of moves whose two decodes met again, and the kernel's time per decoded
    position (a full decode from position 0, timed alone).
``search``
    ``local-search``'s defaults (late acceptance, moves within 5 positions) against
    first improvement within 20 positions (the defaults before), at 60,000 and 300,000
    moves (no time limit) on the shipped mixed n = 200 and n = 1,000 backlogs and seeds
    1 and 2 of each, and at 60,000 moves on ``mixed_backlog(10_000, seed=0)``: the
    objectives side by side (about 6 minutes; ``--scale`` does not shorten it).
``exact``
    ``cpsat`` on ``jaillet_instance(seed, n)``, seeds 0..4, n = 15 and 20, 60 s each:
    median time (a run cut by the limit counts as 60 s), proven count, median gap of
    unproven runs. Target: n = 15 median <= 60 s with every seed proven.
``rules``
    Every list rule and ``sorted-f`` on ``mixed_backlog(10**6, seed=1)``, one run each
    (solver runtime, without the bound). Targets: rules <= 5 s, sorted-f <= 10 s.
``shift``
    Left-shift compaction of the best rule's strict schedule of
    ``mixed_backlog(10_000, seed=0)``, the compiled engine against the NumPy reference
    (``engine="python"``, about 5 minutes): seconds, passes, gain, and whether both give
    the same schedule.
``cpsat``
    ``cpsat`` on the shipped mixed n = 200 backlog at 30 s (its size refusal lifted)
    against ``svf``, its warm start.
``best``
    ``lower_bound(method="best")`` on the shipped mixed n = 200 and n = 1,000 backlogs and
    ``mixed_backlog(10_000)`` (median of :data:`REPEATS` runs): seconds, value, the method
    that gave it, the methods out of reach and dominated; the winning method alone
    (median) and the ratio; the value before ``best`` was planned by cost
    (:data:`BEST_BEFORE`). Then ``schedlab compare instances/mixed-n1000.json`` (default
    solvers) once, as a command. Targets: n = 1,000 <= 5 s, n = 10,000 <= 30 s, values no
    lower than before, ``compare`` <= 60 s.
``pricing``
    The time-indexed LP with compiled pricing against the NumPy reference
    (``engine="python"``) on every shipped instance: the same value and columns, and
    the seconds of each; then the paired speed ratio of one pricing, reference over
    compiled, median over :data:`REPEATS` pairs run in turn, at the LP's final prices on
    the shipped n = 1,000 backlog and at the fluid prices of ``lagrangian`` (1,000
    blocks) on ``mixed_backlog(10_000)``.
``spacing``
    One evaluation of the completion-spacing bound, compiled against the NumPy reference
    (``engine="python"``), at the LP's prices on the shipped mixed n = 200 (at the
    multiplier ``best`` settles on) and n = 1,000 backlogs: the same value, and the paired
    speed ratio, reference over compiled (median of :data:`REPEATS` pairs). Then
    ``schedlab bound`` and ``schedlab compare`` of ``instances/mixed-n200.json`` as a user
    runs them, warm (median of :data:`REPEATS`). Targets: ``bound`` <= 3 s, ``compare``
    <= 5 s.

The gap of a row is ``objective / B - 1`` with ``B`` the larger of the instance's
``best`` lower bound (computed once, without a time limit) and the solver's own.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from schedlab import read_instance, solve
from schedlab.budget import Budget
from schedlab.offline.backlogs import jaillet_instance, mixed_backlog
from schedlab.offline.bounds import Bound, forget_bounds, lower_bound
from schedlab.offline.bounds.completion_spacing import spacing_value
from schedlab.offline.bounds.lagrangian import DEFAULT_BLOCKS, fluid_prices
from schedlab.offline.bounds.time_indexed import (
    LP_ROUNDS,
    lp_relaxation,
    price_starts,
    uniform_blocks,
)
from schedlab.offline.bounds.volume import volume_completions
from schedlab.offline.decoder import list_schedule
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.solvers.left_shift import left_shift
from schedlab.offline.solvers.local_search import SearchSettings, best_start_order, improve_order
from schedlab.offline.solvers.order_evaluator import OrderEvaluator
from schedlab.offline.solvers.rules import RULES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, tee_section

ROOT = Path(__file__).resolve().parents[1]


def _shipped(n: int) -> Instance:
    return read_instance(ROOT / "instances" / f"mixed-n{n}.json")


def _gap_rows(
    instances: list[Instance],
    runs: list[tuple[str, str, dict[str, Any]]],
    limits: list[float],
    target: str,
    longest_only: tuple[str, ...] = (),
) -> dict[tuple[str, str, float], float]:
    """Print solver x instance x limit gaps; return them by (instance, label, limit).

    The runs labelled in ``longest_only`` run at the longest limit only.
    """
    gaps = {}
    print(
        f"{'instance':<16}{'solver':<21}{'limit s':>8}{'objective':>14}{'bound':>14}"
        f"{'gap %':>8}{'time s':>8}  stopped_by"
    )
    for inst in instances:
        bound = lower_bound(inst, method="best")
        for limit in limits:
            for label, solver, options in runs:
                if label in longest_only and limit < max(limits):
                    continue
                result = solve(inst, solver, time_limit=limit, bound=None, **options)
                best = max(bound.value, result.lower_bound or 0.0)
                gap = 100 * (result.objective / best - 1)
                gaps[inst.name, label, limit] = gap
                print(
                    f"{inst.name:<16}{label:<21}{limit:>8.0f}{result.objective:>14,}"
                    f"{best:>14,.0f}{gap:>8.2f}{result.runtime:>8.1f}  "
                    f"{result.stats.get('stopped_by')}",
                    flush=True,
                )
    print(f"target: {target}")
    return gaps


#: ``alns`` governed by the time limit: no work budget and no end of its own (it anneals
#: over the limit).
ALNS_BY_TIME = {"work": None, "idle": None}


def gap200(scale: float) -> None:
    instances = [_shipped(200), mixed_backlog(200, seed=1), mixed_backlog(200, seed=2)]
    runs = [
        ("lp-search", "lp-search", {}),
        ("lp-search (long)", "lp-search", LONG_LP_SEARCH[200]),
        ("alns", "alns", {}),
        ("alns (time)", "alns", ALNS_BY_TIME),
    ]
    _gap_rows(instances, runs, [60 * scale], "<= 1.0 % in 60 s")


#: ``local-search`` for a long run: a work budget that fits the row's longest limit on the
#: development machine, and a late-acceptance history to match (``local_search``'s docs).
#: Beside two other benchmark processes the n = 10,000 budget did not fit: seed 0 was cut
#: by the 600 s cap at 550 s (2026-12-02; seed 1 took 500 s).
LONG_SEARCH = {
    1000: {"work": 4_000_000, "history": 1_000},
    10_000: {"work": 5_000_000, "history": 300},
}


#: ``lp-search`` for a long run, by instance size: exact moves within 3 positions and a
#: long history, the whole work budget (no end by idle moves). Chosen in trials on the
#: rows' shipped instances with the compiled search (one or two runs at a time; % above
#: the best bound):
#:
#: * n = 200 (2026-12-02), 60 s with no work budget (the search then stops at 49 s):
#:   window 3 with history 3,000 / 10,000 reached 1.600 / 1.557 %, window 5 1.567 /
#:   1.573 %; the chosen 2,500,000 moves take 42 s and reach 1.557 %. Given 600 s (30 M
#:   moves), window 5 with history 30,000 reached 1.520 % and window 3 with 5,000
#:   1.619 %: the search is near where it ends, not short of time;
#: * n = 1,000, 300 s, screened moves (``screen=8``, the choice of 2026-12-02): history
#:   5,000 reached 1.835 % with 2 M moves (94 s in all), 1.538 % with 6 M (142 s) and the
#:   same with 12 M (182 s); history 8,000 with 10 M 1.568 %, 15,000 with 12 M 1.633 %
#:   (cut by the cap); window 2 / 4 with 8 M 1.642 / 1.688 %. On 2026-12-03 (about 8 µs
#:   a move; % above 4,470,244), with search seeds 0 / 1: 6 M moves 1.538 / 1.624 %;
#:   4 M 1.560 / 1.646 % (57 s), then two more rounds of 4 M from each best order, a
#:   fresh history each, 1.545 / 1.615 % (80 s); history 20,000 with 20 M 1.565 / 1.612 %
#:   (168 / 162 s, its best still falling);
#: * n = 1,000, exact moves (2026-12-03, about 21 µs a move): history 5,000 with 8 M
#:   moves reached 1.536 / 1.542 % (seeds 0 / 1, 200 / 194 s, the best last falling at
#:   6.6 M / 7.1 M moves); the chosen 10 M, through ``solve`` with a 300 s cap, 1.536 /
#:   1.542 % (237 s each; the cap did not bind) and 1.700 % on ``mixed_backlog(1000,
#:   seed=1)`` (226 s), against 1.77 % with the screened settings; history 10,000 with
#:   10 M 1.527 / 1.577 % (seed 0 cut by the cap at 9,998,935 moves, both still falling).
#:   Exact moves reach lower with fewer moves, and the seeds lie closer together; none
#:   of these settings reached the 1.5 % target on both seeds in the row's time.
LONG_LP_SEARCH = {
    200: {"work": 2_500_000, "idle": None, "history": 10_000, "width": 3},
    1000: {"work": 10_000_000, "idle": None, "history": 5_000, "width": 3},
}


def gap1000(scale: float) -> None:
    runs = [(s, s, {}) for s in ("local-search", "lp-swap", "lp-search", "alns")]
    runs.append(("alns (time)", "alns", ALNS_BY_TIME))
    long_runs = [
        ("local-search (long)", "local-search", LONG_SEARCH[1000]),
        ("lp-search (long)", "lp-search", LONG_LP_SEARCH[1000]),
    ]
    limits = [30 * scale, 300 * scale]
    gaps = _gap_rows(
        [_shipped(1000)],
        runs + long_runs,
        limits,
        "<= 1.5 % in 300 s",
        longest_only=tuple(label for label, _, _ in long_runs),
    )
    for limit in limits:
        ls = gaps["mixed-n1000", "local-search", limit]
        worse = [label for (_, label, at), gap in gaps.items() if at == limit and gap > ls]
        print(f"at {limit:.0f} s, worse than local-search ({ls:.2f} %): {worse or 'none'}")
    _gap_rows(
        [mixed_backlog(1000, seed=1)],
        long_runs,
        [300 * scale],
        "<= 1.5 % in 300 s (a second seed, not used in choosing the long settings)",
    )


def gap10000(scale: float) -> None:
    runs = [
        ("local-search", "local-search", {}),
        ("local-search (long)", "local-search", LONG_SEARCH[10_000]),
    ]
    _gap_rows(
        [mixed_backlog(10_000, seed=0)],
        [*runs, ("alns (time)", "alns", ALNS_BY_TIME)],
        [600 * scale],
        "<= 3 % in 600 s",
    )
    _gap_rows(
        [mixed_backlog(10_000, seed=1)], runs, [600 * scale], "<= 3 % in 600 s (a second seed)"
    )


def moves(scale: float) -> None:
    inst = _shipped(1000)
    order, _ = best_start_order(inst)
    searches = [
        ("first/20", SearchSettings("first", width=20, screen=None, work=None)),
        ("late/5, compiled", SearchSettings(screen=None, work=None)),
        ("late/5, python", SearchSettings(screen=None, work=None, engine="python")),
    ]
    for label, settings in searches:
        for limit in (30 * scale, 120 * scale):
            _, stats = improve_order(inst, order, settings, budget=Budget(limit), seed=0)
            print(
                f"local search {label}, exact moves, {limit:.0f} s: "
                f"{stats['moves_per_s']:,.0f} moves/s (target >= 30,000), "
                f"objective {stats['objective_strict']:,}; "
                f"{stats['decoded_per_move']:.0f} positions decoded per move, "
                f"{100 * stats['met'] / max(stats['moves'], 1):.1f} % of moves met again",
                flush=True,
            )
    evaluator = OrderEvaluator(inst, order)
    repeats = 200
    began = time.perf_counter()
    for _ in range(repeats):
        evaluator.evaluate(order, 0, inst.n - 1)
    per_position = (time.perf_counter() - began) / repeats / inst.n
    print(f"kernel: {per_position * 1e9:.0f} ns per decoded position (full decodes)")
    print("target: still improving between 30 s and 120 s")


def search(scale: float) -> None:
    del scale  # work budgets only: no time limit to scale
    settings = [("first/20", {"strategy": "first", "width": 20}), ("late/5 (default)", {})]
    cases = []
    for n in (200, 1000):
        for inst in (_shipped(n), mixed_backlog(n, seed=1), mixed_backlog(n, seed=2)):
            cases += [(inst, 60_000), (inst, 300_000)]
    cases.append((mixed_backlog(10_000, seed=0), 60_000))
    print(f"{'instance':<16}{'moves':>10}" + "".join(f"{label:>20}" for label, _ in settings))
    for inst, budget in cases:
        values = [
            solve(inst, "local-search", bound=None, work=budget, **options).objective
            for _, options in settings
        ]
        print(f"{inst.name:<16}{budget:>10,}" + "".join(f"{v:>20,}" for v in values), flush=True)


def exact(scale: float) -> None:
    limit = 60 * scale
    for n in (15, 20):
        times, gaps, proven = [], [], 0
        for seed in range(5):
            result = solve(jaillet_instance(seed, n=n), "cpsat", time_limit=limit, bound=None)
            if result.status == Status.OPTIMAL:
                proven += 1
                times.append(result.runtime)
            else:
                times.append(limit)
                if result.lower_bound:
                    gaps.append(100 * (result.objective / result.lower_bound - 1))
        gap = f"{statistics.median(gaps):.1f} %" if gaps else "-"
        print(
            f"cpsat jaillet n = {n}: median {statistics.median(times):.1f} s, proven "
            f"{proven}/5, median gap of the unproven {gap}",
            flush=True,
        )
    print("target: n = 15 proven in <= 60 s median (5 seeds)")


def rules(scale: float) -> None:
    inst = mixed_backlog(10**6, seed=1)
    for name in (*RULES, "sorted-f"):
        began = time.perf_counter()
        result = solve(inst, name, bound=None)
        target = 10 if name == "sorted-f" else 5
        print(
            f"{name:<16} n = 10^6: solver {result.runtime:6.1f} s, call "
            f"{time.perf_counter() - began:6.1f} s (target <= {target} s)",
            flush=True,
        )


def shift(scale: float) -> None:
    inst = mixed_backlog(10_000, seed=0)
    order, rule = best_start_order(inst)
    strict = list_schedule(inst, order)
    schedules = {}
    for engine in ("compiled", "python"):
        began = time.perf_counter()
        schedules[engine], stats = left_shift(inst, strict, engine=engine)
        print(
            f"left shift of {rule}'s strict schedule, n = 10,000, {engine}: "
            f"{time.perf_counter() - began:.1f} s, {stats['passes']} passes, "
            f"gain {stats['gain']:,}",
            flush=True,
        )
    same = schedules["compiled"].tolist() == schedules["python"].tolist()
    print(f"same schedule from both engines: {same}")


def cpsat(scale: float) -> None:
    inst = _shipped(200)
    svf = solve(inst, "svf", bound=None)
    # cpsat refuses a model this large by default (MAX_INTERVALS); lifted to measure it
    result = solve(inst, "cpsat", time_limit=30 * scale, bound=None, max_intervals=10**6)
    print(
        f"cpsat mixed-n200 at {30 * scale:.0f} s: {result.objective:,} "
        f"(svf, its warm start: {svf.objective:,}); improved: {result.objective < svf.objective}"
    )


#: ``best`` before it was planned by cost (commit b912de9, every chosen method run one after
#: another; 2026-12-06 on the development machine beside other jobs): value, method,
#: seconds. On ``mixed_backlog(10_000)`` ``lagrangian`` gave 452,347,448 and took most of
#: the time; on the shipped n = 1,000 ``completion-spacing`` gave 4,468,244.
BEST_BEFORE = {
    "mixed-n200": (248_761.0, "completion-spacing", 14.3),
    "mixed-n1000": (4_470_244.0, "fluid-spacing", 111.8),
    "mixed-n10000-s0": (453_632_375.0, "fluid-spacing", 310.2),
}

#: ``schedlab compare instances/mixed-n1000.json`` before (b912de9, the same day): seconds.
COMPARE_BEFORE = 165.0

#: Timed runs (median) of the ``best`` row, and pairs of the ``pricing`` row's ratios.
REPEATS = 3


def _median_time(call: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall seconds of ``repeats`` calls, and the last call's result."""
    times, result = [], None
    for _ in range(repeats):
        began = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def best(scale: float) -> None:
    del scale  # work budgets only
    repeats = REPEATS
    targets = {200: None, 1000: 5.0, 10_000: 30.0}
    for inst in (_shipped(200), _shipped(1000), mixed_backlog(10_000)):
        took, bound = _median_time(lambda inst=inst: _computed(inst, "best"), repeats)
        alone, _ = _median_time(lambda inst=inst, b=bound: _computed(inst, b.method), repeats)
        before, before_method, before_s = BEST_BEFORE[inst.name]
        target = targets[inst.n]
        print(
            f"best {inst.name}: {took:.2f} s (target {'-' if target is None else target} s), "
            f"{bound.value:,.0f} by {bound.method}; {bound.method} alone {alone:.2f} s "
            f"(ratio {took / alone:.2f}); out of reach {bound.stats['out_of_reach']}, "
            f"dominated {bound.stats['dominated']}, work {bound.stats['work']:.3g}; before "
            f"{before:,.0f} by {before_method} in {before_s} s: value "
            f"{'kept' if bound.value >= before else 'FELL'} (median of {repeats})",
            flush=True,
        )
    began = time.perf_counter()  # the command as a user runs it, start-up included
    subprocess.run(
        [
            sys.executable,
            "-m",
            "schedlab",
            "compare",
            str(ROOT / "instances" / "mixed-n1000.json"),
        ],
        check=True,
        capture_output=True,
    )
    print(
        f"compare mixed-n1000, default solvers: {time.perf_counter() - began:.1f} s "
        f"(target <= 60 s; before {COMPARE_BEFORE} s)"
    )


def pricing(scale: float) -> None:
    del scale  # work budgets only
    repeats = REPEATS
    relax = {}
    for path in sorted((ROOT / "instances").glob("*.json")):
        inst = read_instance(path)
        seconds = {}
        for engine in ("python", "compiled"):
            began = time.perf_counter()
            relax[engine] = lp_relaxation(inst, max_rounds=LP_ROUNDS, engine=engine)
            seconds[engine] = time.perf_counter() - began
        same = (
            relax["python"].value == relax["compiled"].value
            and relax["python"].stats["columns"] == relax["compiled"].stats["columns"]
        )
        print(
            f"lp {inst.name:<12} {relax['compiled'].value:>16,.3f}  same value and columns: "
            f"{same}  reference {seconds['python']:.2f} s, compiled {seconds['compiled']:.2f} s",
            flush=True,
        )
    inst = _shipped(1000)
    large = mixed_backlog(10_000)
    blocks = uniform_blocks(int(volume_completions(large).max()), DEFAULT_BLOCKS)
    cases = [
        (
            "mixed-n1000, the LP's final prices",
            inst,
            relax["compiled"].bounds,
            relax["compiled"].prices,
        ),
        ("mixed_backlog(10_000), fluid prices", large, blocks, fluid_prices(large, blocks)),
    ]
    for label, case, bounds, mu in cases:
        price_starts(case, bounds, mu)  # compiles the kernel once, outside the timing
        ratios = []
        for _ in range(repeats):
            began = time.perf_counter()
            price_starts(case, bounds, mu, engine="python")
            slow = time.perf_counter() - began
            began = time.perf_counter()
            price_starts(case, bounds, mu)
            ratios.append(slow / (time.perf_counter() - began))
        print(
            f"pricing {label}: reference / compiled {statistics.median(ratios):.1f}x "
            f"(median of {repeats} pairs, {min(ratios):.1f}-{max(ratios):.1f}x)",
            flush=True,
        )


def _command_seconds(argv: list[str], repeats: int) -> float:
    """Median wall seconds of ``schedlab ARGV`` as a user runs it (start-up included),
    after one unmeasured run (warm: numba's cache and the file system)."""
    command = [sys.executable, "-m", "schedlab", *argv]
    subprocess.run(command, check=True, capture_output=True)
    took, _ = _median_time(
        lambda: subprocess.run(command, check=True, capture_output=True), repeats
    )
    return took


def _computed(inst: Instance, method: str) -> Bound:
    """``lower_bound(inst, method)`` computed, not recalled from the bounds kept in the
    process (:func:`~schedlab.offline.bounds.bound_within`)."""
    forget_bounds()
    return lower_bound(inst, method)


def spacing(scale: float) -> None:
    del scale  # work budgets only
    repeats = REPEATS
    for inst in (_shipped(200), _shipped(1000)):
        relax = lp_relaxation(inst, max_rounds=LP_ROUNDS)
        step = max(1, math.ceil(relax.horizon / 32))
        nu = lower_bound(inst, "completion-spacing").stats["nu"] if inst.n <= 200 else 1e-5
        args = (inst, relax.bounds, relax.prices, nu, step)
        spacing_value(*args)  # compiles or loads the kernel, outside the timing
        ratios, same = [], True
        for _ in range(repeats):
            began = time.perf_counter()
            reference = spacing_value(*args, engine="python")
            slow = time.perf_counter() - began
            began = time.perf_counter()
            same &= spacing_value(*args) == reference
            ratios.append(slow / (time.perf_counter() - began))
        print(
            f"spacing evaluation {inst.name} (nu {nu:.3g}, step {step}): reference / compiled "
            f"{statistics.median(ratios):.1f}x (median of {repeats} pairs, "
            f"{min(ratios):.1f}-{max(ratios):.1f}x), the same value: {same}",
            flush=True,
        )
    shipped = str(ROOT / "instances" / "mixed-n200.json")
    for argv, target in ((["bound", shipped], 3.0), (["compare", shipped], 5.0)):
        took = _command_seconds(argv, repeats)
        print(
            f"schedlab {argv[0]} instances/mixed-n200.json: {took:.2f} s warm, start-up "
            f"included (target <= {target:g} s; median of {repeats})",
            flush=True,
        )


ROWS: dict[str, Callable[[float], None]] = {
    "gap200": gap200,
    "gap1000": gap1000,
    "gap10000": gap10000,
    "moves": moves,
    "search": search,
    "exact": exact,
    "rules": rules,
    "shift": shift,
    "cpsat": cpsat,
    "best": best,
    "pricing": pricing,
    "spacing": spacing,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", default=",".join(ROWS), help="comma-separated, of: " + ", ".join(ROWS)
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every time limit")
    parser.add_argument(
        "--page",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write each row's output as its section of this page",
    )

    args = parser.parse_args()
    chosen = args.rows.split(",")
    unknown = [r for r in chosen if r not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose among {', '.join(ROWS)}")
    scale = [] if args.scale == 1.0 else ["--scale", f"{args.scale:g}"]
    for row in chosen:
        print(f"\n== {row} ==", flush=True)
        command = command_line("offline_targets.py", ["--rows", row, *scale])
        with tee_section(
            args.page, "Offline solvers and bounds against their targets", row, command
        ):
            ROWS[row](args.scale)


if __name__ == "__main__":
    main()
