"""vLLM's own scheduler in schedlab's loop (the optional extra ``schedlab[vllm]``).

:mod:`.release` names the vLLM release driven and imports it; :mod:`.config` maps an
:class:`~schedlab.serving.engine_config.EngineConfig` onto vLLM's configuration and
builds its scheduler; :mod:`.engine` drives that scheduler as one replica of the driver
(engine kind ``vllm``); :mod:`.sloweave` is SLOWeave as a vLLM scheduler class
(``SLOWeaveScheduler``, also reachable here); :mod:`.differential` holds schedlab's
engine to vLLM's step by step. Importing this package does not import vLLM; building an
engine, or reaching ``SLOWeaveScheduler``, does.
"""

from __future__ import annotations

from typing import Any

from schedlab.integrations.vllm.config import (
    MODEL_DIR,
    VllmSetup,
    build_scheduler,
    config_mapping,
)
from schedlab.integrations.vllm.release import ANY_VERSION_ENV, SUPPORTED_VERSION, require_vllm

__all__ = [
    "ANY_VERSION_ENV",
    "MODEL_DIR",
    "SUPPORTED_VERSION",
    "SLOWeaveScheduler",
    "VllmSetup",
    "build_scheduler",
    "config_mapping",
    "make_replica",
    "require_vllm",
]


def make_replica(
    scenario: Any, *, timing: Any, index: int = 0, record_batches: bool = False
) -> Any:
    """The engine-kind factory of ``vllm`` (:mod:`schedlab.serving.engine_kinds`): one
    :class:`~schedlab.integrations.vllm.engine.VllmEngine` for ``scenario``."""
    require_vllm()
    from schedlab.integrations.vllm.engine import VllmEngine

    if scenario.policy != "vllm":
        from schedlab.integrations.vllm.sloweave import check_policy

        check_policy(scenario.policy)

    return VllmEngine(
        VllmSetup(scenario.engine, scenario.engine_model, scenario.policy),
        timing,
        slo=scenario.slo,
        index=index,
        record_batches=record_batches,
        margin_s=scenario.margin_s,
    )


def __getattr__(name: str) -> Any:
    """``SLOWeaveScheduler`` from :mod:`.sloweave`, imported (with vLLM) on first use."""
    if name == "SLOWeaveScheduler":
        from schedlab.integrations.vllm.sloweave import SLOWeaveScheduler

        return SLOWeaveScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
