"""Calibration of iteration-cost models from real GPU profiles, and replay of real runs.

Importing this package registers the cost-model kind ``profile-grid`` with
:mod:`schedlab.serving.cost_model`, so fitted models load through
:func:`~schedlab.serving.cost_model.load_cost_model` and the simulator. The fitting and
replay modules (and scipy) are imported on first use, so the command line starts fast.

Modules: :mod:`~schedlab.calibration.profiles` (readers), :mod:`~.model_shapes`,
:mod:`~.curves`, :mod:`~.attention_grid`, :mod:`~.profile_model` (the cost model),
:mod:`~.fit` (:func:`calibrate`), :mod:`~.replay`, :mod:`~.cli`.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

from schedlab.calibration.profile_model import KIND, ProfileCostModel

__all__ = [
    "KIND",
    "ProfileCostModel",
    "calibrate",
    "get_model_shape",
    "read_llmservingsim_profile",
    "read_recorded_run",
    "read_splitwise_perf_model",
    "read_vidur_mlp",
    "register_model_shape",
    "replay",
    "shipped_model_path",
]

#: Fitted models shipped in ``schedlab/data/cost_models`` (name -> file name).
_LAZY = {
    "calibrate": "schedlab.calibration.fit",
    "get_model_shape": "schedlab.llm.models",
    "register_model_shape": "schedlab.llm.models",
    "read_llmservingsim_profile": "schedlab.calibration.profiles",
    "read_splitwise_perf_model": "schedlab.calibration.profiles",
    "read_vidur_mlp": "schedlab.calibration.profiles",
    "read_recorded_run": "schedlab.calibration.replay",
    "replay": "schedlab.calibration.replay",
}


def shipped_model_path(name: str = "rtxpro6000_llama-3.1-8b") -> Path:
    """Path of a shipped fitted model (load it with ``load_cost_model``)."""
    from schedlab.errors import UnknownNameError
    from schedlab.serving.cost_model import shipped_cost_models

    shipped = shipped_cost_models()
    if name not in shipped:
        raise UnknownNameError("shipped cost model", name, tuple(shipped))
    return shipped[name]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'schedlab.calibration' has no attribute {name!r}")
