"""Command-line subcommands ``calibrate`` and ``replay`` (added by ``schedlab.cli``).

``schedlab calibrate PROFILE_DIR [--model NAME] [--tp N] [--link BW,LATENCY] -o MODEL.json``
fits a cost model to an LLMServingSim profile directory, writes it as JSON and prints the
held-out error report.

``schedlab calibrate machine RUN --cost-model MODEL -o MACHINE.json`` fits a machine file
on a recorded run (:mod:`schedlab.calibration.machine_fit`): the host time of a step and
the link of the run's collectives, which ``--machine`` applies to every other run and
deployment of that machine (``replay``, ``simulate``, ``capacity``, ``sweep``,
``cluster``). A profile folder named ``machine`` is written ``./machine``.

``schedlab replay RUN [--cost-model MODEL] [--json] [--plot FILE.png]`` simulates a recorded
run (a run directory, its ``requests.jsonl``, or a ``vllm bench serve --save-detailed``
result) on the deployment its records describe, and prints measured vs simulated TTFT,
TPOT and latency (mean, P50, P90, P95, P99); engine flags override the records. Without
``--cost-model`` it takes the shipped model of the run's model, GPU and TP degree, else
calibrates the matching profile under the data directory (``--data-dir``, default
``$SCHEDLAB_DATA``) and caches the fit (:mod:`schedlab.calibration.run_model`), saying on
standard error which profile and setting it used.
``--json`` prints ``{"metrics": {"ttft_mean": {"measured": ..., "simulated": ...,
"diff_pct": ...}, ...}, "wall_s": ...}`` (seconds).

Heavy modules are imported when a command runs, so start-up stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from schedlab.cli.arguments import positive_int
from schedlab.cli.files import cost_model_files, declare_files, profiles_of_data_dir
from schedlab.cli.outputs import STDOUT, add_format_option, table_aside, wrote
from schedlab.errors import CalibrationError
from schedlab.tables import rows_to_csv

__all__ = ["register"]


def _profile_dir(text: str) -> Path:
    path = Path(text)
    if path.is_file():
        raise CalibrationError(
            f"{path}: calibrate reads an LLMServingSim profile directory (meta.yaml and "
            "tp<N>/); a single file of per-op timings becomes one with schedlab profile "
            "import (docs/profile-format.md)"
        )
    return path


def _at_most(text: str, maximum: int) -> int:
    """An integer from 1 to ``maximum``; argparse reports anything else."""
    value = positive_int(text)
    if value > maximum:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 1 to {maximum:,}, got {text!r}"
        )
    return value


def _tensor_parallel(text: str) -> int:
    """``replay --tp``: at most :data:`~schedlab.calibration.deployment.MAX_TENSOR_PARALLEL`."""
    from schedlab.calibration.deployment import MAX_TENSOR_PARALLEL

    return _at_most(text, MAX_TENSOR_PARALLEL)


def _data_parallel(text: str) -> int:
    """``replay --dp``: at most :data:`~schedlab.serving.scenario.MAX_REPLICAS`."""
    from schedlab.serving.scenario import MAX_REPLICAS

    return _at_most(text, MAX_REPLICAS)


def _run_files(value: str | None, args: argparse.Namespace) -> list[Path]:
    """The files ``replay RUN`` reads (:func:`~schedlab.calibration.recorded_run.run_files`)."""
    from schedlab.calibration.recorded_run import run_files

    return [] if value is None else run_files(Path(value))


def _check_output(output: Path) -> None:
    """Refuse, before fitting, an output that cannot be written (that it overwrites no
    input, :func:`~schedlab.cli.files.check_files` checked)."""
    if not output.parent.is_dir():
        raise CalibrationError(f"-o {output}: no such directory {output.parent}")
    if output.is_dir():
        raise CalibrationError(f"-o {output}: is a directory")


#: ``calibrate`` options of a profile's fit, not of ``calibrate machine``, and the reverse.
_PROFILE_ONLY = ("model", "tp", "link", "margin_quantile", "name")
_MACHINE_ONLY = ("run", "cost_model", "rounds")


def _given(args: argparse.Namespace, keys: tuple[str, ...]) -> list[str]:
    """Those of the options ``keys`` given on the command line, as written there."""
    return [
        "RUN" if key == "run" else f"--{key.replace('_', '-')}"
        for key in keys
        if getattr(args, key) is not None
    ]


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from schedlab.calibration.fit import calibrate
    from schedlab.calibration.profiles import read_meta_yaml
    from schedlab.llm.link_evidence import link_given
    from schedlab.serving.cost_model import save_cost_model

    if args.profile_dir == "machine":
        return _cmd_calibrate_machine(args)
    given = _given(args, _MACHINE_ONLY)
    if given:
        raise CalibrationError(
            f"{', '.join(given)}: options of calibrate machine RUN, not of a profile's fit"
        )
    args.tp = 1 if args.tp is None else args.tp
    args.margin_quantile = 0.95 if args.margin_quantile is None else args.margin_quantile
    root = _profile_dir(args.profile_dir)
    if args.output != STDOUT:
        _check_output(Path(args.output))
    link = None if args.link is None else link_given(args.link)
    model_name = args.model
    if model_name is None:
        model_name = str(read_meta_yaml(root / "meta.yaml").get("model", ""))
    model, report = calibrate(
        root,
        model_name,
        tp=args.tp,
        margin_quantile=args.margin_quantile,
        name=args.name,
        link=None if link is None else link.link,
    )
    save_cost_model(model, args.output)
    if args.output != STDOUT:
        wrote(args.output)
    with table_aside(args.output):
        if args.format == "json":
            data = {"model": model.name, "output": args.output} | report.to_dict()
            print(json.dumps(data, indent=1))
        elif args.format == "csv":
            rows_to_csv(report.rows(), sys.stdout)
        else:
            print(f"{model.name}: fitted on {', '.join(s.name for s in model.sources)}")
            print(report.to_text())
            if link is not None:
                print(link.note)
    return 0


def _cmd_calibrate_machine(args: argparse.Namespace) -> int:
    """``calibrate machine RUN --cost-model MODEL -o MACHINE.json`` (module docstring)."""
    from schedlab.calibration.machine_file import save_machine_file
    from schedlab.calibration.machine_fit import ROUNDS, fit_machine
    from schedlab.calibration.profile_model import ProfileCostModel
    from schedlab.calibration.recorded_run import read_recorded_run
    from schedlab.progress import Progress
    from schedlab.serving.cost_model import get_cost_model

    given = _given(args, _PROFILE_ONLY)
    if given:
        raise CalibrationError(
            f"{', '.join(given)}: options of a profile's fit, not of calibrate machine"
        )
    if args.run is None or args.cost_model is None:
        raise CalibrationError("calibrate machine: give RUN and --cost-model MODEL")
    if args.output == STDOUT:
        raise CalibrationError("-o -: calibrate machine writes a file; name it")
    _check_output(Path(args.output))
    rounds = ROUNDS if args.rounds is None else args.rounds
    run = read_recorded_run(args.run)
    model = get_cost_model(args.cost_model)
    if not isinstance(model, ProfileCostModel):
        raise CalibrationError(
            f"--cost-model {args.cost_model}: a machine file is fitted with a calibrated "
            "(profile-grid) model of the run's model and GPU"
        )
    with Progress("fitting the machine", rounds, enabled=args.format == "text") as bar:
        machine = fit_machine(
            run,
            model,
            rounds=rounds,
            progress=lambda _, misfit: bar.step(f"J {misfit:.3g}"),
        )
    save_machine_file(machine, args.output)
    wrote(args.output)
    if args.format == "json":
        print(json.dumps({"output": args.output} | machine.to_dict(), indent=1))
    else:
        written = dataclasses.replace(machine, path=Path(args.output))
        print(written.note())
        fit = machine.fit
        settled = (
            "settled" if fit["settled"] else "NOT settled: the round budget (--rounds) ended it"
        )
        print(f"fit: misfit J {fit['misfit']:.4g} after {int(fit['rounds'])} rounds, {settled}")
        if machine.host_s == 0:
            print(
                "the host time sits at its bound, 0: the kernel model alone already takes "
                "as long as the run's steps, or longer"
            )
    return 0


def _machine(args: argparse.Namespace) -> Any:
    """``--machine``'s file, read (``None``: not given)."""
    from schedlab.calibration.machine_file import read_machine_file

    return None if args.machine is None else read_machine_file(args.machine)


def _cmd_replay(args: argparse.Namespace) -> int:
    from schedlab.calibration.deployment import check_modelled, deployment_of
    from schedlab.calibration.recorded_run import read_recorded_run
    from schedlab.calibration.replay import replay
    from schedlab.calibration.run_model import model_for_run
    from schedlab.cli.serving import announce_engine
    from schedlab.llm.link_evidence import link_given
    from schedlab.plotting.figures import check_figure_path
    from schedlab.serving.cost_model import CostModel, get_cost_model
    from schedlab.serving.engine_kinds import BUILTIN_KIND

    if args.plot:
        check_figure_path(args.plot, "--plot")
    machine = _machine(args)  # a bad file is refused before any model is fitted
    run = read_recorded_run(args.run)
    deployment = deployment_of(
        run,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        kv_tokens=args.kv_tokens,
        tp=args.tp,
        dp=args.dp,
        async_scheduling={"auto": None, "on": True, "off": False}[args.async_scheduling],
        prefix_caching={"auto": None, "on": True, "off": False}[args.prefix_caching],
        link=None if args.link is None else link_given(args.link),
    )
    for line in check_modelled(deployment, allow=args.allow_mismatch, where=str(args.run)):
        print(f"schedlab: WARNING: {line}", file=sys.stderr)
    policy = (
        (args.engine if args.engine != BUILTIN_KIND else "vllm")
        if args.policy is None
        else args.policy
    )
    cost_model: CostModel  # found (or refused) before an engine kind imports vLLM
    if args.cost_model is None:
        cost_model, note = model_for_run(deployment, args.data_dir, run=run)
        print(f"schedlab: {note}", file=sys.stderr)
    else:
        cost_model = get_cost_model(args.cost_model)
    announce_engine(args.engine, deployment.engine, policy=policy, model_dir=args.vllm_model)
    report = replay(
        run,
        cost_model,
        deployment=deployment,
        policy=policy,
        allow_mismatch=args.allow_mismatch,
        series=args.plot is not None,
        engine_kind=args.engine,
        engine_model=args.vllm_model,
        machine=machine,
        data_dir=None if args.cost_model is None else args.data_dir,  # refused when unread
    )
    if args.plot:
        from schedlab.plotting.replay import plot_replay

        title = f"{run.directory.name}: cost model {report.cost_model} ({report.hardware})"
        plot_replay(report, args.plot, title=title)
        wrote(args.plot)
    if args.format == "json":
        data: dict[str, Any] = report.to_dict()
        print(json.dumps(data, indent=1))
    elif args.format == "csv":
        rows_to_csv(report.rows(), sys.stdout)
    else:
        print(report.to_text())
    return 0


#: Help of ``--link`` (calibrate, replay).
_LINK_HELP = (
    "measured link between the GPUs of one engine, for the collectives of tensor and "
    "expert parallelism: the output of nccl-tests' all_reduce_perf on them, or BW,LATENCY "
    "such as 54GB/s,4us, both parts required (0us for none; 1MB/s to 10TB/s, latency at "
    "most 1s) (default: the published measurement for the GPU, else an assumption that the "
    "output names)"
)


def register(subparsers: Any) -> None:
    """Add ``calibrate`` and ``replay`` to the ``schedlab`` command line."""
    _calibrate_parser(subparsers)
    _replay_parser(subparsers)


def _calibrate_parser(subparsers: Any) -> None:
    """``calibrate``: a profile's fit, or ``calibrate machine``."""

    cal = subparsers.add_parser(
        "calibrate",
        help="fit an iteration-cost model to a GPU profile",
        description="Fit a cost model to an LLMServingSim profile directory (meta.yaml, "
        "tp<N>/dense.csv, attention.csv, per_sequence.csv, and moe.csv or skew_fit.csv "
        "where present); print the held-out error report.",
    )
    cal.add_argument(
        "profile_dir",
        metavar="PROFILE_DIR",
        help="LLMServingSim profile directory to fit; or the word machine, then RUN",
    )
    cal.add_argument(
        "run",
        nargs="?",
        default=None,
        metavar="RUN",
        help="calibrate machine: the recorded run (directory, requests.jsonl or bench .json) "
        "to fit a machine file on",
    )
    cal.add_argument(
        "--cost-model",
        default=None,
        metavar="MODEL",
        help="calibrate machine: the calibrated model of the run's model and GPU (a name "
        "or a JSON file)",
    )
    cal.add_argument(
        "--rounds",
        type=positive_int,
        default=None,
        metavar="N",
        help="calibrate machine: most rounds of the fit, one replay of the run each "
        "(default schedlab.calibration.machine_fit.ROUNDS)",
    )
    cal.add_argument(
        "--model",
        default=None,
        help="model name as meta.yaml spells it, e.g. meta-llama/Llama-3.1-8B (default: "
        "meta.yaml's)",
    )
    cal.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="MODEL.json",
        help="write the fitted cost model here (- for standard output)",
    )
    cal.add_argument(
        "--tp", type=positive_int, default=None, help="tensor-parallel degree (default 1)"
    )
    cal.add_argument(
        "--link",
        default=None,
        metavar="BW,LATENCY|FILE",
        help=_LINK_HELP,
    )
    cal.add_argument(
        "--margin-quantile",
        type=float,
        default=None,
        help="quantile of the iteration residuals taken as SLOWeave's margin (default 0.95)",
    )
    cal.add_argument("--name", default=None, help="name of the fitted model")
    add_format_option(cal)
    cal.set_defaults(func=_cmd_calibrate)
    declare_files(
        cal,
        reads=["profile_dir", "run", "cost_model", "link"],
        writes=["output"],
        resolve={"run": _run_files, "cost_model": cost_model_files},
    )


def _replay_parser(subparsers: Any) -> None:
    """``replay``."""
    from schedlab.cli.serving import engine_kind_options
    from schedlab.serving.cost_model import cost_model_names
    from schedlab.serving.policy_registry import policy_names

    rep = subparsers.add_parser(
        "replay",
        help="simulate a recorded serving run and compare its metrics",
        description="Replay a recorded run (a run directory with requests.jsonl, meta.json "
        "and config.json; or a vllm bench serve --save-detailed result) on the simulator "
        "with the deployment its records describe; print measured vs simulated TTFT, TPOT "
        "and latency. Engine flags override the records.",
    )
    rep.add_argument("run", metavar="RUN", help="run directory, requests.jsonl or bench .json")
    rep.add_argument(
        "--cost-model",
        default=None,
        metavar="MODEL",
        help=f"{', '.join(cost_model_names())}, or a JSON file (default: the shipped model "
        "of the run's model, GPU and TP degree, else one calibrated from the matching "
        "profile under --data-dir and cached)",
    )
    rep.add_argument(
        "--data-dir",
        default=None,
        help="directory holding profiles/ (default $SCHEDLAB_DATA)",
    )
    rep.add_argument("--policy", default=None, help=f"{', '.join(policy_names())} (default vllm)")
    engine_kind_options(rep)
    rep.add_argument(
        "--max-num-seqs",
        type=positive_int,
        default=None,
        metavar="N",
        help="most requests running at once (default: as the run's meta.json records it)",
    )
    rep.add_argument(
        "--max-num-batched-tokens",
        type=positive_int,
        default=None,
        metavar="B",
        help="most tokens in one iteration (default: as the run's meta.json records it)",
    )
    rep.add_argument(
        "--kv-tokens",
        type=positive_int,
        default=None,
        metavar="K",
        help="KV capacity of one GPU in tokens (default: meta.json kv_cache, else vLLM's "
        "formula on config.json's GPU)",
    )
    rep.add_argument("--tp", type=_tensor_parallel, default=None, help="tensor-parallel degree")
    rep.add_argument("--dp", type=_data_parallel, default=None, help="data-parallel replicas")
    rep.add_argument("--link", default=None, metavar="BW,LATENCY|FILE", help=_LINK_HELP)
    rep.add_argument(
        "--machine",
        default=None,
        metavar="MACHINE.json",
        help="a machine file of the run's GPU (schedlab calibrate machine), fitted on "
        "another run: its host time and link",
    )
    for flag, what in (
        ("--async-scheduling", "vLLM's asynchronous scheduling"),
        ("--prefix-caching", "the prefix cache"),
    ):
        rep.add_argument(
            flag,
            choices=("auto", "on", "off"),
            default="auto",
            help=f"simulate {what} (default auto: from meta.json and the vLLM version)",
        )
    rep.add_argument(
        "--allow-mismatch",
        action="store_true",
        help="replay with a cost model of another model, GPU or TP degree, or a run that "
        "records a setting the simulator does not model (speculative decoding, LoRA, fp8 "
        "KV, another vLLM release...: each is printed as a warning)",
    )
    rep.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="draw running/waiting requests, token throughput and TTFT/latency CDFs, "
        "simulated against measured",
    )
    add_format_option(rep)
    rep.set_defaults(func=_cmd_replay)
    declare_files(
        rep,
        reads=["run", "cost_model", "data_dir", "link", "machine", "vllm_model"],
        writes=["plot"],
        resolve={
            "run": _run_files,
            "cost_model": cost_model_files,
            "data_dir": profiles_of_data_dir,
        },
    )
