r"""schedlab's engine against vLLM's own scheduler on many random traces: the mismatch rate.

Each trace is drawn from ``--seed`` and its number: 1-40 requests with arrival gaps of
0-200 ms in 5 ms steps (so ties occur), prompts of 1-800 tokens and outputs of 1-120,
under engine settings drawn to bind (KV caches of one to four times the largest request,
1-16 seats, token budgets of 16-512, block sizes 8/16/32, the whole-prompt admission gate
on or off). The traces are split evenly over the four modes: prefix caching on/off,
synchronous/asynchronous scheduling. Each runs on both engines
(:func:`schedlab.integrations.vllm.differential.differential_run`); a trace mismatches
when any step or request differs, and errs when the integration itself fails (another
vLLM release may change what it reads). The table gives, per mode, the traces, the
mismatches, the errors, the traces with preemptions (so that the KV pressure is known to
bind) and the first differences found.

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
from typing import Any

import numpy as np

MODES = [(prefix, asynchronous) for prefix in (True, False) for asynchronous in (False, True)]


def random_case(seed: int, number: int, mode: tuple[bool, bool]) -> tuple[Any, Any]:
    """Trace ``number`` of ``seed``: its request stream and engine settings."""
    from schedlab.serving.engine_config import EngineConfig
    from schedlab.serving.workloads import RequestStream

    rng = np.random.default_rng([seed, number])
    n = int(rng.integers(1, 41))
    arrival = np.cumsum(rng.integers(0, 41, n)) * 0.005
    prompt = rng.integers(1, 801, n)
    output = rng.integers(1, 121, n)
    block_size = int(rng.choice([8, 16, 32]))
    seqs = int(rng.integers(1, 17))
    largest = -(-int(np.max(prompt + output - 1)) // block_size)
    blocks = int(rng.integers(largest, 4 * largest + 9))
    engine = EngineConfig(
        kv_tokens=blocks * block_size,
        block_size=block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=int(rng.integers(max(seqs, 16), 513)),
        prefix_caching=mode[0],
        reserve_full_prompt=bool(rng.integers(0, 2)),
        async_scheduling=mode[1],
    )
    stream = RequestStream("differential", arrival, prompt, output, float(arrival[-1]) + 1.0)
    return stream, engine


def run_chunk(seed: int, numbers: list[int]) -> list[tuple[int, int, str | None]]:
    """``(trace, preemptions in vLLM's run, first mismatch or None)`` for each trace."""
    from schedlab.integrations.vllm.differential import differential_run

    found = []
    for number in numbers:
        stream, engine = random_case(seed, number, MODES[number % len(MODES)])
        try:
            _, theirs, mismatch = differential_run(stream, engine)
        except Exception as error:  # another vLLM release may break the integration itself
            found.append((number, -1, f"{engine}: error {type(error).__name__}: {error}"))
            continue
        preempted = sum(r.preemptions for r in theirs.records)
        found.append((number, preempted, None if mismatch is None else f"{engine}: {mismatch}"))
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
    started = time.perf_counter()
    chunks = [
        list(range(start, min(start + 50, args.traces))) for start in range(0, args.traces, 50)
    ]
    results: list[tuple[int, int, str | None]] = []
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
        f"{'prefix caching':<16}{'scheduling':<14}{'traces':>8}{'mismatches':>12}"
        f"{'errors':>8}{'with preemption':>17}"
    )
    for m, (prefix, asynchronous) in enumerate(MODES):
        mine = [r for r in results if r[0] % len(MODES) == m]
        errors = sum(r[1] < 0 for r in mine)
        bad = sum(r[2] is not None for r in mine) - errors
        pressed = sum(r[1] > 0 for r in mine)
        print(
            f"{'on' if prefix else 'off':<16}{'async' if asynchronous else 'sync':<14}"
            f"{len(mine):>8,}{bad:>12,}{errors:>8,}{pressed:>17,}"
        )
    wrong = [r for r in results if r[2] is not None]
    print(f"mismatch rate {len(wrong) / len(results):.4%} ({len(wrong)} of {len(results):,})")
    for number, _, text in wrong[: args.show]:
        print(f"  trace {number}: {text}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
