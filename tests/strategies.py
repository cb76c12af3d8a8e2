"""Hypothesis strategies for random instances, shared by the test modules."""

from __future__ import annotations

from hypothesis import strategies as st

from schedlab.offline.instance import Instance, Request


@st.composite
def instances(
    draw: st.DrawFn,
    max_n: int = 8,
    max_memory: int = 30,
    max_arrival: int = 5,
    max_output: int = 12,
) -> Instance:
    """Small feasible instances: every request fits alone (``s + o <= M``)."""
    memory = draw(st.integers(2, max_memory))
    n = draw(st.integers(1, max_n))
    requests = []
    for _ in range(n):
        output = draw(st.integers(1, min(max_output, memory)))
        prompt = draw(st.integers(0, memory - output))
        arrival = draw(st.integers(0, max_arrival))
        requests.append(Request(prompt, output, arrival))
    return Instance(memory, tuple(requests))
