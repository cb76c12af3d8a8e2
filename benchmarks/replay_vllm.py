r"""Replay every recorded vLLM run in the shared data and report how close the simulator is.

For each run directory under ``$SCHEDLAB_DATA/validation`` (default ``../shared/data``),
as a new user would and with nothing taken from the run's timestamps:

1. read the run and its deployment from its own records
   (:func:`schedlab.calibration.deployment.deployment_of`: engine limits, KV capacity,
   prefix caching, asynchronous scheduling, parallelism, link);
2. calibrate the profile of the run's GPU and model at its tensor-parallel degree
   (``profiles/llmservingsim/<hardware>/<model>/bf16``) and print the held-out iteration
   error; check that the shipped model of that GPU, if there is one, is exactly this fit;
3. replay the run with that model and the ``vllm`` policy ``--repeats`` times: the 15
   metrics measured vs simulated, how many lie within 5 %, the worst, the preemptions, and
   the median wall time of a replay; beside them the figures the publisher of the run
   reports for its own simulator (``../shared/data/README.md``);
4. ``--ablation``: the replay with each modelled behaviour switched off in turn (the
   per-bucket decode-skew table, then skew altogether; asynchronous scheduling; the prefix
   cache; the whole-prompt admission gate), to show what each contributes. Nothing is
   tuned: every variant is a documented behaviour or its absence.

``--plot DIR`` writes each run's measured-vs-simulated picture (``replay --plot``).

``--report`` writes the fidelity report, ``docs/fidelity.md`` (``--report-out``), with its
figures beside it in ``docs/fidelity/``: for every run found (the shared ones, and every
run directory given with ``--runs``, e.g. runs of your own) the 15 metrics, the ablation
of every modelled behaviour, and the decode-step throughput predicted against the one
measured in ``timeseries.csv`` (generation tokens per second per running request, over
the seconds with a request running): a diagnostic, never fitted to.

Usage: ``python benchmarks/replay_vllm.py [--repeats 5] [--ablation] [--plot DIR]
[--report [--report-out docs/fidelity.md]] [--runs DIR ...]``
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from schedlab.calibration.deployment import Deployment, deployment_of
from schedlab.calibration.fit import calibrate
from schedlab.calibration.machine_file import MachineFile
from schedlab.calibration.machine_fit import fit_machine
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.recorded_run import MeasuredSeries, RecordedRun, read_recorded_run
from schedlab.calibration.replay import ReplayReport, replay
from schedlab.calibration.skew import SkewTable
from schedlab.serving.cost_model import load_cost_model, shipped_cost_models

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import stamp

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SCHEDLAB_DATA") or ROOT.parent / "shared" / "data")
TARGET_PCT = 5.0

#: What the publisher of each run reports for its own simulator, ms (../shared/data/README.md).
PEER = {
    "vllm-0.19.0_RTXPRO6000_Llama-3.1-8B": {
        "ttft_mean": 6816,
        "ttft_p50": 8634,
        "ttft_p99": 19357,
        "tpot_mean": 32.1,
        "latency_mean": 27695,
    },
    "vllm-0.19.0_RTX4090_Llama-3.1-8B": {
        "ttft_mean": 65820,
        "tpot_mean": 32.5,
        "latency_mean": 86980,
    },
}
#: What the publisher reports as differences (%) only (../shared/data/README.md).
PEER_PCT = {
    "vllm-0.19.0_RTXPRO6000_Qwen3-30B-A3B-Instruct-2507": {
        "ttft_mean": -13.6,
        "ttft_p50": -21.8,
        "tpot_mean": -1.7,
        "latency_mean": -2.2,
    },
}


def profile_of(deployment: Deployment) -> Path:
    return DATA / "profiles" / "llmservingsim" / deployment.hardware / deployment.model / "bf16"


def fitted_model(run: RecordedRun, deployment: Deployment) -> ProfileCostModel:
    """Calibrate the run's profile; check the shipped model of the same GPU is this fit."""
    model, report = calibrate(profile_of(deployment), deployment.model, tp=deployment.tp)
    print(
        f"  calibrated {model.name}: held-out iteration error median "
        f"{report.iteration.median_pct:.2f} %, P90 {report.iteration.p90_pct:.2f} %"
    )
    shipped = shipped_cost_models().get(model.name)
    if shipped is not None:
        gap = largest_difference(load_cost_model(shipped).to_dict(), model.to_dict())
        verdict = "DIFFERS" if gap > SAME_FIT else f"this fit (numbers within {gap:.1g} relative)"
        print(f"  shipped {shipped.name}: {verdict}")
    return model


#: Shipped and refitted coefficients that agree to this relative difference are the same
#: fit: the last bits of a least-squares fit change with the machine's BLAS.
SAME_FIT = 1e-9


def largest_difference(a: object, b: object) -> float:
    """The largest relative difference between the numbers of two JSON-like values of the
    same shape; ``inf`` where their shapes or other values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return math.inf
        return max((largest_difference(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return math.inf
        return max((largest_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))
    return 0.0 if a == b else math.inf


def peer_pct(name: str, key: str, measured_s: float) -> float | None:
    """The publisher's own simulator's difference (%) on ``key`` of run ``name``."""
    if key in PEER.get(name, {}):
        return 100 * (PEER[name][key] - measured_s * 1e3) / (measured_s * 1e3)
    return PEER_PCT.get(name, {}).get(key)


def print_report(name: str, report: ReplayReport, walls: list[float]) -> None:
    print(f"  {'metric':<14}{'measured':>11}{'simulated':>11}{'diff %':>9}{'peer diff %':>13}")
    for key, m in report.metrics.items():
        peer = peer_pct(name, key, m.measured)
        theirs = f"{'':>13}" if peer is None else f"{peer:+13.2f}"
        print(
            f"  {key:<14}{m.measured * 1e3:>11.1f}{m.simulated * 1e3:>11.1f}"
            f"{m.diff_pct:>+9.2f}{theirs}"
        )
    within = within_count(report)
    worst, diff = report.worst
    print(
        f"  within {TARGET_PCT:g} %: {within}/15; worst {worst} {diff:+.2f} %; "
        f"{report.preemptions} preemptions, {report.reused_tokens} tokens resumed from the "
        f"prefix cache; replay wall time median {statistics.median(walls):.3f} s "
        f"(min {min(walls):.3f}, max {max(walls):.3f}, {len(walls)} runs)"
    )


def within_count(report: ReplayReport) -> int:
    """How many of the 15 metrics lie within :data:`TARGET_PCT` of their measurement."""
    return sum(abs(m.diff_pct) <= TARGET_PCT for m in report.metrics.values())


def within(report: ReplayReport) -> str:
    """``n/15 within 5 % (worst key +d %)``."""
    worst, diff = report.worst
    return f"{within_count(report)}/15 within {TARGET_PCT:g} % (worst {worst} {diff:+.2f} %)"


def carried(
    name: str, report: ReplayReport, machined: list[tuple[MachineFile, ReplayReport]]
) -> list[str]:
    """One bullet of the machine-file summary: the run plain and with each other file."""
    line = f"- {name}: {within(report)}"
    banded = [m for m in report.metrics.values() if m.band is not None and m.band[1] > m.band[0]]
    if any(m.band is not None for m in report.metrics.values()) and not banded:
        line += "; its band has no width (the assumed terms do not move its metrics)"
    if banded:
        inside = sum(m.band[0] <= m.measured <= m.band[1] for m in banded)  # type: ignore[index]
        line += f"; measured inside the band on {inside} of {len(banded)} metrics"
    for machine, other in machined:
        line += (
            f"; with the file fitted on {machine.run} (host {machine.host_s * 1e3:.3f} ms a "
            f"step): {within(other)}"
        )
    return [line + "."]


def ablations(
    run: RecordedRun, model: ProfileCostModel, deployment: Deployment
) -> dict[str, ReplayReport]:
    """The replay with each modelled behaviour switched off in turn."""
    engine = deployment.engine
    variants: dict[str, tuple[ProfileCostModel, Deployment]] = {"as modelled": (model, deployment)}
    if model.skew is not None:
        pooled = SkewTable(model.skew.default, {}, model.skew.axes)
        variants["pooled skew alpha only"] = (dataclasses.replace(model, skew=pooled), deployment)
        variants["no skew correction"] = (dataclasses.replace(model, skew=None), deployment)
    if model.parallelism.tp > 1 or deployment.lockstep:
        alone = dataclasses.replace(model.parallelism, link=None, link_evidence="")
        variants["no collectives"] = (
            dataclasses.replace(model, parallelism=alone),
            dataclasses.replace(deployment, link=None),
        )
    for label, field in (
        ("synchronous scheduling", "async_scheduling"),
        ("no prefix cache", "prefix_caching"),
        ("no whole-prompt admission gate", "reserve_full_prompt"),
    ):
        if getattr(engine, field):
            changed = dataclasses.replace(engine, **{field: False})
            variants[label] = (model, dataclasses.replace(deployment, engine=changed))
    return {
        label: replay(run, variant, deployment=where)
        for label, (variant, where) in variants.items()
    }


def print_ablations(reports: dict[str, ReplayReport]) -> None:
    keys = ("ttft_mean", "ttft_p50", "ttft_p95", "tpot_mean", "latency_mean", "latency_p50")
    print(f"  {'variant':<32}" + "".join(f"{k:>13}" for k in keys) + f"{'worst':>9}{'preempt':>9}")
    for label, report in reports.items():
        cells = "".join(f"{report.metrics[k].diff_pct:>+13.2f}" for k in keys)
        print(f"  {label:<32}{cells}{report.worst[1]:>+9.2f}{report.preemptions:>9}")


def decode_rate(series: MeasuredSeries) -> float:
    """Median generation tokens per second per running request, over the seconds with a
    request running: the decode steps a request sees per second."""
    busy = series.running > 0
    if not busy.any():
        return math.nan
    return float(np.median(series.generation_tps[busy] / series.running[busy]))


def rank_distance(report: ReplayReport, key: str) -> str:
    """For a percentile metric ``<name>_p<q>``: the share (%) of measured values below the
    simulated percentile, less ``q``; blank for a mean."""
    name, _, stat = key.rpartition("_")
    if not stat.startswith("p"):
        return ""
    measured = np.asarray(report.measured[name])
    measured = measured[~np.isnan(measured)]
    below = float(np.mean(measured < report.metrics[key].simulated)) * 100
    return f"{below - float(stat[1:]):+.1f}"


def markdown_run(
    name: str,
    deployment: Deployment,
    model: ProfileCostModel,
    report: ReplayReport,
    variants: dict[str, ReplayReport],
    figure: str,
    machined: list[tuple[MachineFile, ReplayReport]],
) -> list[str]:
    """The report section of one run."""
    within = within_count(report)
    worst, diff = report.worst
    lines = [
        f"## {name}",
        "",
        f"{len(report.measured['ttft'])} requests; cost model `{model.name}` calibrated from "
        f"its profile; {report.preemptions} simulated preemptions. Deployment, as read: "
        + "; ".join(deployment.notes)
        + ".",
        "",
        f"**{within} of 15 metrics within {TARGET_PCT:g} %; worst {worst} {diff:+.2f} %.**",
        "",
        "The last column places each simulated percentile in the *measured* distribution: "
        "the share of measured requests below the simulated value, less the percentile's "
        "own (in percentage points). Where the measured distribution has a gap (a cohort "
        "of requests that waited together), a few requests on the other side of it move a "
        "percentile by the whole gap while this distance stays small.",
        "",
        "The band is each metric simulated at the ends of the terms nobody measured for "
        "this run (the KV capacity where the run does not record it, a published link: "
        "each moved to its ends in turn); the publisher's column is its own simulator's "
        "difference on this run, where it reports one.",
        "",
        "| metric | measured, ms | simulated, ms | diff % | band, ms | rank distance, "
        "points | publisher's diff % |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, m in report.metrics.items():
        band = "" if m.band is None else f"{m.band[0] * 1e3:.1f} – {m.band[1] * 1e3:.1f}"
        peer = peer_pct(name, key, m.measured)
        lines.append(
            f"| {key} | {m.measured * 1e3:.1f} | {m.simulated * 1e3:.1f} | {m.diff_pct:+.2f} | "
            f"{band} | {rank_distance(report, key)} | {'' if peer is None else f'{peer:+.2f}'} |"
        )
    lines += ["", "Machine terms: " + "; ".join(report.machine_notes) + "."]
    if machined:
        lines += [
            "",
            "With a machine file fitted on another run of the same machine (`schedlab "
            "calibrate machine`; never on this run), the difference (%) from the measured "
            "run:",
            "",
            "| machine file fitted on | host ms a step | link | "
            + " | ".join(report.metrics)
            + " | within 5 % |",
            "|---|---|---|" + "---|" * (len(report.metrics) + 1),
        ]
        for machine, other in machined:
            link = "none" if machine.link is None else machine.link.describe()
            cells = " | ".join(f"{m.diff_pct:+.2f}" for m in other.metrics.values())
            count = within_count(other)
            lines.append(
                f"| {machine.run} | {machine.host_s * 1e3:.3f} | {link} | {cells} | {count}/15 |"
            )
    keys = list(report.metrics)
    lines += [
        "",
        "Ablation: the difference (%) from the measured run with each modelled behaviour "
        "switched off in turn.",
        "",
        "| variant | " + " | ".join(keys) + " | within 5 % |",
        "|---|" + "---|" * (len(keys) + 1),
    ]
    for label, variant in variants.items():
        cells = " | ".join(f"{variant.metrics[k].diff_pct:+.2f}" for k in keys)
        count = within_count(variant)
        lines.append(f"| {label} | {cells} | {count}/15 |")
    if report.measured_series is not None and report.series is not None:
        measured, simulated = decode_rate(report.measured_series), decode_rate(report.series)
        lines += [
            "",
            "Decode-step throughput (diagnostic, never fitted to): median generation tokens "
            "per second per running request over the seconds with a request running, "
            f"measured {measured:.2f}, simulated {simulated:.2f} "
            f"({(simulated / measured - 1) * 100:+.1f} %).",
        ]
    lines += ["", f"![{name}]({figure})", ""]
    return lines


def fit_machines(runs: list[Path]) -> dict[str, MachineFile]:
    """A machine file fitted on each run, by the run's name."""
    machines = {}
    for directory in runs:
        run = read_recorded_run(directory)
        deployment = deployment_of(run)
        machine = fit_machine(run, fitted_model(run, deployment), deployment=deployment)
        machines[directory.name] = machine
        print(f"{directory.name}: {machine.note()}; fit {machine.fit}")
    return machines


def report_header(machines: dict[str, MachineFile], summary: list[str]) -> list[str]:
    """The fidelity page's head: how it was made, the machine files, what they carry."""
    return [
        "# Fidelity: recorded vLLM runs replayed",
        "",
        stamp("python benchmarks/replay_vllm.py --report"),
        "",
        "Each run is replayed as a new user would (`schedlab replay RUN`): its deployment "
        "read from its own records, its cost model calibrated from the profile of its "
        "GPU and model (`docs/calibration.md` gives the evidence for every term), "
        "nothing fitted to its timestamps or summaries. Beside it, the run replayed "
        "with a machine file (host time a step, link) fitted on *another* run of the "
        "same GPU kind. Machine files fitted on each run:",
        "",
        "| run | GPU | host ms a step | link (fitted on) | misfit J | rounds |",
        "|---|---|---|---|---|---|",
        *(
            f"| {name} | {m.gpu} | {m.host_s * 1e3:.3f} | "
            + (
                "none (no collective)"
                if m.link is None
                else f"{m.link.describe()} ({m.collective})"
            )
            + f" | {m.fit['misfit']:.3g} | {int(m.fit['rounds'])}"
            + ("" if m.fit["settled"] else " (budget ended it)")
            + " |"
            for name, m in machines.items()
        ),
        "",
        "## Machine files: what they carry and what they do not",
        "",
        "A machine file carries the fitted run's host time whole: data-parallel "
        "replicas synchronise on the host every step, so a file fitted on a "
        "data-parallel run holds more host time than one GPU of the machine spends. "
        "Each run, plain and with the files of the other runs of its GPU; and whether "
        "its measured metrics lie inside the band of the terms it does not measure:",
        "",
        *summary,
        "",
        "Add your own runs with `--runs DIR ...`.",
        "",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="replays timed per run")
    parser.add_argument("--ablation", action="store_true", help="switch behaviours off")
    parser.add_argument("--plot", type=Path, default=None, metavar="DIR")
    parser.add_argument("--report", action="store_true", help="write the fidelity report")
    parser.add_argument("--report-out", type=Path, default=ROOT / "docs" / "fidelity.md")
    parser.add_argument(
        "--runs", type=Path, nargs="*", default=[], metavar="DIR", help="more run directories"
    )
    args = parser.parse_args(argv)
    runs = sorted(p for p in (DATA / "validation").glob("*") if (p / "requests.jsonl").is_file())
    missing = [str(p) for p in args.runs if not (p / "requests.jsonl").is_file()]
    if missing:
        print(f"--runs: no requests.jsonl in {', '.join(missing)}", file=sys.stderr)
        return 2
    runs += args.runs
    if not runs:
        print(f"no recorded runs under {DATA / 'validation'} (set SCHEDLAB_DATA)", file=sys.stderr)
        return 2
    if args.report:
        args.plot = args.plot or args.report_out.parent / "fidelity"
        args.ablation = True
    sections: list[str] = []
    machines = fit_machines(runs)
    summary: list[str] = []
    for directory in runs:
        run = read_recorded_run(directory)
        deployment = deployment_of(run)
        print(f"{directory.name}: {len(run)} requests")
        print("  deployment: " + "; ".join(deployment.notes))
        model = fitted_model(run, deployment)
        reports = [replay(run, model, deployment=deployment) for _ in range(args.repeats)]
        machined = [
            (machine, replay(run, model, deployment=deployment, machine=machine))
            for name, machine in machines.items()
            if name != directory.name and machine.gpu == deployment.hardware
        ]
        for machine, other in machined:
            print(f"  with the machine file fitted on {machine.run}:")
            print_report(directory.name, other, [other.wall_s])
        if args.plot is not None:  # the series for the figure, outside the timed replays
            reports[0] = replay(run, model, deployment=deployment, series=True)
        print_report(directory.name, reports[0], [r.wall_s for r in reports])
        summary += carried(directory.name, reports[0], machined)
        variants = ablations(run, model, deployment) if args.ablation else {}
        if variants:
            print_ablations(variants)
        if args.plot is not None:
            from schedlab.plotting.replay import plot_replay

            args.plot.mkdir(parents=True, exist_ok=True)
            target = args.plot / f"{directory.name}.png"
            plot_replay(reports[0], target, title=f"{directory.name}: {model.name}")
            print(f"  wrote {target}")
            if args.report:
                figure = os.path.relpath(target, args.report_out.parent)
                sections += markdown_run(
                    directory.name, deployment, model, reports[0], variants, figure, machined
                )
    if args.report:
        header = report_header(machines, summary)
        args.report_out.parent.mkdir(parents=True, exist_ok=True)
        args.report_out.write_text("\n".join(header + sections), encoding="utf-8")
        print(f"wrote {args.report_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
