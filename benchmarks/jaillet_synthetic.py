"""MC-SF against proven optima and certified bounds on Jaillet et al.'s synthetic protocol.

Jaillet et al. ("Online Scheduling for LLM Inference with KV Cache Constraints", arXiv
2502.07115, Gurobi): all requests at time 0, ``M ~ U[30, 50]``, ``s ~ U[1, 5]``,
``o ~ U[1, M - s]``, ``n ~ U[40, 60]``, 200 trials; MC-SF / optimum = 1.005 on average,
worst 1.074, 114/200 exactly optimal.

Prompt models (``--prompts``)
-----------------------------
``per-instance`` (default)
    One ``s ~ U[1, 5]`` per instance, shared by all its requests, and ``o_i ~ U[1, M - s]``:
    ``jaillet_instance(seed, shared_prompt=True)``. This is the protocol of the code
    published with the paper (github.com/anonymouspeople111/neurips2025-code:
    ``MC-SF_synthetic.py`` and ``Hindsight_IP.py`` take a single prompt size ``s`` per
    instance) and the setting of the paper's O(1) guarantee (equal prompts).
``per-request``
    Each request draws its own ``s_i ~ U[1, 5]`` and ``o_i ~ U[1, M - s_i]``
    (``jaillet_instance(seed)``, same ``M`` and ``n`` for a seed).

MC-SF variants (both reported)
------------------------------
``mc-sf``
    The published rule: each round, waiting requests by increasing ``o`` (ties by index)
    are admitted while the future-memory check passes, stopping at the first that fails
    (the ``break`` in the published ``MC-SF_synthetic.py``); the same schedule as ``sof``.
``mc-sf-backfill``
    A request that does not fit is skipped and later ones may start. With equal prompts
    both coincide (the slack ``S_t(o)`` of :mod:`schedlab.offline.decoder` is
    non-increasing in ``o``, so once one request fails every longer one fails too); with
    per-request prompts backfilling can start long requests with small prompts while a
    shorter one waits, and on this protocol it is markedly worse.

Parts
-----
(a) ``n = --small-n`` (default 10): CP-SAT proves the optimum; MC-SF / OPT mean, worst
    and exactly-optimal count over the proven trials.
(b) ``n ~ U[40, 60]``: CP-SAT with ``--time-limit`` seconds, warm-started from the best
    rule, and ``lp-search`` run to its end (no time limit: the result depends only on the
    instance and seed); "best found" = least objective of CP-SAT, ``lp-search`` and every
    rule, "best bound" = the largest of CP-SAT's proven bound and
    ``lower_bound(..., "best")``. Reports MC-SF / best found and best found / best bound.

Ratios are means of per-instance ratios; the ratio of the sums is printed beside them.

Run: ``python benchmarks/jaillet_synthetic.py --trials-small 30 --trials-large 20
--time-limit 20 [--prompts per-request]`` (about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.bounds import lower_bound
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.solve import available_solvers, solve
from schedlab.offline.solvers.rules import RULES
from schedlab.progress import Progress

PUBLISHED = {"mean": 1.005, "worst": 1.074, "exact": "114/200"}

#: The MC-SF variants reported (see module docs).
VARIANTS = ("mc-sf", "mc-sf-backfill")

#: Prompt model -> ``shared_prompt`` of :func:`~schedlab.offline.backlogs.jaillet_instance`.
PROMPTS = {"per-instance": True, "per-request": False}


def _mcsf(inst: Instance) -> dict[str, float]:
    return {name: solve(inst, name, bound=None).objective for name in VARIANTS}


def _summary(values: list[float], references: list[float], label: str) -> str:
    if not values:
        return "no trials"
    ratios = [v / r for v, r in zip(values, references, strict=True)]
    equal = sum(1 for r in ratios if r <= 1 + 1e-12)
    return (
        f"mean {statistics.fmean(ratios):.4f}  worst {max(ratios):.4f}  "
        f"{label} {equal}/{len(ratios)}  (ratio of sums {sum(values) / sum(references):.4f})"
    )


def part_a(make: Callable[..., Instance], trials: int, n: int, limit: float, workers: int) -> None:
    found: dict[str, list[float]] = {name: [] for name in VARIANTS}
    optima: list[float] = []
    times = []
    with Progress("(a) trials", trials) as bar:
        for seed in range(trials):
            inst = make(seed, n=n)
            exact = solve(inst, "cpsat", time_limit=limit, bound=None, num_workers=workers)
            times.append(exact.runtime)
            bar.step()
            if exact.status != Status.OPTIMAL:
                continue
            optima.append(exact.objective)
            for name, value in _mcsf(inst).items():
                found[name].append(value)
    print(f"(a) n = {n}, {trials} trials, CP-SAT limit {limit:g} s: {len(optima)} proven optimal")
    for name in VARIANTS:
        print(f"    {name:14s} / OPT: {_summary(found[name], optima, 'exactly optimal')}")
    print(f"    CP-SAT time: median {statistics.median(times):.2f} s, max {max(times):.2f} s")


def part_b(
    make: Callable[..., Instance], trials: int, limit: float, workers: int, seed0: int
) -> None:
    found: dict[str, list[float]] = {name: [] for name in VARIANTS}
    best: list[float] = []
    gap_ratios, proven = [], 0
    heuristics = [name for name in available_solvers() if name in RULES]
    with Progress("(b) trials", trials) as bar:
        for seed in range(seed0, seed0 + trials):
            inst = make(seed)
            exact = solve(inst, "cpsat", time_limit=limit, bound=None, num_workers=workers)
            mcsf = _mcsf(inst)
            rules = [solve(inst, h, bound=None).objective for h in heuristics]
            search = solve(inst, "lp-search", bound=None, seed=seed).objective
            least = min([exact.objective, search, *rules, *mcsf.values()])
            ours = lower_bound(inst, "best", time_limit=limit / 4).value
            bound = max(exact.lower_bound or 0.0, ours)
            proven += least <= bound + 1e-6
            best.append(least)
            for name, value in mcsf.items():
                found[name].append(value)
            gap_ratios.append(least / bound)
            bar.step()
    print(f"(b) n ~ U[40, 60], {trials} trials, CP-SAT limit {limit:g} s")
    for name in VARIANTS:
        print(f"    {name:14s} / best found: {_summary(found[name], best, 'equal')}")
    print(
        f"    best found / best bound: mean {statistics.fmean(gap_ratios):.4f}  "
        f"worst {max(gap_ratios):.4f}  proven optimal {proven}/{trials}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", choices=sorted(PROMPTS), default="per-instance")
    parser.add_argument("--trials-small", type=int, default=30)
    parser.add_argument("--small-n", type=int, default=10)
    parser.add_argument("--trials-large", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per instance")
    parser.add_argument("--small-time-limit", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2, help="CP-SAT workers")
    parser.add_argument("--large-seed", type=int, default=1000, help="first seed of (b)")
    args = parser.parse_args()
    print(
        f"published (Jaillet et al., Gurobi, n ~ U[40,60], 200 trials): MC-SF / OPT mean "
        f"{PUBLISHED['mean']}, worst {PUBLISHED['worst']}, exactly optimal {PUBLISHED['exact']}"
    )
    print(f"prompts: {args.prompts}")
    make = functools.partial(jaillet_instance, shared_prompt=PROMPTS[args.prompts])
    began = time.perf_counter()
    if args.trials_small:
        part_a(make, args.trials_small, args.small_n, args.small_time_limit, args.workers)
    if args.trials_large:
        part_b(make, args.trials_large, args.time_limit, args.workers, args.large_seed)
    print(f"total {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
