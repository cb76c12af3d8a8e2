"""The pytest plugin of :mod:`schedlab.testing`: fixtures to property-test one's own
solver or serving policy.

Installed with schedlab (the ``pytest11`` entry point ``schedlab`` in
``pyproject.toml``), so a test needs no import to use them:

``check_solver``
    :func:`~schedlab.testing.properties.check_solver_properties`:
    ``check_solver(my_solver)`` property-tests a function from an instance to start rounds.
``check_policy``
    :func:`~schedlab.testing.properties.check_policy_properties`:
    ``check_policy(MyPolicy, deadlines=True)`` property-tests a policy factory.

Both are session-scoped and stateless, so they may be used inside a hypothesis test too.
The plugin imports schedlab and hypothesis only when a fixture is first used, so that
merely having schedlab installed costs a pytest run nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

__all__ = ["check_policy", "check_solver"]


@pytest.fixture(scope="session")
def check_solver() -> Callable[..., None]:
    """:func:`~schedlab.testing.properties.check_solver_properties`."""
    from schedlab.testing.properties import check_solver_properties

    return check_solver_properties


@pytest.fixture(scope="session")
def check_policy() -> Callable[..., None]:
    """:func:`~schedlab.testing.properties.check_policy_properties`."""
    from schedlab.testing.properties import check_policy_properties

    return check_policy_properties
