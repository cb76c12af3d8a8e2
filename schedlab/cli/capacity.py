"""Command-line subcommands of the rate an engine sustains: ``capacity`` (the highest rate
meeting the SLO, by simulation), ``headroom`` (closed-form fluid capacities) and ``sweep``
(policies over rates).

``schedlab.cli`` adds them with :func:`register`; they share :mod:`schedlab.cli.serving`'s
options and scenario. As there, the simulator is imported when a command runs, and
matplotlib only when ``sweep --plot`` asks for it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from schedlab.cli.arguments import (
    add_executor_options,
    comma_list,
    executor_from,
    non_negative_int,
    positive_int,
    single_or_grid,
)
from schedlab.cli.durations import parse_duration
from schedlab.cli.outputs import add_format_option, wrote
from schedlab.cli.serving import (
    _common,
    _cost_model_option,
    _decode_alone,
    _engine,
    _margin,
    _ms,
    _positive_number,
    _refuse_bare_tpot,
    _scenario,
    _seed_list,
    _slo,
    _workload_option,
    cost_model_of,
    declare_serving_files,
    kv_json,
    print_csv,
    say_kv,
)
from schedlab.errors import ServingError
from schedlab.jobs import DEFAULT_BACKEND

__all__ = ["register"]


def _capacity(args: argparse.Namespace) -> int:
    from schedlab.serving.capacity import MIN_REL_TOL, capacity

    search = {
        "duration_s": parse_duration(args.duration, "--duration"),
        "target": _positive_number(args.target, "--target"),
        "rel_tol": _positive_number(args.tolerance, "--tolerance", MIN_REL_TOL),
        "start_rps": _positive_number(args.start_rate, "--start-rate"),
        "max_rps": _positive_number(args.max_rate, "--max-rate"),
        "data_dir": args.data_dir,
        "progress": args.format == "text" and not args.quiet,
    }
    single_or_grid(args, ("policy", "policies"), ("seed", "seeds"))
    if args.policies or args.seeds or len(args.predictions or ()) > 1:
        return _capacity_grid(args, search)
    if args.results or args.backend != DEFAULT_BACKEND or args.workers or args.address:
        raise ServingError(
            "--backend, --workers, --address, --results: for a grid only "
            "(give --policies, --seeds or several --predictions)"
        )
    result = capacity(args.workload, _scenario(args), **search)
    if args.format == "json":
        print(json.dumps({**result.to_dict(), **kv_json(args)}))
        return 0
    if args.format == "csv":
        print_csv(args, [result.row()])
        return 0
    bound = ">= " if result.saturated else ""
    say_kv(args)
    print(
        f"capacity of {result.policy} on {result.workload} (cost model {result.cost_model}, "
        f"{result.hardware}): {bound}{result.capacity_rps:.3f} "
        f"req/s (attainment >= {result.target:g} at TTFT <= {result.ttft_s:g} s, "
        f"TPOT ({result.tpot_slo}) <= {result.tpot_s * 1e3:g} ms; {len(result.probes)} runs)"
    )
    return 0


def _capacity_grid(args: argparse.Namespace, search: dict[str, Any]) -> int:
    from schedlab.serving.capacity import GridError, capacity_grid

    scenario = _scenario(args)
    policies = args.policies or [scenario.policy]
    seeds = [int(s) for s in args.seeds] if args.seeds else [scenario.seed]
    executor = executor_from(args, progress=search.pop("progress"))
    try:
        found = capacity_grid(
            args.workload,
            policies,
            scenario,
            seeds=seeds,
            predictions=args.predictions,
            **search,
            executor=executor,
        )
    except GridError as error:  # the searches that ran are shown, then the error
        _capacity_table(args, error.done)
        raise
    _capacity_table(args, found)
    if args.results:
        wrote(args.results)
    return 0


def _capacity_table(args: argparse.Namespace, found: Sequence[Any]) -> None:
    if args.format == "json":
        print(json.dumps([{**r.to_dict(), **kv_json(args)} for r in found]))
        return
    if not found:
        return
    if args.format == "csv":
        print_csv(args, [r.row() for r in found])
        return
    first = found[0]
    say_kv(args)
    print(
        f"capacity on {first.workload} (cost model {first.cost_model}, {first.hardware}), "
        f"attainment >= {first.target:g} at TTFT <= {first.ttft_s:g} s, TPOT "
        f"({first.tpot_slo}) <= {first.tpot_s * 1e3:g} ms"
    )
    if len({r.predictions for r in found}) > 1 or args.predictions:
        _capacity_by_predictions(found)
        return
    print(f"{'policy':<20}{'seed':>6}{'req/s':>10}{'runs':>6}")
    for r in found:
        bound = ">=" if r.saturated else ""
        print(f"{r.policy:<20}{r.seed:>6}{bound + f'{r.capacity_rps:.3f}':>10}{len(r.probes):>6}")


def _capacity_by_predictions(found: Sequence[Any]) -> None:
    """The capacities (req/s) of a grid over prediction models: a row per policy and
    seed, a column per model; a policy that reads no prediction ran once, under
    ``perfect``, and shows that capacity in every column (marked ``*``)."""
    from schedlab.serving.policy_registry import get_policy

    reads = {r.policy: get_policy(r.policy).reads_predictions for r in found}
    specs = list(dict.fromkeys(r.predictions for r in found if reads[r.policy])) or ["perfect"]
    width = max(12, *(len(s) + 2 for s in specs))
    print(f"{'policy':<20}{'seed':>6}" + "".join(f"{s:>{width}}" for s in specs) + "  (req/s)")
    cells: dict[tuple[str, int], dict[str, str]] = {}
    for r in found:
        text = (">=" if r.saturated else "") + f"{r.capacity_rps:.3f}"
        row = cells.setdefault((r.policy, r.seed), {})
        if reads[r.policy]:
            row[r.predictions] = text
        else:
            row.update({spec: text + "*" for spec in specs})
    for (policy, seed), row in cells.items():
        print(f"{policy:<20}{seed:>6}" + "".join(f"{row.get(s, '-'):>{width}}" for s in specs))
    if not all(reads.values()):
        print("* reads no prediction: one search, under perfect predictions")


def _headroom(args: argparse.Namespace) -> int:
    from schedlab.serving.fluid import FluidLoad, headroom
    from schedlab.serving.workloads import TraceReplay, make_workload

    model = cost_model_of(args)
    workload = make_workload(args.workload, data_dir=args.data_dir)
    if isinstance(workload, TraceReplay):  # its own lengths, all of them; no times needed
        lengths: Any = workload.trace
    else:
        lengths = workload.generate(100.0, 1000.0, args.seed)
    tpot = parse_duration(args.tpot, "--tpot")
    _refuse_bare_tpot(args.tpot, tpot)
    _decode_alone(model, tpot)
    kv = _engine(args).kv_tokens
    result = headroom(
        model,
        FluidLoad.of(lengths.prompt, lengths.output),
        tpot,
        workload=workload.name,
        margin_s=_margin(args.margin, tpot),
        kv_tokens=kv,
    )
    if args.format == "json":
        print(json.dumps({**result.to_dict(), **kv_json(args)}))
        return 0
    if args.format == "csv":
        print_csv(args, result.rows())
        return 0
    load = result.load
    say_kv(args)
    print(
        f"fluid headroom of {result.workload} (cost model {result.cost_model}, "
        f"{result.hardware}), per-token deadline "
        f"{result.tpot_s * 1e3:g} ms, margin {result.margin_s * 1e3:g} ms; "
        f"mean prompt {load.mean_prompt:.0f}, mean output {load.mean_output:.0f} "
        f"({load.n_requests} requests)"
    )
    print(
        f"F = {result.fixed_s * 1e3:.3g} ms; lambda* (SLOWeave) = {result.rate_star_rps:.2f} "
        f"req/s; best of any policy {result.best_rps:.2f} req/s; C* = {result.chunk_star:.0f} "
        f"tokens; KV at lambda* {result.kv_in_use_at_star / 1e3:.0f} k tokens"
    )
    print(
        f"with {kv} KV tokens: best of any policy {result.kv_bound_rps:.2f} req/s "
        f"(prefill in {result.kv_bound_prefill_share:.0%} of iterations)"
    )
    print(
        f"{'chunk':>7}{'bound':>10}{'req/s':>9}{'w/ KV':>9}{'iter ms':>9}{'KV k':>8}"
        f"{'lambda*/':>10}"
    )
    for row in result.fixed:
        ratio = result.ratio(row.chunk)
        print(
            f"{row.chunk:>7}{row.bound:>10}{row.capacity_rps:>9.2f}{row.kv_capacity_rps:>9.2f}"
            f"{_ms(row.iteration_s):>9}{row.kv_in_use / 1e3:>8.0f}{ratio:>10.3f}"
        )
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from schedlab.plotting.figures import check_figure_path
    from schedlab.serving.capacity import GridError, sweep

    policies = args.policies
    rates = [_positive_number(r, "--rates") for r in args.rates]
    if args.plot:
        check_figure_path(args.plot, "--plot")
    try:
        points = sweep(
            args.workload,
            policies,
            rates,
            _scenario(args),
            duration_s=parse_duration(args.duration, "--duration"),
            data_dir=args.data_dir,
            executor=executor_from(args, progress=args.format == "text" and not args.quiet),
        )
    except GridError as error:  # the points that ran are shown, then the error
        _sweep_report(args, error.done)
        raise
    _sweep_report(args, points)
    if args.results:
        wrote(args.results)
    return 0


def _sweep_report(args: argparse.Namespace, points: Sequence[Any]) -> None:
    from schedlab.serving.capacity import sweep_title

    if not points:
        return
    rows = [p.row() for p in points]
    if args.plot:
        from schedlab.plotting.sweep import plot_sweep

        plot_sweep(points, args.plot, title=f"SLO {_slo(args).describe()}")
        wrote(args.plot)
    if args.format == "csv":
        print_csv(args, rows)
        return
    if args.format == "json":
        print(
            json.dumps(
                [
                    {**{k: (None if v != v else v) for k, v in r.items()}, **kv_json(args)}
                    for r in rows
                ]
            )
        )
        return
    say_kv(args)
    print(f"{sweep_title(points)}; SLO {_slo(args).describe()}")
    _print_table(rows)


def _print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = (
        f"{'policy':<16}{'rate':>8}{'attain':>8}{'goodput':>9}{'TTFT p99':>10}{'TPOT p99':>10}"
        f"{'TBT p99':>10}"
    )
    print(header + "  (rates req/s, times ms)")
    for r in rows:
        print(
            f"{r['policy']:<16}{r['rate_rps']:>8.3g}{r['attainment']:>8.3f}"
            f"{r['goodput_rps']:>9.3f}{_ms(r['ttft_p99_s']):>10}{_ms(r['tpot_p99_s']):>10}"
            f"{_ms(r['tbt_p99_s']):>10}"
        )


def register(subparsers: Any) -> None:
    """Add ``capacity``, ``headroom`` and ``sweep`` to an argparse subparsers object.
    Every default shown is the Python API's own (read from it, never restated)."""
    import inspect

    from schedlab.serving.capacity import CAPACITY_WINDOW_S, DEFAULT_SWEEP_POLICIES, capacity
    from schedlab.serving.scenario import DEFAULT_SLO
    from schedlab.serving.simulator import DEFAULT_WINDOW_S

    given = inspect.signature(capacity).parameters
    cap = subparsers.add_parser("capacity", help="highest rate with SLO attainment >= target")
    _common(cap, duration=CAPACITY_WINDOW_S, grid_predictions=True)
    cap.set_defaults(grid_predictions=True)
    for flag, key, what in (
        ("--target", "target", "attainment target"),
        ("--tolerance", "rel_tol", "relative bisection tolerance"),
        ("--start-rate", "start_rps", "first rate tried, requests/s"),
        ("--max-rate", "max_rps", "highest rate tried, requests/s"),
    ):
        default = given[key].default
        cap.add_argument(flag, default=f"{default:g}", help=f"{what} (default {default:g})")
    cap.add_argument(
        "--policies",
        type=comma_list,
        default=None,
        help="a grid: the capacity of each of these policies (in place of --policy)",
    )
    cap.add_argument(
        "--seeds",
        type=_seed_list,
        default=None,
        help="a grid: the capacity under each of these seeds, e.g. 0,1,2",
    )
    add_executor_options(cap)
    cap.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    cap.set_defaults(func=_capacity)
    declare_serving_files(cap, ["vllm_model", "results"], ["results"])

    head = subparsers.add_parser(
        "headroom", help="fluid capacities of SLOWeave and fixed chunks (linear cost model)"
    )
    _workload_option(head)
    _cost_model_option(head)
    tpot = f"{DEFAULT_SLO.tpot_s * 1e3:g}ms"
    head.add_argument("--tpot", default=tpot, help=f"per-token deadline (default {tpot})")
    head.add_argument("--margin", default=None, help="SLOWeave margin (default the model's)")
    head.add_argument(
        "--kv-tokens",
        type=positive_int,
        default=None,
        help="KV capacity in tokens (default: what vLLM would allocate on the cost model's "
        "GPU deployment)",
    )
    head.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="seed of the lengths of a synthetic workload (default 0)",
    )
    head.add_argument("--data-dir", default=None, help="directory holding traces/ (Azure)")
    add_format_option(head)
    head.set_defaults(
        func=_headroom, block_size=None, max_num_seqs=None, max_num_batched_tokens=None
    )
    declare_serving_files(head)

    swp = subparsers.add_parser("sweep", help="compare policies over arrival rates")
    _common(swp, policy=False, duration=DEFAULT_WINDOW_S)
    policies = ",".join(DEFAULT_SWEEP_POLICIES)
    swp.add_argument(
        "--policies",
        type=comma_list,
        default=list(DEFAULT_SWEEP_POLICIES),
        help=f"comma-separated policies, as --policy of simulate names them (default {policies})",
    )
    swp.add_argument(
        "--rates", type=comma_list, required=True, help="comma-separated rates, requests/s"
    )
    add_executor_options(swp)
    swp.add_argument(
        "--plot", default=None, metavar="FILE.png", help="write attainment vs rate (PNG/PDF/SVG)"
    )
    swp.add_argument("--quiet", action="store_true", help="no progress on stderr")
    swp.set_defaults(func=_sweep)
    declare_serving_files(swp, ["vllm_model", "results"], ["plot", "results"])
