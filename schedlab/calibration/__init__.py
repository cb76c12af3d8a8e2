"""Calibration of iteration-cost models from real GPU profiles, and replay of real runs.

Modules: :mod:`~schedlab.calibration.profiles` (the reader of LLMServingSim profiles),
:mod:`~.curves` (monotone 1-D fits), :mod:`~.attention_grid` (the 4-D attention table),
:mod:`~.profile_model` (the calibrated cost model, kind ``profile-grid``),
:mod:`~.fit` (:func:`calibrate`), :mod:`~.run_model` (a run's cost model: shipped, or
its profile calibrated and cached), :mod:`~.replay` (a recorded run on the simulator),
:mod:`~.machine_file` and :mod:`~.machine_fit` (a machine's host time and link, fitted
on one recorded run, :func:`fit_machine`, for every other deployment on it) and
:mod:`~.profile_table` (one CSV of per-op timings, checked by :mod:`~.table_checks`,
read by a registered format) and :mod:`~.profile_exchange` (such a table to and from a
profile directory).
scipy is imported when a fit runs, so importing this package stays cheap.
"""

from __future__ import annotations

from pathlib import Path

from schedlab.calibration.fit import calibrate
from schedlab.calibration.machine_file import MachineFile, read_machine_file, save_machine_file
from schedlab.calibration.machine_fit import fit_machine
from schedlab.calibration.profile_model import KIND, ProfileCostModel
from schedlab.calibration.profiles import read_llmservingsim_profile
from schedlab.calibration.recorded_run import read_recorded_run
from schedlab.calibration.replay import replay
from schedlab.errors import UnknownNameError
from schedlab.serving.cost_model import shipped_cost_models

__all__ = [
    "KIND",
    "MachineFile",
    "ProfileCostModel",
    "calibrate",
    "fit_machine",
    "read_llmservingsim_profile",
    "read_machine_file",
    "read_recorded_run",
    "replay",
    "save_machine_file",
    "shipped_model_path",
]


def shipped_model_path(name: str = "rtxpro6000_llama-3.1-8b") -> Path:
    """Path of a shipped fitted model (load it with ``load_cost_model``)."""
    shipped = shipped_cost_models()
    if name not in shipped:
        raise UnknownNameError("shipped cost model", name, tuple(shipped))
    return shipped[name]
