"""A user's CI, as ``docs/testing.md`` shows it: a test file outside the package, written
against :mod:`schedlab.testing`'s fixtures only, property-tests a toy solver and a toy
serving policy (``user_example/``). It passes for the correct ones and fails, naming the
broken invariant, for the ones with a deliberate bug. The user's ``conftest.py``
derandomises hypothesis, so each outcome is the same on every run.

Each case runs pytest in a fresh process on a copy of the files in a temporary folder,
the user's project. The fixtures come from the ``pytest11`` entry point when this
checkout is installed with it, and from ``-p schedlab.testing.plugin`` otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points

from tests.conftest import ROOT

EXAMPLE = ROOT / "tests" / "testing" / "user_example"
PLUGIN = "schedlab.testing.plugin"


def _run_user_ci(tmp_path, scheduler: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(EXAMPLE / "check_scheduler.py", tmp_path / "test_scheduler.py")
    shutil.copy(EXAMPLE / "ci_conftest.py", tmp_path / "conftest.py")
    shutil.copy(EXAMPLE / f"scheduler_{scheduler}.py", tmp_path / "scheduler.py")
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not installed:
        command += ["-p", PLUGIN]
    return subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_correct_solver_and_policy_pass(tmp_path):
    done = _run_user_ci(tmp_path, "good")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_broken_solver_and_policy_fail_with_the_broken_invariant(tmp_path):
    done = _run_user_ci(tmp_path, "broken")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "2 failed" in out
    assert "FAILED test_scheduler.py::test_my_solver" in out
    assert "FAILED test_scheduler.py::test_my_policy" in out
    # hypothesis shrank each failure, and the message names where the invariant broke
    assert "ScheduleViolation: infeasible schedule of 2 request(s) with memory M = 1" in out
    assert "Instance.from_arrays(1, [0, 0], [1, 1], [0, 0])" in out
    assert "DeadlineViolation: replica 0 iteration" in out and "next-token deadline" in out


def test_the_guide_shows_the_user_test():
    guide = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    for name in ("check_scheduler.py", "scheduler_good.py", "ci_conftest.py"):
        assert (EXAMPLE / name).read_text(encoding="utf-8") in guide, name
    lines = (EXAMPLE / "check_scheduler.py").read_text(encoding="utf-8").strip().splitlines()
    assert len(lines) <= 10


def test_the_plugin_is_a_pytest11_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["entry-points"]["pytest11"] == {"schedlab": PLUGIN}
