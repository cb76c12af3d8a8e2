"""The online half of schedlab: an iteration-level serving simulator, cost models and
SLOWeave's deadline-safe chunk sizing (``docs/design.md``, sections "Online model",
"SLOWeave" and "Cost models and calibration").

Typical use::

    from schedlab.serving import SLO, Scenario, capacity, simulate

    scenario = Scenario(policy="sloweave", slo=SLO(ttft_s=5.0, tpot_s=0.025), seed=0)
    result = simulate("mixed", scenario, rate=4.0, duration_s=120)
    print(result.summary.attainment)

Modules, from the bottom up: :mod:`~.workloads` (request streams), :mod:`~.cost_model`,
:mod:`~.engine_config`, :mod:`~.kv_cache` (the KV block manager), :mod:`~.metrics`
(SLO kinds), :mod:`~.fluid` (closed-form headroom), :mod:`~.prediction` (output-length
predictions), :mod:`~.sloweave` (the chunk chooser), :mod:`~.view` (what a policy sees),
:mod:`~.iteration` (an iteration's duration and record), :mod:`~.request_state`,
:mod:`~.policies`, :mod:`~.engine_kinds` (the engine interface), :mod:`~.engine` (one
replica), :mod:`~.driver` (the event loop), :mod:`~.scenario`, :mod:`~.simulator` and
:mod:`~.capacity`; :mod:`~.kv_transfer`, :mod:`~.routers` and :mod:`~.cluster` (engines
in roles behind a router).
"""

from schedlab.errors import NonMonotoneCostModelError, ServingError
from schedlab.serving.capacity import CapacityResult, SweepPoint, capacity, sweep
from schedlab.serving.cost_model import (
    SLOWEAVE_DEFAULT,
    CostModel,
    LinearAttentionCostModel,
    check_monotone,
    get_cost_model,
    load_cost_model,
    register_cost_model_kind,
    require_monotone,
    save_cost_model,
)
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.fluid import FluidLoad, Headroom, headroom
from schedlab.serving.kv_cache import KVCache
from schedlab.serving.metrics import SLO, SLO_KINDS, Distribution, RequestRecord, Summary
from schedlab.serving.policies import Policy, PolicyContext
from schedlab.serving.policy_registry import POLICIES, PolicySpec, make_policy, register_policy
from schedlab.serving.routers import RouterSpec, register_router
from schedlab.serving.scenario import Scenario
from schedlab.serving.simulator import SimulationResult, run_engine, simulate
from schedlab.serving.sloweave import ChunkDecision, SLOWeaveState, choose_chunk
from schedlab.serving.workloads import (
    WORKLOADS,
    RequestStream,
    WorkloadSpec,
    make_workload,
    register_workload,
)

__all__ = [
    "POLICIES",
    "SLO",
    "SLOWEAVE_DEFAULT",
    "SLO_KINDS",
    "WORKLOADS",
    "CapacityResult",
    "ChunkDecision",
    "CostModel",
    "Distribution",
    "EngineConfig",
    "FluidLoad",
    "Headroom",
    "KVCache",
    "LinearAttentionCostModel",
    "NonMonotoneCostModelError",
    "Policy",
    "PolicyContext",
    "PolicySpec",
    "RequestRecord",
    "RequestStream",
    "RouterSpec",
    "SLOWeaveState",
    "Scenario",
    "ServingError",
    "SimulationResult",
    "Summary",
    "SweepPoint",
    "WorkloadSpec",
    "capacity",
    "check_monotone",
    "choose_chunk",
    "get_cost_model",
    "headroom",
    "load_cost_model",
    "make_policy",
    "make_workload",
    "register_cost_model_kind",
    "register_policy",
    "register_router",
    "register_workload",
    "require_monotone",
    "run_engine",
    "save_cost_model",
    "simulate",
    "sweep",
]
