import math

import numpy as np
import pytest

from schedlab.errors import InfeasibleInstanceError, InstanceError
from schedlab.offline.instance import Instance, Request


def test_arrays_and_volume():
    inst = Instance(10, (Request(2, 3), Request(0, 1, arrival=4, id="x")))
    assert inst.n == 2 == len(inst)
    assert inst.prompt.tolist() == [2, 0]
    assert inst.output.tolist() == [3, 1]
    assert inst.arrival.tolist() == [0, 4]
    # volume s*o + o(o+1)/2: 2*3 + 6 = 12 and 0 + 1 = 1; it equals the tokens summed
    # over the active rounds, (2+1) + (2+2) + (2+3) = 12.
    assert inst.volume.tolist() == [12, 1]
    assert inst.requests[0].peak == 5
    with pytest.raises(ValueError):
        inst.prompt[0] = 7  # read-only view of frozen data


def test_frozen():
    inst = Instance(10, (Request(1, 1),))
    with pytest.raises(AttributeError):
        inst.kv_tokens = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        inst.requests[0].output = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompt": -1, "output": 1}, "request.prompt: must be >= 0, got -1"),
        ({"prompt": 1, "output": 0}, "request.output: must be >= 1, got 0"),
        ({"prompt": 1, "output": 1, "arrival": -2}, "request.arrival: must be >= 0, got -2"),
        ({"prompt": 1.5, "output": 1}, "request.prompt: must be an integer, got 1.5"),
        ({"prompt": math.nan, "output": 1}, "request.prompt: must be an integer, got nan"),
        ({"prompt": math.inf, "output": 1}, "request.prompt: must be an integer"),
        ({"prompt": "3", "output": 1}, "request.prompt: must be an integer, got '3'"),
        ({"prompt": True, "output": 1}, "request.prompt: must be an integer, got True"),
        ({"prompt": 1, "output": 1, "id": 5}, "request.id: must be a string"),
    ],
)
def test_request_errors_name_the_field(kwargs, message):
    with pytest.raises(InstanceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Request(**kwargs)


def test_integral_floats_and_numpy_integers_are_accepted():
    r = Request(np.int64(3), 2.0, np.int32(1))
    assert (r.prompt, r.output, r.arrival) == (3, 2, 1)
    assert all(type(v) is int for v in (r.prompt, r.output, r.arrival))


def test_magnitudes_are_limited():
    with pytest.raises(InstanceError, match=r"request.prompt: must be <= 1099511627776"):
        Request(2**40 + 1, 1)
    with pytest.raises(InstanceError, match="kv_tokens: must be <= "):
        Instance(2**63 - 1, (Request(1, 1),))


def test_request_larger_than_memory_names_it():
    with pytest.raises(InfeasibleInstanceError, match=r"requests\[1\]: prompt \+ output = 11"):
        Instance(10, (Request(1, 1), Request(5, 6)))


def test_instance_level_errors():
    with pytest.raises(InstanceError, match="kv_tokens: must be >= 1, got 0"):
        Instance(0, (Request(0, 1),))
    with pytest.raises(InstanceError, match="at least one request"):
        Instance(5, ())
    with pytest.raises(InstanceError, match=r"requests\[0\]: must be a Request"):
        Instance(5, ((1, 2),))  # type: ignore[arg-type]


def test_duplicate_ids_are_refused():
    with pytest.raises(
        InstanceError, match=r"requests\[2\]\.id: 'a' is already the id of requests\[0\]"
    ):
        Instance(10, (Request(1, 1, id="a"), Request(1, 1), Request(1, 1, id="a")))
    assert Instance(10, (Request(1, 1), Request(1, 1))).n == 2  # ids are optional


def test_from_arrays_names_the_index():
    with pytest.raises(InstanceError, match=r"requests\[2\]\.output: must be >= 1, got 0"):
        Instance.from_arrays(10, [1, 2, 3], [1, 1, 0])
    with pytest.raises(InstanceError, match="lengths differ"):
        Instance.from_arrays(10, [1, 2], [1])
    inst = Instance.from_arrays(10, np.array([1, 2]), np.array([3, 4]), [0, 5], name="a")
    assert inst.arrival.tolist() == [0, 5] and inst.name == "a"


@pytest.mark.parametrize(
    ("memory", "prompt", "output", "arrival"),
    [
        (2**40, [0] * 5000, [2**40] * 5000, None),  # objectives near 1.4e19 would wrap
        (2**40, [0] * 3, [2**40] * 3, None),  # volumes near 2**79
        (10, [1, 1], [1, 1], [0, 2**40]),  # a serial horizon past 2**40 rounds
        (2**40, [0, 0], [2**21, 2**21 + 1], None),  # M times the horizon past 2**62
    ],
)
def test_instances_beyond_64_bit_arithmetic_are_refused(memory, prompt, output, arrival):
    with pytest.raises(InstanceError, match=r"^requests: too large for 64-bit arithmetic"):
        Instance.from_arrays(memory, prompt, output, arrival)


def test_the_largest_values_still_fit():
    inst = Instance.from_arrays(2**40, [2**39], [2**20])
    assert inst.volume[0] == 2**39 * 2**20 + 2**20 * (2**20 + 1) // 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Instance.from_arrays(10, 1, 1), r"^arrays: prompt must be a one-dimensional"),
        (lambda: Instance.from_arrays(10, np.array(1), [1]), r"^arrays: prompt must be"),
        (lambda: Instance.from_arrays(10, [1], [[1, 2], [3]]), r"^arrays: output must be"),
        (lambda: Instance.from_arrays(10, [1], [1], arrival="0"), r"^arrays: arrival must be"),
        (lambda: Instance.from_arrays(10, [1], [1], meta=[1, 2]), r"^meta: must be a mapping"),
        (lambda: Instance.from_arrays(10, [1], [1], name=5), r"^name: must be a string"),
    ],
)
def test_bad_arrays_name_and_meta_are_refused_in_one_line(call, message):
    with pytest.raises(InstanceError, match=message):
        call()


def test_a_huge_value_is_not_echoed_digit_by_digit():
    with pytest.raises(
        InstanceError, match=r"^kv_tokens: must be <= 1099511627776, got a number of 4000 digits$"
    ):
        Instance.from_arrays(10**3999, [1], [1])
