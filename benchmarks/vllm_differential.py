r"""schedlab's engine against vLLM's own scheduler on many random traces: the mismatch rate.

The traces are :func:`schedlab.integrations.vllm.differential.random_trace`'s, split evenly
over its families (independent requests; chat sessions and agent loops sharing prefixes
in flight; bursts at one instant; shared prefixes under KV pressure; data-parallel ranks,
with and without bursts),
each synchronous or asynchronous with seats, token budgets and caches that bind; trace
``k`` of family ``f`` is drawn from ``(--seed, f, k)``. Each runs on both engines
(:func:`schedlab.integrations.vllm.differential.differential_run`); a trace mismatches
when any step, request or run counter differs, and errs when the integration itself fails
(another vLLM release may change what it reads). The table gives, per family, the traces,
the mismatches, the errors, the traces with preemptions and with evicted cached blocks
(so that the pressure is known to bind), the traces whose data-parallel ranks ran in
lockstep (every other trace of a ``ranks`` family: a mixture-of-experts model's ranks,
which report their counts to vLLM's router), then the first differences found.

``--any-version`` runs against whatever vLLM is installed (``SCHEDLAB_VLLM_ANY_VERSION``)
to see how a newer release differs from 0.19.0.

Usage: ``python benchmarks/vllm_differential.py [--traces 10000] [--seed 0] [--workers 2]
[--any-version]``; exits 1 if any trace mismatched.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

#: (family, trace number, preempted, evicted, ranks in lockstep, first mismatch or error,
#: or None)
Outcome = tuple[str, int, bool, bool, bool, str | None]


def run_chunk(seed: int, jobs: list[tuple[str, int]]) -> list[Outcome]:
    """The outcome of each ``(family, number)`` trace."""
    from schedlab.integrations.vllm.differential import FAMILIES, differential_run, random_trace

    found: list[Outcome] = []
    for family, number in jobs:
        trace = random_trace(family, np.random.default_rng([seed, FAMILIES.index(family), number]))
        lockstep = trace.replicas > 1 and number % 2 == 1
        try:
            _, theirs, mismatch = differential_run(
                trace.stream, trace.engine, replicas=trace.replicas, lockstep=lockstep
            )
        except Exception as error:  # another vLLM release may break the integration itself
            text = f"{trace.engine}: error {type(error).__name__}: {error}"
            found.append((family, number, False, False, lockstep, text))
            continue
        preempted = any(r.preemptions for r in theirs.records)
        text = None if mismatch is None else f"{trace.engine}: {mismatch}"
        found.append((family, number, preempted, theirs.evicted_blocks > 0, lockstep, text))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=10_000, help="traces (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the traces (default 0)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument(
        "--any-version", action="store_true", help="run against any installed vLLM release"
    )
    parser.add_argument("--show", type=int, default=5, help="mismatches printed (default 5)")
    args = parser.parse_args(argv)
    if args.traces < 1 or args.workers < 1:
        parser.error("--traces and --workers must be >= 1")
    if args.any_version:
        os.environ["SCHEDLAB_VLLM_ANY_VERSION"] = "1"
    from schedlab.integrations.vllm import require_vllm
    from schedlab.progress import Progress

    version = require_vllm()
    from schedlab.integrations.vllm.differential import FAMILIES

    started = time.perf_counter()
    jobs = [(FAMILIES[k % len(FAMILIES)], k // len(FAMILIES)) for k in range(args.traces)]
    chunks = [jobs[start : start + 50] for start in range(0, len(jobs), 50)]
    results: list[Outcome] = []
    with ProcessPoolExecutor(args.workers) as pool, Progress("traces", args.traces) as bar:
        for found in pool.map(run_chunk, [args.seed] * len(chunks), chunks):
            results.extend(found)
            bar(len(results), args.traces)
    wall = time.perf_counter() - started
    print(
        f"vLLM {version} against schedlab's engine: {args.traces:,} traces, seed {args.seed}, "
        f"{wall:.0f} s"
    )
    print(
        f"{'family':<14}{'traces':>8}{'mismatches':>12}{'rate':>9}{'errors':>8}"
        f"{'with preemption':>17}{'with eviction':>15}{'in lockstep':>13}"
    )
    for family in FAMILIES:
        mine = [r for r in results if r[0] == family]
        errors = sum(r[5] is not None and ": error " in r[5] for r in mine)
        bad = sum(r[5] is not None for r in mine) - errors
        rate = bad / len(mine) if mine else 0.0
        print(
            f"{family:<14}{len(mine):>8,}{bad:>12,}{rate:>9.2%}{errors:>8,}"
            f"{sum(r[2] for r in mine):>17,}{sum(r[3] for r in mine):>15,}"
            f"{sum(r[4] for r in mine):>13,}"
        )
    wrong = [r for r in results if r[5] is not None]
    print(f"mismatch rate {len(wrong) / len(results):.4%} ({len(wrong)} of {len(results):,})")
    for family, number, _, _, _, text in wrong[: args.show]:
        print(f"  {family} trace {number}: {text}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
