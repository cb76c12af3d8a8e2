"""Every command fed malformed files and options: exit code 2, one line on stderr, never a
traceback (an exception escaping :func:`schedlab.cli.main` fails the test with its own).

Each strategy draws input that is malformed by construction — a strict prefix of a JSON
object, a key given twice, a value outside its field's range, an option value its parser
refuses — so every example must be refused; none may run as if it were fine.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from schedlab.cli import main
from schedlab.cli.serving import parse_duration
from schedlab.errors import SchedlabError
from schedlab.offline.bounds import available_bounds
from schedlab.offline.solvers import available_solvers
from schedlab.serving.cost_model import cost_model_names
from schedlab.serving.policies import POLICIES
from schedlab.serving.workloads import WORKLOADS
from tests.conftest import INSTANCES

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,  # data_dir: a read-only path
    ],
)

TINY = INSTANCES / "tiny-1.json"
INSTANCE = json.loads(TINY.read_text())


def _refused(argv: list[str]) -> None:
    """Run the command line in-process; it must exit 2 with one line on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's errors
            code = exc.code
    lines = err.getvalue().strip().splitlines()
    assert code == 2, f"{argv}: exit {code}; stderr {err.getvalue()!r}"
    assert len(lines) == 1, f"{argv}: stderr {err.getvalue()!r}"
    assert "Traceback" not in err.getvalue() and lines[0].startswith(("schedlab", "python"))


@contextlib.contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


# --- malformed JSON -------------------------------------------------------------------


def _json_text(valid: object) -> st.SearchStrategy[str]:
    """Text that is not the strict JSON of ``valid``'s shape: a strict prefix of its
    object (never JSON), a member given twice, or a NaN / Infinity in it."""
    text = json.dumps(valid)
    prefixes = st.integers(0, len(text) - 1).map(lambda k: text[:k])
    twice = st.just("{" + text[1:-1] + ", " + text[1:-1] + "}")
    constant = st.sampled_from(["NaN", "Infinity", "-Infinity"]).map(
        lambda c: text[:-1] + f', "x": {c}' + "}"
    )
    return st.one_of(prefixes, twice, constant)


def _bad_instance_values() -> st.SearchStrategy[object]:
    """A parsed instance with one field out of the model's range or of the wrong type."""
    wrong = {
        "memory": [0, -1, 1.5, "10", True, None, [], 2**41],
        "prompt": [-1, 1.5, "1", True, None, {}, 2**41],
        "output": [0, -1, 2.5, "2", False, None],
        "arrival": [-1, 0.5, "0", True],
    }

    @st.composite
    def mutated(draw: st.DrawFn) -> object:
        data = json.loads(json.dumps(INSTANCE))
        field = draw(st.sampled_from(sorted(wrong)))
        value = draw(st.sampled_from(wrong[field]))
        if field == "memory":
            data["memory"] = value
        else:
            k = draw(st.integers(0, len(data["requests"]) - 1))
            data["requests"][k][field] = value
        return data

    shapes = st.sampled_from(
        [[], {}, 1, "x", None, {"format": "schedlab-instance/2"}, {"requests": []}]
    )
    return st.one_of(mutated(), shapes)


def _malformed_instance() -> st.SearchStrategy[str]:
    return st.one_of(_json_text(INSTANCE), _bad_instance_values().map(json.dumps))


@FUZZ
@given(
    text=_malformed_instance(),
    command=st.sampled_from(["solve", "compare", "bound", "export", "verify"]),
)
def test_malformed_instance_files(text: str, command: str) -> None:
    with _folder() as folder:
        path = folder / "instance.json"
        path.write_text(text)
        extra = {
            "export": ["-o", str(folder / "m.lp")],
            "verify": [str(folder / "s.json")],
            "compare": ["--quiet"],
        }.get(command, [])
        (folder / "s.json").write_text("[0]")
        _refused([command, str(path), *extra])


def _malformed_schedule() -> st.SearchStrategy[tuple[str, str]]:
    """A schedule file of tiny-1 that cannot be read: broken JSON, or a CSV without its
    columns, with a ragged row, or with lengths of another instance."""
    n = len(INSTANCE["requests"])
    head = "request,id,start,completion,prompt,output\n"
    rows = [
        f"{i},,0,{r['output']},{r['prompt']},{r['output']}\n"
        for i, r in enumerate(INSTANCE["requests"])
    ]
    csv_texts = st.sampled_from(
        [
            "start\n0\n",
            "request\n0\n",
            head + "0,,0\n",
            head + rows[0].replace(",0,", ",0,999,", 1),
            head + "".join(rows).replace(f",{INSTANCE['requests'][1]['prompt']},", ",12345,"),
            head.encode("utf-16").decode("latin-1"),
        ]
    )
    return st.one_of(
        _json_text({"starts": list(range(n))}).map(lambda t: ("s.json", t)),
        csv_texts.map(lambda t: ("s.csv", t)),
    )


@FUZZ
@given(schedule=_malformed_schedule())
def test_malformed_schedule_files(schedule: tuple[str, str]) -> None:
    name, text = schedule
    with _folder() as folder:
        (folder / name).write_text(text, encoding="latin-1" if "\x00" in text else "utf-8")
        _refused(["verify", str(TINY), str(folder / name)])


# --- malformed traces -------------------------------------------------------------------

AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZURE_ROWS = [
    "2023-11-16 18:17:03.9799600,4808,10\n",
    "2023-11-16 18:17:04.0319600,3180,8\n",
    "2023-11-16 18:17:05.1000000,120,3\n",
]


@st.composite
def _malformed_trace(draw: st.DrawFn, order: bool = True) -> tuple[str, str]:
    """A trace file (Azure CSV, length-stats CSV or Mooncake JSONL) with one bad field, a
    missing column, a request without tokens or (``order``) an out-of-order time."""
    kind = draw(st.sampled_from(["azure", "stats", "mooncake"]))
    bad = draw(st.sampled_from(["-1", "x", "", "1.5", "1e400", "nan"]))
    k = draw(st.integers(0, 2))
    if kind == "azure":
        rows = list(AZURE_ROWS)
        column = draw(st.integers(0, 3))
        if column == 3:  # out of time order, or an output of 0 tokens
            late = order and k < 2
            rows[k] = rows[k].replace("18:17:", "18:19:") if late else rows[k][:-3] + ",0\n"
        else:
            fields = rows[k].rstrip("\n").split(",")
            fields[column] = bad if column else draw(st.sampled_from(["yesterday", "", "3"]))
            rows[k] = ",".join(fields) + "\n"
        return "trace.csv", AZURE_HEAD + "".join(rows)
    if kind == "stats":
        rows = ["100,5,105,20\n", "200,7,207,28\n", "50,2,52,25\n"]
        fields = rows[k].split(",")
        column = draw(st.integers(0, 1))  # an empty prompt is a valid backlog request
        fields[column] = draw(st.sampled_from([bad, "0"] if column else [bad]))
        rows[k] = ",".join(fields)
        head = draw(
            st.sampled_from(
                ["num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"] * 3
                + ["num_prefill,num_decode\n"]
            )
        )
        return "lengths.csv", head + "".join(rows)
    lines = [
        {"timestamp": 0, "input_length": 10, "output_length": 3},
        {"timestamp": 1000, "input_length": 20, "output_length": 2},
        {"timestamp": 2000, "input_length": 5, "output_length": 4},
    ]
    field = draw(st.sampled_from(["timestamp", "input_length", "output_length"]))
    value = draw(st.sampled_from([-1, "3", None, True, 1.5, [], 10**12]))
    if field == "timestamp":
        late = [5000 if k < 2 else -5000] if order else []
        value = draw(st.sampled_from(["3", None, True, [], *late]))
    lines[k][field] = value
    text = "".join(json.dumps(line) + "\n" for line in lines)
    if draw(st.booleans()):
        text = text.replace("}\n", "\n", 1)  # one line broken
    return "trace.jsonl", text


@FUZZ
@given(trace=_malformed_trace(), command=st.sampled_from(["simulate", "capacity", "headroom"]))
def test_malformed_trace_files(trace: tuple[str, str], command: str) -> None:
    name, text = trace
    with _folder() as folder:
        path = folder / name
        path.write_text(text)
        window = [] if command == "headroom" else ["--duration", "2s"]
        _refused([command, "--workload", str(path), *window])


@FUZZ
@given(trace=_malformed_trace(order=False))  # a backlog has no times to be out of order
def test_malformed_trace_as_a_backlog_source(trace: tuple[str, str]) -> None:
    name, text = trace
    with _folder() as folder:
        path = folder / name
        path.write_text(text)
        _refused(["generate", "backlog", "--source", str(path), "-n", "5"])


@FUZZ
@given(
    part=st.sampled_from(["requests.jsonl", "meta.json", "config.json"]),
    cut=st.integers(1, 200),
)
def test_malformed_recorded_runs(data_dir: Path, part: str, cut: int) -> None:
    run = data_dir / "validation" / "vllm-0.19.0_RTX4090_Llama-3.1-8B"
    with _folder() as folder:
        for name in ("requests.jsonl", "meta.json", "config.json"):
            text = (run / name).read_text()
            if name == part:  # a strict prefix of its first object (or of its first line)
                first = text.splitlines()[0] if name == "requests.jsonl" else text
                text = first[: max(1, min(cut, len(first) - 1))] + "\n"
            (folder / name).write_text(text)
        _refused(["replay", str(folder)])


@FUZZ
@given(meta=st.text(max_size=60) | st.sampled_from(["[1, 2", "a: [", "model: {", "- x\n- y"]))
def test_malformed_profile_directories(meta: str) -> None:
    with _folder() as folder:
        (folder / "meta.yaml").write_text(meta)
        _refused(["calibrate", str(folder), "-o", str(folder / "m.json")])


# --- option values their parsers refuse --------------------------------------------------


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _real(text: str, low: float, high: float = math.inf, *, above: bool = False) -> bool:
    """Whether ``text`` is a finite number from ``low`` (excluded if ``above``) to
    ``high``."""
    value = _number(text)
    return value is not None and (value > low if above else value >= low) and value <= high


def _whole(text: str, low: int, high: float = math.inf) -> bool:
    value = _integer(text)
    return value is not None and low <= value <= high


def _duration_ok(text: str, zero: bool = False) -> bool:
    try:
        parse_duration(text, allow_zero=zero)
    except SchedlabError:
        return False
    return True


def _option_ok(text: str, solver: str = "") -> bool:
    """Whether ``--option`` text may be valid: ``[solver.]backfill=true|false`` for the
    rules (the default solver of ``solve`` and the only one ``compare`` names here)."""
    key, _, value = text.partition("=")
    return key.strip() == f"{solver}backfill" and value.strip().lower() in ("true", "false")


def _comma_items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",")]


def _policy_known(text: str) -> bool:
    return any(item.split(":")[0] in POLICIES for item in _comma_items(text))


#: Per command: flags with a test ``ok(value)`` that is true for every value the flag
#: may accept; the fuzz feeds only values for which it is false.
OPTIONS: dict[str, dict[str, Callable[[str], bool]]] = {
    "solve": {
        "--solver": lambda t: t in available_solvers(),
        "--time-limit": lambda t: _real(t, 0, above=True),
        "--seed": lambda t: t.strip().isdigit() and _integer(t) is not None,
        "--option": _option_ok,
    },
    "compare": {
        "--solvers": lambda t: any(x in available_solvers() for x in _comma_items(t)),
        "--time-limit": lambda t: _real(t, 0, above=True),
        "--option": lambda t: _option_ok(t, "fcfs."),
    },
    "bound": {"--method": lambda t: t in available_bounds()},
    "generate": {
        "-n": lambda t: _whole(t, 1),
        "--memory": lambda t: _whole(t, 1),
        "--long-fraction": lambda t: _real(t, 0, 1),
    },
    "simulate": {
        "--rate": lambda t: _real(t, 0, above=True),
        "--duration": _duration_ok,
        "--tpot": _duration_ok,
        "--ttft": _duration_ok,
        "--policy": _policy_known,
        "--workload": lambda t: t in WORKLOADS or Path(t).is_file(),
        "--cost-model": lambda t: t in cost_model_names() or Path(t).is_file(),
        "--block-size": lambda t: _integer(t) in (1, 8, 16, 32, 64, 128, 256),
        "--kv-tokens": lambda t: _whole(t, 16),
        "--max-num-seqs": lambda t: _whole(t, 1, 8192),
        "--prediction-cv": lambda t: _real(t, 0),
        "--noise-cv": lambda t: _real(t, 0),
        "--margin": lambda t: _duration_ok(t, zero=True),
        "--tpot-slo": lambda t: t in ("every-token", "p99", "mean"),
    },
    "capacity": {
        "--target": lambda t: _real(t, 0, 1, above=True),
        "--tolerance": lambda t: _real(t, 0, above=True),
        "--start-rate": lambda t: _real(t, 0, above=True),
    },
    "sweep": {
        "--rates": lambda t: all(_real(x, 0, above=True) for x in _comma_items(t)),
        "--policies": _policy_known,
        "--workers": lambda t: _whole(t, 1),
    },
    "headroom": {"--tpot": _duration_ok, "--kv-tokens": lambda t: _whole(t, 1)},
}

#: What each command needs besides the fuzzed option (small, so nothing runs long).
BASE = {
    "solve": ["solve", str(TINY)],
    "compare": ["compare", str(TINY), "--quiet", "--solvers", "fcfs"],
    "bound": ["bound", str(TINY)],
    "generate": ["generate", "mixed"],
    "simulate": ["simulate", "--duration", "2s"],
    "capacity": ["capacity", "--duration", "5s", "--quiet", "--max-rate", "2"],
    "sweep": ["sweep", "--duration", "2s", "--quiet", "--workers", "1"],
    "headroom": ["headroom"],
}

#: Texts a careless user or a script types; hypothesis adds arbitrary ones.
TYPED = ["", " ", "-1", "0", "1e999", "nan", "inf", "25", "abc", "1,,2", "²", "1_000x", "--x"]


@FUZZ
@given(
    case=st.sampled_from([(c, f) for c, flags in OPTIONS.items() for f in flags]),
    value=st.sampled_from(TYPED) | st.text(max_size=12),
)
def test_option_values_their_parsers_refuse(case: tuple[str, str], value: str) -> None:
    command, flag = case
    assume(not OPTIONS[command][flag](value))
    rates = ["--rates", "1"] if command == "sweep" and flag != "--rates" else []
    _refused([*BASE[command], *rates, f"{flag}={value}"])


@pytest.mark.parametrize("command", sorted(BASE))
def test_an_unknown_option_is_one_line(command: str) -> None:
    rates = ["--rates", "1"] if command == "sweep" else []
    _refused([*BASE[command], *rates, "--colour", "red"])
