"""Where the certified gap on mixed n = 200 lies: bound side or schedule side (issue 13).

Run: ``python benchmarks/gap_split.py`` (about 10 minutes on a 2-core machine);
``--windows none --scatter none`` skip the exact window repairs, ``--small 0`` the small
instances.

The first two measurements are on the shipped mixed n = 200 backlog and two fresh seeds
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
   bound of ours yet proves unavoidable. The slack splits further, round by round, as

   .. math:: M - \\mathrm{load}(t) = |A(t)|\\,(e(t) - t)
             + \\bigl[\\mathrm{load}(e(t)) - \\mathrm{load}(t) - |A(t)|\\,(e(t) - t)\\bigr]
             + \\bigl[M - \\mathrm{load}(e(t))\\bigr],

   with ``e(t)`` the next round ``>= t`` that is some request's last and ``A(t)`` the
   requests active in ``t``: the *lemma* part, the growth the completion-spacing lemma
   charges (``proofs/completion_spacing.md``, Lemma 1), then the tokens of requests that
   start before ``e(t)`` (*starts*, ``>= 0`` by the lemma's proof), then the memory still
   *unfilled* in that last round, which no bound of ours charges. Each is priced at
   ``λ_t`` (rounds after the last completion count as unfilled). The table also gives
   memory utilisation in the first and second halves of the LP horizon. A second table
   follows the lemma part through the bound's relaxations at the schedule itself
   (:func:`lemma_kept`): each round priced at the least price of its grid cell (*grid*);
   each piece's ``sum (e(t) - t)`` replaced by Lemma 2's even-spacing minimum for the
   completions the schedule has in it (*even*: what is lost here is mostly the
   unevenness of the schedule's completions, which a better schedule might remove, and
   partly the waits of a piece's last run beyond the cell's end, which Lemma 2 does not
   count: a read-only review measured the latter at about a quarter of the loss on the
   shipped instance); and that traded against the completion budget at the bound's
   ``ν`` (*traded*, Lemma 3). *Proved* is the bound's gain over the LP.
2. **Exact window repairs** (shipped instance), of ``lp-search``'s schedule and of
   ``local-search``'s (default work budgets): for each ``K:R`` of ``--windows``, windows of
   ``K`` consecutive requests (by start) every ``K/2`` positions across the schedule are
   freed in turn, everything else stays, and
   :func:`~schedlab.offline.solvers.cpsat.repair_window` places them optimally in what
   memory the others leave, each within ``R`` rounds of its start, minimising the sum of
   their starts (at most ``--seconds`` of wall clock per window, model building
   included, though CP-SAT's presolve can overrun it; so a status may differ between
   machines). Each window's result is kept, a re-placement of equal sum included, and
   the next window is read off the schedule it leaves: so a later window can gain where
   the given schedule's could not. A window ``OPTIMAL`` with no gain proves that no
   re-placement of those requests within that range helps; ``TIME_LIMIT`` means none was
   found but none was ruled out. Every repaired schedule is checked by the verifier; the
   median and longest time a window are printed. For each ``K:R:D`` of ``--scatter`` the
   same is done for ``D`` sets of ``K`` requests drawn at random from the whole schedule
   (seeded), each free to move ``R`` rounds: moves of single requests far from their place,
   which the searches' moves of a few positions rarely make.
3. **Small instances with proven optima** (``--small`` seeds, 5 by default):
   ``mixed_backlog(12, kv_tokens=M, seed)`` for ``M`` in :data:`SMALL_MEMORIES` (a few
   requests run at once, as against about forty on n = 200), solved to optimality by
   ``cpsat`` (at most ``--small-seconds`` each; unproven ones are listed and left out of
   the summary). Each bound method of ``best`` and ``local-search`` and ``lp-search``
   (their default work budgets) are compared with the optimum: how far it lies above
   the bound (``OPT / bound - 1``) and how far the schedules lie above it. This is the
   integrality gap of our bounds where it can be measured; the requests there are large
   against memory (peaks up to most of ``M``), which the n = 200 ones are not (at most 17 %),
   so it shows which side can be loose, not how loose it is at n = 200.

"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from schedlab import read_instance, solve
from schedlab.budget import Budget
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.bounds import lower_bound
from schedlab.offline.bounds.completion_spacing import (
    grid_minima,
    piece_slack,
    spacing_bound_search,
    start_brackets,
)
from schedlab.offline.bounds.time_indexed import (
    LP_ROUNDS,
    lp_relaxation,
    price_starts,
    start_costs,
)
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.schedule import load_profile, total_latency
from schedlab.offline.solvers.cpsat import MAX_REACH, repair_window
from schedlab.offline.verify import assert_feasible

ROOT = Path(__file__).resolve().parents[1]

#: Memory of the small instances of measurement 3: about 2, 3 and 4 of their requests at
#: once (their peaks are some 3,000 tokens).
SMALL_MEMORIES = (8000, 12000, 16000)

#: Bound methods compared with the small optima (``best`` takes the largest).
SMALL_BOUNDS = ("mean-busy-time", "fluid-spacing", "completion-spacing", "tall-chain")

#: Searches compared with the small optima, with their default work budgets.
SMALL_SOLVERS = ("local-search", "lp-search")


def next_last_rounds(instance: Instance, starts: np.ndarray, span: int) -> np.ndarray:
    """``e(t)`` for rounds ``t = 0 .. span``: the next round ``>= t`` that is some request's
    last (``span``, where nothing runs, after the last one); ``span`` at least the last
    request's end."""
    last_round = np.zeros(span + 1, dtype=bool)
    last_round[starts + instance.output - 1] = True
    marks = np.where(last_round, np.arange(span + 1), span)
    return np.minimum.accumulate(marks[::-1])[::-1]


def slack_parts(instance: Instance, starts: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """``M - load(t)`` in rounds ``0 .. length - 1`` as its *lemma*, *starts* and *unfilled*
    parts (module docs, item 1), one array each; they sum to the slack."""
    span = max(length, int((starts + instance.output).max()))
    load = load_profile(instance, starts, 0, span + 1)
    active = np.zeros(span + 1, dtype=np.int64)
    for p, o in zip(starts.tolist(), instance.output.tolist(), strict=True):
        active[p : p + o] += 1
    following = next_last_rounds(instance, starts, span)
    lemma = active * (following - np.arange(span + 1))
    growth = load[following] - load
    parts = {
        "lemma": lemma,
        "starts": growth - lemma,
        "unfilled": instance.kv_tokens - load[following],
    }
    return {name: part[:length] for name, part in parts.items()}


def lemma_kept(
    instance: Instance,
    starts: np.ndarray,
    bounds: np.ndarray,
    prices: np.ndarray,
    stats: dict[str, float | int | str | None],
) -> dict[str, float]:
    """What the spacing bound's relaxations keep of the lemma part of ``starts``' priced
    slack, at this schedule (module docs, item 1): the lemma part at each grid cell's least
    price (``grid``), Lemma 2's even spacing with the schedule's own completion counts
    (``even``), and that traded against the completion budget at the bound's ``ν``
    (``traded``); ``stats`` are :func:`spacing_bound_search`'s."""
    # ``stats`` come from the same LP (its fixed rounds, no cap), so the prices agree
    step, nu = int(stats["step"] or 1), float(stats["nu"] or 0.0)
    ends = starts + instance.output
    span = int(ends.max())
    following = next_last_rounds(instance, starts, span)
    wait = following - np.arange(span + 1)  # e(t) - t
    cell = grid_minima(bounds, prices, step, span + 1)
    grid = even = 0.0
    for p, end in zip(starts.tolist(), ends.tolist(), strict=True):
        # the pieces of completion_spacing's _brackets: the request's rounds in each cell
        for q in range(p // step, (end - 1) // step + 1):
            lo, hi = max(p, q * step), min(end, (q + 1) * step)
            completions = int((following[lo:hi] == np.arange(lo, hi)).sum())
            grid += cell[q] * float(wait[lo:hi].sum())
            even += cell[q] * float(piece_slack(np.array(hi - lo), np.array(completions)))
    brackets = start_brackets(instance, bounds, prices, nu, step, starts)
    waste = brackets - start_costs(instance, bounds, prices, starts)
    traded = float(waste.sum()) - nu * instance.kv_tokens * instance.n
    return {"grid": grid, "even": even, "traded": traded}


def split(instance: Instance, starts: np.ndarray) -> dict[str, float]:
    """The Lagrangian split of ``starts``' objective at the LP's prices (module docs)."""
    relax = lp_relaxation(instance, max_rounds=LP_ROUNDS)
    bounds, prices = relax.bounds, np.maximum(relax.prices, 0.0)
    least, _ = price_starts(instance, bounds, prices)
    excess = float((start_costs(instance, bounds, prices, starts) - least).sum())
    horizon = int(bounds[-1])
    price = np.repeat(prices, np.diff(bounds))
    load = load_profile(instance, starts, 0, horizon)
    parts = slack_parts(instance, starts, horizon)
    spacing, stats = spacing_bound_search(instance)
    half = horizon // 2
    return {
        **lemma_kept(instance, starts, bounds, prices, stats),
        "objective": float(total_latency(instance, starts)),
        "lp": relax.value,
        "spacing": spacing,
        "excess": excess,
        "slack": float(price @ (instance.kv_tokens - load)),
        **{name: float(price @ part) for name, part in parts.items()},
        "early": float(load[:half].mean() / instance.kv_tokens),
        "late": float(load[half:].mean() / instance.kv_tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--windows",
        default="10:100,20:200",
        help="window sweeps K:R, comma-separated (K requests freed, R rounds of reach; "
        "'none': no repairs)",
    )
    parser.add_argument(
        "--scatter",
        default="5:1000:10",
        help="random sets K:R:D, comma-separated (D sets of K requests, R rounds of reach; "
        "'none': none)",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="CP-SAT cap per window")
    parser.add_argument("--small", type=int, default=5, help="seeds of small instances (0: none)")
    parser.add_argument(
        "--small-seconds", type=float, default=300.0, help="cpsat cap per small instance"
    )
    args = parser.parse_args()
    shipped = read_instance(ROOT / "instances" / "mixed-n200.json")
    try:
        sweeps = _triples(args.windows, 2, "--windows", shipped.n)
        scatters = _triples(args.scatter, 3, "--scatter", shipped.n)
    except ValueError as error:
        parser.error(str(error))
    instances = [shipped, mixed_backlog(200, seed=1), mixed_backlog(200, seed=2)]
    print(
        f"{'instance':<14}{'objective':>10}{'LP':>10}{'spacing':>10}{'gap %':>7}"
        f"{'excess %':>9}{'slack %':>8}{'lemma':>7}{'starts':>7}{'unfilled':>9}"
        f"{'proved %':>9}{'util 1st':>9}{'util 2nd':>9}"
    )
    schedules, rows = {}, {}
    for inst in instances:
        starts = np.asarray(solve(inst, "lp-search", bound=None).starts, dtype=np.int64)
        schedules[inst.name] = starts
        row = rows[inst.name] = split(inst, starts)
        lp, best = row["lp"], max(row["lp"], row["spacing"])
        print(
            f"{inst.name:<14}{row['objective']:>10,.0f}{lp:>10,.0f}{row['spacing']:>10,.0f}"
            f"{100 * (row['objective'] / best - 1):>7.2f}{100 * row['excess'] / lp:>9.2f}"
            f"{100 * row['slack'] / lp:>8.2f}{100 * row['lemma'] / lp:>7.2f}"
            f"{100 * row['starts'] / lp:>7.2f}{100 * row['unfilled'] / lp:>9.2f}"
            f"{100 * (best - lp) / lp:>9.2f}{100 * row['early']:>9.2f}{100 * row['late']:>9.2f}",
            flush=True,
        )
    print(
        "excess, slack: the split of objective - LP (percent of LP); lemma + starts + "
        "unfilled = slack; proved: the slack the spacing bound proves unavoidable"
    )
    print(f"\n{'instance':<14}{'lemma':>7}{'grid':>7}{'even':>7}{'traded':>7}{'proved':>7}")
    for name, row in rows.items():
        lp = row["lp"]
        kept = (row["lemma"], row["grid"], row["even"], row["traded"], row["spacing"] - lp)
        print(f"{name:<14}" + "".join(f"{100 * value / lp:>7.2f}" for value in kept))
    print(
        "the lemma part at the schedule and what the bound keeps of it there (percent of LP): "
        "at the grid's least prices, by even spacing with the schedule's own completion "
        "counts, traded against the completion budget; proved: the bound's gain over the LP"
    )
    if sweeps or scatters:
        searched = np.asarray(solve(shipped, "local-search", bound=None).starts, dtype=np.int64)
        for label, starts in (("lp-search", schedules[shipped.name]), ("local-search", searched)):
            for size, reach in sweeps:
                firsts = range(0, shipped.n - size + 1, max(1, size // 2))
                consecutive = _consecutive(firsts, size)
                what = f"windows of {size} within {reach} rounds"
                repair_windows(shipped, label, starts, consecutive, reach, args.seconds, what)
            for size, reach, draws in scatters:
                scattered = _scattered(shipped.n, size, draws)
                what = f"{draws} random sets of {size} within {reach} rounds"
                repair_windows(shipped, label, starts, scattered, reach, args.seconds, what)
    if args.small > 0:
        small_optima(args.small, args.small_seconds)


def _triples(text: str, width: int, option: str, n: int) -> list[tuple[int, ...]]:
    """``"K:R,K:R"`` (``width`` integers an item) as tuples; ``"none"``: none. ``K`` (first)
    in ``1 .. n``, ``R`` (second) in ``0 .. MAX_REACH``, ``D`` (third) at least 1."""
    if text == "none":
        return []
    try:
        items = [tuple(int(x) for x in item.split(":")) for item in text.split(",")]
    except ValueError:
        items = []
    if not items or any(
        len(item) != width
        or not 1 <= item[0] <= n
        or not 0 <= item[1] <= MAX_REACH
        or min(item[2:], default=1) < 1
        for item in items
    ):
        raise ValueError(
            f"{option}: expected {width} integers an item (K in 1..{n}, R in "
            f"0..{MAX_REACH}, D >= 1), got {text!r}"
        )
    return items


#: A source of windows: given the current schedule (a function, read when each window
#: comes, as a gain may reorder it), the freed sets one after another.
Windows = Callable[[Callable[[], np.ndarray]], Iterable[list[int]]]


def _consecutive(firsts: range, size: int) -> Windows:
    """Windows of ``size`` consecutive requests by start, from each of ``firsts``."""

    def windows(current: Callable[[], np.ndarray]) -> Iterator[list[int]]:
        for first in firsts:
            yield np.argsort(current(), kind="stable")[first : first + size].tolist()

    return windows


def _scattered(n: int, size: int, draws: int) -> Windows:
    """``draws`` sets of ``size`` requests drawn at random (seed 0), whatever the schedule."""
    rng = np.random.default_rng(0)
    sets = [rng.choice(n, size, replace=False).tolist() for _ in range(draws)]
    return lambda _: sets


def repair_windows(
    shipped: Instance,
    label: str,
    starts: np.ndarray,
    windows: Windows,
    reach: int,
    seconds: float,
    what: str,
) -> None:
    """Measurement 2 (module docs): exact repairs of the freed sets ``windows`` gives, one
    after another, each of the schedule as the ones before left it."""
    counts: dict[str, int] = {}
    seconds_taken = []
    before = total_latency(shipped, starts)
    schedule = [starts]  # the current schedule, which the windows read as they come
    for free in windows(lambda: schedule[0]):
        began = time.perf_counter()
        repaired = repair_window(shipped, schedule[0], free, reach, budget=Budget(seconds))
        seconds_taken.append(time.perf_counter() - began)
        assert_feasible(shipped, repaired.starts)
        counts[repaired.status] = counts.get(repaired.status, 0) + 1
        schedule[0] = repaired.starts
    after = total_latency(shipped, schedule[0])
    print(
        f"{label} ({before:,}): {what}: "
        + ", ".join(f"{count} {status}" for status, count in counts.items())
        + f"; gain {before - after} ({100 * (before - after) / before:.3f} %); "
        f"{statistics.median(seconds_taken):.2f} s median a window, "
        f"{max(seconds_taken):.2f} s max",
        flush=True,
    )


def small_optima(seeds: int, seconds: float) -> None:
    """Measurement 3 (module docs): bounds and searches against proven optima."""
    columns = ("best", *SMALL_BOUNDS, *SMALL_SOLVERS)
    width = {name: max(len(name) + 2, 10) for name in columns}
    print("\n" + f"{'instance':<24}{'optimum':>9}" + "".join(f"{c:>{width[c]}}" for c in columns))
    gaps: dict[str, list[float]] = {name: [] for name in columns}
    for memory in SMALL_MEMORIES:
        for seed in range(seeds):
            inst = mixed_backlog(12, kv_tokens=memory, seed=seed)
            exact = solve(inst, "cpsat", time_limit=seconds, bound=None)
            assert_feasible(inst, exact.starts)
            name = f"{inst.name} M={memory}"
            if exact.status is not Status.OPTIMAL:
                print(f"{name:<24}not proven in {seconds:g} s ({exact.objective:,})")
                continue
            opt = exact.objective
            best = lower_bound(inst)
            row = {"best": 100 * (opt / best.value - 1)}
            row |= {
                m: 100 * (opt / value - 1)
                for m, value in best.stats["values"].items()
                if m in SMALL_BOUNDS
            }
            for solver in SMALL_SOLVERS:
                result = solve(inst, solver, bound=None)
                assert_feasible(inst, result.starts)
                row[solver] = 100 * (result.objective / opt - 1)
            for column, gap in row.items():
                gaps[column].append(gap)
            cells = "".join(
                f"{row[c]:>{width[c] - 1}.2f}%" if c in row else f"{'-':>{width[c]}}"
                for c in columns
            )
            print(f"{name:<24}{opt:>9,}{cells}", flush=True)
    print(
        "bounds: how far the optimum lies above each, OPT / bound - 1; searches: objective / "
        "OPT - 1"
    )
    for column, values in gaps.items():
        if values:
            print(
                f"  {column:<20} median {statistics.median(values):5.2f} %, "
                f"max {max(values):5.2f} %, within 0.005 %: {sum(g < 5e-3 for g in values)}"
                f"/{len(values)}"
            )


if __name__ == "__main__":
    main()
