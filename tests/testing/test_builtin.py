"""schedlab's own policies and a solver pass the property tests a user runs on theirs
(:func:`schedlab.testing.check_policy_properties`, ``check_solver_properties``): every
registered policy keeps every token and KV block, and the SLOWeave policies keep the
per-step deadline guarantee on drawn engines, traces and monotone cost models."""

from __future__ import annotations

import pytest

from schedlab.serving.policies import POLICIES
from schedlab.testing import check_policy_properties, check_solver_properties

#: A spelling of each registered policy (``fixed`` needs its chunk).
SPELLINGS = {name: "fixed:64" if name == "fixed" else name for name in POLICIES}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_every_policy_keeps_the_invariants(name):
    check_policy_properties(
        SPELLINGS[name], deadlines=name.startswith("sloweave"), max_examples=25
    )


def test_a_registered_solver_by_name_keeps_the_invariants():
    check_solver_properties("mc-sf", max_examples=40)
