"""Speed of every list-scheduling rule on mixed backlogs, up to a million requests.

Targets: each rule (``solve``, verification included) on 10^6 requests in <= 5 s
(issue 13; issue 2 asked <= 5 s at 10^5 and <= 15x from 10^4 to 10^5). Prints the
median of ``--repeats`` runs per size, the ratio last / first size, and the target
next to the largest size; ``--reference`` also times the pure-Python decode
(``list_schedule(..., engine="python")``) of each rule's order at the largest size, once.
``--compile`` first measures, in a fresh process with an empty numba cache, how long
the first strict decode takes (it imports :mod:`schedlab.offline.compiled_decoder`,
which compiles all its kernels), then the first backfilling decode and the first
``OrderEvaluator`` (both then cheap), and the first Sorted-F fast selection (its own
kernel, :mod:`schedlab.offline.solvers.compiled_sorted_f`). ``--backfill`` adds a row
for each strict rule run with ``backfill=True`` (no target: the targets are the named
rules'); an order unrelated to output lengths is the backfilling search's hard case
(:func:`~schedlab.offline.compiled_decoder.bucket_layout`).

Run: ``python benchmarks/list_scheduling_speed.py --sizes 10000,100000,1000000 --repeats 1
--compile``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from schedlab import solve
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import list_schedule
from schedlab.offline.priority import priority_order
from schedlab.offline.solvers.rules import RULES

TARGET_S = 5.0

_COMPILE = """
import time
began = time.perf_counter()
import numpy as np
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.decoder import list_schedule
from schedlab.offline.solvers.order_evaluator import OrderEvaluator
from schedlab.offline.solvers.sorted_f import sorted_f_batches
inst = mixed_backlog(50, seed=0)
imported = time.perf_counter()
list_schedule(inst, np.arange(50))
strict = time.perf_counter()
list_schedule(inst, np.arange(50), backfill=True)
backfill = time.perf_counter()
OrderEvaluator(inst, np.arange(50))
evaluator = time.perf_counter()
sorted_f_batches(inst, method="fast")
done = time.perf_counter()
print(imported - began, strict - imported, backfill - strict, evaluator - backfill,
      done - evaluator)
"""


def compile_seconds() -> list[float]:
    """Import, then first strict / backfill / evaluator / Sorted-F call, empty cache (s)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = subprocess.run(
            [sys.executable, "-c", _COMPILE], env=env, capture_output=True, text=True, check=True
        )
    return [float(x) for x in out.stdout.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reference", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--backfill", action="store_true")
    args = parser.parse_args()
    if args.compile:
        load, strict, backfill, evaluator, batches = compile_seconds()
        print(
            f"numba compile (empty cache): import {load:.2f} s, first strict decode "
            f"(all decoder kernels) {strict:.2f} s, then backfill {backfill:.2f} s, "
            f"evaluator {evaluator:.2f} s; sorted-f selection kernel {batches:.2f} s"
        )
    sizes = [int(x) for x in args.sizes.split(",")]
    instances = {n: mixed_backlog(n, seed=1) for n in sizes}
    list_schedule(instances[sizes[0]], priority_order(instances[sizes[0]], "fcfs"))  # load
    header = f"{'rule':<15}" + "".join(f"{f'n={n:,} (s)':>18}" for n in sizes)
    print(
        header + f"{'ratio':>8}{'target':>9}" + ("  python decode (s)" if args.reference else "")
    )
    runs = [(rule, rule, {}) for rule in RULES]
    if args.backfill:
        runs += [(f"{rule} +bf", rule, {"backfill": True}) for rule in RULES if not RULES[rule][1]]
    for label, rule, options in runs:
        medians = []
        for n in sizes:
            times = []
            for _ in range(args.repeats):
                began = time.perf_counter()
                solve(instances[n], rule, bound=None, **options)
                times.append(time.perf_counter() - began)
            medians.append(statistics.median(times))
        line = f"{label:<15}" + "".join(f"{m:>18.3f}" for m in medians)
        target = f"<= {TARGET_S:g}" if not options else "-"
        line += f"{medians[-1] / medians[0]:>8.1f}{target:>9}"
        if args.reference:
            inst = instances[sizes[-1]]
            backfill = options.get("backfill", RULES[rule][1])
            began = time.perf_counter()
            list_schedule(inst, priority_order(inst, rule), backfill=backfill, engine="python")
            line += f"{time.perf_counter() - began:>19.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
