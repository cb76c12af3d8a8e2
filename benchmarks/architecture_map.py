"""The shape of the code, measured from its own imports: the figures and the picture of
``docs/architecture.md``.

Reads every module of ``schedlab`` and its imports as ``tests/test_architecture.py`` does
(the same graph, the same layers), and writes between the markers of
``docs/architecture.md`` a table of the parts (layer, modules, lines, the parts each
imports), the counts the layering rules are about (import cycles, imports up a layer),
and the size limits (modules over 700 lines, functions over 100 lines, functions with 8
or more parameters); ``docs/architecture.png`` draws the parts a box each, floors from
the ground up, an arrow for each part imported.

Usage: ``python benchmarks/architecture_map.py [--page docs/architecture.md]
[--figure docs/architecture.png]``
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' reading of the imports
sys.path.insert(0, str(ROOT / "benchmarks"))  # beside it: results_page
from results_page import stamp  # noqa: E402

from tests.test_architecture import APART, LAYERS, modules, part  # noqa: E402
from tests.test_architecture import GRAPH as IMPORTS  # noqa: E402

START, END = "<!-- measured: start -->", "<!-- measured: end -->"
#: The size limits of docs/design.md's house rules.
MODULE_LINES, FUNCTION_LINES, PARAMETERS = 700, 100, 8


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


#: The comment a function over the limit carries at its top, with its reason.
REASON = "Over 100 lines by design:"


def _is_kernel(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``node`` is compiled by :func:`schedlab.jit.kernel` (flat arrays only)."""
    for decorator in node.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(call, ast.Name) and call.id == "kernel":
            return True
    return False


def _functions(path: Path) -> list[tuple[str, int, int, bool, bool]]:
    """``(name, lines, parameters, reason given, compiled kernel)`` of every function
    of ``path`` (``self``/``cls`` not counted)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
            count += (args.vararg is not None) + (args.kwarg is not None)
            if args.args and args.args[0].arg in ("self", "cls"):
                count -= 1
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            first = node.body[0]  # the reason follows the docstring, if there is one
            docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            top = first.end_lineno if docstring else first.lineno - 1
            head = "\n".join(lines[top : (top or 0) + 3])
            found.append((node.name, size, count, REASON in head, _is_kernel(node)))
    return found


def measure() -> dict[str, object]:
    """The parts, their sizes and imports, and the counts of the rules."""
    paths = modules()
    parts: dict[str, dict[str, object]] = {
        name: {"modules": 0, "lines": 0, "imports": set()} for name in LAYERS
    }
    for name, path in paths.items():
        entry = parts[part(name)]
        entry["modules"] = int(entry["modules"]) + 1  # type: ignore[call-overload]
        entry["lines"] = int(entry["lines"]) + _lines(path)  # type: ignore[call-overload]
        for target in IMPORTS[name]:
            if part(target) != part(name):
                entry["imports"].add(part(target))  # type: ignore[attr-defined]
    up = [
        (a, b)
        for a, targets in IMPORTS.items()
        for b in targets
        if LAYERS[part(b)] > LAYERS[part(a)] or (part(a), part(b)) in APART
    ]
    try:
        list(TopologicalSorter(IMPORTS).static_order())
        cycles = 0
    except CycleError:
        cycles = 1
    big = sorted(
        ((_lines(p), n) for n, p in paths.items() if _lines(p) > MODULE_LINES), reverse=True
    )
    long_functions, many_parameters = [], []
    for name, path in paths.items():
        for function, size, count, reason, compiled in _functions(path):
            if size > FUNCTION_LINES:
                long_functions.append((size, f"{name}.{function}", reason))
            if count >= PARAMETERS:
                many_parameters.append((count, f"{name}.{function}", compiled))
    return {
        "parts": parts,
        "modules": len(paths),
        "lines": sum(_lines(p) for p in paths.values()),
        "edges": sum(len(targets) for targets in IMPORTS.values()),
        "up": up,
        "cycles": cycles,
        "big": big,
        "long": sorted(long_functions, reverse=True),
        "many": sorted(many_parameters, reverse=True),
    }


def _short(name: str) -> str:
    return name.removeprefix("schedlab.") if name != "schedlab" else "schedlab"


def section(found: dict[str, object], command: str) -> str:
    """The measured section of the page."""
    parts = found["parts"]
    assert isinstance(parts, dict)
    rows = [
        "| part | layer | modules | lines | imports (other parts) |",
        "|---|---:|---:|---:|---|",
    ]
    for name in sorted(parts, key=lambda p: (-LAYERS[p], p)):
        entry = parts[name]
        if not entry["modules"]:
            continue
        targets = ", ".join(f"`{_short(t)}`" for t in sorted(entry["imports"])) or "-"
        rows.append(
            f"| `{_short(name)}` | {LAYERS[name]} | {entry['modules']} | "
            f"{entry['lines']:,} | {targets} |"
        )
    big = found["big"]
    long = found["long"]
    many = found["many"]
    assert isinstance(big, list) and isinstance(long, list) and isinstance(many, list)
    listed = ", ".join(f"`{_short(n)}` ({size})" for size, n, _ in long) or "none"
    reasoned = sum(reason for _, _, reason in long)
    lines = [
        START,
        "",
        stamp(command),
        "",
        f"{found['modules']} modules, {found['lines']:,} lines, {found['edges']} imports "
        f"between modules; **{found['cycles']} import cycles, {len(found['up'])} imports "
        "up a layer or across the halves** (`tests/test_architecture.py` fails on either).",
        "",
        *rows,
        "",
        f"Modules over {MODULE_LINES} lines: "
        + (", ".join(f"`{_short(n)}` ({size})" for size, n in big) or "none")
        + ".",
        f"Functions over {FUNCTION_LINES} lines: {len(long)}, {reasoned} of them with the "
        f"reason at their top (`# {REASON} ...`): {listed}.",
        f"Functions with {PARAMETERS} or more parameters: {len(many)}, of them "
        f"{sum(compiled for _, _, compiled in many)} compiled kernels (flat arrays: a numba "
        "kernel takes no objects); the others: "
        + ", ".join(f"`{_short(n)}` ({count})" for count, n, compiled in many if not compiled)
        + ".",
        "",
        "![The parts a box each, floors from the ground up (the ground's one-module parts "
        "in one box), an arrow for each part imported](architecture.png)",
        "",
        END,
    ]
    return "\n".join(lines)


def draw(found: dict[str, object], path: Path) -> None:
    """The parts on their floors, a box each (its width growing with its lines), an
    arrow for each part imported; the ground's one-module parts are one box."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts = found["parts"]
    assert isinstance(parts, dict)

    def box(name: str) -> str:
        return "the ground" if LAYERS[name] == 0 else _short(name)

    sizes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    arrows: set[tuple[str, str]] = set()
    floor: dict[str, int] = {}
    for name, entry in parts.items():
        if not entry["modules"]:
            continue
        here = box(name)
        floor[here] = LAYERS[name]
        sizes[here][0] += int(entry["modules"])
        sizes[here][1] += int(entry["lines"])
        arrows |= {(here, box(t)) for t in entry["imports"] if box(t) != here}
    floors: dict[int, list[str]] = defaultdict(list)
    for name in sorted(floor):
        floors[floor[name]].append(name)
    widest = max(len(names) for names in floors.values())
    place = {
        name: ((k + 0.5) * widest / len(names), layer * 1.6)
        for layer, names in floors.items()
        for k, name in enumerate(names)
    }
    most = max(lines for _, lines in sizes.values())
    fig, ax = plt.subplots(figsize=(12, 8))
    for source, target in sorted(arrows):
        (x, y), (tx, ty) = place[source], place[target]
        style = {"arrowstyle": "->", "color": "0.55", "lw": 0.8}
        ax.annotate("", xy=(tx, ty + 0.25), xytext=(x, y - 0.25), arrowprops=style)
    for name, (count, lines) in sizes.items():
        x, y = place[name]
        side = 0.45 + 0.45 * (lines / most) ** 0.5
        rect = plt.Rectangle((x - side / 2, y - 0.25), side, 0.5)
        rect.set(facecolor="#dbe8f5", edgecolor="#3b6ea5")
        ax.add_patch(rect)
        noun = "module" if count == 1 else "modules"
        label = f"{name}\n{count} {noun}, {lines:,} lines"
        ax.text(x, y, label, ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.3, widest + 0.3)
    ax.set_ylim(-0.8, max(floors) * 1.6 + 0.8)
    ax.axis("off")
    cycles, up = found["cycles"], found["up"]
    assert isinstance(up, list)
    ax.set_title(
        f"schedlab: {found['modules']} modules on {len(floors)} floors, an arrow per part "
        f"imported; {cycles} import cycles, {len(up)} imports up"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default=str(ROOT / "docs" / "architecture.md"))
    parser.add_argument("--figure", default=str(ROOT / "docs" / "architecture.png"))
    args = parser.parse_args(argv)
    found = measure()
    page = Path(args.page)
    text = page.read_text(encoding="utf-8")
    if START not in text or END not in text:
        print(f"{page}: no {START} ... {END} markers to write between", file=sys.stderr)
        return 2
    command = "python benchmarks/architecture_map.py"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    page.write_text(head + section(found, command) + tail, encoding="utf-8")
    draw(found, Path(args.figure))
    print(f"wrote {page} and {args.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
