"""schedlab's own policies and a solver pass the property tests a user runs on theirs
(:func:`schedlab.testing.check_policy_properties`, ``check_solver_properties``): every
registered or installed policy keeps every token and KV block, and those registered as
deadline-safe (:attr:`~schedlab.serving.policy_registry.PolicySpec.deadline_safe`) keep the
per-step deadline guarantee on drawn engines, traces and monotone cost models."""

from __future__ import annotations

import pytest

from schedlab.serving.policy_registry import get_policy, policy_names
from schedlab.testing import check_policy_properties, check_solver_properties

#: A spelling of each registered or installed policy: optional arguments left out, and
#: ``fixed:C``'s chunk given.
SPELLINGS = sorted("fixed:64" if s == "fixed:C" else s.partition("[")[0] for s in policy_names())


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_policy_keeps_the_invariants(spelling):
    deadline_safe = get_policy(spelling).deadline_safe
    check_policy_properties(spelling, deadlines=deadline_safe, max_examples=25)


def test_a_registered_solver_by_name_keeps_the_invariants():
    check_solver_properties("mc-sf", max_examples=40)
