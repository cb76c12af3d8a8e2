"""The import structure of ``docs/architecture.md``: layers that import one way, no cycle.

Every ``import`` of a schedlab module (at module level or inside a function) is read
from the source with :mod:`ast`, and the graph of modules checked against the layers.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "schedlab"

#: Layer of each part, from the bottom; a module may import its own layer and below.
LAYERS = {
    "schedlab.errors": 0,
    "schedlab.arguments_check": 0,
    "schedlab.budget": 0,
    "schedlab.progress": 0,
    "schedlab.interrupts": 0,
    "schedlab.json_files": 0,
    "schedlab.tables": 0,
    "schedlab.jobs": 0,
    "schedlab.jit": 0,  # numba kernels: signatures, the on-disk cache
    "schedlab.plugins": 0,
    "schedlab.registry": 0,
    "schedlab.llm": 1,
    "schedlab.predictions": 1,  # output-length predictions, read by both halves
    "schedlab.offline": 2,
    "schedlab.serving": 2,
    "schedlab.calibration": 3,
    "schedlab.integrations": 3,  # other systems' code in the loop (vLLM's scheduler)
    "schedlab.testing": 3,  # property testing of both halves, for users' CI
    "schedlab": 4,  # the package's face: the offline entry points, imported on first use
    "schedlab.plotting": 5,
    "schedlab.cli": 6,
    "schedlab.__main__": 7,
}
#: Parts of one layer that must not import each other.
APART = {("schedlab.offline", "schedlab.serving"), ("schedlab.serving", "schedlab.offline")}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` refers to (a module, or a package's ``__init__``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` uses the module; ``from pkg import name``, pkg itself.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for target in targets:
            if target.split(".")[0] == "schedlab":
                resolved = resolve(target, known)
                if resolved is not None and resolved != name:
                    found.add(resolved)
    return found


def part(name: str) -> str:
    best = max((p for p in LAYERS if name == p or name.startswith(p + ".")), key=len)
    return best


GRAPH = {name: imports(name, path, modules()) for name, path in modules().items()}


def test_every_module_has_a_layer():
    assert all(part(name) in LAYERS for name in GRAPH)
    assert len(GRAPH) > 60


def test_imports_run_down_the_layers():
    wrong = [
        f"{a} -> {b}"
        for a, targets in GRAPH.items()
        for b in targets
        if LAYERS[part(b)] > LAYERS[part(a)] or (part(a), part(b)) in APART
    ]
    assert wrong == []


def test_no_import_cycle():
    try:
        order = list(TopologicalSorter(GRAPH).static_order())
    except CycleError as exc:  # pragma: no cover - the message is the point
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None
    assert set(order) >= set(GRAPH)


def test_the_checker_sees_a_violation(tmp_path):
    # The checks can fail: a serving module importing the offline half is caught.
    fake = {"schedlab.serving.x": tmp_path / "x.py", "schedlab.offline.y": tmp_path / "y.py"}
    fake["schedlab.serving.x"].write_text("from schedlab.offline.y import thing\n")
    found = imports("schedlab.serving.x", fake["schedlab.serving.x"], fake)
    assert found == {"schedlab.offline.y"}
    assert (part("schedlab.serving.x"), part("schedlab.offline.y")) in APART
    loop = {"a": {"b"}, "b": {"a"}}
    try:
        list(TopologicalSorter(loop).static_order())
    except CycleError:
        return
    raise AssertionError("a cycle went unnoticed")


def test_importing_the_package_loads_no_heavy_back_end():
    # docs/architecture.md: OR-Tools, PuLP, HiGHS, matplotlib and scipy's optimisers load
    # only when code that needs them runs (a fresh interpreter, so nothing is cached).
    import subprocess
    import sys

    code = (
        "import sys, schedlab, schedlab.serving, schedlab.offline.bounds, "
        "schedlab.calibration, schedlab.cli; "
        "print(sorted(m for m in ('ortools', 'pulp', 'highspy', 'matplotlib', "
        "'scipy.optimize') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_package_and_the_command_line_start_without_numpy():
    # schedlab's names and subpackages load on first use; `schedlab --version` builds no
    # subcommand's parser (a fresh interpreter, so nothing is cached)
    import subprocess
    import sys

    code = (
        "import sys, schedlab, schedlab.cli; "
        "assert schedlab.cli.main(['--version']) == 0; "
        "print(sorted(m for m in ('numpy', 'schedlab.offline', 'schedlab.serving') "
        "if m in sys.modules)); "
        "print(schedlab.Instance.__name__, schedlab.serving.__name__, 'solve' in dir(schedlab))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["schedlab 0.1.0", "[]", "Instance schedlab.serving True"]
