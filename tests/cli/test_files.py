"""No command overwrites one of its inputs (:mod:`schedlab.cli.files`).

Every subcommand's parser declares the arguments naming files it reads and writes; the
first test holds that declaration complete (an option that names a file and is not
declared fails it), the second tries each declared output of each command onto each of
its declared inputs — the same file, by another spelling of its path, or a file of an
input folder — and requires one error line, exit code 2 and the file unchanged.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import pytest

from schedlab.cli import build_parser, main
from schedlab.cli.files import CommandFiles

#: Words in an option's metavar, or option names, that say it names a file or folder.
FILE_WORDS = ("FILE", "DIR", "PATH", "RUN", "SCHEDULE", "TABLE", "MODEL", ".csv", ".json")
FILE_DESTS = {
    *("workload", "cost_model", "actual_cost_model", "source", "link", "data_dir"),
    *("output", "plot", "csv"),
}

#: Options that look like files but name none, with why.
NOT_FILES = {
    ("compare", "plot_schedule"): "names an instance among the inputs, and a solver",
    ("cluster", "link"): "BANDWIDTH,LATENCY only (no nccl-tests file)",
    **{
        (command, "data_dir"): "read only through --workload's named trace, which names it"
        for command in ("simulate", "capacity", "headroom", "sweep", "cluster")
    },
}

#: The arguments whose value is a folder read, and where in it a file read lies.
FOLDERS_READ = {
    "profile_dir": "tp1/dense.csv",
    "run": "meta.json",
    "vllm_model": "sub/config.json",
    "data_dir": "profiles/x/meta.yaml",
}

#: What each command needs besides the files tried: its other positional arguments are
#: given a path that does not exist (so they are no input), its required options this.
REQUIRED = {"sweep": ["--rates", "1"], "generate": ["backlog"]}


def _commands() -> dict[str, argparse.ArgumentParser]:
    commands: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*prefix, name])
        if prefix and not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            commands[" ".join(prefix)] = parser

    walk(build_parser(), [])
    return commands


COMMANDS = _commands()


def _files(parser: argparse.ArgumentParser) -> CommandFiles | None:
    return parser.get_default("command_files")


def _names_a_file(command: str, action: argparse.Action) -> bool:
    if (command, action.dest) in NOT_FILES or action.nargs == 0:  # a flag
        return False
    if not action.option_strings and not action.choices:  # a positional argument
        return True
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    return action.dest in FILE_DESTS or any(word in metavar for word in FILE_WORDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_naming_a_file_is_declared(command):
    parser = COMMANDS[command]
    files = _files(parser)
    declared = set() if files is None else {*files.reads, *files.writes}
    named = {
        a.dest
        for a in parser._actions
        if a.dest not in ("help", "command") and _names_a_file(command, a)
    }
    assert named <= declared, f"{command}: undeclared file arguments {named - declared}"


def _pairs() -> list[tuple[str, str, str]]:
    pairs = []
    for command, parser in sorted(COMMANDS.items()):
        files = _files(parser)
        if files is not None:
            for out, read in itertools.product(files.writes, files.reads):
                if out != read:
                    pairs.append((command, out, read))
    return pairs


def _argv(command: str, values: dict[str, str], tmp: Path) -> list[str]:
    """The command line of ``command`` giving each argument in ``values`` its value."""
    argv = command.split() + REQUIRED.get(command.split()[0], [])
    options: list[str] = []
    for action in COMMANDS[command]._actions:
        if not action.option_strings:
            if action.dest in values:
                argv.append(values[action.dest])
            elif action.dest not in ("help", "kind"):
                argv.append(str(tmp / "absent"))
        elif action.dest in values:
            options += [action.option_strings[-1], values[action.dest]]
        elif action.required:
            options += [action.option_strings[-1], str(tmp / "absent-output")]
    return argv + options


@pytest.mark.parametrize(("command", "out", "read"), _pairs())
def test_no_output_overwrites_an_input(tmp_path, capsys, command, out, read):
    files = _files(COMMANDS[command])
    assert files is not None
    folder = tmp_path / "here"
    folder.mkdir()
    if out in files.folders:  # an output folder: the input is one of the files it writes
        target = folder / "out" / "report.csv"
        target.parent.mkdir()
        written = files.folders[out](target.parent)
        target = written[0] if written else target
        out_value = str(target.parent)
    elif read in FOLDERS_READ:  # a file the command reads in the folder
        target = folder / FOLDERS_READ[read]
        target.parent.mkdir(parents=True, exist_ok=True)
        out_value = str(tmp_path / "here" / "." / FOLDERS_READ[read])  # another spelling
    else:
        target = folder / "file.csv"
        out_value = str(tmp_path / "here" / "." / "file.csv")  # another spelling
    target.write_bytes(b"an input\n")
    read_value = str(folder if read in FOLDERS_READ else target)
    code = main(_argv(command, {out: out_value, read: read_value}, tmp_path))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err, (command, out, read)
    assert err[-1].startswith("schedlab: error: "), err
    # the input --results is an output too: refused as such
    assert "is the input" in err[-1] or (read == "results" and "the same file as" in err[-1])
    assert target.read_bytes() == b"an input\n"


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    same = str(tmp_path / "out.png")
    argv = ["sweep", "--rates", "1", "--plot", same, "--results", same]
    assert main(argv) == 2
    assert "the same file as --plot" in capsys.readouterr().err


def test_a_new_output_beside_its_inputs_is_written(tmp_path, capsys):
    inst = tmp_path / "inst.json"
    inst.write_bytes((Path(__file__).parents[2] / "instances" / "tiny-1.json").read_bytes())
    schedule = tmp_path / "schedule.csv"
    assert main(["solve", str(inst), "--schedule-csv", str(schedule), "--no-bound"]) == 0
    assert schedule.is_file() and f"wrote {schedule}" in capsys.readouterr().err


def _tiny(path: Path) -> Path:
    path.write_bytes((Path(__file__).parents[2] / "instances" / "tiny-1.json").read_bytes())
    return path


def test_a_file_given_as_standard_input_is_not_overwritten(tmp_path, capsys, monkeypatch):
    inst = _tiny(tmp_path / "x.lp")
    before = inst.read_bytes()
    with inst.open() as stdin:
        monkeypatch.setattr("sys.stdin", stdin)
        assert main(["export", "-", "--format", "lp", "--output", str(inst)]) == 2
    assert "is the input standard input" in capsys.readouterr().err
    assert inst.read_bytes() == before


def test_a_folder_read_through_a_linked_subfolder_is_protected(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    (real / "dense.csv").write_text("an input\n")
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "tp1").symlink_to(real)  # the readers follow it; so does the check
    argv = ["profile", "export", str(profile), "--output", str(profile / "tp1" / "dense.csv")]
    assert main(argv) == 2
    assert "is the input PROFILE_DIR" in capsys.readouterr().err
    assert (real / "dense.csv").read_text() == "an input\n"


def test_only_the_files_a_run_reads_count(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "requests.jsonl").write_text("{}\n")
    (run / "fig.png").write_bytes(b"an earlier figure")  # written by an earlier replay
    # refused for what replay reads (not for the figure): the run is malformed, exit 2
    assert main(["replay", str(run), "--plot", str(run / "fig.png")]) == 2
    assert "is the input" not in capsys.readouterr().err
    assert main(["replay", str(run), "--plot", str(run / "requests.jsonl")]) == 2
    assert "is the input RUN" in capsys.readouterr().err


def test_a_file_that_cannot_be_read_in_an_input_folder_is_skipped(tmp_path, capsys):
    profile = tmp_path / "profile"
    (profile / "tp1").mkdir(parents=True)
    (profile / "tp1" / "loop").symlink_to(profile)  # a link back up: walked once
    (profile / "dangling.csv").symlink_to(tmp_path / "nowhere")
    out = _tiny(tmp_path / "out.csv")  # an existing output: the inputs are looked for
    assert main(["profile", "export", str(profile), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "is the input" not in err and "Traceback" not in err  # the reader's own error


@pytest.mark.parametrize("spelling", ["dangling", "dotdot"])
def test_two_outputs_are_compared_by_where_they_land(tmp_path, capsys, spelling):
    (tmp_path / "a" / "b").mkdir(parents=True)
    plot = tmp_path / "a" / "fig.png"
    if spelling == "dangling":  # a link to the file --plot will create
        results = tmp_path / "log.jsonl"
        results.symlink_to(plot)
        argv = ["--plot", str(plot), "--results", str(results)]
        expected = 2
    else:  # link/../x is a/x to the system, not ./x
        (tmp_path / "link").symlink_to(tmp_path / "a" / "b")
        argv = [
            "--plot",
            str(tmp_path / "link" / ".." / "x.png"),
            "--results",
            str(tmp_path / "x.png"),
        ]
        expected = None
    code = main(["sweep", "--rates", "1", "--duration", "1s", "--policies", "vllm", *argv])
    err = capsys.readouterr().err
    if expected == 2:
        assert code == 2 and "the same file as" in err
    else:
        assert "the same file as" not in err


def test_an_option_is_named_as_its_help_shows_it(tmp_path, capsys):
    out = tmp_path / "cmp"
    out.mkdir()
    inst = _tiny(out / "report.md")
    assert main(["compare", str(inst), "--solvers", "fcfs", "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--output {out} (report.md)" in err and "--out " not in err
