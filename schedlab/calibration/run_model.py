"""The cost model of a recorded run's deployment: shipped, or calibrated from its profile.

:func:`model_for_run` gives a run that names no cost model the one of its model, GPU and
tensor-parallel degree (:func:`check_model_fits` refuses another):

1. a shipped model (``schedlab/data/cost_models``) fitted for exactly these;
2. else the matching profile under the data directory
   (``profiles/llmservingsim/<GPU>/<org>/<model>/<dtype>/`` holding ``meta.yaml`` and a
   ``tp<t>/`` folder, :func:`find_profile`: ``meta.yaml``'s ``model`` and ``hardware``
   the run's, ``t`` the run's tensor-parallel degree), calibrated
   (:func:`~schedlab.calibration.fit.calibrate`) and cached as JSON (:func:`cache_directory`),
   keyed by the SHA-256 of every file of the profile that a calibration may read, of
   schedlab's version and of the code that fits, so that a changed profile, release or
   fitting code fits again. Expert
   parallelism and the link are the deployment's, applied when the run is replayed.

A run whose setting no profile covers is refused with the list of the profiles found.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from schedlab.calibration.deployment import Deployment
from schedlab.calibration.fit import calibrate
from schedlab.calibration.profile_model import ProfileCostModel
from schedlab.calibration.profiles import read_meta_yaml
from schedlab.calibration.recorded_run import RecordedRun
from schedlab.errors import CalibrationError, FileAccessError, FormatError, SchedlabError
from schedlab.llm.gpus import find_gpu
from schedlab.serving.cost_model import (
    CostModel,
    load_cost_model,
    save_cost_model,
    shipped_cost_models,
)
from schedlab.serving.workloads import data_directory

__all__ = [
    "CACHE_ENV",
    "cache_directory",
    "cached_calibration",
    "check_model_fits",
    "find_profile",
    "mismatch",
    "model_for_run",
    "shipped_model_for",
]

#: The environment variable naming the cache directory.
CACHE_ENV = "SCHEDLAB_CACHE"

#: Where profiles lie under the data directory.
PROFILES = Path("profiles") / "llmservingsim"


def _same_text(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def _same_gpu(a: str, b: str) -> bool:
    """Whether two GPU names name one GPU (:mod:`schedlab.llm.gpus`, else as text)."""
    known_a, known_b = find_gpu(a), find_gpu(b)
    if known_a is not None and known_b is not None:
        return known_a == known_b
    return re.sub(r"[^a-z0-9]", "", a.lower()) == re.sub(r"[^a-z0-9]", "", b.lower())


def mismatch(cost_model: ProfileCostModel, deployment: Deployment) -> str | None:
    """How ``cost_model`` differs from the deployment's model, GPU or TP degree, if it does."""
    pairs = [
        ("model", cost_model.model, deployment.model),
        ("hardware", cost_model.hardware, deployment.hardware),
        ("tensor parallelism", cost_model.parallelism.tp, deployment.tp),
    ]
    for what, mine, theirs in pairs:
        same = _same_gpu if what == "hardware" else _same_text
        if mine != "" and theirs != "" and not same(str(mine), str(theirs)):
            return f"cost model {cost_model.name!r} is for {what} {mine}, the run's is {theirs}"
    return None


def check_model_fits(cost_model: CostModel, deployment: Deployment) -> None:
    """Refuse a ``profile-grid`` model of another model, GPU or tensor-parallel degree than
    the deployment's (others cannot be checked).

    Raises
    ------
    CalibrationError
        Naming both sides.
    """
    if isinstance(cost_model, ProfileCostModel):
        found = mismatch(cost_model, deployment)
        if found is not None:
            raise CalibrationError(
                f"{found}: calibrate the run's own profile (or allow the mismatch explicitly)"
            )


def shipped_model_for(deployment: Deployment) -> ProfileCostModel:
    """The shipped ``profile-grid`` model fitted for the deployment's model, GPU and TP
    degree (all three must be recorded).

    Raises
    ------
    CalibrationError
        If the run does not say, or no shipped model matches.
    """
    if not (deployment.model and deployment.hardware):
        raise CalibrationError(
            "the run records no model or hardware name: give a cost model explicitly"
        )
    for path in shipped_cost_models().values():
        model = load_cost_model(path)
        if not (isinstance(model, ProfileCostModel) and model.model and model.hardware):
            continue
        if mismatch(model, deployment) is None:
            return model
    raise CalibrationError(
        f"no shipped cost model for {deployment.model} on {deployment.hardware} with "
        f"tp {deployment.tp} (shipped: {', '.join(shipped_cost_models())}): calibrate "
        "its profile (schedlab calibrate) and give the model explicitly"
    )


def find_profile(data_dir: Path, model: str, hardware: str, tp: int) -> Path:
    """The profile directory under ``data_dir`` (module docstring) of ``model`` on
    ``hardware`` with a ``tp<tp>/`` folder.

    Raises
    ------
    CalibrationError
        If none is, listing every profile found with its TP degrees.
    """
    root = data_dir / PROFILES
    found: list[str] = []
    for meta_path in sorted(root.glob("**/meta.yaml")):
        try:
            meta = read_meta_yaml(meta_path)
        except SchedlabError:
            continue
        name, gpu = str(meta.get("model", "")), str(meta.get("hardware", ""))
        degrees = sorted(
            int(sub.name[2:])
            for sub in meta_path.parent.glob("tp*")
            if sub.is_dir() and sub.name[2:].isdigit()
        )
        found.append(f"{name} on {gpu} tp{'/'.join(map(str, degrees))}")
        if name.lower() == model.lower() and _same_gpu(gpu, hardware) and tp in degrees:
            return meta_path.parent
    listing = "; ".join(found) if found else f"none under {root}"
    raise CalibrationError(
        f"no profile for {model} on {hardware} with tp {tp} (profiles: {listing}): give a "
        "cost model (--cost-model NAME or FILE.json)"
    )


def cache_directory() -> Path:
    """``$SCHEDLAB_CACHE``, else ``$XDG_CACHE_HOME/schedlab``, else
    ``~/.cache/schedlab``."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "schedlab"


#: The source files whose code makes a calibration: the calibration package and the
#: models, GPUs and links it reads (``schedlab.llm``).
_FITTING_CODE = (
    *sorted(Path(__file__).parent.glob("*.py")),
    *sorted((Path(__file__).parents[1] / "llm").glob("*.py")),
)


def _profile_key(profile_dir: Path, tp: int) -> str:
    """SHA-256 over schedlab's version, the code that fits (:data:`_FITTING_CODE`), ``tp``
    and every file a calibration of ``tp`` may read (``meta.yaml``, ``tp<tp>/`` and
    ``tp1/``, where ``moe.csv`` may come from)."""
    try:
        release = version("schedlab")
    except PackageNotFoundError:  # run from a source tree that is not installed
        release = "source"
    digest = hashlib.sha256(f"schedlab {release}; tp {tp}\n".encode())
    for code in _FITTING_CODE:  # a fit changed by the code, not the release, fits again
        digest.update(hashlib.sha256(code.read_bytes()).digest())
    files = [profile_dir / "meta.yaml"]
    for folder in sorted({f"tp{tp}", "tp1"}):
        files += sorted(p for p in (profile_dir / folder).glob("*") if p.is_file())
    for path in files:
        digest.update(f"{path.relative_to(profile_dir)}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def cached_calibration(profile_dir: Path, tp: int) -> tuple[ProfileCostModel, Path, bool]:
    """The model calibrated from ``profile_dir``'s ``tp<tp>/``, from the cache or fitted
    and cached now: ``(model, cache file, whether it was cached)``. A cache file that
    cannot be read is fitted again and replaced.

    Raises
    ------
    CalibrationError, FormatError
        If the profile cannot be calibrated.
    FileAccessError
        If the cache directory cannot be written.
    """
    meta = read_meta_yaml(profile_dir / "meta.yaml")
    model_name = str(meta.get("model", ""))
    key = _profile_key(profile_dir, tp)
    stem = re.sub(r"[^a-z0-9.]+", "-", f"{meta.get('hardware', '')}_{model_name}".lower())
    path = cache_directory() / "cost_models" / f"{stem}_tp{tp}-{key[:16]}.json"
    if path.is_file():
        try:
            cached = load_cost_model(path)
        except FormatError:
            cached = None
        if isinstance(cached, ProfileCostModel):
            return cached, path, True
    model, _ = calibrate(profile_dir, model_name, tp=tp)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".json.part")
        os.close(handle)
        save_cost_model(model, temporary)
        os.replace(temporary, path)
    except OSError as exc:
        raise FileAccessError(
            f"{path.parent}: cannot write the calibrated model ({exc.strerror}); set "
            f"{CACHE_ENV} to a writable directory"
        ) from None
    return model, path, False


def model_for_run(
    deployment: Deployment, data_dir: str | Path | None = None, *, run: RecordedRun | None = None
) -> tuple[ProfileCostModel, str]:
    """The cost model of ``deployment``'s model, GPU and TP degree (module docstring),
    and a line saying which it is: shipped, or which profile and setting it was
    calibrated from. ``run``, if given, is named when it records no model or GPU.

    Raises
    ------
    CalibrationError
        If the deployment does not name its model and GPU, or no shipped model and no
        profile under the data directory matches.
    DataNotFoundError
        If no shipped model matches and there is no data directory.
    """
    if run is not None and not (deployment.model and deployment.hardware):
        files = {"meta.json": run.meta, "config.json": run.config}
        absent = [name for name, data in files.items() if not data]
        said = f"there is no {' or '.join(absent)} beside it" if absent else "no record"
        raise CalibrationError(
            f"{run.path}: {said} to name the run's model and GPU, so no cost model can be "
            "chosen: give one (--cost-model NAME or FILE.json)"
        )
    try:
        model = shipped_model_for(deployment)
        return model, f"cost model {model.name} (shipped; {model.source})"
    except CalibrationError:
        if not (deployment.model and deployment.hardware):
            raise
    profile = find_profile(
        data_directory(data_dir, holding="profiles/"),
        deployment.model,
        deployment.hardware,
        deployment.tp,
    )
    model, path, hit = cached_calibration(profile, deployment.tp)
    experts = f", experts over ep {deployment.ep}" if deployment.ep > 1 else ""
    return model, (
        f"cost model {model.name}: calibrated from profile {profile} at tp{deployment.tp} "
        f"(the run's tensor-parallel degree{experts}); "
        f"{'read from the cache' if hit else 'fitted now, cached'} at {path}"
    )
