"""How long the command line takes to start (issue 51): ``schedlab --version``, ``schedlab
--help``, a subcommand's ``--help`` and ``import schedlab``, each as a whole process.

Each command runs ``--repeats`` times after one unmeasured run (warm file cache); the page
gives the median, least and largest wall seconds. Targets (issue 51): ``--version`` at most
0.3 s and ``--help`` at most 0.6 s here.

Run: ``python benchmarks/startup.py`` (``--page docs/startup.md`` writes the results page);
wall seconds on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import command_line, tee_page

#: What is timed: a label, the command and its target in seconds (``None``: none).
COMMANDS = (
    ("schedlab --version", [sys.executable, "-m", "schedlab", "--version"], 0.3),
    ("schedlab --help", [sys.executable, "-m", "schedlab", "--help"], 0.6),
    ("schedlab simulate --help", [sys.executable, "-m", "schedlab", "simulate", "--help"], None),
    ("python -c 'import schedlab'", [sys.executable, "-c", "import schedlab"], None),
)


def wall_seconds(command: list[str], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` runs of ``command``, after one unmeasured run."""
    subprocess.run(command, check=True, capture_output=True)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--page", type=Path, default=None, help="also write a results page")
    args = parser.parse_args()
    command = command_line("startup.py", sys.argv[1:])
    with tee_page(args.page, "Start-up of the command line", command):
        print(f"{'command':<30} {'median':>8} {'least':>8} {'largest':>8}  target")
        for label, argv, target in COMMANDS:
            times = wall_seconds(argv, args.repeats)
            print(
                f"{label:<30} {statistics.median(times):>7.3f}s {min(times):>7.3f}s "
                f"{max(times):>7.3f}s  {'-' if target is None else f'<= {target:g} s'}",
                flush=True,
            )
        print(f"\nwall seconds of {args.repeats} runs each, after one unmeasured run")


if __name__ == "__main__":
    main()
