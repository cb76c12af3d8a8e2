"""The simulator's command line: ``simulate``, and the options, scenario and outputs it
shares with ``capacity``, ``headroom``, ``sweep`` (:mod:`schedlab.cli.capacity`) and
``cluster`` (:mod:`schedlab.cli.cluster`).

``schedlab.cli`` adds ``simulate`` with :func:`register`. Only ``argparse`` and the standard
library are imported here; the simulator is imported when a command runs, and matplotlib
only when ``sweep --plot`` asks for it, so start-up stays fast. Errors of bad input are
raised as :class:`~schedlab.errors.SchedlabError` for ``schedlab.cli`` to print as one
line with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedlab.cli.arguments import (
    comma_list,
    non_negative_int,
    positive_int,
    read_from_stdin,
)
from schedlab.cli.durations import parse_duration
from schedlab.cli.files import cost_model_files, declare_files
from schedlab.cli.outputs import STDOUT, add_format_option, open_output, table_aside
from schedlab.errors import InputError, SchedlabError, SchedlabNote, ServingError
from schedlab.serving.workloads import MAX_REQUESTS
from schedlab.tables import rows_to_csv

if TYPE_CHECKING:
    from schedlab.serving.cost_model import CostModel
    from schedlab.serving.engine_config import EngineConfig
    from schedlab.serving.metrics import SLO
    from schedlab.serving.scenario import Scenario

__all__ = ["register"]


def _positive_number(text: str, flag: str, minimum: float = 0.0) -> float:
    """A finite number ``> 0`` and ``>= minimum``, read from ``flag``'s ``text``."""
    try:
        value = float(text)
    except ValueError:
        raise ServingError(f"{flag}: expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ServingError(f"{flag}: must be a positive number, got {text!r}")
    if value < minimum:
        raise ServingError(f"{flag}: must be at least {minimum:g}, got {text!r}")
    return value


def _workload_option(parser: argparse.ArgumentParser) -> None:
    from schedlab.serving.workloads import DEFAULT_WORKLOAD, workload_names

    parser.add_argument(
        "--workload",
        default=DEFAULT_WORKLOAD,
        help=f"{', '.join(workload_names())}, or a trace file (- for standard input, a "
        f"CSV or JSONL trace; default {DEFAULT_WORKLOAD})",
    )
    read_from_stdin(parser, ("workload", "stdin"))


def _cost_model_option(parser: argparse.ArgumentParser) -> None:
    from schedlab.serving.cost_model import cost_model_names
    from schedlab.serving.scenario import DEFAULT_COST_MODEL

    parser.add_argument(
        "--cost-model",
        default=DEFAULT_COST_MODEL,
        help=f"{', '.join(cost_model_names())}, or a JSON file (default {DEFAULT_COST_MODEL})",
    )
    parser.add_argument(
        "--machine",
        default=None,
        metavar="MACHINE.json",
        help="a machine file of the cost model's GPU (schedlab calibrate machine): its host "
        "time a step, and its link for tensor-parallel collectives, go on the calibrated "
        "cost model",
    )


def cost_model_of(args: argparse.Namespace) -> CostModel:
    """``--cost-model``, with ``--machine``'s terms on it when given
    (:func:`~schedlab.calibration.machine_file.on_model`; said on standard error once)."""
    from schedlab.serving.cost_model import get_cost_model

    if getattr(args, "machine", None) is not None and isinstance(args.cost_model, str):
        from schedlab.calibration.machine_file import on_model, read_machine_file

        model, note = on_model(get_cost_model(args.cost_model), read_machine_file(args.machine))
        print(f"schedlab: machine: {note}", file=sys.stderr)
        args.cost_model = model
    return get_cost_model(args.cost_model)


def _workload_files(value: str | None, args: argparse.Namespace) -> list[Path]:
    """The trace ``--workload`` reads: a path, or a named trace under the data directory
    (none for a built-in workload, or a name that does not resolve: the command reports
    that)."""
    from schedlab.serving.workloads import make_workload, workload_names

    if value is None:
        return []
    if value not in workload_names():
        return [Path(value)]
    try:  # a name, even where a file of that name lies here
        path = getattr(make_workload(value, data_dir=args.data_dir), "path", None)
    except SchedlabError:
        return []
    return [] if path is None else [Path(path)]


def declare_serving_files(
    parser: argparse.ArgumentParser, reads: Sequence[str] = (), writes: Sequence[str] = ()
) -> None:
    """:func:`~schedlab.cli.files.declare_files` of a command with the options of
    :func:`_common`: ``--workload``, ``--cost-model`` and ``--machine`` (and ``reads``)
    read, ``writes`` written. ``--data-dir`` is read only through ``--workload``'s named
    trace, which names its file."""
    declare_files(
        parser,
        reads=["workload", "cost_model", "machine", *reads],
        writes=writes,
        resolve={
            "workload": _workload_files,
            "cost_model": cost_model_files,
            "actual_cost_model": cost_model_files,
        },
    )


def _common(
    parser: argparse.ArgumentParser,
    *,
    policy: bool = True,
    duration: float,
    engines: bool = True,
    grid_predictions: bool = False,
) -> None:
    from schedlab.serving.engine_config import BLOCK_SIZES, EngineConfig
    from schedlab.serving.policy_registry import policy_names
    from schedlab.serving.scenario import DEFAULT_POLICY, DEFAULT_SLO

    _workload_option(parser)
    parser.add_argument(
        "--duration", default=f"{duration:g}s", help=f"arrival window (default {duration:g}s)"
    )
    if policy:
        parser.add_argument(
            "--policy",
            default=None,
            help=f"{', '.join(policy_names())} (default {DEFAULT_POLICY})",
        )
    _cost_model_option(parser)
    tpot, ttft = f"{DEFAULT_SLO.tpot_s * 1e3:g}ms", f"{DEFAULT_SLO.ttft_s:g}s"
    parser.add_argument("--tpot", default=tpot, help=f"TPOT target (default {tpot})")
    parser.add_argument(
        "--tpot-slo",
        choices=("every-token", "p99", "mean"),
        default="every-token",
        help="how the TPOT target is judged: every gap (every-token, the default), each "
        "request's P99 gap, or its mean",
    )
    parser.add_argument("--ttft", default=ttft, help=f"TTFT target (default {ttft})")
    parser.add_argument(
        "--seed",
        type=non_negative_int,
        default=None,
        help="seed of every random draw (default 0)",
    )
    engine = EngineConfig()
    parser.add_argument(
        "--kv-tokens",
        type=positive_int,
        default=None,
        help="KV capacity in tokens (default: what vLLM would allocate on the cost model's "
        f"GPU deployment; {engine.kv_tokens:,} for a model without one)",
    )
    parser.add_argument(
        "--block-size",
        type=positive_int,
        default=None,
        help=f"tokens per KV block: {', '.join(map(str, BLOCK_SIZES))} "
        f"(default {engine.block_size})",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=positive_int,
        default=None,
        help=f"most requests running at once (default {engine.max_num_seqs})",
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=positive_int,
        default=None,
        help=f"most tokens in one iteration (default {engine.max_num_batched_tokens:,})",
    )
    parser.add_argument(
        "--prediction-cv",
        type=float,
        default=0.0,
        help="output lengths seen by sloweave-kv: exact (default 0) or with a lognormal "
        "error of this CV (short for --predictions lognormal:CV)",
    )
    parser.add_argument(
        "--predictions",
        type=comma_list,
        default=None,
        metavar="SPEC",
        help="the prediction model of the output lengths the sloweave-kv policies see: "
        "perfect (default), interval:ALPHA[:SEED], buckets[:SEED], lognormal:CV[:SEED]"
        + ("; several, comma-separated, give a grid" if grid_predictions else ""),
    )
    parser.add_argument("--data-dir", default=None, help="directory holding traces/ (Azure)")
    if engines:
        engine_kind_options(parser)
    add_format_option(parser)


def engine_kind_options(parser: argparse.ArgumentParser) -> None:
    """``--engine`` (whose scheduler runs) and ``--vllm-model`` (the model folder vLLM is
    configured with)."""
    from schedlab.serving.engine_kinds import BUILTIN_KIND, engine_kind_names

    parser.add_argument(
        "--engine",
        default=BUILTIN_KIND,
        help=f"whose scheduler runs: {', '.join(engine_kind_names())} (default "
        f"{BUILTIN_KIND}; vllm: vLLM's own, needs the extra schedlab[vllm], and is the policy)",
    )
    parser.add_argument(
        "--vllm-model",
        default=None,
        metavar="DIR",
        help="with --engine vllm: a model folder holding config.json (default: the "
        "integration's own small decoder-only model; only its limits matter)",
    )


def announce_engine(
    kind: str, engine: EngineConfig, *, policy: str = "vllm", model_dir: str | None = None
) -> None:
    """For an engine kind other than schedlab's, check that it can run (vLLM installed and
    of the pinned release, the policy one it runs, the model folder readable), then print
    on standard error which release runs and how each engine setting maps onto its
    configuration."""
    from schedlab.serving.engine_kinds import BUILTIN_KIND

    if kind != "vllm":
        if kind != BUILTIN_KIND:
            print(f"schedlab: engine {kind} (an installed engine kind)", file=sys.stderr)
        return
    from schedlab.integrations.vllm import VllmSetup, config_mapping, require_vllm

    version = require_vllm()
    if policy != "vllm":
        from schedlab.integrations.vllm.sloweave import check_policy

        check_policy(policy)
    VllmSetup(engine, model_dir, policy).folder()
    pairs = "; ".join(
        f"{ours} -> {theirs} = {value}" for ours, theirs, value in config_mapping(engine)
    )
    print(f"schedlab: engine vllm (vLLM {version}'s scheduler): {pairs}", file=sys.stderr)


def _engine(args: argparse.Namespace) -> EngineConfig:
    """The engine the options describe on ``--cost-model``
    (:func:`~schedlab.serving.engine_config.engine_for`). Where its KV capacity came from
    is printed on standard error beside a text output (:func:`say_kv`), or put in a
    ``--json`` output (:func:`kv_json`).
    """
    from schedlab.serving.engine_config import engine_for

    engine, note = engine_for(
        cost_model_of(args),
        kv_tokens=args.kv_tokens,
        block_size=args.block_size,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
    )
    args.kv_capacity = {"tokens": engine.kv_tokens, "source": note}
    return engine


def kv_json(args: argparse.Namespace) -> dict[str, Any]:
    """The ``kv_capacity`` field of a ``--json`` output: ``{"tokens", "source"}``."""
    return {"kv_capacity": args.kv_capacity}


def print_csv(args: argparse.Namespace, rows: Sequence[dict[str, Any]]) -> None:
    """Print ``rows`` as CSV, each with the KV budget run (``kv_tokens``; where it came
    from on standard error, :func:`say_kv`)."""
    say_kv(args)
    rows_to_csv([{**row, "kv_tokens": args.kv_capacity["tokens"]} for row in rows], sys.stdout)


def say_kv(args: argparse.Namespace) -> None:
    """Print where the KV capacity came from on standard error, beside a text output."""
    print(f"schedlab: {args.kv_capacity['source']}", file=sys.stderr)


def _slo(args: argparse.Namespace) -> SLO:
    from schedlab.serving.metrics import SLO

    tpot_s = parse_duration(args.tpot, "--tpot")
    _refuse_bare_tpot(args.tpot, tpot_s)
    return SLO(ttft_s=parse_duration(args.ttft, "--ttft"), tpot_s=tpot_s, kind=args.tpot_slo)


def _refuse_bare_tpot(text: str, tpot_s: float) -> None:
    """Refuse a per-token target of a second or more written without a unit: a bare
    number is seconds, and ``--tpot 25`` is almost surely 25 ms (a unit written, ``25s``,
    is taken as meant)."""
    bare = text.strip()
    if tpot_s >= 1 and bare.replace(".", "", 1).isdigit():
        raise InputError(
            f"--tpot {bare}: a bare number is seconds, and {tpot_s:g} s per token is most "
            f"likely a slip; write {bare}ms for milliseconds, or {bare}s if seconds are meant"
        )


def _margin(text: str | None, tpot_s: float) -> float | None:
    """``--margin`` in seconds (``None``: not given), below the TPOT ``tpot_s`` as SLOWeave
    and the fluid headroom need it (:func:`~schedlab.serving.sloweave.check_margin`)."""
    from schedlab.serving.sloweave import check_margin

    if text is None:
        return None
    return check_margin(parse_duration(text, "--margin", allow_zero=True), tpot_s, "--margin")


def _scenario(args: argparse.Namespace, *, engine_policies: bool = True) -> Scenario:
    """The scenario the common options describe (and ``simulate``'s own, if given), after
    a note on standard error when no request of two or more tokens can meet its TPOT.

    With ``engine_policies`` (all but ``cluster``, whose routers may read predictions too),
    ``--margin`` and ``--prediction-cv`` are refused when no policy of the run
    (``--policies``, else ``--policy``) reads them.
    """
    from schedlab.serving.engine_kinds import BUILTIN_KIND
    from schedlab.serving.scenario import DEFAULT_POLICY, Scenario

    slo = _slo(args)
    specs = _prediction_specs(args)
    kind = getattr(args, "engine", BUILTIN_KIND)
    default_policy = DEFAULT_POLICY if kind == BUILTIN_KIND else kind
    scenario = Scenario(
        policy=default_policy if getattr(args, "policy", None) is None else args.policy,
        cost_model=cost_model_of(args),
        slo=slo,
        engine=_engine(args),
        actual_cost_model=getattr(args, "actual_cost_model", None),
        noise_cv=getattr(args, "noise_cv", 0.0),
        margin_s=_margin(getattr(args, "margin", None), slo.tpot_s),
        seed=0 if args.seed is None else args.seed,
        prediction_cv=args.prediction_cv,
        engine_kind=kind,
        engine_model=getattr(args, "vllm_model", None),
        predictions=specs[0] if specs else None,
    )
    if engine_policies:
        _refuse_unread(scenario, getattr(args, "policies", None) or [scenario.policy], specs)
    announce_engine(
        scenario.engine_kind,
        scenario.engine,
        policy=str(scenario.policy),
        model_dir=scenario.engine_model,
    )
    _decode_alone(scenario.actual() or scenario.predicted(), slo.tpot_s)
    return scenario


def _prediction_specs(args: argparse.Namespace) -> list[str]:
    """The ``--predictions`` models given (none: the scenario's default), each checked
    (:func:`~schedlab.serving.prediction.check_spec`); one only, unless the command
    takes a grid of them.

    Raises
    ------
    ServingError
        For a bad model, several where one is taken, or ``--prediction-cv`` beside.
    """
    from schedlab.serving.prediction import check_spec

    specs: list[str] = getattr(args, "predictions", None) or []
    if specs and args.prediction_cv:
        raise ServingError(
            "--predictions and --prediction-cv: give one "
            "(--prediction-cv V is --predictions lognormal:V)"
        )
    if len(specs) > 1 and not getattr(args, "grid_predictions", False):
        raise ServingError(f"--predictions: this command takes one model, got {len(specs)}")
    for spec in specs:
        check_spec(spec, "--predictions")
    return specs


def _decode_alone(model: CostModel, tpot_s: float) -> None:
    """Refuse a cost model whose one decode alone takes longer than any iteration may
    (:data:`~schedlab.serving.iteration.MAX_ITERATION_S`); note on standard error when it
    takes longer than the TPOT target ``tpot_s``."""
    from schedlab.serving.iteration import MAX_ITERATION_S

    alone = model.iteration_time(1, 1, ())  # one decode of one token, nothing else
    if not (math.isfinite(alone) and 0 < alone <= MAX_ITERATION_S):
        raise ServingError(
            f"cost model {model.name!r}: one decode alone takes {alone!r} s; an iteration "
            f"must take a positive time of at most {MAX_ITERATION_S:g} s"
        )
    if alone > tpot_s:
        print(
            f"schedlab: note: one decode alone takes {alone * 1e3:.3g} ms on cost model "
            f"{model.name!r}, above the TPOT target {tpot_s * 1e3:g} ms: no request of "
            "two or more output tokens can meet it (--tpot)",
            file=sys.stderr,
        )


def _refuse_unread(scenario: Scenario, policies: Sequence[str], specs: Sequence[str] = ()) -> None:
    """Refuse ``--margin``, a positive ``--prediction-cv`` or ``--predictions`` models
    ``specs`` other than ``perfect`` that no policy of ``policies``
    reads (:attr:`~schedlab.serving.policy_registry.PolicySpec.reads_margin`,
    :attr:`~schedlab.serving.policy_registry.PolicySpec.reads_predictions`): the run would not
    change."""
    from schedlab.serving.policy_registry import POLICIES, get_policy

    given = (
        ("--margin", scenario.margin_s is not None, "reads_margin"),
        ("--prediction-cv", scenario.prediction_cv > 0, "reads_predictions"),
        ("--predictions", any(spec != "perfect" for spec in specs), "reads_predictions"),
    )
    for flag, used, reads in given:
        if used and not any(getattr(get_policy(p), reads) for p in policies):
            for policy in policies:  # a bad policy argument is the error to report first
                scenario.with_(policy=policy).build_policy()
            readers = sorted(
                name for name, spec in POLICIES.entries().items() if getattr(spec, reads)
            )
            noun = "policy" if len(policies) == 1 else "policies"
            raise ServingError(
                f"{flag}: read only by {' and '.join(readers)}; "
                f"{noun} {', '.join(policies)} would not change with it"
            )


def _seed_list(text: str) -> list[int]:
    """Comma-separated seeds, each an integer >= 0, none twice."""
    return [non_negative_int(s) for s in comma_list(text)]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None or math.isnan(seconds) else f"{seconds * 1e3:.1f}"


def _simulate(args: argparse.Namespace) -> int:
    from schedlab.serving.simulator import simulate

    if args.timeline == STDOUT and args.records == STDOUT:
        raise InputError("--timeline, --records: only one of them may go to standard output (-)")
    rate = None if args.rate is None else _positive_number(args.rate, "--rate")
    scenario = _scenario(args)
    window = {
        "rate": rate,
        "duration_s": parse_duration(args.duration, "--duration"),
        "data_dir": args.data_dir,
        "max_requests": args.max_requests,
    }
    result = simulate(args.workload, scenario, record_batches=bool(args.timeline), **window)
    args.band = _link_band(args, scenario, window, result.summary)
    if args.timeline:
        write_run_timeline(args.timeline, result.run)
    if args.records:
        with open_output(args.records, f"{len(result.records)} requests") as handle:
            for record in result.records:
                handle.write(json.dumps(record.to_dict()) + "\n")
    say_backlog(result.records, "simulate")
    with table_aside(args.records, args.timeline):
        _simulate_report(args, result)
    return 0


def _link_band(
    args: argparse.Namespace, scenario: Scenario, window: dict[str, Any], summary: Any
) -> dict[str, dict[str, list[float]]]:
    """Each metric statistic's lowest and highest value over ``summary`` (the run's own)
    and the run simulated again at the slow and fast ends of a published or assumed link
    (:func:`~schedlab.calibration.machine_file.link_ends`), as ``{metric: {stat: [low,
    high]}}``; empty when the link was measured or there is none."""
    from schedlab.calibration.machine_file import link_ends
    from schedlab.calibration.profile_model import ProfileCostModel
    from schedlab.serving.cost_model import get_cost_model
    from schedlab.serving.simulator import simulate

    model = get_cost_model(scenario.cost_model)
    ends = link_ends(model)
    if ends is None or not isinstance(model, ProfileCostModel):
        return {}
    runs = [
        simulate(args.workload, scenario.with_(cost_model=model.deployed(link=end)), **window)
        for end in ends.at_ends()
    ]
    summaries = [summary, *(run.summary for run in runs)]
    band = {}
    for name in ("ttft", "tpot", "itl", "latency"):
        values = {
            stat: [getattr(getattr(each, name), stat) for each in summaries]
            for stat in ("mean", "p50", "p90", "p95", "p99")
        }
        band[name] = {stat: [min(v), max(v)] for stat, v in values.items()}
    return band


def add_timeline_option(parser: argparse.ArgumentParser) -> None:
    """``--timeline FILE.json``: the run's iterations as a Chrome trace."""
    parser.add_argument(
        "--timeline",
        default=None,
        metavar="FILE.json",
        help="write every iteration as a Chrome trace (open it in https://ui.perfetto.dev "
        "or chrome://tracing): what it ran, the queues and the KV blocks over time",
    )


def write_run_timeline(path: str, run: Any, names: Sequence[str] = ()) -> None:
    """Write ``run``'s iterations to ``path`` (``--timeline``)."""
    from schedlab.serving.timeline import write_timeline

    with open_output(path, f"{len(run.batches):,} iterations") as handle:
        write_timeline(run, handle, names)


def say_backlog(records: Sequence[Any], what: str) -> None:
    """A note when the queue grew through the run of ``records``
    (:func:`~schedlab.serving.metrics.queue_growth`): the load offered exceeds what the
    engine serves, and the figures depend on the window's length."""
    from schedlab.serving.metrics import queue_growth

    growth = queue_growth(records)
    if growth is not None:
        early, late = growth
        warnings.warn(
            f"{what}: the requests of the window's last fifth found {late:g} requests "
            f"ahead still waiting for a first token (median), those of its first fifth "
            f"{early:g}: the load offered exceeds what it serves and the queue grows through "
            "the window, so these figures depend on its length (lower --rate; `schedlab "
            "capacity` finds the rate it sustains)",
            SchedlabNote,
            stacklevel=2,
        )


def _simulate_report(args: argparse.Namespace, result: Any) -> None:
    """``simulate``'s output in ``--format``."""
    s = result.summary
    band = args.band
    if args.format == "json":
        extra = ({"band": band} if band else {}) | (
            {"machine": args.machine} if getattr(args, "machine", None) else {}
        )
        print(json.dumps({**s.to_dict(), "wall_s": result.wall_s, **kv_json(args), **extra}))
        return
    if args.format == "csv":
        print_csv(args, [s.row()])
        return
    say_kv(args)
    print(
        f"policy {s.policy} on {s.workload} (cost model {s.cost_model}, {s.hardware}): "
        f"{s.n_requests} requests, "
        f"{s.n_finished} finished, {s.iterations} iterations, {s.preemptions} preemptions"
    )
    print(f"{'metric':<10}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}  (ms)")
    for name in ("ttft", "tpot", "itl", "latency"):
        d = getattr(s, name)
        cells = "".join(f"{_ms(v):>10}" for v in (d.mean, d.p50, d.p90, d.p95, d.p99))
        print(f"{name:<10}{cells}")
        for end, side in ((0, "  low"), (1, "  high")):
            if name in band:
                cells = "".join(f"{_ms(pair[end]):>10}" for pair in band[name].values())
                print(f"{side:<10}{cells}")
    print(
        f"SLO {s.slo.describe()}: attainment {s.attainment:.3f}, goodput "
        f"{s.goodput_rps:.3f} req/s; system-wide P99 time between tokens {_ms(s.itl.p99)} ms"
    )
    if band:
        print(
            "low, high: each metric simulated again at the slow and fast ends of the "
            "published link's evidence (--machine, or a model calibrated with --link, "
            "measures it)"
        )


def register(subparsers: Any) -> None:
    """Add ``simulate`` to an argparse subparsers object (``capacity``, ``headroom`` and
    ``sweep`` are :mod:`schedlab.cli.capacity`'s). Every default shown is the Python API's
    own (read from it, never restated)."""
    from schedlab.serving.simulator import DEFAULT_WINDOW_S
    from schedlab.serving.workloads import DEFAULT_RATE_RPS

    sim = subparsers.add_parser("simulate", help="simulate a serving workload under a policy")
    _common(sim, duration=DEFAULT_WINDOW_S)
    sim.add_argument(
        "--rate",
        default=None,
        help=f"mean arrival rate, requests/s (default {DEFAULT_RATE_RPS:g} for a synthetic "
        "workload; a replay keeps its timestamps unless a rate rescales them)",
    )
    sim.add_argument(
        "--noise-cv",
        type=float,
        default=0.0,
        help="actual/predicted iteration time: lognormal noise with this CV (default 0)",
    )
    sim.add_argument(
        "--actual-cost-model",
        default=None,
        help="advance time by this model instead of the predicted one",
    )
    sim.add_argument("--margin", default=None, help="SLOWeave margin delta, e.g. 0.5ms")
    sim.add_argument(
        "--records",
        default=None,
        metavar="FILE.jsonl",
        help="write per-request records, one JSON object a line (- for standard output: "
        "the table then goes to standard error)",
    )
    sim.add_argument(
        "--max-requests",
        type=positive_int,
        default=MAX_REQUESTS,
        help=f"refuse a stream of more requests than this (default {MAX_REQUESTS:,})",
    )
    add_timeline_option(sim)
    sim.set_defaults(func=_simulate)
    declare_serving_files(sim, ["actual_cost_model", "vllm_model"], ["records", "timeline"])
