"""Subcommands of the offline problem: ``solve``, ``solvers`` and ``compare``, and the
options they share with :mod:`schedlab.cli.instance_tools` (``verify``, ``bound``,
``generate``, ``export``).

Heavy modules (solvers, bounds, PuLP) are imported when a command runs, so start-up stays
fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from schedlab.cli.arguments import (
    add_executor_options,
    comma_list,
    executor_from,
    non_negative_int,
)
from schedlab.cli.durations import optional_duration
from schedlab.cli.files import declare_files
from schedlab.cli.outputs import (
    STDOUT,
    add_format_option,
    refuse_stdout,
    table_aside,
    wrote,
)
from schedlab.errors import InputError, SchedlabError
from schedlab.tables import rows_to_csv

__all__ = ["register"]


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=1))


def _key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    """``KEY=VALUE`` texts of a repeated option, by key (a key given twice is refused)."""
    pairs: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{flag}: expected KEY=VALUE, got {item!r}")
        if key.strip() in pairs:
            raise InputError(f"{flag}: {key.strip()} given twice")
        pairs[key.strip()] = value
    return pairs


def _memory_size(text: str) -> int:
    """``--max-memory``: a size such as ``4G``, ``512M`` or bare bytes."""
    from schedlab.budget import parse_memory

    try:
        return parse_memory(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_max_memory(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--max-memory",
        type=_memory_size,
        default=None,
        metavar="SIZE",
        help=f"memory budget {what}, e.g. 4G, 512M or bytes; a method that would pass it "
        "refuses in one line (default: a quarter of the machine's memory)",
    )


def _time_limit(args: argparse.Namespace) -> float | None:
    """``--time-limit`` in seconds (``None``: not given, no limit)."""
    from schedlab.budget import MAX_TIME_LIMIT

    return optional_duration(args.time_limit, "--time-limit", maximum=MAX_TIME_LIMIT)


def _add_predictions(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--predictions",
        default=None,
        metavar="SPEC|FILE",
        help=f"predicted output lengths for {what}: perfect, interval:ALPHA[:SEED], "
        "buckets[:SEED], lognormal:CV[:SEED], or a .csv/.json file of id,lower,upper per "
        "request (default perfect)",
    )


def _solver_options(solver: str, texts: dict[str, str]) -> dict[str, Any]:
    from schedlab.offline.solvers import get_solver
    from schedlab.offline.solvers.contract import parse_options

    return parse_options(solver, get_solver(solver).fn, texts)


def _predictions(
    value: str,
    solvers: list[str],
    options: dict[str, dict[str, Any]],
    instances: list[Any],
) -> str:
    """``--predictions``: the value of the solver option ``predictions`` of the online
    ones among ``solvers`` (``options``: each solver's other options, by name), checked
    before anything runs.

    A spec (``interval:0.5:3``) is checked as :func:`schedlab.predictions.predict` reads
    it; a prediction file (``.csv`` or ``.json``) is read for each of ``instances`` by
    request id, and its intervals checked against the true lengths (an exact file must
    contain them). No online solver among ``solvers``, or the option also given by
    ``--option``, is refused.
    """
    from schedlab.offline.compare import online_solvers
    from schedlab.offline.solvers import available_solvers
    from schedlab.predictions import predict, read_predictions

    online = online_solvers(solvers)
    if not online:
        known = ", ".join(online_solvers(available_solvers()))
        raise InputError(
            f"--predictions: {', '.join(solvers)} knows every output length and takes no "
            f"predictions; the online solvers do: {known}"
        )
    if any("predictions" in options.get(name, {}) for name in online):
        raise InputError("--predictions: also given by --option; give it once")
    if not value.endswith((".csv", ".json")):
        predict(value, [1], where="--predictions")  # the spec alone
        return value
    for instance in instances:
        read_predictions(value, instance).check(instance.output, f"--predictions {value}")
    return value


def _runs(result: Any) -> list[list[list[int]]]:
    """Every request's runs ``[[start, rounds], ...]`` in order, the last one complete:
    an online algorithm's own, one run a request for any other solver."""
    own = result.stats.get("runs")
    if own is not None:
        return [[[int(p), int(r)] for p, r in request] for request in own]
    outputs = result.schedule.instance.output.tolist()
    return [[[int(p), o]] for p, o in zip(result.starts.tolist(), outputs, strict=True)]


def _without_runs(stats: dict[str, Any]) -> dict[str, Any]:
    """A result's statistics but an online algorithm's runs, which ``--json`` prints once,
    as ``"runs"`` beside the starts."""
    return {key: value for key, value in stats.items() if key != "runs"}


def _cmd_solve(args: argparse.Namespace) -> int:
    from schedlab import read_instance, solve
    from schedlab.offline.schedule_io import write_schedule_csv

    if args.schedule_csv and args.schedule_csv != STDOUT:
        from schedlab.plotting.figures import check_output_path

        check_output_path(args.schedule_csv, "--schedule-csv")
        target = Path(args.schedule_csv)
        if target.suffix.lower() != ".csv":
            raise InputError(f"--schedule-csv: {target} must end in .csv (verify reads it so)")
    instance = read_instance(args.file)
    options = _solver_options(args.solver, _key_values(args.option, "--option"))
    if args.predictions is not None:
        options["predictions"] = _predictions(
            args.predictions, [args.solver], {args.solver: options}, [instance]
        )
    result = solve(
        instance,
        args.solver,
        time_limit=_time_limit(args),
        max_memory=args.max_memory,
        seed=args.seed,
        bound=None if args.no_bound else "best",
        progress=args.format == "text" and not args.quiet,
        **options,
    )
    if args.schedule_csv:
        write_schedule_csv(result.schedule, args.schedule_csv)
        if args.schedule_csv != STDOUT:
            wrote(args.schedule_csv)
    with table_aside(args.schedule_csv):
        _solve_report(args, instance, result)
    return 0


def _memory_use(result: Any) -> tuple[int, float]:
    """Peak tokens held and the share of the memory-time area used: an online solver's
    over every run, evicted ones included (its ``stats``), else the schedule's."""
    stats, schedule = result.stats, result.schedule
    return (
        stats.get("peak_memory", schedule.peak_memory),
        stats.get("utilisation", schedule.utilisation),
    )


def _solve_report(args: argparse.Namespace, instance: Any, result: Any) -> None:
    """``solve``'s output in ``--format``."""
    s = result.schedule
    peak, utilisation = _memory_use(result)
    if args.format == "json":
        data = result.to_dict()
        _print_json(data | {"stats": _without_runs(result.stats), "runs": _runs(result)})
        return
    if args.format == "csv":
        row = {
            "instance": instance.name,
            "n": instance.n,
            "kv_tokens": instance.kv_tokens,
            "solver": result.solver,
            "status": str(result.status),
            "stopped_by": result.stats.get("stopped_by"),
            "runtime_s": result.runtime,
            "objective": result.objective,
            "mean_latency_rounds": s.mean_latency,
            "lower_bound": result.lower_bound,
            "gap": result.gap,
            "makespan_rounds": s.makespan,
            "peak_memory_tokens": peak,
            "utilisation": utilisation,
        }
        rows_to_csv([row], sys.stdout)
        return
    bound = "-" if result.lower_bound is None else f"{result.lower_bound:,.1f}"
    gap = "-" if result.gap is None else f"{100 * result.gap:.2f}%"
    stopped = result.stats.get("stopped_by")
    ended = {
        None: "",
        "work": ", stopped by its work budget" + _raise_it(result.stats.get("work_budget")),
        "memory": ", stopped by its memory budget (raise it with --max-memory)",
        "time_limit": ", stopped by the time limit",
    }.get(stopped, f", stopped by {stopped}")
    print(f"{instance.name or args.file}: n = {instance.n}, M = {instance.kv_tokens:,} tokens")
    print(f"solver        {result.solver} ({result.status}, {result.runtime:.3f} s{ended})")
    print(f"objective     {result.objective:,} (mean latency {s.mean_latency:,.1f} rounds)")
    print(f"lower bound   {bound} (gap {gap})")
    print(
        f"makespan      {s.makespan:,} rounds; peak memory {peak:,} tokens; "
        f"utilisation {100 * utilisation:.1f}%"
        + (" (every run, evicted ones included)" if "evictions" in result.stats else "")
    )
    if "evictions" in result.stats:  # an online algorithm: its bound is the hindsight bound
        print(
            f"evictions     {result.stats['evictions']:,} runs, "
            f"{result.stats['wasted_token_rounds']:,} wasted token-rounds "
            f"(predictions {result.stats['predictions']}; the lower bound is in hindsight)"
        )


def _raise_it(budget: dict[str, Any] | None) -> str:
    """`` NAME=VALUE (raise it with --option NAME=...)`` for a solver's work budget."""
    if not budget:
        return ""
    (name, value), *_ = budget.items()
    return f" {name}={value:g} (raise it with --option {name}=...)"


def _compare_options(items: list[str] | None, names: list[str]) -> dict[str, dict[str, Any]]:
    """``--option SOLVER.KEY=VALUE`` of ``compare``, read as each solver's options."""
    texts: dict[str, dict[str, str]] = {}
    for key, value in _key_values(items, "--option").items():
        solver, dot, option = key.partition(".")
        if not dot or not option:
            raise InputError(f"--option: expected SOLVER.KEY=VALUE, got {key}={value}")
        if solver not in names:
            raise InputError(
                f"--option {key}: {solver} is not among the solvers ({', '.join(names)})"
            )
        texts.setdefault(solver, {})[option] = value
    return {solver: _solver_options(solver, own) for solver, own in texts.items()}


def _cmd_compare(args: argparse.Namespace) -> int:
    from schedlab.offline.compare import online_solvers, solver_names
    from schedlab.offline.report import REPORT_FILES, run_report
    from schedlab.plotting.figures import check_figure_path

    if args.starts and args.format != "json":
        raise InputError("--starts: only with --format json (the table shows no start rounds)")
    refuse_stdout(args.output, "--output", "the report is a folder of two files")
    names = solver_names(args.solvers)  # names and options are checked before anything runs
    options = _compare_options(args.option, names)
    if args.predictions is not None:
        value = _predictions(args.predictions, names, options, _file_instances(args))
        for name in online_solvers(names):
            options[name] = {**options.get(name, {}), "predictions": value}
    if args.output:  # a new output folder may also hold the figure
        Path(args.output).mkdir(parents=True, exist_ok=True)
    if args.plot:
        check_figure_path(args.plot, "--plot")
    _plot_schedule(args, names)
    report = run_report(
        args.paths,
        names,
        time_limit=_time_limit(args),
        max_memory=args.max_memory,
        seed=args.seed,
        options=options,
        out_dir=args.output,
        executor=executor_from(args, progress=args.format == "text" and not args.quiet),
    )
    if args.plot:
        from schedlab.plotting.comparison import MAX_SCHEDULE_COLUMNS, plot_report

        plot_report(report, args.plot, schedule=_plot_schedule(args, names))
        scheduled = sum(comp.best() is not None for comp in report.comparisons)
        if args.plot_schedule is None and scheduled > MAX_SCHEDULE_COLUMNS:
            print(
                f"--plot: {scheduled} instances have a schedule, more than "
                f"{MAX_SCHEDULE_COLUMNS}: the figure shows their gaps only; "
                "choose one with --plot-schedule INSTANCE[:SOLVER]",
                file=sys.stderr,
            )
    if args.format == "json":
        _print_json(_compare_json(report, starts=args.starts))
    elif args.format == "csv":
        rows_to_csv(report.records(), sys.stdout)
    else:
        print(report.to_text())
    for name in REPORT_FILES if args.output else ():
        wrote(Path(args.output) / name)
    for path in (args.plot, args.results):
        if path:
            wrote(path)
    return 0


def _plot_schedule(args: argparse.Namespace, solvers: list[str]) -> str | tuple[str, str] | None:
    """``--plot-schedule INSTANCE[:SOLVER]`` as :func:`plot_report`'s ``schedule``; its
    solver is checked against ``solvers`` (the instance only once the report exists)."""
    text = args.plot_schedule
    if text is None:
        return None
    if not args.plot:
        raise InputError("--plot-schedule: only with --plot")
    name, colon, solver = text.rpartition(":")
    if not colon:
        return text
    if solver not in solvers:
        raise InputError(
            f"--plot-schedule {text}: {solver} is not among the solvers ({', '.join(solvers)})"
        )
    return (name, solver)


def _file_instances(args: argparse.Namespace) -> list[Any]:
    """The instances ``compare`` reads, for checking a prediction file against each
    (standard input is read once, by the comparison: not with a prediction file)."""
    from schedlab import read_instance

    if not args.predictions.endswith((".csv", ".json")):
        return []
    files = _instance_files(args.paths)
    if Path("-") in files:
        raise InputError(f"--predictions {args.predictions}: not with an instance on stdin")
    return [read_instance(path) for path in files]


def _instance_files(paths: list[str]) -> list[Path]:
    """The instance files ``compare`` reads: each file named, and a folder's ``*.json``."""
    files: list[Path] = []
    for path in map(Path, paths):
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return files


def _report_files(folder: Path) -> list[Path]:
    """The files ``compare -o FOLDER`` writes."""
    from schedlab.offline.report import REPORT_FILES

    return [folder / name for name in REPORT_FILES]


def _compare_json(report: Any, *, starts: bool) -> list[dict[str, Any]]:
    """One object a (instance, solver): the report's columns, and each result's
    statistics (and start rounds, if asked) where the solver gave a schedule."""
    rows = []
    for comp in report.comparisons:
        done = {r.solver: r for r in comp.results}
        for record in comp.records():
            result = done.get(record["solver"])
            if result is not None:
                peak, utilisation = _memory_use(result)
                record |= {"peak_memory": peak, "utilisation": utilisation}
                record["stats"] = _without_runs(result.stats)
                if starts:
                    record["starts"] = result.starts.tolist()
                    record["runs"] = _runs(result)
            rows.append(record)
    return rows


def _cmd_solvers(args: argparse.Namespace) -> int:
    from schedlab.offline.solvers import available_solvers, get_solver

    infos = []
    for name in available_solvers():
        try:
            infos.append(get_solver(name))
        except SchedlabError as error:  # a broken plug-in: the others are still listed
            print(f"schedlab: warning: solver {name!r} left out: {error}", file=sys.stderr)
    if args.format == "csv":
        rows = [
            {
                "solver": info.name,
                "exact": info.exact,
                "option": spec.name,
                "types": " or ".join(spec.type_names),
                "default": spec.default,
            }
            for info in infos
            for spec in info.option_specs
        ]
        rows_to_csv(rows, sys.stdout)
    elif args.format == "json":
        _print_json(
            [
                {
                    "name": info.name,
                    "exact": info.exact,
                    "options": [
                        {
                            "name": spec.name,
                            "types": list(spec.type_names),
                            "default": spec.default,
                        }
                        for spec in info.option_specs
                    ],
                }
                for info in infos
            ]
        )
    else:
        print("\n".join(info.describe() for info in infos))
    return 0


def _solver_epilog() -> str:
    """The options of every built-in and registered solver, for ``solve --help``."""
    from schedlab.offline.solvers import SOLVERS

    return "solver options (--option KEY=VALUE; schedlab solvers lists them all):\n" + "\n".join(
        info.describe() for _, info in sorted(SOLVERS.entries().items())
    )


def register(sub: Any) -> None:
    """Add the offline subcommands to an argparse subparsers object; the names each
    option takes are listed in its help, from the registries."""
    # Over 100 lines by design: a declaration of three subcommands' options, one statement each.
    from schedlab.offline.compare import DEFAULT_SOLVERS
    from schedlab.offline.solvers import available_solvers

    solvers = ", ".join(available_solvers())

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--time-limit",
            default=None,
            metavar="DURATION",
            help="wall-clock cap per solver (and for the bound); default none: solvers "
            "stop at their work budgets, so a seed gives the same answer on any machine",
        )
        _add_max_memory(p, "per solver (and for the bound)")
        p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default 0)")
        add_format_option(p)

    p = sub.add_parser(
        "solve",
        help="solve one instance with one solver",
        epilog=_solver_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="instance file (schedlab-instance/1 JSON; - for stdin)")
    p.add_argument("--solver", default="mc-sf", help=f"{solvers} (default mc-sf)")
    p.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a solver option, e.g. work=20000 (local-search), max_requests=14 (dp), "
        "backfill=true (rules); repeat for several",
    )
    _add_predictions(p, "the online solver (a-min, a-max, ...)")
    p.add_argument("--no-bound", action="store_true", help="skip the lower bound")
    p.add_argument(
        "--schedule-csv",
        default=None,
        metavar="FILE.csv",
        help="write the schedule: request, id, start, completion, prompt, output "
        "(verify reads it back)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    common(p)
    p.set_defaults(func=_cmd_solve)
    declare_files(p, reads=["file", "predictions"], writes=["schedule_csv"])

    p = sub.add_parser("solvers", help="list the solvers with their options, types and defaults")
    add_format_option(p)
    p.set_defaults(func=_cmd_solvers)

    p = sub.add_parser("compare", help="compare solvers against one lower bound")
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="instance files or folders (- for stdin)"
    )
    p.add_argument(
        "--solvers",
        type=comma_list,
        default=None,
        help=f"comma-separated, from {solvers} (default {','.join(DEFAULT_SOLVERS)})",
    )
    p.add_argument(
        "--option",
        action="append",
        metavar="SOLVER.KEY=VALUE",
        help="a solver's option, e.g. local-search.work=20000; repeat for several",
    )
    p.add_argument(
        "-o",
        "--output",
        default=None,
        metavar="DIR",
        help="save the report as DIR/report.csv and DIR/report.md",
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="save a figure: gap per solver and instance; memory and Gantt of each "
        "instance's best schedule (up to 4 instances) or of --plot-schedule's",
    )
    p.add_argument(
        "--plot-schedule",
        default=None,
        metavar="INSTANCE[:SOLVER]",
        help="--plot: draw this instance's schedule by SOLVER (default its best) "
        "instead of one column per instance",
    )
    _add_predictions(p, "every online solver listed")
    p.add_argument(
        "--starts",
        action="store_true",
        help="--format json: include every start round, and every request's runs",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_executor_options(p)
    common(p)
    p.set_defaults(func=_cmd_compare)
    declare_files(
        p,
        reads=["paths", "predictions", "results"],
        writes=["output", "plot", "results"],
        resolve={"paths": lambda value, args: _instance_files([value] if value else [])},
        folders={"output": _report_files},
    )
