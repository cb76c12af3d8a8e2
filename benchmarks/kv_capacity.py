r"""How far vLLM's KV-cache sizing as schedlab computes it lies from what vLLM allocated.

For every recorded run under ``$SCHEDLAB_DATA/validation`` (default ``../shared/data``)
and every profile under ``profiles/llmservingsim``, the KV blocks of
:func:`schedlab.llm.models.kv_budget` (through
:func:`schedlab.calibration.deployment.deployment_of` for a run, with the run's record of
its blocks set aside, and :func:`schedlab.calibration.deployment.profile_deployment` for
a profile), beside the blocks the run or profile records (``meta.json`` ``kv_cache`` or
``resolved_config.cache_config.num_gpu_blocks``; ``meta.yaml`` ``num_gpu_blocks``), and
the relative error. A run is computed twice: with the GPU memory it records as CUDA
reported it (``hardware.device_total_memory_bytes``), and with the datasheet figure of its
``config.json`` (``npu_mem.mem_size`` GiB). Nothing is fitted: the formula's terms are
derived from vLLM 0.19's source (``schedlab/llm/models.py``), and this report only
measures them.

Usage: ``python benchmarks/kv_capacity.py [--output docs/kv-capacity.md]``
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
from pathlib import Path

from schedlab.calibration.deployment import deployment_of, profile_deployment
from schedlab.calibration.profiles import read_llmservingsim_profile
from schedlab.calibration.recorded_run import RecordedRun, read_recorded_run
from schedlab.llm.models import GIB, NON_TORCH_MEASURED_BYTES, get_model_shape, kv_bytes_per_token

sys.path.insert(0, str(Path(__file__).resolve().parent))  # beside it: results_page
from results_page import stamp

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SCHEDLAB_DATA") or ROOT.parent / "shared" / "data")


def recorded_blocks(meta: dict) -> int | None:
    """The blocks vLLM allocated, as the run records them (``None``: not recorded)."""
    cache = meta.get("kv_cache") or {}
    resolved = (meta.get("resolved_config") or {}).get("cache_config") or {}
    return cache.get("num_gpu_blocks") or resolved.get("num_gpu_blocks")


def without_blocks(run: RecordedRun, *, nominal: bool) -> RecordedRun:
    """``run`` with its record of the blocks set aside (and, if ``nominal``, its record
    of the GPU's memory, so that ``config.json``'s datasheet figure is read)."""
    meta = copy.deepcopy(run.meta)
    (meta.get("kv_cache") or {}).pop("num_gpu_blocks", None)
    ((meta.get("resolved_config") or {}).get("cache_config") or {}).pop("num_gpu_blocks", None)
    if nominal:
        (meta.get("hardware") or {}).pop("device_total_memory_bytes", None)
    return dataclasses.replace(run, meta=meta)


def run_rows() -> list[str]:
    rows = []
    for directory in sorted((DATA / "validation").glob("*/")):
        run = read_recorded_run(directory)
        recorded = recorded_blocks(run.meta)
        for nominal in (False, True):
            if nominal and "device_total_memory_bytes" not in (run.meta.get("hardware") or {}):
                continue
            deployment = deployment_of(without_blocks(run, nominal=nominal))
            engine = deployment.engine
            blocks = engine.total_blocks + 1  # the null block is vLLM's too
            memory = "datasheet (config.json)" if nominal else "recorded"
            if "device_total_memory_bytes" not in (run.meta.get("hardware") or {}):
                memory = "datasheet (config.json)"
            error = implied = "-"
            if recorded is not None:
                error = f"{100 * (blocks - recorded) / recorded:+.1f} %"
                block_bytes = engine.block_size * kv_bytes_per_token(
                    get_model_shape(deployment.model), deployment.tp
                )
                implied = f"{(blocks - recorded) * block_bytes / 2**20:,.0f}"
            rows.append(
                f"| {directory.name} | {memory} | {engine.max_num_batched_tokens} / "
                f"{engine.max_num_seqs} | {blocks:,} | "
                f"{'not recorded' if recorded is None else f'{recorded:,}'} | {error} | "
                f"{implied} |"
            )
    return rows


def profile_rows() -> list[str]:
    rows = []
    for meta_path in sorted((DATA / "profiles" / "llmservingsim").glob("**/meta.yaml")):
        root = meta_path.parent
        for tp_dir in sorted(p for p in root.glob("tp*") if p.is_dir()):
            tp = int(tp_dir.name[2:])
            profile = read_llmservingsim_profile(root, tp=tp)
            hosting = profile_deployment(profile)
            engine = profile.meta.get("engine_effective") or {}
            batch, seqs = (
                engine.get("max_num_batched_tokens", 2048),
                engine.get("max_num_seqs", 256),
            )
            recorded = profile.meta.get("num_gpu_blocks")
            if hosting is None:
                rows.append(f"| {root.relative_to(DATA)} | tp{tp} | GPU memory unknown | - | - |")
                continue
            budget = hosting.budget(batch, seqs)
            blocks = budget.blocks(hosting.block_size)
            rows.append(
                f"| {root.relative_to(DATA)} | tp{tp} | {hosting.gpu_memory_bytes / GIB:.2f} GiB, "
                f"{batch} / {seqs} | {blocks:,} (P {budget.peak / 2**20:,.0f} MiB) | "
                f"{'not recorded' if recorded is None else f'{recorded:,}'} |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(ROOT / "docs" / "kv-capacity.md"))
    args = parser.parse_args()
    lines = [
        "# KV capacity: schedlab's formula against vLLM's own allocation",
        "",
        stamp("python benchmarks/kv_capacity.py"),
        "",
        "The formula",
        "(`schedlab.llm.models.kv_budget`, its terms derived from vLLM 0.19.0's memory",
        "profiling with file and line in the module docstring) is",
        "`blocks = floor((ceil(u G) - W - P - N) / (block b_kv))`: G the GPU's memory, u",
        "`gpu_memory_utilization`, W the weights and rotary cache one GPU holds, P the larger",
        "stage of the profiling run (a forward pass of `max_num_batched_tokens` tokens, or",
        "the sampler on `min(max_num_batched_tokens, max_num_seqs)` rows), N the memory",
        "outside PyTorch. Blocks include vLLM's null block (one fewer is usable).",
        "",
        "## What N is, and why the capacity is a band",
        "",
        "vLLM 0.19 measures N as the rise, from the worker's creation to the end of the",
        "profiling run, of the memory CUDA reports in use less the memory PyTorch's",
        "allocator reserved (`vllm/utils/mem_utils.py`, `memory_profiling`, lines 249-274,",
        "`non_torch_increase`; subtracted in `vllm/v1/worker/gpu_worker.py` lines 387-421).",
        "What grows there: the code of the CUDA kernels loaded lazily on their first use in",
        "the profiling run, the cuBLAS/cuBLASLt workspaces, and with tensor parallelism",
        "NCCL's and the custom all-reduce's buffers. The CUDA context itself is older than",
        "the snapshot and is not subtracted; CUDA-graph memory is subtracted only when",
        "`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` is set (off by default, lines 395-399).",
        "Kernel code sizes depend on the GPU, the build and the kernels the model runs, so",
        "no formula gives N: it is evidence. The one measurement is the RTX 4090 run below",
        f"({NON_TORCH_MEASURED_BYTES / 2**20:.0f} MiB, its unexplained column at the",
        "recorded memory, `schedlab.llm.models.NON_TORCH_MEASURED_BYTES`). So where a run",
        "does not record its blocks, the capacity is known only between the formula with",
        "that N (low) and with N = 0 (high, an upper bound): `schedlab replay` simulates at",
        'the high end and gives every metric at both ends (`band ms`; `"band"` in',
        "`--json`), and the note of every estimated capacity names both ends.",
        "",
        "## Recorded runs",
        "",
        "The last column is the memory the formula leaves unexplained, (formula - vLLM's)",
        "blocks times a block's bytes: N and any term the derivation misses.",
        "",
        "| run | GPU memory | batched tokens / seqs | formula blocks | vLLM's blocks | error |"
        " unexplained MiB |",
        "|---|---|---|---|---|---|---|",
        *run_rows(),
        "",
        "## Profiles",
        "",
        "At the profiler's own engine settings (`meta.yaml` `engine_effective`); the GPU's",
        "memory from `schedlab.llm.gpus` (no profile records it, nor its blocks). The",
        "profiler ran one decoder layer, so its own allocation would not be the full",
        "model's anyway; the figures are what the full model would get at its settings.",
        "",
        "| profile | tp | GPU memory, batched tokens / seqs | formula blocks | recorded |",
        "|---|---|---|---|---|",
        *profile_rows(),
        "",
    ]
    Path(args.output).write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
