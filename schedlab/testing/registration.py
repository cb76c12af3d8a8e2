"""Hypothesis's setup hook: ``st.from_type`` draws schedlab's types with
:mod:`schedlab.testing.strategies`.

Hypothesis calls :func:`register_types` when it is imported (the ``hypothesis`` entry
point of schedlab's ``pyproject.toml``), so ``st.from_type(Instance)`` and
``st.builds(f)`` of a function annotated with :class:`~schedlab.offline.instance.Instance`
or :class:`~schedlab.serving.engine_config.EngineConfig` work without importing
:mod:`schedlab.testing` first. The strategies themselves are imported on first draw.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["register_types"]


def _strategy(name: str) -> Any:
    """The strategy ``name`` of :mod:`schedlab.testing.strategies`, with its defaults."""
    return getattr(import_module("schedlab.testing.strategies"), name)()


def register_types() -> None:
    """Register :func:`~schedlab.testing.strategies.instances` for
    :class:`~schedlab.offline.instance.Instance` and
    :func:`~schedlab.testing.strategies.engine_configs` for
    :class:`~schedlab.serving.engine_config.EngineConfig`."""
    from hypothesis import strategies as st

    from schedlab.offline.instance import Instance
    from schedlab.serving.engine_config import EngineConfig

    st.register_type_strategy(Instance, st.deferred(lambda: _strategy("instances")))
    st.register_type_strategy(EngineConfig, st.deferred(lambda: _strategy("engine_configs")))
