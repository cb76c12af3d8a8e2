"""Length tables: the joint distribution of prompt and output lengths, in quantiles.

The real traces under ``../shared/data`` may not be redistributed, so schedlab ships
only figures derived from them: for each trace a :class:`LengthTable` holding

* the prompt-length quantiles at ``PROMPT_LEVELS`` probability levels, and
* for each prompt-length decile bin, the output-length quantiles at ``OUTPUT_LEVELS``.

Sampling draws a prompt length by inverse-CDF interpolation of the first table, then an
output length from the conditional table of the prompt's decile, so the correlation
between prompt and output length is kept at decile resolution. The shipped tables live
in ``schedlab/data/length_tables.json``; each names its source file and license.
``python -m schedlab.llm.lengths DATA_DIR`` re-derives them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from schedlab.errors import FormatError, SchedlabError, UnknownNameError
from schedlab.json_files import parse_json
from schedlab.llm.traces import Trace, read_trace

__all__ = ["LengthTable", "builtin_table", "builtin_table_names"]

PROMPT_LEVELS = np.linspace(0.0, 1.0, 201)
OUTPUT_LEVELS = np.linspace(0.0, 1.0, 101)
N_BINS = 10

#: Trace files the shipped tables are derived from, with their sources and licenses.
SOURCES: dict[str, tuple[str, str]] = {
    "sharegpt": (
        "traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "project-etalon/etalon (also in microsoft/vidur), Apache-2.0",
    ),
    "arxiv": (
        "traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "microsoft/vidur, MIT",
    ),
    "azure-code": (
        "traces/AzureLLMInferenceTrace_code.csv",
        "Azure/AzurePublicDataset, CC-BY-4.0 (Patel et al., Splitwise, ISCA 2024)",
    ),
    "azure-conv": (
        "traces/AzureLLMInferenceTrace_conv.csv",
        "Azure/AzurePublicDataset, CC-BY-4.0 (Patel et al., Splitwise, ISCA 2024)",
    ),
}


@dataclass(frozen=True)
class LengthTable:
    """Quantile summary of a trace's joint prompt/output length distribution.

    Attributes
    ----------
    name
        Table name (``sharegpt``, ``arxiv``, ...).
    prompt_quantiles
        Prompt lengths at :data:`PROMPT_LEVELS`.
    bin_edges
        Prompt-length edges of the ``N_BINS`` decile bins (``N_BINS + 1`` values).
    output_quantiles
        ``(N_BINS, len(OUTPUT_LEVELS))`` output lengths per prompt bin.
    source, license
        Where the figures come from.
    """

    name: str
    prompt_quantiles: np.ndarray
    bin_edges: np.ndarray
    output_quantiles: np.ndarray
    source: str = ""
    license: str = ""

    @classmethod
    def from_trace(
        cls, trace: Trace, name: str, source: str = "", license: str = ""
    ) -> LengthTable:
        """Derive a table from a trace (requests with output ``>= 1`` only)."""
        keep = trace.output >= 1
        prompt = trace.prompt[keep].astype(float)
        output = trace.output[keep].astype(float)
        edges = np.quantile(prompt, np.linspace(0, 1, N_BINS + 1))
        which = np.clip(np.searchsorted(edges, prompt, side="right") - 1, 0, N_BINS - 1)
        rows = []
        for b in range(N_BINS):
            chosen = output[which == b]
            rows.append(np.quantile(chosen if chosen.size else output, OUTPUT_LEVELS))
        return cls(
            name,
            np.quantile(prompt, PROMPT_LEVELS),
            edges,
            np.vstack(rows),
            source,
            license,
        )

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n`` (prompt, output) pairs; outputs are ``>= 1``, both ``int64``."""
        prompt = np.interp(rng.random(n), PROMPT_LEVELS, self.prompt_quantiles)
        which = np.clip(np.searchsorted(self.bin_edges, prompt, side="right") - 1, 0, N_BINS - 1)
        levels = rng.random(n)
        # Row-wise inverse CDF: interpolate each draw in its bin's quantile row.
        pos = levels * (OUTPUT_LEVELS.size - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, OUTPUT_LEVELS.size - 1)
        frac = pos - lo
        table = self.output_quantiles  # indexed pointwise: O(n) memory, not n rows of it
        output = table[which, lo] * (1 - frac) + table[which, hi] * frac
        return (
            np.rint(prompt).astype(np.int64),
            np.maximum(np.rint(output), 1).astype(np.int64),
        )

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "license": self.license,
            "prompt_quantiles": np.round(self.prompt_quantiles, 2).tolist(),
            "bin_edges": np.round(self.bin_edges, 2).tolist(),
            "output_quantiles": np.round(self.output_quantiles, 2).tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict, where: str = "length table") -> LengthTable:
        try:
            table = cls(
                str(data["name"]),
                np.asarray(data["prompt_quantiles"], float),
                np.asarray(data["bin_edges"], float),
                np.asarray(data["output_quantiles"], float),
                str(data.get("source", "")),
                str(data.get("license", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{where}: malformed length table ({exc})") from None
        if table.output_quantiles.shape != (N_BINS, OUTPUT_LEVELS.size):
            raise FormatError(f"{where}: output_quantiles must be {N_BINS}x{OUTPUT_LEVELS.size}")
        if table.prompt_quantiles.shape != PROMPT_LEVELS.shape:
            raise FormatError(f"{where}: prompt_quantiles must have {PROMPT_LEVELS.size} values")
        return table


#: The shipped tables' file, inside the package.
_SHIPPED_NAME = "data/length_tables.json"


@cache
def _builtin_tables() -> dict[str, LengthTable]:
    text = resources.files("schedlab").joinpath(_SHIPPED_NAME).read_text("utf-8")
    return {
        name: LengthTable.from_dict(entry, f"length_tables.json[{name}]")
        for name, entry in parse_json(text, "length_tables.json")["tables"].items()
    }


def builtin_table_names() -> tuple[str, ...]:
    """Names of the shipped length tables."""
    return tuple(_builtin_tables())


def builtin_table(name: str) -> LengthTable:
    """The shipped length table ``name`` (one of :func:`builtin_table_names`)."""
    tables = _builtin_tables()
    if name not in tables:
        raise UnknownNameError("length table", name, tuple(tables))
    return tables[name]


def derive_tables(data_dir: str | Path) -> dict:
    """Derive all shipped tables from the trace files under ``data_dir``."""
    data_dir = Path(data_dir)
    tables = {}
    for name, (rel, lic) in SOURCES.items():
        table = LengthTable.from_trace(read_trace(data_dir / rel), name, rel, lic)
        tables[name] = table.to_dict()
    return {
        "note": "Quantile figures derived from public traces; each table names its "
        "source file (under shared/data of schedlab's development setup) and license.",
        "tables": tables,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m schedlab.llm.lengths DATA_DIR [-o FILE]``: re-derive the shipped
    tables from the traces under ``DATA_DIR``; bad input is one line on stderr and exit
    code 2."""
    parser = argparse.ArgumentParser(
        prog="python -m schedlab.llm.lengths",
        description="Re-derive schedlab's shipped length tables from the trace files "
        "under DATA_DIR (its traces/ folder).",
    )
    parser.add_argument("data_dir", metavar="DATA_DIR", help="folder holding traces/")
    parser.add_argument(
        "-o", "--output", default=None, help="write here (default: the shipped table file)"
    )
    args = parser.parse_args(argv)
    out = Path(args.output or str(resources.files("schedlab").joinpath(_SHIPPED_NAME)))
    try:
        tables = derive_tables(args.data_dir)
    except SchedlabError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    out.write_text(json.dumps(tables, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    sys.exit(main())
