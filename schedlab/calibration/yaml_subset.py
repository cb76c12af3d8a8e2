"""A tiny reader for the YAML subset that profile metadata files use.

PyYAML is not a dependency of schedlab, and LLMServingSim's ``meta.yaml`` only needs:

* block mappings nested by indentation (``key: value`` and ``key:`` opening a block);
* block sequences of scalars (``- item``) under a key;
* flow sequences of scalars on one line (``[1, 2, a]``);
* scalars: integers, floats, ``true``/``false``, ``null``/``~``, single- or double-quoted
  strings, and plain strings (anything else, e.g. ``0, 16-2048 x2``);
* ``#`` comments (outside quotes) and blank lines.

Anything else (anchors, multi-line strings, flow mappings, tabs in indentation, nested
block sequences) raises :class:`~schedlab.errors.FormatError` naming file and line, so a
file this reader misunderstands is refused rather than misread. Keys are parsed as
scalars too, so ``1:`` gives the integer key ``1`` as YAML does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from schedlab.errors import DataNotFoundError, FormatError

__all__ = ["parse_yaml_subset", "read_yaml_subset"]

_INT = re.compile(r"[-+]?\d+\Z")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?\Z")


def _strip_comment(text: str) -> str:
    """``text`` without a trailing ``# comment`` (a ``#`` inside quotes is kept)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


def _scalar(token: str, where: str) -> Any:
    token = token.strip()
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    if token and token[0] in "'\"":
        raise FormatError(f"{where}: unterminated quoted string {token!r}")
    if token[:1] in ("{", "&", "*", "|", ">", "!"):
        raise FormatError(f"{where}: unsupported YAML construct {token!r}")
    if token in ("", "~", "null", "Null", "NULL"):
        return None
    if token in ("true", "True", "TRUE"):
        return True
    if token in ("false", "False", "FALSE"):
        return False
    if _INT.match(token):
        return int(token)
    if _FLOAT.match(token):
        return float(token)
    return token


def _value(token: str, where: str) -> Any:
    token = token.strip()
    if token.startswith("["):
        if not token.endswith("]"):
            raise FormatError(f"{where}: flow sequence must close on the same line")
        inner = token[1:-1].strip()
        if not inner:
            return []
        if "[" in inner or "{" in inner:
            raise FormatError(f"{where}: nested flow collections are not supported")
        return [_scalar(part, where) for part in inner.split(",")]
    return _scalar(token, where)


def parse_yaml_subset(text: str, source: str = "<yaml>") -> dict[Any, Any]:
    """Parse ``text`` (the subset in the module docstring) into nested dicts and lists.

    Parameters
    ----------
    text
        The document.
    source
        Name used in error messages (``source:line``).

    Raises
    ------
    FormatError
        On anything outside the subset, or inconsistent indentation.
    """
    root: dict[Any, Any] = {}
    # Stack of (indent of the block's keys, container); containers are dicts or lists.
    stack: list[tuple[int, dict[Any, Any] | list[Any]]] = [(0, root)]
    pending: tuple[dict[Any, Any], Any, int] | None = None  # key waiting for its block
    for lineno, raw in enumerate(text.splitlines(), start=1):
        where = f"{source}:{lineno}"
        line = _strip_comment(raw)
        if not line.strip() or line.strip() == "---":
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise FormatError(f"{where}: tabs are not allowed in indentation")
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if pending is not None:
            parent, key, parent_indent = pending
            pending = None
            if indent > parent_indent:
                child: dict[Any, Any] | list[Any] = [] if body.startswith("- ") else {}
                parent[key] = child
                stack.append((indent, child))
        while len(stack) > 1 and indent < stack[-1][0]:
            stack.pop()
        block_indent, container = stack[-1]
        if indent != block_indent:
            raise FormatError(f"{where}: unexpected indentation ({indent} spaces)")
        if body.startswith("- ") or body == "-":
            if not isinstance(container, list):
                raise FormatError(f"{where}: sequence item where a mapping key was expected")
            item = body[1:].strip()
            if item.startswith("- ") or (":" in item and not item.startswith(("'", '"'))):
                raise FormatError(f"{where}: only sequences of scalars are supported")
            container.append(_value(item, where))
            continue
        if not isinstance(container, dict):
            raise FormatError(f"{where}: mapping key inside a sequence")
        key_text, sep, rest = body.partition(":")
        if not sep or (rest and not rest.startswith(" ")):
            raise FormatError(f"{where}: expected 'key: value', got {body!r}")
        key = _scalar(key_text, where)
        if key in container:
            raise FormatError(f"{where}: duplicate key {key!r}")
        if rest.strip():
            container[key] = _value(rest, where)
        else:
            container[key] = None
            pending = (container, key, indent)
    return root


def read_yaml_subset(path: str | Path) -> dict[Any, Any]:
    """Read and parse a YAML file (see :func:`parse_yaml_subset`)."""
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such file")
    return parse_yaml_subset(path.read_text(encoding="utf-8"), str(path))
