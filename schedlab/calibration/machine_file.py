r"""A machine file: what one machine adds to a kernel profile, fitted once on a recorded run.

A kernel profile times one GPU's kernels. A served deployment also pays for the machine
around them: the link its collectives cross and the host's work of each step
(scheduling, input preparation, the host side of sampling). A machine file holds those
terms for one machine (one GPU kind, one vLLM release), fitted on one recorded run of it
(:mod:`schedlab.calibration.machine_fit`), so that every other deployment on that machine,
of any model and parallel setting, is simulated with them:

- ``host_s``: :math:`H`, seconds of host time a step
  (:attr:`~schedlab.calibration.profile_model.ProfileCostModel.host_s`);
- ``link``: the link between the GPUs as the fitted run's collective achieved it
  (``collective`` names which: the expert-parallel all-gather and reduce-scatter, or the
  tensor-parallel all-reduce), or ``null`` when that run had none.

:func:`machine_terms` puts them on a calibrated cost model for one deployment. The link
is taken first found first used: a link the user measured (``--link``), the machine
file's, the cost model's own when it was measured at calibration, then the published
figures for the GPU (:func:`~schedlab.llm.link_evidence.link_for`), whose range is
carried as the ends of a band. Without a machine file the host time is the model's own
(0 for a model calibrated from a profile), and the output says when it is not modelled.

A file is refused, in one line naming it and its field, when it is of another GPU kind
than the deployment, of another vLLM release than the run (or than the one the simulator
models, :data:`~schedlab.calibration.deployment.MODELLED_RELEASE`), when a term is out of
physical range (a link faster than the GPU's fastest link to a peer,
:attr:`~schedlab.llm.gpus.GpuSpec.link_peak_Bps`; a negative latency; host time beyond
:data:`~schedlab.calibration.profile_model.MAX_HOST_S`), or when it is applied to the very
run it was fitted on (that is fitting, not predicting: the run's ``requests.jsonl`` is
recognised by its SHA-256).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.calibration.deployment import MODELLED_RELEASE, Deployment, release_of
from schedlab.calibration.profile_model import MAX_HOST_S, ProfileCostModel
from schedlab.calibration.recorded_run import RecordedRun
from schedlab.errors import CalibrationError, FormatError
from schedlab.json_files import check_keys, json_number, read_json, text_field
from schedlab.llm.gpus import find_gpu
from schedlab.llm.interconnect import Link
from schedlab.llm.link_evidence import LinkEvidence, link_for
from schedlab.serving.cost_model import CostModel

__all__ = [
    "KIND",
    "MachineFile",
    "MachineTerms",
    "calibrated",
    "link_ends",
    "machine_terms",
    "on_model",
    "read_machine_file",
    "requests_sha256",
    "save_machine_file",
]

#: The ``kind`` of the JSON form.
KIND = "schedlab-machine"

_KEYS = ("kind", "gpu", "vllm", "host_s", "link", "collective", "fitted_on", "fit")
_FITTED_ON_KEYS = ("run", "requests_sha256", "cost_model")


@dataclass(frozen=True)
class MachineFile:
    """One machine's terms (module docstring).

    Attributes
    ----------
    gpu
        The GPU kind, as profiles name it (``RTXPRO6000``).
    vllm
        The vLLM release of the fitted run, ``major.minor``.
    host_s
        Host time of a step, seconds.
    link
        The link between the GPUs, or ``None`` when the fitted run had no collective.
    collective
        The collective the link was fitted on (``""`` without a link).
    run, requests_sha256, cost_model
        The run fitted on, the SHA-256 of its requests file, and the kernel model used.
    fit
        Figures of the fit (free-form numbers: objective, evaluations, errors).
    path
        The file it was read from (``None``: not read from a file).
    """

    gpu: str
    vllm: str
    host_s: float
    link: Link | None
    collective: str
    run: str
    requests_sha256: str
    cost_model: str
    fit: Mapping[str, float] = field(default_factory=dict)
    path: Path | None = None

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else "machine file"

    def to_dict(self) -> dict[str, Any]:
        """JSON form, kind :data:`KIND`."""
        return {
            "kind": KIND,
            "gpu": self.gpu,
            "vllm": self.vllm,
            "host_s": self.host_s,
            "link": None if self.link is None else self.link.to_dict(),
            "collective": self.collective,
            "fitted_on": {
                "run": self.run,
                "requests_sha256": self.requests_sha256,
                "cost_model": self.cost_model,
            },
            "fit": dict(self.fit),
        }

    def note(self) -> str:
        """One line: what the file holds and where it comes from."""
        link = (
            "no link (the run had no collective)"
            if self.link is None
            else f"link {self.link.describe()} (fitted on the {self.collective})"
        )
        return (
            f"{self.where}: {self.gpu}, vLLM {self.vllm}: host time "
            f"{self.host_s * 1e3:.3g} ms a step, {link}; fitted on {self.run} with "
            f"{self.cost_model}"
        )

    def check(self, hardware: str, run: RecordedRun | None = None) -> None:
        """Refuse a file of another GPU kind than ``hardware``, of another vLLM release
        than ``run`` (else than the simulator models), or applied to the run it was
        fitted on (module docstring).

        Raises
        ------
        FormatError
            Naming the file and the field.
        """
        if hardware and _key(hardware) != _key(self.gpu):
            raise FormatError(
                f"{self.where}: gpu: fitted on {self.gpu}, this deployment runs on "
                f"{hardware}; fit a machine file on a run of that GPU"
            )
        recorded = None if run is None else run.meta.get("vllm_version")
        release = (
            _release(recorded) if recorded else _release(".".join(map(str, MODELLED_RELEASE)))
        )
        if release != self.vllm:
            source = "the run records" if recorded else "the simulator models"
            raise FormatError(
                f"{self.where}: vllm: fitted on vLLM {self.vllm}, {source} vLLM {release}"
            )
        if run is not None and requests_sha256(run) == self.requests_sha256:
            raise FormatError(
                f"{self.where}: fitted_on: this file was fitted on {self.run}, the run "
                "replayed: replaying it is fitting, not predicting; use the file on other "
                "runs and deployments of the machine"
            )


@dataclass(frozen=True)
class MachineTerms:
    """A calibrated model with a deployment's machine terms on it.

    Attributes
    ----------
    model
        The model, deployed (link, expert parallelism, host time).
    notes
        One line a term: the evidence each came from.
    link
        The link's evidence, whose ends give a band when it is published or assumed
        (``None``: no collective).
    """

    model: ProfileCostModel
    notes: tuple[str, ...]
    link: LinkEvidence | None


def machine_terms(
    model: ProfileCostModel, deployment: Deployment, machine: MachineFile | None = None
) -> MachineTerms:
    """``model`` with the link, expert parallelism and host time of ``deployment`` on
    ``machine`` (module docstring: the link's evidence order)."""
    given = deployment.link
    evidence = given if given is None or given.kind == "measured" else _link(model, machine)
    evidence = evidence or given  # nothing better than the deployment's published link
    notes = [_host_note(model, machine)]
    if evidence is not None:
        notes.insert(0, evidence.note)
    deployed = model.deployed(
        link=evidence, ep=deployment.ep, host_s=None if machine is None else machine.host_s
    )
    return MachineTerms(deployed, tuple(notes), evidence)


def on_model(model: CostModel, machine: MachineFile) -> tuple[ProfileCostModel, str]:
    """``model`` with ``machine``'s host time, and for tensor-parallel collectives its
    link (the module docstring's order: the file's before the model's own); and a line
    saying so. For a simulation without a recorded run (``simulate``, ``capacity``,
    ``sweep``, ``cluster``).

    Raises
    ------
    CalibrationError
        If ``model`` is not a calibrated (``profile-grid``) model.
    FormatError
        If ``machine`` is of another GPU than ``model`` or another vLLM release than the
        simulator models.
    """
    model = calibrated(model, machine)
    machine.check(model.hardware)
    link = _link(model, machine) if model.parallelism.tp > 1 else None
    return model.deployed(link=link, host_s=machine.host_s), machine.note()


def calibrated(model: CostModel, machine: MachineFile) -> ProfileCostModel:
    """``model``, refused unless it is calibrated: ``machine``'s terms go on nothing else.

    Raises
    ------
    CalibrationError
        If ``model`` is not a ``profile-grid`` model.
    """
    if not isinstance(model, ProfileCostModel):
        raise CalibrationError(
            f"--machine {machine.where}: its terms go on a calibrated cost model (kind "
            f"profile-grid); {model.name} is not one"
        )
    return model


def link_ends(model: CostModel) -> LinkEvidence | None:
    """The evidence of a calibrated model's tensor-parallel link when it is published or
    assumed (:func:`~schedlab.llm.link_evidence.link_for` its GPU), whose ends
    (:meth:`~schedlab.llm.link_evidence.LinkEvidence.at_ends`) a simulation is repeated at
    to show each metric's band (also for a link whose evidence the file does not record);
    ``None`` when the model has no collective or its link was measured or fitted."""
    if not isinstance(model, ProfileCostModel):
        return None
    par = model.parallelism
    if par.tp <= 1 or par.link is None or par.link_evidence in ("measured", "machine"):
        return None
    return link_for(model.hardware)


def _link(model: ProfileCostModel, machine: MachineFile | None) -> LinkEvidence | None:
    """The link a machine file gives, else the model's own when it was measured, else
    ``None`` (a link whose evidence the file does not record, from before it did, is
    taken for the published one it most likely was)."""
    if machine is not None and machine.link is not None:
        return LinkEvidence(
            machine.link,
            "machine",
            f"link {machine.link.describe()}: {machine.where}, fitted on the "
            f"{machine.collective} of {machine.run}",
        )
    own = model.parallelism
    if own.link is None or own.link_evidence != "measured":
        return None
    return LinkEvidence(
        own.link,
        "measured",
        f"link {own.link.describe()}: the cost model {model.name}'s own, measured",
    )


def _host_note(model: ProfileCostModel, machine: MachineFile | None) -> str:
    """Where the host time of a step comes from."""
    if machine is not None:
        return f"host time {machine.host_s * 1e3:.3g} ms a step ({machine.where})"
    if model.host_s > 0:
        return f"host time {model.host_s * 1e3:.3g} ms a step (the cost model's own)"
    return (
        "host time of a step NOT MODELLED (0): no machine file (schedlab calibrate machine "
        "RUN fits one on a recorded run of this machine)"
    )


def requests_sha256(run: RecordedRun) -> str:
    """SHA-256 of the file ``run`` was read from."""
    return hashlib.sha256(run.path.read_bytes()).hexdigest()


def save_machine_file(machine: MachineFile, path: str | Path) -> None:
    """Write ``machine`` as JSON."""
    Path(path).write_text(json.dumps(machine.to_dict(), indent=1) + "\n", encoding="utf-8")


def read_machine_file(path: str | Path) -> MachineFile:
    """The machine file at ``path``.

    Raises
    ------
    FormatError
        Naming the file and field: not a machine file, a field missing or malformed, a
        term out of physical range (module docstring).
    """
    path = Path(path)
    where = str(path)
    data = read_json(path, "machine file")
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise FormatError(f"{where}: kind: not a machine file (expected kind {KIND!r})")
    check_keys(data, _KEYS, where)
    for key in ("gpu", "vllm", "host_s", "fitted_on"):
        if key not in data:
            raise FormatError(f"{where}: {key}: missing")
    gpu = text_field(data, "gpu", "", where)
    spec = find_gpu(gpu)
    if spec is None:
        raise FormatError(f"{where}: gpu: unknown GPU {gpu!r} (schedlab.llm.gpus)")
    vllm = text_field(data, "vllm", "", where)
    if _release(vllm) != vllm:
        raise FormatError(f"{where}: vllm: expected a release such as '0.19', got {vllm!r}")
    host_s = json_number(data["host_s"], f"{where}: host_s")
    if not 0 <= host_s <= MAX_HOST_S:
        raise FormatError(
            f"{where}: host_s: expected seconds from 0 to {MAX_HOST_S:g}, got {host_s!r}"
        )
    link = None if data.get("link") is None else Link.from_dict(data["link"], f"{where}: link")
    if link is not None and link.bandwidth_Bps > spec.link_peak_Bps:
        raise FormatError(
            f"{where}: link.bandwidth_Bps: {link.bandwidth_Bps / 1e9:.3g} GB/s is above the "
            f"peak of {spec.name}'s link to a peer, {spec.link_peak_Bps / 1e9:.3g} GB/s"
        )
    collective = text_field(data, "collective", "", where)
    if (link is None) != (collective == ""):
        raise FormatError(
            f"{where}: collective: names the collective a link was fitted on, and only then"
        )
    fitted = data["fitted_on"]
    if not isinstance(fitted, dict):
        raise FormatError(f"{where}: fitted_on: expected an object")
    check_keys(fitted, _FITTED_ON_KEYS, f"{where}: fitted_on")
    for key in _FITTED_ON_KEYS:
        if not text_field(fitted, key, "", f"{where}: fitted_on"):
            raise FormatError(f"{where}: fitted_on.{key}: missing or empty")
    if not re.fullmatch(r"[0-9a-f]{64}", fitted["requests_sha256"]):
        raise FormatError(f"{where}: fitted_on.requests_sha256: expected 64 hexadecimal digits")
    fit = data.get("fit", {})
    if not isinstance(fit, dict):
        raise FormatError(f"{where}: fit: expected an object")
    return MachineFile(
        gpu=spec.name,
        vllm=vllm,
        host_s=host_s,
        link=link,
        collective=collective,
        run=fitted["run"],
        requests_sha256=fitted["requests_sha256"],
        cost_model=fitted["cost_model"],
        fit={str(k): json_number(v, f"{where}: fit.{k}") for k, v in fit.items()},
        path=path,
    )


def _release(text: Any) -> str:
    """``major.minor`` of a version text (``v0.19.0`` -> ``0.19``; ``""`` if none)."""
    found = release_of(text)
    return "" if found is None else f"{found[0]}.{found[1]}"


def _key(name: str) -> str:
    spec = find_gpu(name)
    return spec.name if spec is not None else name
