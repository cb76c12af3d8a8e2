"""Writers of small recorded runs for the calibration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def req(prompt: int, output: int, queued: float, first: float, last: float) -> dict[str, Any]:
    """One ``requests.jsonl`` line of LLMServingSim's bench format."""
    return {
        "input_toks": prompt,
        "output_toks": output,
        "queued_ts": queued,
        "first_token_ts": first,
        "last_token_ts": last,
        "arrival_time": 0,
    }


def write_run(
    directory: Path,
    requests: list[dict[str, Any]],
    meta: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    """Write ``requests.jsonl`` (and ``meta.json``, ``config.json``) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "requests.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in requests) + "\n")
    if meta is not None:
        (directory / "meta.json").write_text(json.dumps(meta))
    if config is not None:
        (directory / "config.json").write_text(json.dumps(config))
    return path


def gpu_config(mem_gib: float = 96, **top: Any) -> dict[str, Any]:
    """A ``config.json`` of one Llama-3.1-8B instance with ``mem_gib`` GiB."""
    instance = {
        "model_name": "meta-llama/Llama-3.1-8B",
        "hardware": "RTXPRO6000",
        "npu_mem": {"mem_size": mem_gib, "mem_util": 0.5},
    }
    return {"nodes": [{"instances": [instance]}], **top}
