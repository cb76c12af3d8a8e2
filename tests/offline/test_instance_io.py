import json
import math

import numpy as np
import pytest

from schedlab.errors import DataNotFoundError, FormatError, InfeasibleInstanceError, InstanceError
from schedlab.offline.backlogs import mixed_backlog
from schedlab.offline.instance import Instance, Request
from schedlab.offline.instance_io import FORMAT, instance_from_dict, read_instance, write_instance


def _doc(**overrides):
    doc = {
        "format": FORMAT,
        "name": "t",
        "kv_tokens": 10,
        "requests": [{"prompt": 1, "output": 2}],
    }
    doc.update(overrides)
    return doc


def test_round_trip(tmp_path):
    inst = Instance(
        12, (Request(2, 3, id="a"), Request(0, 1, arrival=4)), "demo", {"optimum": 7, "x": [1]}
    )
    path = tmp_path / "i.json"
    write_instance(inst, path)
    back = read_instance(path)
    assert back == inst
    assert dict(back.meta) == {"optimum": 7, "x": [1]}
    data = json.loads(path.read_text())
    assert data["requests"][0] == {"prompt": 2, "output": 3, "id": "a"}
    assert data["requests"][1] == {"prompt": 0, "output": 1, "arrival": 4}


def test_numpy_meta_is_written_plain_and_other_objects_are_refused(tmp_path):
    # a generator given a NumPy seed records it in meta
    inst = mixed_backlog(5, seed=np.int64(3))
    path = tmp_path / "i.json"
    write_instance(inst, path)
    assert read_instance(path).meta["seed"] == 3
    cycle: list = []
    cycle.append(cycle)
    refused = (
        ({"a": object()}, "object is not JSON-ready"),
        ({"a": math.nan}, "nan"),
        ({"a": [{1: 2}]}, "key 1 is not a string"),  # JSON would read it back as "1"
        ({"a": np.array([{None: 2}], dtype=object)}, "key None is not a string"),
        ({"a": np.array({3: 4}, dtype=object)}, "key 3 is not a string"),  # 0-d
        ({"a": cycle}, "Circular reference"),  # json names it
    )
    for meta, message in refused:
        bad = Instance(10, (Request(1, 1),), meta=meta)
        with pytest.raises(FormatError, match=f"y.json: meta: .*{message}"):
            write_instance(bad, tmp_path / "y.json")
    assert not (tmp_path / "y.json").exists()


def test_arrival_defaults_to_zero():
    inst = instance_from_dict(_doc())
    assert inst.requests[0].arrival == 0 and inst.name == "t"


@pytest.mark.parametrize(
    ("doc", "error", "message"),
    [
        (_doc(format="other/1"), FormatError, "format: expected 'schedlab-instance/1'"),
        ({"format": FORMAT, "requests": []}, FormatError, "missing key 'kv_tokens'"),
        (_doc(extra=1), FormatError, "unknown key"),
        (_doc(requests={"a": 1}), FormatError, "requests: expected a list"),
        (_doc(requests=[5]), FormatError, r"requests\[0\]: expected an object"),
        (_doc(requests=[{"prompt": 1}]), FormatError, r"requests\[0\]: missing key 'output'"),
        (_doc(requests=[{"prompt": 1, "output": 1, "promt": 2}]), FormatError, "unknown key"),
        (
            _doc(requests=[{"prompt": 1, "output": 1}, {"prompt": -4, "output": 1}]),
            InstanceError,
            r"requests\[1\]\.prompt: must be >= 0, got -4",
        ),
        (
            _doc(requests=[{"prompt": 1, "output": 2.5}]),
            InstanceError,
            r"requests\[0\]\.output: must be an integer, got 2.5",
        ),
        (
            _doc(requests=[{"prompt": 9, "output": 2}]),
            InfeasibleInstanceError,
            r"requests\[0\]: prompt \+ output = 11 exceeds the KV budget M = 10",
        ),
        (
            _doc(requests=[{"prompt": 1, "output": 1, "id": "x"}] * 2),
            InstanceError,
            r"requests\[1\]\.id: 'x' is already the id of requests\[0\]",
        ),
        (_doc(kv_tokens="10"), InstanceError, "kv_tokens: must be an integer"),
        (_doc(kv_tokens=None), InstanceError, "kv_tokens: must be an integer"),
        (_doc(memory=10), FormatError, "kv_tokens and memory: give kv_tokens only"),
        (_doc(name=3), FormatError, "name: expected a string"),
        (_doc(meta=[]), FormatError, "meta: expected an object"),
        ([], FormatError, "expected a JSON object"),
    ],
)
def test_malformed_documents(doc, error, message):
    with pytest.raises(error, match=message):
        instance_from_dict(doc)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(DataNotFoundError, match="no such instance file"):
        read_instance(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "schedlab-instance/1",\n "kv_tokens": 10,,}')
    with pytest.raises(FormatError, match=r"bad\.json:2:\d+: invalid JSON"):
        read_instance(bad)
    nan = tmp_path / "nan.json"
    nan.write_text(
        '{"format": "schedlab-instance/1", "kv_tokens": 10, '
        '"requests": [{"prompt": NaN, "output": 1}]}'
    )
    with pytest.raises(FormatError, match=r"nan\.json:1: invalid JSON \(NaN is not JSON"):
        read_instance(nan)


def test_old_files_name_the_kv_budget_memory(tmp_path):
    old = {k: v for k, v in _doc().items() if k != "kv_tokens"} | {"memory": 10}
    inst = instance_from_dict(old)
    assert inst.kv_tokens == 10
    with pytest.raises(InstanceError, match="memory: must be an integer"):
        instance_from_dict(old | {"memory": "10"})
    path = tmp_path / "i.json"
    write_instance(inst, path)
    written = path.read_text()
    assert '"kv_tokens": 10' in written and '"memory"' not in written
