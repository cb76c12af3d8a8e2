"""Every README example and command runs as written (from the repository root).

Python blocks are executed. Shell blocks are split into commands (at ``&&`` and line ends,
comments dropped) and each command is dealt with by what it is:

- ``schedlab ...`` and ``python benchmarks/...`` are run, and must exit 0;
- ``pip install -e '.[extras]'`` must name extras that ``pyproject.toml`` declares;
- the environment, linter and test commands must be exactly those ``.ci/run`` runs
  (that script is the test of the quickstart's second command);
- ``mkdocs build --strict`` is run by ``tests/test_docs.py``.

A command of any other kind fails the test, so a new README command needs a way to run here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import DATA_DIR, ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
SHELL = re.findall(r"```bash\n(.*?)```", README, re.S)


def shell_commands() -> list[list[str]]:
    """The README's shell commands, each a token list, in order of appearance."""
    commands: list[list[str]] = []
    for block in SHELL:
        for line in block.splitlines():
            tokens = shlex.split(line, comments=True)
            current: list[str] = []
            for token in [*tokens, "&&"]:
                if token == "&&":
                    if current:
                        commands.append(current)
                    current = []
                else:
                    current.append(token)
    return commands


def ci_commands() -> list[list[str]]:
    """The commands of ``.ci/run``'s command chain."""
    chain = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.startswith("python3 -m venv")
    ]
    assert len(chain) == 1, ".ci/run must hold one command chain"
    return [shlex.split(part) for part in chain[0].split("&&")]


COMMANDS = shell_commands()
RUN = [
    c
    for c in COMMANDS
    if c[0] == "schedlab" or (c[0] == "python" and c[1].startswith("benchmarks/"))
]
INSTALLS = [c for c in COMMANDS if c[:2] == ["pip", "install"]]
AS_CI = [c for c in COMMANDS if c not in RUN and c not in INSTALLS and c[0] != "mkdocs"]


def test_the_readme_has_python_examples_and_commands():
    assert len(BLOCKS) >= 2
    assert RUN and INSTALLS and AS_CI


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # raises if it fails


@pytest.mark.parametrize("command", RUN, ids=[" ".join(c) for c in RUN])
def test_readme_command_runs(command):
    if command[0] == "python" and not DATA_DIR.is_dir():
        pytest.skip("the benchmarks read ../shared/data, which is not present")
    argv = (
        [sys.executable, "-m", "schedlab", *command[1:]]
        if command[0] == "schedlab"
        else [sys.executable, *command[1:]]
    )
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip(), "the command printed nothing"


@pytest.mark.parametrize("command", INSTALLS, ids=[" ".join(c) for c in INSTALLS])
def test_readme_installs_declared_extras(command):
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    target = command[-1]
    match = re.fullmatch(r"\.(?:\[([a-z,]+)\])?", target)
    assert command[2] == "-e" and match, f"installs {target!r}, not the checkout"
    extras = set(match.group(1).split(",")) if match.group(1) else set()
    assert extras <= set(declared["optional-dependencies"]), extras


@pytest.mark.parametrize("command", AS_CI, ids=[" ".join(c) for c in AS_CI])
def test_readme_tool_commands_are_what_ci_runs(command):
    assert command in ci_commands()
