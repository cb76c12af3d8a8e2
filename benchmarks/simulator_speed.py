"""Simulator speed: iterations per second with 128 running requests, and CLI start-up.

Issue 5 targets: >= 20,000 iterations/s with 128 running requests; ``schedlab simulate``
start-up under 1 s. For reference, the issue quotes Vidur on this machine at 1,400-2,500
iterations/s (65-105 simulated seconds per wall-second) plus 5.5 s start-up.

Two engine loads, each run ``--repeats`` times (median reported):

* ``decode-128``: 128 requests that all arrive at t = 0 (prompt 512, output 20,000
  tokens): after the first prefills, 128 decodes run together until they finish.
* ``churn-128``: the ``chat`` workload (ShareGPT lengths) arriving faster than the engine
  serves (40 req/s for 60 s) with ``max_num_seqs = 128``: every iteration carries about
  128 running requests with arrivals, chunked prefills, finishes and preemptions.

Start-up: wall time of a subprocess running a tiny ``simulate`` (the ``chat`` workload at
20 req/s for 1 s: 15 requests) through the installed
``schedlab`` entry point when it has the command, and through
``schedlab.cli.serving.register`` on a bare argparse parser otherwise.

Usage: python benchmarks/simulator_speed.py [--repeats R] [--policy P]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

from schedlab.serving.cost_model import SLOWEAVE_DEFAULT
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import run_engine
from schedlab.serving.workloads import RequestStream, make_workload

CONFIG = EngineConfig(kv_tokens=2**22, max_num_seqs=128, max_num_batched_tokens=2048)


def loads(seed: int) -> dict[str, RequestStream]:
    n = 128
    decode = RequestStream("decode-128", np.zeros(n), np.full(n, 512), np.full(n, 20_000), 1.0)
    churn = make_workload("chat").generate(40.0, 60.0, seed)
    return {"decode-128": decode, "churn-128": churn}


def measure(stream: RequestStream, policy: str) -> tuple[float, float, float, int]:
    """(iterations/s, simulated s per wall s, mean running decodes, iterations)."""
    built = Scenario(policy, SLOWEAVE_DEFAULT, engine=CONFIG).build_policy()
    start = time.perf_counter()  # the run only, not the policy's one-off checks
    run = run_engine(stream, Scenario(built, SLOWEAVE_DEFAULT, engine=CONFIG))
    wall = time.perf_counter() - start
    iterations = run.iteration_end_s.size
    tokens = sum(b - a + 1 for r in run.records for a, b in r.segments)
    return iterations / wall, run.end_s / wall, tokens / iterations, iterations


def startup_seconds(repeats: int) -> tuple[str, list[float]]:
    # 20 req/s over 1 s: 15 requests with seed 0 (at 1 req/s none arrives, which
    # ``simulate`` refuses as an empty run)
    tiny = ["simulate", "--workload", "chat", "--rate", "20", "--duration", "1s", "--json"]
    exe = shutil.which("schedlab")
    has_command = False
    if exe:
        probe = subprocess.run([exe, "simulate", "--help"], capture_output=True, text=True)
        has_command = probe.returncode == 0
    if has_command and exe:
        how, argv = "schedlab entry point", [exe, *tiny]
    else:
        code = (
            "import argparse, sys; from schedlab.cli.serving import register; "
            "p = argparse.ArgumentParser(); register(p.add_subparsers()); "
            "a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))"
        )
        how, argv = (
            "python -c + schedlab.cli.serving.register",
            [sys.executable, "-c", code, *tiny],
        )
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return how, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--policy", default="sloweave")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, stream in loads(args.seed).items():
        rows = [measure(stream, args.policy) for _ in range(args.repeats)]
        its, sim, running, iterations = (statistics.median(col) for col in zip(*rows, strict=True))
        print(
            f"{name:<11} {args.policy}: {its:,.0f} iterations/s "
            f"(min {min(r[0] for r in rows):,.0f}), {sim:,.0f} simulated s per wall s, "
            f"mean decodes per iteration {running:.1f}, {iterations:,.0f} iterations "
            f"(median of {args.repeats})"
        )
    how, times = startup_seconds(args.repeats)
    print(
        f"start-up ({how}): median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s over {args.repeats} runs"
    )


if __name__ == "__main__":
    main()
