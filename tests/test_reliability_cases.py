"""Issue 43's "What was measured", case by case: each gives one line and exit 2 on the
command line, or a typed SchedlabError in Python, within 4 GiB and 120 s.

Where the merged design returns a verified result with its stop recorded instead of an
error (``dp`` and ``receding-horizon`` past their work or memory budget, ``brute-force``
past its work budget), the test asserts exit 0, the stop shown, within the same caps.
Cases tested elsewhere with the same strength are named in a comment, not run twice.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from schedlab import lower_bound, read_instance, solve, write_instance
from schedlab.errors import InputError, InputTypeError, MemoryBudgetError, SchedlabError
from schedlab.offline.backlogs import jaillet_instance, sample_backlog
from schedlab.offline.export import export_model
from schedlab.offline.instance import Instance
from schedlab.offline.schedule import Schedule
from schedlab.offline.solvers import get_solver
from schedlab.offline.solvers.contract import integer_option
from tests.conftest import INSTANCES

CAP_BYTES = 4 << 30
CAP_S = 120
FAR = 1 << 30


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))


def capped(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command line under a 4 GiB address-space cap, killed past 120 s."""
    return subprocess.run(
        [sys.executable, "-m", "schedlab", *argv],
        capture_output=True,
        text=True,
        timeout=CAP_S,
        preexec_fn=_cap,
        check=False,
    )


def one_error_line(done: subprocess.CompletedProcess[str], fragment: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("schedlab: error: "), done.stderr
    assert fragment in lines[0], lines[0]


def solved_with_stop(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "objective" in done.stdout


# --- exact solvers and their budgets ---------------------------------------------------


def test_dp_on_a_backlog_of_8_stops_at_its_memory_budget(tmp_path: Path) -> None:
    """``generate backlog -n 8 --kv-tokens 2000``; ``solve --solver dp`` reached 18.9 GB
    after 15 minutes. Now it stops at its memory budget with a verified answer (exit 0,
    "stopped by its memory budget"); a small ``--max-memory`` shows it sooner."""
    path = tmp_path / "t.json"
    write_instance(sample_backlog(8, 2000), path)
    done = capped("solve", str(path), "--solver", "dp", "--quiet", "--max-memory", "200M")
    solved_with_stop(done)
    assert "stopped by its memory budget" in done.stdout


# b6 under a 3 GB cap (MemoryError traceback): tests/offline/test_memory_budget.py::
# test_dp_stops_at_its_memory_budget_with_a_valid_answer (Python) and
# test_dp_on_the_command_line_within_4_gib (the command line, capped).


def test_receding_horizon_on_40_requests_with_releases(tmp_path: Path) -> None:
    """40 requests with releases, ``M = 1,500``, outputs <= 300: grew to 24.3 GB with
    its defaults. Its windows share one work budget and each window's ``dp`` its memory
    budget: exit 0 within the caps, the stop (if any) recorded."""
    rng = np.random.default_rng(0)
    output = rng.integers(1, 301, 40)
    prompt = np.minimum(rng.integers(1, 800, 40), 1500 - output)
    arrival = np.sort(rng.integers(0, 400, 40))
    path = tmp_path / "r40.json"
    write_instance(Instance.from_arrays(1500, prompt, output, arrival), path)
    done = capped("solve", str(path), "--solver", "receding-horizon", "--no-bound", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["stopped_by"] in (None, "work", "memory")


def test_dp_at_its_default_size_on_jaillet_12(tmp_path: Path) -> None:
    """``generate jaillet -n 12 --seed 2``, ``dp``: 3.7 GB and a MemoryError after
    415 s. Now a verified answer within the caps (a small ``--max-memory`` shows the
    memory stop sooner)."""
    path = tmp_path / "j12.json"
    write_instance(jaillet_instance(2, n=12), path)
    done = capped(
        "solve", str(path), "--solver", "dp", "--no-bound", "--json", "--max-memory", "300M"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["stopped_by"] in (None, "work", "memory")


def test_brute_force_on_6_requests_ends_within_the_caps(tmp_path: Path) -> None:
    """``brute-force`` on 6 requests ran 20 minutes (``work=None``). With its
    default work budget it ends with a verified answer (exit 0) on a Jaillet instance
    of 6, and refuses the 6-request backlog of ``M = 2,000`` in one line (its search
    would span more than ``max_rounds``)."""
    path = tmp_path / "j6.json"
    write_instance(jaillet_instance(2, n=6), path)
    done = capped("solve", str(path), "--solver", "brute-force", "--no-bound", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["stopped_by"] in (None, "work", "memory")
    write_instance(sample_backlog(6, 2000, seed=1), path)
    done = capped("solve", str(path), "--solver", "brute-force", "--no-bound")
    one_error_line(done, "above max_rounds")


# sorted-f --option method=exact on mixed-n1000 (4.39 GiB): tests/offline/
# test_memory_budget.py::test_sorted_f_exact_on_the_command_line_within_4_gib.


# --- a release at round 2^30 -------------------------------------------------------------

# local-search, alns, cpsat: tests/offline/test_memory_budget.py::
# test_far_releases_within_4_gib_on_the_command_line (and, in Python, with bounds:
# test_searches_solve_releases_far_out_in_time).


def _far(tmp_path: Path) -> Path:
    path = tmp_path / "far.json"
    write_instance(Instance.from_arrays(100, [4, 50], [10, 30], [0, FAR], name="far"), path)
    return path


def test_export_refuses_a_far_release_in_one_line(tmp_path: Path) -> None:
    one_error_line(capped("export", str(_far(tmp_path)), "-o", str(tmp_path / "m.lp")), "export")


def test_compare_plots_a_far_release_within_the_caps(tmp_path: Path) -> None:
    """The memory figure asked for a profile over every round to the makespan (8 GiB);
    it is drawn from the load at each stretch's ends (Schedule.load_points)."""
    pytest.importorskip("matplotlib")
    figure = tmp_path / "far.png"
    done = capped("compare", str(_far(tmp_path)), "--solvers", "fcfs", "--plot", str(figure))
    assert done.returncode == 0, done.stderr
    assert figure.is_file()


def test_memory_profile_is_refused_past_the_budget_and_load_points_are_exact() -> None:
    far = Schedule(Instance.from_arrays(100, [4, 5], [10, 3], [FAR, 7]), [FAR, 20])
    with pytest.raises(MemoryBudgetError, match=r"^memory_profile: "):
        far.memory_profile  # noqa: B018 (the property is the call)
    rounds, held = far.load_points()
    assert rounds.size <= 8 and held.max() == far.peak_memory == 14
    instance = read_instance(INSTANCES / "mixed-n50.json")
    schedule = solve(instance, "fcfs", bound=None).schedule
    rounds, held = schedule.load_points()
    dense = np.interp(np.arange(schedule.makespan), rounds, held)
    assert np.array_equal(dense, schedule.memory_profile)


# --- estimates before allocating ---------------------------------------------------------


@pytest.mark.parametrize("solver", ["local-search", "alns", "cpsat"])
def test_searches_refuse_before_allocating_past_the_budget(solver: str) -> None:
    instance = read_instance(INSTANCES / "mixed-n50.json")
    with pytest.raises(MemoryBudgetError, match=rf"^{solver}: .*a search over 50 requests"):
        solve(instance, solver, bound=None, max_memory=1 << 16)


def test_lagrangian_refuses_its_round_prices_past_the_budget() -> None:
    instance = read_instance(INSTANCES / "mixed-n1000.json")
    with pytest.raises(MemoryBudgetError, match=r"^lagrangian: arrays over a horizon"):
        lower_bound(instance, "lagrangian", max_memory=1 << 16)


def test_export_checks_its_model_against_the_budget(tmp_path: Path) -> None:
    instance = read_instance(INSTANCES / "tiny-1.json")
    with pytest.raises(MemoryBudgetError, match=r"^export: a model of .* nonzeros"):
        export_model(instance, tmp_path / "m.lp", max_memory=1000)
    assert not (tmp_path / "m.lp").exists()
    assert export_model(instance, tmp_path / "m.lp").is_file()


def test_export_max_memory_on_the_command_line(tmp_path: Path) -> None:
    done = capped(
        "export", str(INSTANCES / "tiny-1.json"), "-o", str(tmp_path / "m.lp"),
        "--max-memory", "1K",
    )  # fmt: skip
    one_error_line(done, "export: a model of")


# --- certificates, results files, outputs, readers ---------------------------------------

# The wrong registered bound (1e12, "OPTIMAL" with gap 0): tests/offline/solvers/
# test_contract.py::test_a_wrong_bound_is_refused_not_made_a_certificate (every solver,
# through register_bound) and tests/test_error_types.py.
# The forged compare line and sweep attainment of 9.99: tests/cli/test_errors.py::
# test_forged_results_lines_are_refused_on_resume (exit 2, one line), and
# tests/offline/test_compare.py, tests/serving/test_capacity.py.
# export inst.lp -o inst.lp, compare inst.png --plot inst.png, compare --output DIR with a
# symlinked report.csv: tests/cli/test_errors.py::
# test_an_output_naming_an_input_is_refused_and_the_input_kept.
# "margn_s" in a cost model, "outptu" in a request: tests/cli/test_errors.py::
# test_a_misspelt_key_of_a_cost_model_or_request_is_named.
# The YAML alias bomb: tests/cli/test_errors.py::test_a_yaml_alias_bomb_is_refused_at_once
# and tests/cli/test_fuzz.py::test_a_yaml_alias_bomb_is_refused_at_once.
# Silent acceptance: an absurd Mooncake timestamp, tests/llm/test_traces.py::
# test_mooncake_timestamps_are_finite_non_negative_and_not_absurd; negative times in
# requests.jsonl, tests/llm/test_traces.py::test_a_vllm_requests_file_with_negative_times_
# is_refused and tests/cli/test_fuzz.py::test_a_negative_recorded_time_is_refused; a run
# out of order, read sorted with a note, tests/calibration/test_recorded_run.py.
# Errors outside the hierarchy (write_instance to a missing folder, time_limit=-1,
# read_instance of a missing file, simulate("chat", "sloweave")):
# tests/test_error_types.py::test_a_user_error_is_ours_and_the_builtin_one; solve
# /dev/stdin: tests/cli/test_errors.py::test_standard_input_is_read_for_a_dash_and_dev_stdin.


def test_calibrate_output_through_a_link_to_the_profile_is_refused(tmp_path: Path) -> None:
    from tests.calibration.conftest import write_profile

    profile = write_profile(tmp_path / "profile")
    link = tmp_path / "m.json"
    link.symlink_to(profile / "meta.yaml")  # outside the profile, naming its file
    before = (profile / "meta.yaml").read_text()
    one_error_line(capped("calibrate", str(profile), "-o", str(link)), "is the input PROFILE_DIR")
    assert (profile / "meta.yaml").read_text() == before


def test_replay_plot_naming_a_file_of_the_run_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "requests.jsonl").write_text("{}\n")
    figure = run / "timeseries.csv"
    figure.write_bytes(b"not a figure")  # a file the run reader reads
    done = capped("replay", str(run), "--plot", str(figure))
    one_error_line(done, "is the input RUN")
    assert figure.read_bytes() == b"not a figure"


# --- typed errors at the offline doors ---------------------------------------------------

TINY = read_instance(INSTANCES / "tiny-1.json")


@pytest.mark.parametrize(
    ("call", "kind"),
    [
        (lambda: solve(TINY, "sorted-f", bound=None, method="nope"), InputError),
        (lambda: solve(TINY, "local-search", bound=None, width=0), InputError),
        (lambda: solve(TINY, "alns", bound=None, block=1), InputError),
        (lambda: solve(TINY, "receding-horizon", bound=None, commit=0), InputError),
        (lambda: solve(TINY, "cpsat", bound=None, max_intervals=1), InputError),
        (lambda: solve(TINY, "cpsat", bound=None, num_workers=0), InputError),
        (lambda: get_solver("local-search").fn(TINY, width="5"), InputTypeError),
        (lambda: integer_option("x", "k", 1.5, ""), InputTypeError),
        (lambda: integer_option("x", "k", 0, "", minimum=1), InputError),
        (lambda: export_model(TINY, "m.lp", max_nonzeros=10**12), InputError),
    ],
)
def test_user_errors_of_solvers_and_export_are_typed(call, kind) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, SchedlabError)
    assert isinstance(info.value, ValueError | TypeError)
