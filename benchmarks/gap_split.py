"""Where the certified gap on mixed n = 200 lies: bound side or schedule side (issue 13).

Run: ``python benchmarks/gap_split.py`` (about 3 minutes on a 2-core machine);
``--windows 0`` skips the exact window repairs.

Two measurements, on the shipped mixed n = 200 backlog and two fresh seeds
(``mixed_backlog(200, seed=1, 2)``), each with ``lp-search``'s schedule ``p`` (its
default work budget, no time limit):

1. **The Lagrangian split.** For the time-indexed LP's prices ``λ_t >= 0``
   (:func:`~schedlab.offline.bounds.time_indexed.lp_relaxation`), every schedule satisfies
   exactly (``proofs/time_indexed_lagrangian.md``)

   .. math:: \\mathrm{obj}(p) - L(λ) = \\sum_i \\bigl[f_i(p_i) - \\min_τ f_i(τ)\\bigr]
             + \\sum_t λ_t \\bigl(M - \\mathrm{load}_p(t)\\bigr),

   *start-cost excess* plus *priced slack* (memory left unused, valued at the prices).
   ``L(λ)`` is the LP's certificate; the completion-spacing bound proves part of the
   slack unavoidable (its value minus ``L(λ)``). What is left of the gap, ``obj(p)``
   minus the best bound, is either slack a better schedule would avoid or slack no
   bound of ours yet proves unavoidable. The table also gives memory utilisation in the
   first and second halves of the LP horizon.
2. **Exact window repairs** (shipped instance): ``K`` consecutive requests of ``p`` (by
   start) are freed, everything else stays, and CP-SAT (one worker, ``--seconds`` per
   window) places the freed requests optimally in what memory the others leave, each
   within ``R`` rounds of its start in ``p``, minimising the sum of their starts. The
   cap is wall-clock: CP-SAT's deterministic time runs far slower than the wall on these
   models (2 units took 198 s on one window), so a status may differ between machines.
   A window solved to ``OPTIMAL`` with no gain proves that no rearrangement of those
   requests in that range helps; ``FEASIBLE`` means CP-SAT found nothing better but did
   not prove it. A gain would be a better schedule (it is checked by the verifier).

The model of a repair: start ``q_i in [p_i - R, p_i + R]`` (and ``>= 0``) for each freed
request, one unit interval per active round at ``q_i + k - 1`` with demand ``s_i + k``,
and fixed unit intervals holding the other requests' load of each round, all in one
cumulative of capacity ``M`` (the model of :mod:`schedlab.offline.solvers.cpsat`, with
the rest of the schedule as fixed load).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from ortools.sat.python import cp_model

from schedlab import read_instance, solve
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds.completion_spacing import spacing_bound_search
from schedlab.offline.bounds.time_indexed import (
    LP_ROUNDS,
    lp_relaxation,
    price_starts,
    start_costs,
)
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import Schedule, total_latency
from schedlab.offline.verify import assert_feasible

ROOT = Path(__file__).resolve().parents[1]


def load_profile(instance: Instance, starts: np.ndarray, length: int) -> np.ndarray:
    """Tokens held in each round ``0 .. length - 1`` (the schedule's memory profile,
    cut or padded with zeros)."""
    held = Schedule(instance, starts).memory_profile
    profile = np.zeros(length, dtype=np.int64)
    profile[: min(length, len(held))] = held[:length]
    return profile


def split(instance: Instance, starts: np.ndarray) -> dict[str, float]:
    """The Lagrangian split of ``starts``' objective at the LP's prices (module docs)."""
    relax = lp_relaxation(instance, max_rounds=LP_ROUNDS)
    bounds, prices = relax.bounds, np.maximum(relax.prices, 0.0)
    least, _ = price_starts(instance, bounds, prices)
    excess = float((start_costs(instance, bounds, prices, starts) - least).sum())
    horizon = int(bounds[-1])
    price = np.repeat(prices, np.diff(bounds))
    load = load_profile(instance, starts, horizon)
    spacing, _ = spacing_bound_search(instance)
    half = horizon // 2
    return {
        "objective": float(total_latency(instance, starts)),
        "lp": relax.value,
        "spacing": spacing,
        "excess": excess,
        "slack": float(price @ (instance.memory - load)),
        "early": float(load[:half].mean() / instance.memory),
        "late": float(load[half:].mean() / instance.memory),
    }


def repair(
    instance: Instance, starts: np.ndarray, free: list[int], reach: int, seconds: float
) -> tuple[np.ndarray, str]:
    """Re-place the requests ``free`` optimally, the rest fixed (module docs, item 2)."""
    s, o, memory = instance.prompt, instance.output, instance.memory
    low = {i: max(int(instance.arrival[i]), int(starts[i]) - reach) for i in free}
    high = {i: int(starts[i]) + reach for i in free}
    span = max(high[i] + int(o[i]) for i in free) + 1
    others = load_profile(instance, starts, span)
    for i in free:  # the freed requests' own tokens out
        others[starts[i] : starts[i] + o[i]] -= s[i] + np.arange(1, o[i] + 1)
    model = cp_model.CpModel()
    place = {i: model.new_int_var(low[i], high[i], f"q{i}") for i in free}
    intervals, demands = [], []
    for i in free:
        for k in range(1, int(o[i]) + 1):
            intervals.append(model.new_fixed_size_interval_var(place[i] + (k - 1), 1, ""))
            demands.append(int(s[i]) + k)
    for t in range(min(low.values()), span):
        if others[t] > 0:
            intervals.append(model.new_fixed_size_interval_var(t, 1, ""))
            demands.append(int(others[t]))
    model.add_cumulative(intervals, demands, memory)
    model.minimize(sum(place.values()))
    for i in free:
        model.add_hint(place[i], int(starts[i]))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = seconds
    status = solver.solve(model)
    new = starts.copy()
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        for i in free:
            new[i] = solver.value(place[i])
    return new, solver.status_name(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=12, help="window repairs (0: none)")
    parser.add_argument("--size", type=int, default=10, help="requests freed per window (K)")
    parser.add_argument("--reach", type=int, default=100, help="rounds each may move (R)")
    parser.add_argument("--seconds", type=float, default=5.0, help="CP-SAT cap per window")
    args = parser.parse_args()
    shipped = read_instance(ROOT / "instances" / "mixed-n200.json")
    instances = [shipped, mixed_backlog(200, seed=1), mixed_backlog(200, seed=2)]
    print(
        f"{'instance':<14}{'objective':>10}{'LP':>10}{'spacing':>10}{'gap %':>7}"
        f"{'excess %':>9}{'slack %':>8}{'proved %':>9}{'util 1st':>9}{'util 2nd':>9}"
    )
    schedules = {}
    for inst in instances:
        starts = np.asarray(solve(inst, "lp-search", bound=None).starts, dtype=np.int64)
        schedules[inst.name] = starts
        row = split(inst, starts)
        lp, best = row["lp"], max(row["lp"], row["spacing"])
        print(
            f"{inst.name:<14}{row['objective']:>10,.0f}{lp:>10,.0f}{row['spacing']:>10,.0f}"
            f"{100 * (row['objective'] / best - 1):>7.2f}{100 * row['excess'] / lp:>9.2f}"
            f"{100 * row['slack'] / lp:>8.2f}{100 * (best - lp) / lp:>9.2f}"
            f"{100 * row['early']:>9.2f}{100 * row['late']:>9.2f}",
            flush=True,
        )
    print(
        "excess, slack: the split of objective - LP (percent of LP); proved: the slack the "
        "spacing bound proves unavoidable"
    )
    if args.windows <= 0:
        return
    starts = schedules[shipped.name]
    rng = np.random.default_rng(0)
    counts: dict[str, int] = {}
    gained = 0
    for _ in range(args.windows):
        order = np.argsort(starts, kind="stable")
        first = int(rng.integers(0, shipped.n - args.size + 1))
        free = [int(i) for i in order[first : first + args.size]]
        new, status = repair(shipped, starts, free, args.reach, args.seconds)
        gain = total_latency(shipped, starts) - total_latency(shipped, new)
        counts[status] = counts.get(status, 0) + 1
        if gain > 0:
            assert_feasible(shipped, new)
            starts, gained = new, gained + gain
        print(f"  window at position {first:3d}: {status:<9} gain {gain}", flush=True)
    print(
        f"{args.windows} windows of {args.size} requests within {args.reach} rounds: "
        f"{counts}; total gain {gained} (objective {total_latency(shipped, starts):,})"
    )


if __name__ == "__main__":
    main()
