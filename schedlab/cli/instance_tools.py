"""Subcommands on one instance beside solving it: ``verify`` (a schedule, by the
independent verifier), ``bound`` (a lower bound on its optimum), ``generate`` (an
instance) and ``export`` (its exact time-indexed model as LP or MPS).

Heavy modules (bounds, PuLP) are imported when a command runs, so start-up stays fast;
the options they share with ``solve`` and ``compare`` are :mod:`schedlab.cli.offline`'s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from schedlab.cli.arguments import non_negative_int, positive_int, positive_number, read_from_stdin
from schedlab.cli.files import declare_files
from schedlab.cli.offline import _add_max_memory, _print_json, _time_limit
from schedlab.cli.outputs import (
    STDOUT,
    add_format_option,
    wrote,
)
from schedlab.errors import InputError
from schedlab.tables import rows_to_csv

__all__ = ["register"]


def _cmd_verify(args: argparse.Namespace) -> int:
    from schedlab import Schedule, read_instance, verify
    from schedlab.offline.schedule_io import read_starts

    instance = read_instance(args.file)
    starts = read_starts(args.starts, instance)
    problems = verify(instance, starts)
    if problems:
        print(f"INFEASIBLE: {len(problems)} violation(s)")
        for line in problems:
            print(f"  - {line}")
        return 1
    rounds: dict[int, int] = {}
    for k, entry in enumerate(starts):
        request, start = entry if isinstance(entry, tuple) else (k, entry)
        rounds[request] = start
    schedule = Schedule(instance, [rounds[i] for i in range(instance.n)])
    print(
        f"FEASIBLE: objective {schedule.objective:,}, makespan {schedule.makespan:,}, "
        f"peak memory {schedule.peak_memory:,} of {instance.kv_tokens:,} tokens"
    )
    return 0


def _cmd_bound(args: argparse.Namespace) -> int:
    from schedlab import lower_bound, read_instance

    instance = read_instance(args.file)
    bound = lower_bound(
        instance,
        args.method,
        time_limit=_time_limit(args),
        max_memory=args.max_memory,
        work=args.work,
        progress=args.format == "text" and not args.quiet,
    )
    data: dict[str, Any] = {
        "method": bound.method,
        "value": bound.value,
        "status": bound.status,
        "runtime_s": bound.runtime,
        "stats": bound.stats,
    }
    if args.format == "json":
        _print_json(data)
    elif args.format == "csv":
        row = {"instance": instance.name, "n": instance.n} | data
        del row["stats"]
        row["out_of_reach"] = " ".join(bound.stats.get("out_of_reach") or [])
        rows_to_csv([row], sys.stdout)
    else:
        left_out = bound.stats.get("out_of_reach")
        note = f"; out of reach: {', '.join(left_out)}" if left_out else ""
        print(
            f"{instance.name or args.file}: lower bound {bound.value:,.1f} "
            f"({bound.method}, {bound.status}, {bound.runtime:.3f} s{note})"
        )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from schedlab import read_instance
    from schedlab.offline.export import export_model

    instance = read_instance(args.file)
    limits = {"max_nonzeros": args.max_nonzeros, "max_memory": args.max_memory}
    if args.output != STDOUT:
        wrote(export_model(instance, args.output, args.format, **limits))
        return 0
    if args.format is None:
        raise InputError("--output -: give --format lp or mps (no file suffix to tell)")
    with tempfile.TemporaryDirectory() as folder:  # PuLP writes files only
        model = export_model(instance, Path(folder) / f"model.{args.format}", **limits)
        sys.stdout.write(model.read_text(encoding="utf-8"))
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from schedlab import write_instance
    from schedlab.llm.lengths import builtin_table_names
    from schedlab.offline.backlogs import (
        jaillet_instance,
        mixed_backlog,
        sample_backlog,
    )

    allowed = {
        "mixed": {"kv_tokens", "long_fraction"},
        "jaillet": set(),
        "backlog": {"kv_tokens", "source"},
    }
    for option in ("kv_tokens", "long_fraction", "source"):
        if getattr(args, option) is not None and option not in allowed[args.kind]:
            flag = "--" + option.replace("_", "-")
            raise InputError(f"{flag}: does not apply to generate {args.kind}")
    n = 200 if args.n is None and args.kind != "jaillet" else args.n
    limit = {"max_requests": args.max_requests}
    if args.kind == "mixed":
        fraction = 0.5 if args.long_fraction is None else args.long_fraction
        inst = mixed_backlog(n, args.kv_tokens, fraction, args.seed, name=args.name, **limit)
    elif args.kind == "jaillet":
        inst = jaillet_instance(args.seed, n, name=args.name, **limit)
    else:
        source: Any = args.source or "sharegpt"
        if Path(source).is_file():
            from schedlab.llm.traces import read_trace

            source = read_trace(source)
        elif source not in builtin_table_names() and (
            Path(source).suffix or Path(source).parent != Path(".")
        ):  # spelled as a path, not as a table's name
            raise InputError(f"--source {source}: no such trace file")
        inst = sample_backlog(n, args.kv_tokens, source, args.seed, name=args.name, **limit)
    write_instance(inst, args.output)
    if args.output != STDOUT:
        wrote(args.output, f"n = {inst.n}, M = {inst.kv_tokens:,}")
    return 0


def register(sub: Any) -> None:
    """Add ``verify``, ``bound``, ``generate`` and ``export`` to an argparse subparsers
    object; the names an option takes are listed in its help, from the registries."""
    # Over 100 lines by design: a declaration of four subcommands' options, one statement each.
    from schedlab.llm.lengths import builtin_table_names
    from schedlab.offline.backlogs import DEFAULT_KV_TOKENS, MAX_REQUESTS
    from schedlab.offline.bounds import available_bounds

    p = sub.add_parser("verify", help="check a schedule with the independent verifier")
    p.add_argument("file", help="instance file (- for stdin)")
    p.add_argument(
        "starts",
        metavar="SCHEDULE",
        help="solve --schedule-csv's CSV, or JSON: a list of starts, {'starts': [...]} "
        "(solve --json), or [{'request': i, 'start': p}, ...]",
    )
    p.set_defaults(func=_cmd_verify)
    declare_files(p, reads=["file", "starts"])

    p = sub.add_parser("bound", help="compute a lower bound on the optimum")
    p.add_argument("file", help="instance file (- for stdin)")
    p.add_argument(
        "--method", default="best", help=f"{', '.join(available_bounds())} (default best)"
    )
    p.add_argument(
        "--time-limit",
        default=None,
        metavar="DURATION",
        help="wall-clock cap for the bound (default none: each method runs its work budget)",
    )
    _add_max_memory(p, "of each method")
    p.add_argument(
        "--work",
        type=positive_number,
        default=None,
        metavar="START_COSTS",
        help="best's work budget: methods whose estimated work does not fit are left out "
        "(default 2e9)",
    )
    add_format_option(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=_cmd_bound)
    declare_files(p, reads=["file"])

    p = sub.add_parser("generate", help="generate an instance")
    p.add_argument(
        "kind",
        choices=("mixed", "jaillet", "backlog"),
        help="mixed: short and long requests; jaillet: the adversarial family of Jaillet "
        "et al.; backlog: lengths drawn from a length table or trace",
    )
    p.add_argument(
        "-n",
        "--n",
        type=positive_int,
        default=None,
        help="number of requests (default 200; jaillet: drawn from U[40, 60])",
    )
    p.add_argument(
        "--kv-tokens",
        type=positive_int,
        default=None,
        help=f"mixed, backlog: KV budget M in tokens (default {DEFAULT_KV_TOKENS:,})",
    )
    p.add_argument(
        "--long-fraction", type=float, default=None, help="mixed: share of long requests (0.5)"
    )
    p.add_argument(
        "--source",
        default=None,
        help=f"backlog: a shipped length table ({', '.join(builtin_table_names())}; "
        "default sharegpt) or a trace file (- for standard input, a CSV or JSONL trace)",
    )
    read_from_stdin(p, ("source", "stdin"))
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
    p.add_argument(
        "--name",
        default=None,
        help="the instance's name (default KIND-nN-sSEED, e.g. mixed-n200-s0)",
    )
    p.add_argument(
        "-o",
        "--output",
        default=STDOUT,
        metavar="FILE",
        help="write the instance to this file (default -, standard output)",
    )
    p.add_argument(
        "--max-requests",
        type=positive_int,
        default=MAX_REQUESTS,
        help=f"refuse more requests than this (default {MAX_REQUESTS:,})",
    )
    p.set_defaults(func=_cmd_generate)
    declare_files(p, reads=["source"], writes=["output"])

    p = sub.add_parser("export", help="write the exact time-indexed model as LP or MPS")
    p.add_argument("file", help="instance file (- for stdin)")
    p.add_argument(
        "--format", choices=("lp", "mps"), default=None, help="default: from -o's suffix"
    )
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="write the model here (- for standard output, with --format)",
    )
    p.add_argument(
        "--max-nonzeros",
        type=positive_int,
        default=5_000_000,
        help="refuse a larger model (default 5,000,000 nonzeros, about 85 MB as LP)",
    )
    _add_max_memory(p, "for the model, built in memory before it is written")
    p.set_defaults(func=_cmd_export)
    declare_files(p, reads=["file"], writes=["output"])
