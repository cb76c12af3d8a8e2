"""Readers of real GPU timing profiles in LLMServingSim's format, and the parts every
profile reader shares (checked CSV rows and fields, file hashes).

``../shared/data/README.md`` describes the shared copies.

* **LLMServingSim** (casys-kaist/LLMServingSim, MIT) per-layer profiles, one directory per
  hardware / model / dtype holding ``meta.yaml`` and ``tp<N>/``:

  - ``dense.csv`` — ``layer, tokens, time_us``: each non-attention op of *one* decoder
    layer (and the once-per-forward ``embedding`` and ``final_layernorm``) against the
    number of tokens in the batch;
  - ``attention.csv`` — ``prefill_chunk, kv_prefill, n_decode, kv_decode, time_us``: one
    layer's attention for a prefill chunk on top of ``kv_prefill`` cached tokens plus
    ``n_decode`` decodes holding ``kv_decode`` tokens *each*;
  - ``per_sequence.csv`` — ``layer, sequences, time_us``: once-per-iteration work
    (``lm_head``, ``sampler``) against the number of sequences that produce logits;
  - ``moe.csv`` (mixture-of-experts models) — ``tokens, activated_experts, time_us``:
    one layer's expert block for ``tokens`` tokens routed evenly over exactly
    ``activated_experts`` experts, all experts whole on one GPU. The profiler measures it
    at tp1 only (its ``categories_for`` skips the expert block at other degrees), so a
    ``tp<N>`` profile without one takes ``tp1/moe.csv``; the cost model splits it over
    the ranks (:mod:`schedlab.calibration.profile_model`);
  - ``skew_fit.csv`` (optional) — ``pc, n_label, skew_rate_label, kv_big_label,
    kp_label, alpha, n_samples``: the profiler's per-bucket fit of the decode-skew
    coefficient (:mod:`schedlab.calibration.skew`).

  ``meta.yaml`` is read with PyYAML's safe loader (duplicate keys refused); errors name
  the file and line.

  The profiler runs the model with ``hf_overrides.num_hidden_layers`` decoder layers
  (1), so per-layer times are later multiplied by the real layer count of the model's
  config (:mod:`schedlab.llm.models`).

Every reader checks columns and values and raises :class:`~schedlab.errors.FormatError`
naming the file and line (``path:17: time_us: expected a number, got 'abc'``), also for a
time above :data:`MAX_TIME_S`; a missing file raises
:class:`~schedlab.errors.DataNotFoundError`. Each result records the files it read with
their SHA-256 hashes (:class:`SourceFile`), so a fitted model can name exactly what it was
fitted on.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import DataNotFoundError, FormatError
from schedlab.json_files import check_size, read_bytes, read_text
from schedlab.llm.traces import MAX_TOKENS

__all__ = [
    "MAX_COUNT",
    "MAX_TIME_S",
    "AttentionRows",
    "LLMServingSimProfile",
    "MoERows",
    "OpTable",
    "SkewRows",
    "SkewSamples",
    "SourceFile",
    "check_attention_row",
    "number_field",
    "read_csv_rows",
    "read_llmservingsim_profile",
    "read_skew_samples",
    "sha256_of",
    "time_field",
]


@dataclass(frozen=True)
class SourceFile:
    """A file a profile was read from: its name (relative to the profile root) and hash."""

    name: str
    sha256: str


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 of the file's bytes."""
    return hashlib.sha256(read_bytes(path, "profile file")).hexdigest()


@dataclass(frozen=True)
class OpTable:
    """Measurements of one op against one size axis, sorted by size.

    Attributes
    ----------
    name
        Op name (``qkv_proj``, ``lm_head``...).
    x
        Sizes (tokens or sequences), strictly increasing.
    time_us
        Measured times in microseconds, ``>= 0``.
    """

    name: str
    x: np.ndarray
    time_us: np.ndarray


@dataclass(frozen=True)
class AttentionRows:
    """The rows of an LLMServingSim ``attention.csv`` (one decoder layer), as arrays."""

    prefill_chunk: np.ndarray
    kv_prefill: np.ndarray
    n_decode: np.ndarray
    kv_decode: np.ndarray
    time_us: np.ndarray

    def __len__(self) -> int:
        return int(self.time_us.size)


@dataclass(frozen=True)
class MoERows:
    """The rows of an LLMServingSim ``moe.csv``: one layer's expert block (µs)."""

    tokens: np.ndarray
    activated: np.ndarray
    time_us: np.ndarray


@dataclass(frozen=True)
class SkewRows:
    """The rows of an LLMServingSim ``skew_fit.csv``: one fitted alpha per bucket."""

    pc: np.ndarray
    n_label: tuple[str, ...]
    skew_rate_label: tuple[str, ...]
    kv_big_label: tuple[str, ...]
    kp_label: tuple[str, ...]
    alpha: np.ndarray
    n_samples: np.ndarray


@dataclass(frozen=True)
class SkewSamples:
    """The rows of an LLMServingSim ``skew.csv``: one layer's attention for bimodal batches.

    ``n`` decodes of which a share ``ratio`` hold ``kv_big`` KV tokens and the rest
    ``kv_small``, beside a prefill chunk of ``pc`` tokens on ``kp`` cached ones;
    ``t_mean_us``, ``t_max_us`` and ``t_skew_us`` are the measured times with every decode
    at the mean length ``kv_mean``, every decode at ``kv_big``, and the bimodal batch itself.
    Rows without a skewed time (empty cells) are dropped when read.
    """

    n: np.ndarray
    ratio: np.ndarray
    pc: np.ndarray
    kp: np.ndarray
    kv_small: np.ndarray
    kv_big: np.ndarray
    kv_mean: np.ndarray
    t_mean_us: np.ndarray
    t_max_us: np.ndarray
    t_skew_us: np.ndarray

    def __len__(self) -> int:
        return int(self.n.size)

    def subset(self, mask: np.ndarray) -> SkewSamples:
        """The rows where ``mask`` holds."""
        return SkewSamples(*(getattr(self, f.name)[mask] for f in dataclasses.fields(self)))


@dataclass(frozen=True)
class LLMServingSimProfile:
    """One LLMServingSim profile (one hardware, model, dtype and TP degree).

    Attributes
    ----------
    root
        The directory holding ``meta.yaml``.
    tp
        Tensor-parallel degree read (``tp<N>/``).
    meta
        ``meta.yaml`` as nested dicts.
    dense, per_sequence
        Op tables by op name.
    attention
        The attention rows.
    moe
        The expert block's rows (``moe.csv`` of this TP degree, else of tp1), if any.
    skew
        The per-bucket skew fit (``skew_fit.csv``), if present.
    skew_samples
        The skewed-batch measurements (``skew.csv``), if present.
    sources
        Files read, with hashes.
    """

    root: Path
    tp: int
    meta: dict[Any, Any]
    dense: dict[str, OpTable]
    per_sequence: dict[str, OpTable]
    attention: AttentionRows
    sources: tuple[SourceFile, ...] = field(default=())
    moe: MoERows | None = None
    skew: SkewRows | None = None
    skew_samples: SkewSamples | None = None

    @property
    def model(self) -> str:
        """The model name as ``meta.yaml`` spells it."""
        return str(self.meta.get("model", ""))

    @property
    def hardware(self) -> str:
        return str(self.meta.get("hardware", ""))

    @property
    def architecture(self) -> str:
        return str(self.meta.get("architecture", ""))

    @property
    def profiled_layers(self) -> int:
        """Decoder layers the profiler ran (``hf_overrides.num_hidden_layers``, default 1)."""
        engine = self.meta.get("engine_effective") or {}
        overrides = engine.get("hf_overrides") or {} if isinstance(engine, dict) else {}
        value = overrides.get("num_hidden_layers", 1) if isinstance(overrides, dict) else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FormatError(
                f"{self.root / 'meta.yaml'}: engine_effective.hf_overrides.num_hidden_layers: "
                f"expected an integer >= 1, got {value!r}"
            )
        return value


# -- CSV plumbing -------------------------------------------------------------------------


#: The longest time a profile may record, in seconds (an hour). Its rows time one layer's
#: op or one iteration, micro- to milliseconds on any GPU; an hour or more is a wrong unit
#: or a corrupt file, and times near the float range (``1e308`` us) overflow the fit into
#: a model of 1e304-second iterations.
MAX_TIME_S = 3600.0

#: The largest count a profile may record (tokens, sequences, decodes, GPUs): no batch of
#: a real engine holds more than the longest request (:data:`~schedlab.llm.traces.MAX_TOKENS`).
MAX_COUNT = MAX_TOKENS


def read_csv_rows(
    path: Path, required: Iterable[str]
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and ``(line number, fields)`` rows of a CSV file, checking required columns
    (and its size: :func:`~schedlab.json_files.check_size`); blank lines are skipped, a
    row with another field count than the header is refused."""
    check_size(path, "profile file")
    try:
        return _csv_rows(path, required)
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not UTF-8 text") from None


def _csv_rows(
    path: Path, required: Iterable[str]
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        try:
            header = [name.strip() for name in next(reader)]
        except StopIteration:
            raise FormatError(f"{path}:1: empty file (expected a header line)") from None
        missing = [name for name in required if name not in header]
        if missing:
            raise FormatError(
                f"{path}:1: missing column(s) {', '.join(missing)}; found {', '.join(header)}"
            )
        rows: list[tuple[int, list[str]]] = []
        for fields_ in reader:
            line = reader.line_num
            if not fields_ or all(not f.strip() for f in fields_):
                continue
            if len(fields_) != len(header):
                raise FormatError(
                    f"{path}:{line}: expected {len(header)} fields, got {len(fields_)}"
                )
            rows.append((line, fields_))
    if not rows:
        raise FormatError(f"{path}: no data rows")
    return header, rows


def number_field(text: str, column: str, where: str, *, integer: bool = False) -> float:
    """A CSV field as a finite number ``>= 0`` (if ``integer``, a count: an integer of at
    most :data:`MAX_COUNT`); errors name ``where`` (file and line) and ``column``."""
    try:
        value = float(text)
    except ValueError:
        raise FormatError(f"{where}: {column}: expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise FormatError(f"{where}: {column}: must be finite, got {text!r}")
    if value < 0:
        raise FormatError(f"{where}: {column}: must be >= 0, got {text!r}")
    if integer and value != int(value):
        raise FormatError(f"{where}: {column}: expected an integer, got {text!r}")
    if integer and value > MAX_COUNT:
        raise FormatError(f"{where}: {column}: must be at most {MAX_COUNT:g}, got {text!r}")
    return value


def time_field(text: str, column: str, where: str, unit_s: float) -> float:
    """A time in units of ``unit_s`` seconds, from 0 to :data:`MAX_TIME_S`."""
    value = number_field(text, column, where)
    if value * unit_s > MAX_TIME_S:
        raise FormatError(
            f"{where}: {column}: must be at most {MAX_TIME_S / unit_s:g} (an hour), got {text!r}"
        )
    return value


def _field(text: str, column: str, where: str) -> float:
    """A value of an LLMServingSim CSV: ``time_us`` in microseconds, the others integers."""
    if column == "time_us":
        return time_field(text, column, where, 1e-6)
    return number_field(text, column, where, integer=True)


def _op_tables(path: Path, size_column: str) -> dict[str, OpTable]:
    header, rows = read_csv_rows(path, ("layer", size_column, "time_us"))
    i_layer, i_size, i_time = (header.index(c) for c in ("layer", size_column, "time_us"))
    by_op: dict[str, dict[int, float]] = {}
    for line, fields_ in rows:
        where = f"{path}:{line}"
        op = fields_[i_layer].strip()
        if not op:
            raise FormatError(f"{where}: layer: empty op name")
        size = int(number_field(fields_[i_size], size_column, where, integer=True))
        if size < 1:
            raise FormatError(f"{where}: {size_column}: must be >= 1, got {size}")
        seen = by_op.setdefault(op, {})
        if size in seen:
            raise FormatError(f"{where}: duplicate measurement for {op} at {size_column}={size}")
        seen[size] = _field(fields_[i_time], "time_us", where)
    tables = {}
    for op, points in by_op.items():
        sizes = sorted(points)
        tables[op] = OpTable(
            op, np.array(sizes, dtype=float), np.array([points[s] for s in sizes], dtype=float)
        )
    return tables


def check_attention_row(
    pc: float, kp: float, n: float, kv: float, time_us: float, where: str
) -> None:
    """Refuse an attention measurement that describes no batch the grid can hold.

    ``(pc, kp, n, kv)`` = ``(prefill_chunk, kv_prefill, n_decode, kv_decode)``, already
    read as numbers ``>= 0``; ``where`` names the file and line.

    Raises
    ------
    FormatError
        For a time of 0 (the grid's extrapolation fit weighs each row by its inverse
        time), an empty batch, decode KV without decodes (or decodes without KV), or
        cached prefill tokens without a prefill chunk.
    """
    if time_us == 0:
        raise FormatError(f"{where}: time_us: a batch of attention must take time, got 0")
    if pc == 0 and n == 0:
        raise FormatError(f"{where}: an empty batch (prefill_chunk = n_decode = 0)")
    if (n == 0) != (kv == 0):
        raise FormatError(
            f"{where}: kv_decode must be 0 exactly when n_decode is 0, got "
            f"n_decode={n:g}, kv_decode={kv:g}"
        )
    if pc == 0 and kp != 0:
        raise FormatError(f"{where}: kv_prefill={kp:g} without a prefill chunk")


def _attention_rows(path: Path) -> AttentionRows:
    columns = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us")
    header, rows = read_csv_rows(path, columns)
    index = [header.index(c) for c in columns]
    data = np.empty((len(rows), 5))
    seen: set[tuple[float, ...]] = set()
    for k, (line, fields_) in enumerate(rows):
        where = f"{path}:{line}"
        values = [_field(fields_[i], c, where) for i, c in zip(index, columns, strict=True)]
        pc, kp, n, kv, time_us = values
        check_attention_row(pc, kp, n, kv, time_us, where)
        key = (pc, kp, n, kv)
        if key in seen:
            raise FormatError(f"{where}: duplicate measurement for {columns[:4]} = {key}")
        seen.add(key)
        data[k] = values
    return AttentionRows(*(data[:, j].copy() for j in range(5)))


def _moe_rows(path: Path) -> MoERows:
    columns = ("tokens", "activated_experts", "time_us")
    header, rows = read_csv_rows(path, columns)
    index = [header.index(c) for c in columns]
    data = np.empty((len(rows), 3))
    seen: set[tuple[float, float]] = set()
    for k, (line, fields_) in enumerate(rows):
        where = f"{path}:{line}"
        values = [_field(fields_[i], c, where) for i, c in zip(index, columns, strict=True)]
        if values[0] < 1 or values[1] < 1:
            raise FormatError(f"{where}: tokens and activated_experts must be >= 1")
        if (values[0], values[1]) in seen:
            raise FormatError(f"{where}: duplicate measurement for {values[:2]}")
        seen.add((values[0], values[1]))
        data[k] = values
    return MoERows(data[:, 0].copy(), data[:, 1].copy(), data[:, 2].copy())


def _skew_rows(path: Path) -> SkewRows:
    columns = (
        "pc",
        "n_label",
        "skew_rate_label",
        "kv_big_label",
        "kp_label",
        "alpha",
        "n_samples",
    )
    header, rows = read_csv_rows(path, columns)
    index = {c: header.index(c) for c in columns}
    pc, alpha, samples = np.empty(len(rows)), np.empty(len(rows)), np.empty(len(rows))
    labels: dict[str, list[str]] = {c: [] for c in columns[1:5]}
    for k, (line, fields_) in enumerate(rows):
        where = f"{path}:{line}"
        pc[k] = number_field(fields_[index["pc"]], "pc", where, integer=True)
        try:
            alpha[k] = float(fields_[index["alpha"]])
        except ValueError:
            raise FormatError(f"{where}: alpha: expected a number") from None
        if not math.isfinite(alpha[k]):
            raise FormatError(f"{where}: alpha: must be finite")
        samples[k] = number_field(fields_[index["n_samples"]], "n_samples", where, integer=True)
        for column in labels:
            labels[column].append(fields_[index[column]].strip())
    return SkewRows(
        pc,
        tuple(labels["n_label"]),
        tuple(labels["skew_rate_label"]),
        tuple(labels["kv_big_label"]),
        tuple(labels["kp_label"]),
        alpha,
        samples,
    )


#: The columns of ``skew.csv`` read, in :class:`SkewSamples`' order.
_SKEW_SAMPLE_COLUMNS = (
    "n",
    "ratio",
    "pc",
    "kp",
    "kvs",
    "kv_big",
    "kv_mean",
    "t_mean_us",
    "t_max_us",
    "t_skew_us",
)


def read_skew_samples(path: Path) -> SkewSamples:
    """The rows of a ``skew.csv`` (:class:`SkewSamples`), checked."""
    header, rows = read_csv_rows(path, _SKEW_SAMPLE_COLUMNS)
    index = [header.index(c) for c in _SKEW_SAMPLE_COLUMNS]
    kept: list[list[float]] = []
    for line, fields_ in rows:
        where = f"{path}:{line}"
        cells = [fields_[i].strip() for i in index]
        if not all(cells):  # a case the profiler could not time
            continue
        values = [
            time_field(text, column, where, 1e-6)
            if column.startswith("t_")
            else number_field(text, column, where, integer=column != "ratio")
            for text, column in zip(cells, _SKEW_SAMPLE_COLUMNS, strict=True)
        ]
        if values[0] < 2 or not 0 < values[1] < 1 or values[4] >= values[5]:
            raise FormatError(f"{where}: expected n >= 2 decodes, 0 < ratio < 1 and kvs < kv_big")
        if min(values[7:]) <= 0:
            raise FormatError(f"{where}: t_mean_us, t_max_us and t_skew_us must be > 0")
        kept.append(values)
    if not kept:
        raise FormatError(f"{path}: no row with all of {', '.join(_SKEW_SAMPLE_COLUMNS)}")
    data = np.array(kept)
    return SkewSamples(*(data[:, j].copy() for j in range(data.shape[1])))


#: How deep below a folder, and through how many folders in all, :func:`_no_profile_here`
#: looks for profile folders (a tree of profiles is hardware/vendor/model/dtype deep; a
#: mistyped ``/`` must not start a walk of the whole disk).
_PROFILE_DEPTH = 4
_MOST_FOLDERS = 2000


def _profile_folders_below(root: Path) -> list[Path]:
    """The folders holding a ``meta.yaml`` below ``root``, breadth first, within
    :data:`_PROFILE_DEPTH` levels and :data:`_MOST_FOLDERS` folders visited."""
    found: list[Path] = []
    level, visited = [root], 0
    for _ in range(_PROFILE_DEPTH):
        below: list[Path] = []
        for folder in level:
            try:
                children = sorted(p for p in folder.iterdir() if p.is_dir())
            except OSError:  # unreadable (no permission, a loop): nothing to show there
                continue
            for child in children:
                visited += 1
                if visited > _MOST_FOLDERS:
                    return found
                if _is_file(child / "meta.yaml"):
                    found.append(child)
                else:
                    below.append(child)
        level = below
    return found


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; ``False`` where it cannot be looked at (no permission)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _no_profile_here(root: Path) -> str:
    """Why ``root`` (a folder without ``meta.yaml``) is no profile folder, and where the
    profile folders are: above it (a ``tp<N>`` folder of a profile) or below it (a
    hardware or model folder of a tree of profiles)."""
    if not root.is_dir():
        return f"{root}: no such folder"
    degree = root.name.removeprefix("tp")
    if root.name.startswith("tp") and degree.isdigit() and _is_file(root.parent / "meta.yaml"):
        return (
            f"{root}: a tensor-parallel folder of the profile {root.parent}; give that "
            f"folder (with --tp {degree})"
        )
    found = sorted(str(folder) for folder in _profile_folders_below(root))
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        return f"{root}: no meta.yaml, so no profile folder; profile folders below it: {shown}"
    return f"{root}: no meta.yaml, so no profile folder (nor any below it)"


#: The largest ``meta.yaml`` read (bytes): a profile's holds a few kilobytes of settings.
MAX_META_BYTES = 2**20


def read_meta_yaml(path: Path) -> dict[Any, Any]:
    """A profile's ``meta.yaml``, by PyYAML's safe loader with duplicate keys and aliases
    refused, at most :data:`MAX_META_BYTES`.

    PyYAML's ``safe_load`` expands aliases, so a few lines of nested ones ("billion
    laughs") build an object of billions of nodes; a profile's settings need none, so an
    alias (``*name``) is refused where it stands, before anything is expanded.

    Raises
    ------
    DataNotFoundError
        If it does not exist.
    FormatError
        Naming the file and line of a YAML error or an alias, or if it is not a mapping.
    FileAccessError
        If it is larger than :data:`MAX_META_BYTES` or cannot be read.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        """The safe loader, refusing a key given twice in one mapping and any alias."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.events.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"alias *{event.anchor} (a profile's settings need none; aliases are "
                    "not expanded)",
                    event.start_mark,
                )
            return super().compose_node(parent, index)

    def mapping(loader: Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in keys:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            keys.add(key)
        return dict(yaml.SafeLoader.construct_mapping(loader, node, deep=deep))

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    if not path.is_file():  # a folder given that is not a profile's: say where they are
        raise DataNotFoundError(_no_profile_here(path.parent))
    text = read_text(path, "profile meta.yaml", MAX_META_BYTES)
    try:
        data = yaml.load(text, Loader=Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise FormatError(f"{path}{line}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:  # e.g. a control character: PyYAML's text spans lines
        raise FormatError(f"{path}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise FormatError(f"{path}:1: expected a mapping of keys to values")
    return data


def read_llmservingsim_profile(path: str | Path, tp: int = 1) -> LLMServingSimProfile:
    """Read an LLMServingSim profile directory (the one holding ``meta.yaml``).

    Parameters
    ----------
    path
        E.g. ``../shared/data/profiles/llmservingsim/RTXPRO6000/meta-llama/Llama-3.1-8B/bf16``.
    tp
        Tensor-parallel degree: reads ``tp<tp>/``.

    Raises
    ------
    DataNotFoundError
        If the directory or a file is missing.
    FormatError
        On a malformed file (the message names file and line).
    """
    root = Path(path)
    if not root.is_dir():
        raise DataNotFoundError(f"{root}: no such profile directory")
    meta_path = root / "meta.yaml"
    meta = read_meta_yaml(meta_path)
    if not isinstance(meta.get("model"), str):
        raise FormatError(f"{meta_path}: model: expected the model name")
    sub = root / f"tp{tp}"
    if not sub.is_dir():
        found = sorted(p.name for p in root.glob("tp*") if p.is_dir())
        raise DataNotFoundError(
            f"{sub}: no profile for tensor parallelism {tp} (found: {', '.join(found) or 'none'})"
        )
    dense = _op_tables(sub / "dense.csv", "tokens")
    per_sequence = _op_tables(sub / "per_sequence.csv", "sequences")
    attention = _attention_rows(sub / "attention.csv")
    files = [meta_path, sub / "dense.csv", sub / "attention.csv", sub / "per_sequence.csv"]
    moe_path = next(
        (d / "moe.csv" for d in (sub, root / "tp1") if (d / "moe.csv").is_file()), None
    )
    moe = None if moe_path is None else _moe_rows(moe_path)
    skew = _skew_rows(sub / "skew_fit.csv") if (sub / "skew_fit.csv").is_file() else None
    samples = read_skew_samples(sub / "skew.csv") if (sub / "skew.csv").is_file() else None
    files += [
        f
        for f, part in ((moe_path, moe), (sub / "skew_fit.csv", skew), (sub / "skew.csv", samples))
        if part and f
    ]
    sources = tuple(SourceFile(f.relative_to(root).as_posix(), sha256_of(f)) for f in files)
    return LLMServingSimProfile(
        root,
        tp,
        meta,
        dense,
        per_sequence,
        attention,
        sources,
        moe=moe,
        skew=skew,
        skew_samples=samples,
    )
