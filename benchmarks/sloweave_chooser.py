"""Speed of SLOWeave's chunk chooser: microseconds per decision, binary search vs scan.

Issue 5 target: <= 20 us per decision with the analytic model at C_max = 4096. States are
drawn at random (seeded) so that the budget binds somewhere inside [0, C_max]; the linear
scan (the reference of the property tests) evaluates every chunk size.

Usage: python benchmarks/sloweave_chooser.py [--decisions N] [--repeats R] [--seed S]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from schedlab.serving.cost_model import SLOWEAVE_DEFAULT
from schedlab.serving.sloweave import SLOWeaveState, choose_chunk, linear_scan_chunk


def states(n: int, seed: int) -> list[SLOWeaveState]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        decodes = int(rng.integers(1, 257))
        budget = float(rng.uniform(0.005, 0.040))  # 5-40 ms TPOT budgets
        out.append(SLOWeaveState(100.0, 100.0 + budget, decodes, decodes * 1000, 10**6))
    return out


def per_decision_us(fn, batch: list[SLOWeaveState], c_max: int) -> float:
    start = time.perf_counter()
    for s in batch:
        fn(s, SLOWEAVE_DEFAULT, c_max=c_max)
    return (time.perf_counter() - start) / len(batch) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--c-max", type=int, default=4096)
    args = parser.parse_args()
    batch = states(args.decisions, args.seed)
    scan_batch = batch[: max(1, args.decisions // 100)]  # the scan is ~100x slower
    for s in scan_batch:  # same answers on the benchmark states
        assert choose_chunk(s, SLOWEAVE_DEFAULT, c_max=args.c_max).chunk == (
            linear_scan_chunk(s, SLOWEAVE_DEFAULT, c_max=args.c_max).chunk
        )
    fast = [per_decision_us(choose_chunk, batch, args.c_max) for _ in range(args.repeats)]
    slow = [
        per_decision_us(linear_scan_chunk, scan_batch, args.c_max) for _ in range(args.repeats)
    ]
    evals = statistics.mean(
        choose_chunk(s, SLOWEAVE_DEFAULT, c_max=args.c_max).evaluations for s in batch
    )
    chunks = [choose_chunk(s, SLOWEAVE_DEFAULT, c_max=args.c_max).chunk for s in batch]
    f, s = statistics.median(fast), statistics.median(slow)
    print(f"C_max = {args.c_max}, sloweave-default, {args.decisions} random states")
    print(
        f"chunk chosen: median {statistics.median(chunks):.0f}, "
        f"share at C_max {np.mean(np.array(chunks) == args.c_max):.2f}, at 0 "
        f"{np.mean(np.array(chunks) == 0):.2f}; mean evaluations {evals:.2f}"
    )
    print(
        f"binary search: {f:.2f} us/decision (median of {args.repeats}; "
        f"min {min(fast):.2f}, max {max(fast):.2f})"
    )
    print(f"linear scan:   {s:.1f} us/decision (median of {args.repeats})")
    print(f"speed-up: {s / f:.0f}x")


if __name__ == "__main__":
    main()
