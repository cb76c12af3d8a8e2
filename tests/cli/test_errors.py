"""Errors on the command line: one line on stderr, exit 2, never a usage block or a
traceback; errors that cross a process boundary intact."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import schedlab.errors as errors
from schedlab.errors import SchedlabError, UnknownNameError, UnknownOptionError
from schedlab.serving.capacity import sweep


def _schedlab(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedlab", *argv], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--max-num-seqs"], "expected one argument"),
        (["simulate", "--tpot-slo", "p95"], "invalid choice: 'p95'"),
        (["solve", "instances/tiny-1.json", "--time-limit", "-1"], "--time-limit"),
        (["compare", "instances/tiny-1.json", "--solvers", "fcfs,,svf"], "empty items"),
        (["sweep", "--policies", "vllm,vllm", "--rates", "1"], "vllm given twice"),
        (["simulate", "--tpot", "25"], "'25' has no unit"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["simulate", "--rate", "1e9", "--duration", "1s"], "exceed the limit of 2,000,000"),
        (["simulate", "--rate", "1e-9", "--duration", "1s"], "no request arrives"),
    ],
)
def test_option_errors_are_one_line(argv, message):
    done = _schedlab(*argv)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert lines[0].startswith("schedlab")


def test_every_error_class_survives_pickling():
    # a worker process sends errors back pickled; one that cannot be rebuilt used to
    # turn "unknown policy" into BrokenProcessPool
    samples = [
        UnknownNameError("policy", "magic", ["vllm", "sloweave"]),
        UnknownOptionError("dp", ["x"], ["max_requests"]),
    ]
    for name in dir(errors):
        kind = getattr(errors, name)
        if (
            isinstance(kind, type)
            and issubclass(kind, SchedlabError)
            and kind not in (UnknownNameError, UnknownOptionError)
        ):
            samples.append(kind("a message"))
    for error in samples:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error)


def test_sweep_refuses_an_unknown_policy_before_the_workers_start():
    with pytest.raises(UnknownNameError, match="magic"):
        sweep("chat", ["vllm", "magic"], [1.0], duration_s=5.0, workers=2)
