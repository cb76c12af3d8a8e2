"""Command-line subcommands ``calibrate`` and ``replay`` (added by ``schedlab.cli``).

``schedlab calibrate PROFILE_DIR --model NAME -o MODEL.json`` fits a cost model to an
LLMServingSim profile directory, writes it as JSON and prints the held-out error report.

``schedlab replay REQUESTS.jsonl --cost-model MODEL.json --policy vllm --max-num-seqs N
--max-num-batched-tokens B [--kv-tokens K] [--async-scheduling auto|on|off] [--json]``
simulates a recorded run and prints
measured vs simulated TTFT, TPOT and latency (mean, P50, P90, P95, P99) and the
simulation's wall time; ``--json`` prints ``{"metrics": {"ttft_mean": {"measured": ...,
"simulated": ..., "diff_pct": ...}, ...}, "wall_s": ...}`` (seconds). Without
``--kv-tokens`` the KV capacity comes from the run's ``config.json`` and model
(:func:`schedlab.calibration.replay.kv_tokens_for_run`).

Heavy modules are imported when a command runs, so start-up stays fast.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from schedlab.calibration.fit import calibrate
    from schedlab.serving.cost_model import save_cost_model

    model, report = calibrate(
        args.profile_dir,
        args.model,
        tp=args.tp,
        margin_quantile=args.margin_quantile,
        name=args.name,
    )
    save_cost_model(model, args.output)
    if args.json:
        print(
            json.dumps({"model": model.name, "output": args.output} | report.to_dict(), indent=1)
        )
    else:
        print(f"{model.name}: fitted on {', '.join(s.name for s in model.sources)}")
        print(report.to_text())
        print(f"wrote {args.output}")
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from schedlab.calibration.replay import engine_config_for_run, read_recorded_run, replay
    from schedlab.serving.cost_model import get_cost_model

    run = read_recorded_run(args.requests)
    config = engine_config_for_run(
        run,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        kv_tokens=args.kv_tokens,
    )
    report = replay(
        run,
        get_cost_model(args.cost_model),
        policy=args.policy,
        config=config,
        async_scheduling={"auto": None, "on": True, "off": False}[args.async_scheduling],
    )
    if args.json:
        data: dict[str, Any] = report.to_dict()
        print(json.dumps(data, indent=1))
    else:
        print(report.to_text())
    return 0


def register(subparsers: Any) -> None:
    """Add ``calibrate`` and ``replay`` to the ``schedlab`` command line."""
    cal = subparsers.add_parser(
        "calibrate",
        help="fit an iteration-cost model to a GPU profile",
        description="Fit a cost model to an LLMServingSim profile directory (meta.yaml, "
        "tp<N>/dense.csv, attention.csv, per_sequence.csv); print the held-out error report.",
    )
    cal.add_argument("profile_dir", metavar="PROFILE_DIR")
    cal.add_argument(
        "--model",
        required=True,
        help="model name as meta.yaml spells it, e.g. meta-llama/Llama-3.1-8B",
    )
    cal.add_argument("-o", "--output", required=True, metavar="MODEL.json")
    cal.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel degree")
    cal.add_argument(
        "--margin-quantile",
        type=float,
        default=0.95,
        help="quantile of the iteration residuals taken as SLOWeave's margin (default 0.95)",
    )
    cal.add_argument("--name", default=None, help="name of the fitted model")
    cal.add_argument("--json", action="store_true", help="print the report as JSON")
    cal.set_defaults(func=_cmd_calibrate)

    rep = subparsers.add_parser(
        "replay",
        help="simulate a recorded serving run and compare its metrics",
        description="Replay a recorded run (requests.jsonl with queued/first/last token "
        "timestamps) on the simulator; print measured vs simulated TTFT, TPOT, latency.",
    )
    rep.add_argument("requests", metavar="REQUESTS.jsonl")
    rep.add_argument(
        "--cost-model",
        required=True,
        metavar="MODEL",
        help="cost-model JSON file or built-in name",
    )
    rep.add_argument("--policy", default="vllm", help="batch-formation policy (default vllm)")
    rep.add_argument("--max-num-seqs", type=_positive_int, required=True, metavar="N")
    rep.add_argument("--max-num-batched-tokens", type=_positive_int, required=True, metavar="B")
    rep.add_argument(
        "--kv-tokens",
        type=_positive_int,
        default=None,
        metavar="K",
        help="KV capacity in tokens (default: from the run's config.json)",
    )
    rep.add_argument(
        "--async-scheduling",
        choices=("auto", "on", "off"),
        default="auto",
        help="simulate vLLM's asynchronous scheduling (auto: from meta.json, on for "
        "vLLM >= 0.14 unless engine_kwargs.async_scheduling says otherwise)",
    )
    rep.add_argument("--json", action="store_true", help="print JSON")
    rep.set_defaults(func=_cmd_replay)
