"""Reading and writing instances in the ``schedlab-instance/1`` JSON format.

The format, exactly::

    {"format": "schedlab-instance/1", "name": str, "kv_tokens": int,
     "requests": [{"prompt": int, "output": int, "arrival": int, "id": str}, ...],
     "meta": {...}}

``kv_tokens`` is the KV budget ``M``; files written before it was named so call it
``memory``, which is still read (never written).
``arrival`` (default 0), ``id`` (distinct where given), ``name`` and ``meta`` are
optional; request ``i`` is the i-th list entry. Errors name the file and the place
(``requests[17].output``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from schedlab.errors import FormatError, InstanceError
from schedlab.json_files import check_keys, plain, read_json, string_keys, write_text
from schedlab.offline.instance import Instance, Request, check_instance, check_int

__all__ = ["FORMAT", "instance_from_dict", "instance_to_dict", "read_instance", "write_instance"]

FORMAT = "schedlab-instance/1"
_REQUEST_KEYS = {"prompt", "output", "arrival", "id"}
_TOP_KEYS = {"format", "name", "kv_tokens", "memory", "requests", "meta"}


def instance_from_dict(data: Any, where: str = "instance") -> Instance:
    """Build an :class:`Instance` from the parsed JSON object ``data``.

    Raises
    ------
    FormatError
        If the object's shape is wrong (missing or unknown keys, wrong format tag).
    InstanceError
        If a value violates the model; the message names it.
    """
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise FormatError(f"{where}: format: expected {FORMAT!r}, got {data.get('format')!r}")
    check_keys(data, _TOP_KEYS, where)
    if "kv_tokens" in data and "memory" in data:
        raise FormatError(f"{where}: kv_tokens and memory: give kv_tokens only")
    budget = "memory" if "memory" in data else "kv_tokens"  # "memory": an older file
    for key in (budget, "requests"):
        if key not in data:
            raise FormatError(f"{where}: missing key {key!r}")
    name = data.get("name", "")
    meta = data.get("meta", {})
    if not isinstance(name, str):
        raise FormatError(f"{where}: name: expected a string, got {name!r}")
    if not isinstance(meta, dict):
        raise FormatError(f"{where}: meta: expected an object, got {type(meta).__name__}")
    entries = data["requests"]
    if not isinstance(entries, list):
        raise FormatError(f"{where}: requests: expected a list, got {type(entries).__name__}")
    requests = []
    for i, entry in enumerate(entries):
        place = f"requests[{i}]"
        if not isinstance(entry, dict):
            raise FormatError(f"{where}: {place}: expected an object, got {entry!r}")
        check_keys(entry, _REQUEST_KEYS, f"{where}: {place}")  # "outptu": named, not missing
        for key in ("prompt", "output"):
            if key not in entry:
                raise FormatError(f"{where}: {place}: missing key {key!r}")
        try:
            requests.append(
                Request.at(
                    place,
                    entry["prompt"],
                    entry["output"],
                    entry.get("arrival", 0),
                    entry.get("id"),
                )
            )
        except InstanceError as exc:
            raise type(exc)(f"{where}: {exc}") from None
    try:
        kv_tokens = check_int(data[budget], budget, 1)
        return Instance(kv_tokens, tuple(requests), name, meta)
    except InstanceError as exc:
        raise type(exc)(f"{where}: {exc}") from None


def instance_to_dict(instance: Instance) -> dict[str, Any]:
    """The JSON object of ``instance`` in the ``schedlab-instance/1`` format."""
    requests = []
    for r in instance.requests:
        entry: dict[str, Any] = {"prompt": r.prompt, "output": r.output}
        if r.arrival:
            entry["arrival"] = r.arrival
        if r.id is not None:
            entry["id"] = r.id
        requests.append(entry)
    return {
        "format": FORMAT,
        "name": instance.name,
        "kv_tokens": instance.kv_tokens,
        "requests": requests,
        "meta": dict(instance.meta),
    }


def read_instance(path: str | Path) -> Instance:
    """Read an instance file (``-`` or ``/dev/stdin``: standard input); errors name the
    file and the place inside it.

    Raises
    ------
    DataNotFoundError
        (a ``FileNotFoundError``) if it does not exist.
    FormatError, InstanceError
        (``ValueError``) if it is not an instance file, naming the place.
    FileAccessError
        (an ``OSError``) if it cannot be read or is above the size cap
        (:func:`~schedlab.json_files.read_bytes`).
    """
    return instance_from_dict(read_json(path, "instance file"), str(path))


def write_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` as JSON, one request a line for readable diffs.

    NumPy numbers and arrays in ``meta`` are written as the JSON values they stand for.

    Raises
    ------
    FormatError
        If ``meta`` holds a value JSON cannot carry (an arbitrary object, NaN, a key that
        is not a string); nothing is written.
    DataNotFoundError
        (a ``FileNotFoundError``) if the folder of ``path`` does not exist.
    FileAccessError
        (an ``OSError``) if the system refuses to write it.
    """
    check_instance(instance, "write_instance")
    data = instance_to_dict(instance)
    lines = [json.dumps(r, separators=(", ", ": ")) for r in data.pop("requests")]
    try:
        string_keys(data)
        head = json.dumps(data, indent=1, allow_nan=False, default=plain)[:-2]  # no "\n}"
    except (TypeError, ValueError) as exc:  # not JSON-ready, NaN, a cycle
        raise FormatError(f"{path}: meta: {exc}") from None
    body = ",\n  ".join(lines)
    write_text(path, f'{head},\n "requests": [\n  {body}\n ]\n}}\n', "instance file")
