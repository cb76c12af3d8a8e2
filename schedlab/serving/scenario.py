"""A scenario: everything a simulation needs besides its requests, as one object.

:func:`~schedlab.serving.simulator.simulate`, :func:`~schedlab.serving.simulator.run_engine`,
:func:`~schedlab.serving.capacity.capacity` and :func:`~schedlab.serving.capacity.sweep`
take a :class:`Scenario` instead of forwarding a list of keywords from one to the next;
its defaults are the command line's (``schedlab simulate --help``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from schedlab.arguments_check import check_int, check_real, check_seed, check_type
from schedlab.errors import InputTypeError, ServingError, UnknownNameError
from schedlab.serving.cost_model import CostModel, cost_model_from_dict, get_cost_model
from schedlab.serving.engine_config import EngineConfig, engine_for
from schedlab.serving.engine_kinds import BUILTIN_KIND, engine_kind_names
from schedlab.serving.metrics import SLO
from schedlab.serving.policies import Policy, PolicyContext
from schedlab.serving.policy_registry import make_policy
from schedlab.serving.prediction import check_spec, prediction_spec

__all__ = [
    "DEFAULT_COST_MODEL",
    "DEFAULT_POLICY",
    "DEFAULT_SLO",
    "DEPLOYED_ENGINE",
    "MAX_REPLICAS",
    "Scenario",
]

#: The policy simulated when none is named.
DEFAULT_POLICY = "sloweave"

#: The cost model when none is named: SLOWeave's own simulator model.
DEFAULT_COST_MODEL = "sloweave-default"

#: The SLO when none is given: TTFT 5 s, TPOT 25 ms.
DEFAULT_SLO = SLO(ttft_s=5.0, tpot_s=0.025)

#: The most data-parallel replicas a scenario may have. Each is an engine simulated in
#: full, so time and memory grow linearly with the count, and a count near 10**9 would
#: exhaust memory. The largest published deployments are well below it (DeepSeek-V3's
#: decoding spans 320 GPUs).
MAX_REPLICAS = 1024

#: The default ``engine`` of a :class:`Scenario`: it stands for "the engine the cost model
#: runs on" and is replaced, when the scenario is made, by
#: :func:`~schedlab.serving.engine_config.engine_for` of the predicted cost model (a
#: calibrated model's GPU sets the KV capacity). Any other engine, ``EngineConfig()``
#: included, is used as given.
DEPLOYED_ENGINE = EngineConfig()


@dataclass(frozen=True)
class Scenario:
    """The engine, its policy, its cost models, the SLO and the seed of a simulation.

    Attributes
    ----------
    policy
        A spelling for :func:`~schedlab.serving.policy_registry.make_policy` (a fresh policy is
        built for every run), or a policy object (used as it is, by one run).
    cost_model
        The *predicted* model policies plan with: a built-in or shipped name, a JSON
        path, or an object.
    slo
        The SLO of attainment and goodput; its TPOT is the target of ``sarathi``,
        ``sloweave`` and ``sangam``.
    engine
        Engine limits and behaviours (default :data:`DEPLOYED_ENGINE`: the cost model's).
    actual_cost_model
        A second model for the actual iteration time (prediction error).
    noise_cv
        Actual time = predicted x lognormal noise of mean 1 and this coefficient of
        variation; not with ``actual_cost_model`` (which sets the actual time itself).
    margin_s
        SLOWeave's margin (``None``: the cost model's).
    seed
        Seed of every random draw (the workload's and the noise's), from 0 to ``MAX_SEED``
        (``2**63 - 1``, :mod:`schedlab.arguments_check`).
    replicas
        Data-parallel replicas, each an engine of ``engine``'s limits behind vLLM's load
        balancer (:mod:`schedlab.serving.engine`).
    lockstep
        Whether the replicas step together (mixture of experts with expert parallelism).
    prediction_cv
        The output lengths policies see: exact (0) or the true ones times a lognormal
        error of this coefficient of variation: the prediction model ``lognormal:CV``
        (:mod:`schedlab.serving.prediction`).
    engine_kind
        Whose scheduler runs each replica (:mod:`schedlab.serving.engine_kinds`):
        ``schedlab`` (this package's engine and ``policy``) or an installed kind such as
        ``vllm`` (vLLM's own scheduler; ``policy`` is then ``vllm``, or a policy that
        kind runs inside that scheduler: ``sloweave``, ``sloweave-kv``).
    engine_model
        A model folder for engine kinds that configure a model from one (``vllm``:
        its ``config.json``; ``None``: the integration's own).
    predictions
        The prediction model the output lengths policies see are drawn from, e.g.
        ``interval:0.5`` (:func:`~schedlab.serving.prediction.predict_outputs`);
        ``None``: the one ``prediction_cv`` names (:attr:`prediction_spec`). Not with a
        positive ``prediction_cv``.
    kv_source
        Where the engine's KV capacity came from (set when the scenario is made).

    Raises
    ------
    InputTypeError
        (a ``TypeError``) for a field of the wrong type (an engine that is no
        :class:`~schedlab.serving.engine_config.EngineConfig`; a policy that is neither a
        name nor a :class:`~schedlab.serving.policies.Policy`, when a run builds it; a seed
        or replica count that is no integer, NumPy's integers accepted).
    ServingError
        For a value out of its domain: a seed above ``MAX_SEED``, a margin or prediction
        CV that is NaN or negative, fields that contradict each other (the noise's range
        is checked when a run starts).
    """

    policy: str | Policy = DEFAULT_POLICY
    cost_model: str | CostModel = DEFAULT_COST_MODEL
    slo: SLO = DEFAULT_SLO
    engine: EngineConfig = DEPLOYED_ENGINE
    actual_cost_model: str | CostModel | None = None
    noise_cv: float = 0.0
    margin_s: float | None = None
    seed: int = 0
    replicas: int = 1
    lockstep: bool = False
    prediction_cv: float = 0.0
    engine_kind: str = BUILTIN_KIND
    engine_model: str | None = None
    predictions: str | None = None
    kv_source: str = field(default="", init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._check_types()
        self._resolve_engine()
        seed = check_seed(self.seed, "scenario.seed", error=ServingError)
        replicas = check_int(
            self.replicas, "scenario.replicas", 1, MAX_REPLICAS, error=ServingError
        )
        object.__setattr__(self, "seed", seed)  # NumPy's integers as int
        object.__setattr__(self, "replicas", replicas)
        if self.predictions is not None and not isinstance(self.predictions, str):
            raise ServingError(
                f"scenario.predictions: expected a model spelling, got {self.predictions!r}"
            )
        try:
            spec = self.prediction_spec
        except ServingError as error:
            raise ServingError(f"scenario.{error}") from None
        if self.predictions is not None:
            check_spec(spec, "scenario.predictions")  # now, not at the first run
        if self.actual_cost_model is not None and self.noise_cv:
            raise ServingError(
                "scenario: noise_cv and actual_cost_model: give one (the noise multiplies the "
                "predicted time; an actual model replaces it)"
            )
        if self.replicas > 1 and not isinstance(self.policy, str):
            raise ServingError("scenario.policy: several replicas need a policy by name")
        if self.engine_kind not in engine_kind_names():
            raise UnknownNameError("engine", str(self.engine_kind), engine_kind_names())
        if self.engine_kind != BUILTIN_KIND and not isinstance(self.policy, str):
            raise ServingError(
                f"scenario.policy: engine {self.engine_kind} takes a policy by name (its "
                "own scheduler forms the batches)"
            )
        if self.engine_model is not None and self.engine_kind == BUILTIN_KIND:
            raise ServingError(
                "scenario.engine_model: read only by engine kinds that configure a model "
                f"(e.g. vllm), not by {BUILTIN_KIND}"
            )

    def _check_types(self) -> None:
        """Refuse a field of the wrong type (an engine that is no :class:`EngineConfig`),
        and a margin that is NaN or negative: an
        :class:`~schedlab.errors.InputTypeError`, a :class:`ServingError`."""
        types = {
            "cost_model": (str, CostModel),
            "slo": (SLO,),
            "engine": (EngineConfig,),
            "actual_cost_model": (str, CostModel, type(None)),
            "noise_cv": (Real,),
            "lockstep": (bool,),
            "engine_kind": (str,),
            "engine_model": (str, type(None)),
        }
        for name, expected in types.items():
            check_type(getattr(self, name), expected, f"scenario.{name}")
        if self.margin_s is not None:  # the noise's range: IterationTime's
            check_real(self.margin_s, "scenario.margin_s", 0, error=ServingError)

    def _resolve_engine(self) -> None:
        """Replace :data:`DEPLOYED_ENGINE` by the cost model's engine; note the source."""
        if self.engine is not DEPLOYED_ENGINE:
            note = f"KV capacity {self.engine.kv_tokens:,} tokens (engine given)"
            object.__setattr__(self, "kv_source", note)
            return
        engine, note = engine_for(self.predicted())
        object.__setattr__(self, "engine", engine)
        object.__setattr__(self, "kv_source", note)
        object.__setattr__(self, "_derived_engine", engine)

    @property
    def prediction_spec(self) -> str:
        """The prediction model of its runs
        (:func:`~schedlab.serving.prediction.prediction_spec`)."""
        return prediction_spec(self.predictions, self.prediction_cv)

    def predicted(self) -> CostModel:
        """The predicted cost model, resolved."""
        return get_cost_model(self.cost_model)

    def actual(self) -> CostModel | None:
        """The actual cost model, resolved (``None``: the predicted one, maybe with noise)."""
        return None if self.actual_cost_model is None else get_cost_model(self.actual_cost_model)

    def build_policy(self, model: CostModel | None = None) -> Policy:
        """A fresh policy for one run (or the policy object itself).

        Raises
        ------
        InputTypeError
            (a ``TypeError``) for a policy that is neither a name nor a
            :class:`~schedlab.serving.policies.Policy` (no ``plan`` method).
        """
        if not isinstance(self.policy, str):
            if not callable(getattr(self.policy, "plan", None)):
                raise InputTypeError(
                    "scenario.policy: expected a policy name or a Policy, got "
                    f"{type(self.policy).__name__} {self.policy!r:.60}"
                )
            return self.policy
        context = PolicyContext(
            model or self.predicted(), self.engine, self.slo.tpot_s, self.margin_s
        )
        return make_policy(self.policy, context)

    def with_(self, **changes: Any) -> Scenario:
        """A copy with some fields changed; an engine that came from the cost model is
        made again from a new cost model."""
        if "engine" in changes or getattr(self, "_derived_engine", None) is not self.engine:
            return dataclasses.replace(self, **changes)
        if "cost_model" in changes:
            return dataclasses.replace(self, **changes, engine=DEPLOYED_ENGINE)
        copy = dataclasses.replace(self, **changes)
        object.__setattr__(copy, "kv_source", self.kv_source)
        object.__setattr__(copy, "_derived_engine", copy.engine)
        return copy

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (a job's parameters: :mod:`schedlab.jobs`); cost-model objects
        become their JSON form. :meth:`from_dict` rebuilds an equal scenario.

        Raises
        ------
        ServingError
            If the policy is an object, not a name.
        """
        if not isinstance(self.policy, str):
            raise ServingError("scenario.policy: a job needs the policy by name")

        def model(spec: str | CostModel | None) -> Any:
            return spec if spec is None or isinstance(spec, str) else spec.to_dict()

        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        data |= {
            "cost_model": model(self.cost_model),
            "actual_cost_model": model(self.actual_cost_model),
            "slo": dataclasses.asdict(self.slo),
            "engine": dataclasses.asdict(self.engine),
        }
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """The scenario :meth:`to_dict` described."""

        def model(spec: Any) -> str | CostModel | None:
            return cost_model_from_dict(spec, "scenario") if isinstance(spec, Mapping) else spec

        return cls(
            **{
                **data,
                "cost_model": model(data["cost_model"]),
                "actual_cost_model": model(data["actual_cost_model"]),
                "slo": SLO.restored(data["slo"]),
                "engine": EngineConfig(**data["engine"]),
            }
        )
