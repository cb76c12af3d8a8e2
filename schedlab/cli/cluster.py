"""The ``cluster`` subcommand: a cluster of engines, one router or a grid of routers x rates.

``schedlab cluster --nodes 2P2D --router deflect --workload bursty --rate 8`` simulates
one cluster (:mod:`schedlab.serving.cluster`) and prints its TTFT breakdown;
``--routers a,b`` and/or ``--rates x,y`` run every pair (serially, in this process) and
print one row each; ``--plot FILE.png`` draws the breakdown per router
(:func:`schedlab.plotting.cluster.plot_breakdown`). ``--json`` prints one object (a grid:
a list of them). As in :mod:`schedlab.cli.serving`, the simulator is imported when the
command runs, and bad input is a :class:`~schedlab.errors.SchedlabError`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from schedlab.cli.arguments import comma_list, positive_int, single_or_grid
from schedlab.cli.durations import parse_duration
from schedlab.cli.outputs import wrote
from schedlab.cli.serving import (
    _common,
    _ms,
    _positive_number,
    _scenario,
    declare_serving_files,
    kv_json,
    print_csv,
    say_backlog,
    say_kv,
)
from schedlab.errors import SchedlabError
from schedlab.serving.workloads import MAX_REQUESTS

__all__ = ["register"]

#: The router ``schedlab cluster`` uses when none is named.
_DEFAULT_ROUTER = "disaggregated"


def _cluster(args: argparse.Namespace) -> int:
    from schedlab.errors import ServingError
    from schedlab.plotting.figures import check_figure_path
    from schedlab.serving.cluster import (
        DEFAULT_LINK,
        DEFAULT_MODEL,
        DEFAULT_PREFILL_POLICY,
        Cluster,
        kv_link,
        parse_nodes,
        simulate_cluster,
    )
    from schedlab.serving.routers import get_router
    from schedlab.serving.scenario import DEFAULT_POLICY

    single_or_grid(args, ("router", "routers"), ("rate", "rates"))
    nodes = parse_nodes(args.nodes)
    routers = args.routers or [_DEFAULT_ROUTER if args.router is None else args.router]
    for name in routers:
        get_router(name)
    colocated = nodes[0].role == "colocated"
    given = {  # options given that this kind of cluster does not use
        "--policy": not colocated and args.policy is not None,
        "--prefill-policy": colocated and args.prefill_policy is not None,
        "--decode-policy": colocated and args.decode_policy is not None,
        "--link": colocated and args.link is not None,
        "--model": colocated and args.model is not None,
        "--pipelined": colocated and args.pipelined,
    }
    for flag, unused in given.items():
        if unused:
            kind = "prefill/decode" if not colocated else "colocated"
            other = "--prefill-policy/--decode-policy" if flag == "--policy" else "--policy"
            raise ServingError(
                f"{flag}: does not apply to the {kind} cluster {args.nodes!r}"
                + (f" (give {other})" if "policy" in flag else "")
            )
    args.policy = DEFAULT_POLICY if args.policy is None else args.policy
    rate_texts = args.rates or ([args.rate] if args.rate is not None else [None])
    rates = [None if r is None else _positive_number(r, "--rates/--rate") for r in rate_texts]
    link_text = DEFAULT_LINK if args.link is None else args.link  # '' is refused, not default
    link = kv_link(link_text, args.model or DEFAULT_MODEL, args.pipelined)
    duration = parse_duration(args.duration, "--duration")
    if args.plot:
        check_figure_path(args.plot, "--plot")
    scenario = _scenario(args, engine_policies=False)
    clusters = [
        Cluster(
            nodes,
            name,
            scenario,
            link,
            prefill_policy=args.prefill_policy or DEFAULT_PREFILL_POLICY,
            decode_policy=args.decode_policy,
        )
        for name in routers
    ]
    if scenario.prediction_spec != "perfect" and not any(c.reads_predictions for c in clusters):
        flag = "--predictions" if scenario.predictions else "--prediction-cv"
        raise ServingError(
            f"{flag}: no router or node policy of this run reads predicted lengths "
            "(round-robin never does, the others when they choose among two or more "
            "colocated or decode nodes, deflect always; of the policies, only the sloweave-kv "
            "ones)"
        )
    results = []
    for rate in rates:
        for cluster in clusters:
            result = simulate_cluster(
                args.workload,
                cluster,
                rate=rate,
                duration_s=duration,
                data_dir=args.data_dir,
                max_requests=args.max_requests,
                time_routing=True,
            )
            at = "" if rate is None else f" at {rate:g} req/s"
            say_backlog(result.records, f"cluster {cluster.label}{at}")
            results.append((rate, result))
    if args.plot:
        from schedlab.plotting.cluster import plot_breakdown

        plot_breakdown(
            [(f"{r.label}" + ("" if rate is None else f" {rate:g}/s"), r) for rate, r in results],
            args.plot,
            title=f"SLO {scenario.slo.describe()}",
        )
        wrote(args.plot)
    grid = bool(args.routers or args.rates)
    if args.format == "json":
        rows = [{"rate_rps": rate, **r.to_dict(), **kv_json(args)} for rate, r in results]
        print(json.dumps(rows if grid else rows[0]))
        return 0
    if args.format == "csv":
        print_csv(args, [{"rate_rps": rate, **r.row()} for rate, r in results])
        return 0
    say_kv(args)
    _report(results, scenario)
    return 0


def _report(results: list[tuple[float | None, Any]], scenario: Any) -> None:
    from schedlab.serving.cluster_result import BREAKDOWN

    first = results[0][1].summary
    print(
        f"{first.workload} on {first.cost_model} ({first.hardware}); SLO "
        f"{scenario.slo.describe()}; TTFT breakdown means, and shares of the TTFT of requests "
        "at or above the P95 TTFT"
    )
    print(
        f"{'cluster':<22}{'rate':>6}{'attain':>8}{'TTFT':>8}{'p95':>8}{'lat':>8}"
        f"{'queue':>8}{'prefill':>8}{'xfer':>8}{'1st dec':>8}  {'tail shares q/p/x/d':<20}"
        f"{'route us':>9}{'hit':>6}"
    )
    for rate, r in results:
        s, d = r.summary, r.to_dict()
        shares = "/".join("-" if v is None else f"{v:.0%}" for v in d["tail_share"].values())
        route = d["routing_ms"]
        route_us = "-" if route is None else f"{route['median'] * 1e3:.0f}"
        print(
            f"{r.label:<22}{'-' if rate is None else f'{rate:g}':>6}{s.attainment:>8.3f}"
            f"{_ms(s.ttft.mean):>8}{_ms(s.ttft.p95):>8}{_ms(s.latency.mean):>8}"
            + "".join(f"{_ms(r.breakdown[k].mean):>8}" for k in BREAKDOWN)
            + f"  {shares:<20}{route_us:>9}"
            + f"{r.run.hit_rate:>6.2f}"
        )
    print(
        "(times in ms; route us: median microseconds per router call; hit: prefix-cache "
        "hit rate, prompt tokens found cached at first admission)"
    )


def _router_line(get_router: Any, name: str) -> str:
    """``name: description`` for the help, or why an installed router cannot be shown
    (a broken plug-in must not break every command: the parser is built for each)."""
    try:
        return f"{name}: {get_router(name).description}"
    except SchedlabError as error:
        return f"{name}: not usable ({error})"


def register(subparsers: Any) -> None:
    """Add ``cluster`` to an argparse subparsers object."""
    from schedlab.llm.models import MODEL_SHAPES
    from schedlab.serving.cluster import DEFAULT_LINK, DEFAULT_MODEL, DEFAULT_PREFILL_POLICY
    from schedlab.serving.routers import get_router, router_names
    from schedlab.serving.simulator import DEFAULT_WINDOW_S
    from schedlab.serving.workloads import DEFAULT_RATE_RPS

    routers = "; ".join(_router_line(get_router, name) for name in router_names())
    cmd = subparsers.add_parser(
        "cluster",
        help="simulate a cluster of engines (colocated or prefill/decode) behind a router",
        description="Simulate a cluster of engines behind a router and show where the time "
        "to the first token goes (queue, prefill, KV transfer, first decode). Give "
        "--routers and/or --rates for a grid of routers x rates. Routers: " + routers + ".",
    )
    from schedlab.serving.policy_registry import policy_names
    from schedlab.serving.scenario import DEFAULT_POLICY

    _common(cmd, policy=False, duration=DEFAULT_WINDOW_S, engines=False)
    cmd.add_argument(
        "--policy",
        default=None,
        help=f"policy of colocated nodes: {', '.join(policy_names())} (default "
        f"{DEFAULT_POLICY}); refused on a prefill/decode cluster",
    )
    cmd.add_argument(
        "--nodes",
        default="2P2D",
        help="node counts and roles: 2P2D (2 prefill + 2 decode), 4C (4 colocated), ... "
        "(default 2P2D)",
    )
    cmd.add_argument("--router", default=None, help=f"the router (default {_DEFAULT_ROUTER})")
    cmd.add_argument(
        "--routers", type=comma_list, default=None, help="a grid: these routers, e.g. a,b"
    )
    cmd.add_argument(
        "--rate",
        default=None,
        help=f"mean arrival rate, requests/s (default {DEFAULT_RATE_RPS:g} for a synthetic "
        "workload; a replay keeps its timestamps unless a rate rescales them)",
    )
    cmd.add_argument("--rates", type=comma_list, default=None, help="a grid: these rates")
    cmd.add_argument(
        "--link",
        default=None,
        help=f"each prefill node's KV link, BANDWIDTH,LATENCY, both parts required (0us for "
        f"none; 1MB/s to 10TB/s, latency at most 1s) (default {DEFAULT_LINK})",
    )
    cmd.add_argument(
        "--model",
        default=None,
        help=f"model whose KV bytes per token cross the link: {', '.join(MODEL_SHAPES)} "
        f"(default {DEFAULT_MODEL})",
    )
    cmd.add_argument(
        "--pipelined", action="store_true", help="layer-wise KV transfer, overlapping prefill"
    )
    cmd.add_argument(
        "--prefill-policy",
        default=None,
        help=f"policy of prefill nodes (default {DEFAULT_PREFILL_POLICY}); --policy is the "
        "colocated nodes'",
    )
    cmd.add_argument(
        "--decode-policy",
        default=None,
        help="policy of decode nodes (default sloweave; deflect "
        "needs sloweave or sloweave-kv, which its estimate and proofs/deflect.md assume)",
    )
    cmd.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="write the TTFT breakdown per router (PNG, PDF, SVG)",
    )
    cmd.add_argument(
        "--max-requests",
        type=positive_int,
        default=MAX_REQUESTS,
        help=f"refuse a stream of more requests than this (default {MAX_REQUESTS:,})",
    )
    cmd.set_defaults(func=_cluster)
    declare_serving_files(cmd, writes=["plot"])
