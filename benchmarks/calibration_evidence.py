r"""Every term of the calibrated cost model, and the held-out profile evidence for it.

For each LLMServingSim profile under ``$SCHEDLAB_DATA/profiles/llmservingsim`` (default
``../shared/data``), at each tensor-parallel degree, :func:`schedlab.calibration.calibrate`
is run and its held-out report read (``schedlab/calibration/fit.py`` says which rows are
fitted and which held out). A term is tested by the held-out error with it and without it
(or with its simpler alternative):

* each op (per layer, per forward pass, per sequence: ``sampler`` is sampling): the
  held-out iterations predicted without that op's share;
* attention by KV length: the held-out iterations with attention looked up at no prior
  context and the least decode KV of the grid;
* decode skew: five-fold cross-validation on ``skew.csv`` of no correction, one pooled
  :math:`\alpha` and the per-bucket table; and, across models, the table and the pooled
  :math:`\alpha` fitted on every *other* model's ``skew.csv`` (a term claimed to carry
  over must do so);
* the expert count of a mixture-of-experts block: ``moe.csv``'s held-out rows read at the
  row's own expert count, and at its largest;
* tensor- and expert-parallel collectives: no profile row holds them (each ``tp<t>``
  folder is one rank run on one GPU, ``engine_effective.tensor_parallel_size`` 1 in
  ``meta.yaml``), so their link comes from published measurements
  (:mod:`schedlab.llm.link_evidence`); a sensitivity table shows what the link moves;
* a fixed cost per step (host work, launch gaps): no kernel profile measures it, so no
  profile evidence can earn it; it comes from a machine file fitted on a recorded run
  of the machine (:mod:`schedlab.calibration.machine_fit`), not from a profile.

Writes ``docs/calibration.md`` (``--out``). Nothing here reads a recorded serving run.

Usage: ``python benchmarks/calibration_evidence.py [--out docs/calibration.md]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedlab.calibration.fit import CalibrationReport, calibrate_profile
from schedlab.calibration.held_out import ErrorStats, predict_skewed_us, skew_variant
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.profiles import (
    LLMServingSimProfile,
    SkewSamples,
    read_llmservingsim_profile,
)
from schedlab.calibration.skew import SkewTable
from schedlab.llm.interconnect import Link

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import stamp

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SCHEDLAB_DATA") or ROOT.parent / "shared" / "data")

#: LLMServingSim's network setting in the shared runs' config.json (16 GB/s, 20 us): shown
#: in the sensitivity table for comparison only; it is not a measurement.
SIMULATOR_SETTING = Link(16e9, 20e-6)


@dataclass(frozen=True)
class Fitted:
    label: str
    model: str
    profile: LLMServingSimProfile
    cost_model: ProfileCostModel
    report: CalibrationReport


def profiles(root: Path) -> list[Fitted]:
    found = []
    for meta in sorted(root.glob("*/*/*/*/meta.yaml")):
        for sub in sorted(meta.parent.glob("tp*")):
            tp = int(sub.name[2:])
            profile = read_llmservingsim_profile(meta.parent, tp=tp)
            model, report = calibrate_profile(profile)
            short = profile.model.split("/")[-1]
            found.append(
                Fitted(f"{profile.hardware} {short} tp{tp}", short, profile, model, report)
            )
    return found


def pct(stats: ErrorStats | None) -> str:
    return "–" if stats is None or stats.n == 0 else f"{stats.mape_pct:.3f}"


def term_table(fitted: list[Fitted]) -> list[str]:
    ops = sorted({term for f in fitted for term in f.report.ablations})
    head = "| term (held-out rows) | " + " | ".join(f.label for f in fitted) + " | kept |"
    lines = [head, "|" + "---|" * (len(fitted) + 2)]

    def line(term: str, cells: list[tuple[ErrorStats | None, ErrorStats | None]]) -> None:
        worse = [
            f.label
            for f, (w, wo) in zip(fitted, cells, strict=True)
            if w is not None and wo is not None and not w.mape_pct < wo.mape_pct
        ]
        text = [
            f"{pct(w)} / {pct(wo)}" if w is not None and wo is not None else "–" for w, wo in cells
        ]
        verdict = "every profile" if not worse else "dropped on " + ", ".join(worse)
        lines.append(f"| {term} | " + " | ".join(text) + f" | {verdict} |")

    for term in ops:
        line(
            f"{term} (iterations)",
            [(f.report.iteration_every_op, f.report.ablations.get(term)) for f in fitted],
        )
    line(
        "expert count (moe.csv)",
        [(f.report.experts, f.report.experts_without_count) for f in fitted],
    )
    line(
        "decode skew, chosen (skew.csv, 5-fold)",
        [
            (f.report.skew_held_out.get(f.report.skew_choice), f.report.skew_held_out.get("none"))
            for f in fitted
        ],
    )
    return lines


def cross_model(fitted: list[Fitted]) -> list[str]:
    lines = [
        "| profile | none | pooled, own | bucket, own | pooled, other models | "
        "bucket, other models |",
        "|---|---|---|---|---|---|",
    ]
    for f in fitted:
        samples = f.profile.skew_samples
        if samples is None:
            continue
        others = [g.profile.skew_samples for g in fitted if g.model != f.model]
        pooled_rows = SkewSamples(
            *(
                np.concatenate([getattr(o, name) for o in others if o is not None])
                for name in SkewSamples.__dataclass_fields__
            )
        )
        table = SkewTable.fit(pooled_rows)
        other = {
            v: ErrorStats.of(predict_skewed_us(skew_variant(table, v), samples), samples.t_skew_us)
            for v in ("pooled", "bucket")
        }
        own = f.report.skew_held_out
        lines.append(
            f"| {f.label} | {pct(own['none'])} | {pct(own['pooled'])} | {pct(own['bucket'])} | "
            f"{pct(other['pooled'])} | {pct(other['bucket'])} |"
        )
    return lines


def rank_rows(fitted: list[Fitted]) -> list[str]:
    """tp2 over tp1 time of each op at the largest token count both measured."""
    by_model = {(f.model, f.profile.tp): f.profile for f in fitted}
    ops = sorted({op for f in fitted for op in f.profile.dense})
    pairs = [(m, by_model[(m, 1)], by_model[(m, 2)]) for m, tp in by_model if tp == 2]
    lines = [
        "| op | " + " | ".join(m for m, _, _ in pairs) + " |",
        "|---|" + "---|" * len(pairs),
    ]
    for op in ops:
        cells = []
        for _, one, two in pairs:
            if op not in one.dense or op not in two.dense:
                cells.append("–")
                continue
            a, b = one.dense[op], two.dense[op]
            size = min(a.x[-1], b.x[-1])
            ratio = np.interp(size, b.x, b.time_us) / np.interp(size, a.x, a.time_us)
            cells.append(f"{ratio:.2f} at {int(size):,}")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    return lines


#: Batches of the sensitivity table: (label, decodes, KV each, chunk tokens).
BATCHES = (
    ("64 decodes at 1k KV", 64, 1024, 0),
    ("256 decodes at 1k KV", 256, 1024, 0),
    ("2048-token chunk + 32 decodes", 32, 1024, 2048),
)


def sensitivity(fitted: list[Fitted]) -> list[str]:
    published = {f.label: f.cost_model.parallelism.link for f in fitted}
    lines = [
        "| profile | batch | no collectives, ms | published link, ms | bandwidth / 2 | "
        "latency x 2 | LLMServingSim's setting (16 GB/s, 20 us) |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in fitted:
        link = published[f.label]
        if f.profile.tp <= 1 or link is None:
            continue
        variants = [
            None,
            link,
            Link(link.bandwidth_Bps / 2, link.latency_s),
            Link(link.bandwidth_Bps, link.latency_s * 2),
            SIMULATOR_SETTING,
        ]
        for label, n, kv, chunk in BATCHES:
            times = []
            for variant in variants:
                par = dataclasses.replace(
                    f.cost_model.parallelism,
                    link=variant,
                    link_evidence="" if variant is None else "assumed",  # a sensitivity
                )
                model = dataclasses.replace(f.cost_model, parallelism=par)
                chunks = [(chunk, 0)] if chunk else []
                times.append(model.iteration_time(n, n * kv, chunks) * 1e3)
            base = times[1]
            cells = [f"{times[0]:.2f} ({(times[0] / base - 1) * 100:+.1f} %)", f"{base:.2f}"] + [
                f"{t:.2f} ({(t / base - 1) * 100:+.1f} %)" for t in times[2:]
            ]
            lines.append(f"| {f.label} | {label} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "calibration.md"))
    args = parser.parse_args(argv)
    root = DATA / "profiles" / "llmservingsim"
    if not root.is_dir():
        print(
            f"calibration_evidence: no profiles under {root} (set SCHEDLAB_DATA)", file=sys.stderr
        )
        return 2
    started = time.perf_counter()
    fitted = profiles(root)
    print(
        f"calibrated {len(fitted)} profiles in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    doc = [
        "# Calibration: the evidence for each term",
        "",
        stamp("python benchmarks/calibration_evidence.py"),
        "",
        "Every figure is a held-out error on profile rows (LLMServingSim profiles, MIT; "
        "`../shared/data/profiles/llmservingsim`), never a recorded serving run.",
        "",
        "## Each term with and without it",
        "",
        "Mean relative error in percent, *with the term / without it*, on the rows the fit "
        "did not use (`schedlab/calibration/fit.py` says which). Iteration rows: every "
        "held-out attention row made into a whole iteration of that shape. Calibration keeps "
        "an op only on the profiles where dropping it raises that error (`schedlab "
        "calibrate` names the ops it drops); the 'with' column is the iteration error with "
        "every op, before that choice.",
        "",
        *term_table(fitted),
        "",
        "Every term of the table is fitted per profile, on that profile's own rows: none is "
        "carried from one model to another. Decode skew is the one term another simulator "
        "carries across models as a single figure, so it is also tested across models "
        "below.",
        "",
        "## Decode skew across models",
        "",
        "Mean relative error (%) on every `skew.csv` row of the profile: its own folds "
        "(5-fold cross-validation), and tables fitted on the other models' rows only "
        "(every tensor-parallel degree of every other model).",
        "",
        *cross_model(fitted),
        "",
        "## Collectives: evidence and sensitivity",
        "",
        "No profile row holds a collective: each `tp<t>` folder was measured on one GPU with "
        "the model's widths divided by *t* (`meta.yaml`: `engine_effective."
        "tensor_parallel_size: 1`, `hf_overrides`). The link between the GPUs is therefore "
        "the published measurement of `schedlab.llm.link_evidence` (RTX PRO 6000 Blackwell, "
        "PCIe 5.0 peer-to-peer), or the user's own (`--link`, nccl-tests output). The table "
        "shows one iteration's time under each link assumption, and the change from the "
        "published one.",
        "",
        "The rows confirm it. Time of each op in `tp2/` over `tp1/` at the largest token "
        "count both measured: the sharded matrix products (`qkv_proj`, `o_proj`, "
        "`gate_up_proj`, `down_proj`) take about half, the replicated norms about the same; "
        "an op that held an all-reduce would take longer, not half.",
        "",
        *rank_rows(fitted),
        "",
        *sensitivity(fitted),
        "",
        "## Not in a profile: the machine's terms",
        "",
        "- A fixed cost per step (scheduling, input preparation, launch gaps): a kernel "
        "profile does not measure host time, so no held-out profile row can test it. A "
        "machine file fitted on a recorded run of the machine carries it "
        "(`schedlab calibrate machine`); without one it is 0 and every replay says so. "
        "The fitted values are on the [fidelity page](fidelity.md).",
        "- Expert-parallel collectives' link: the same published link as tensor parallelism "
        "(no expert-parallel profile exists), or a machine file's.",
        "",
    ]
    Path(args.out).write_text("\n".join(doc), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
