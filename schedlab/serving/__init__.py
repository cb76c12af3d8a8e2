"""The online half of schedlab: an iteration-level serving simulator, cost models and
SLOWeave's deadline-safe chunk sizing (DESIGN sections 2 and 3).

Typical use::

    from schedlab.serving import SLO, capacity, simulate

    result = simulate("mixed", rate=4.0, duration_s=120, policy="sloweave",
                      slo=SLO(ttft_s=5.0, tpot_s=0.025), seed=0)
    print(result.summary.attainment)
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
from schedlab.serving.metrics import SLO, Distribution, RequestRecord, Summary
from schedlab.serving.policies import (
    POLICIES,
    Policy,
    PolicyContext,
    make_policy,
    register_policy,
)
from schedlab.serving.simulator import SimulationResult, run_engine, simulate
from schedlab.serving.sloweave import ChunkDecision, SLOWeaveState, choose_chunk
from schedlab.serving.workloads import WORKLOADS, RequestStream, make_workload, register_workload

__all__ = [
    "POLICIES",
    "SLO",
    "SLOWEAVE_DEFAULT",
    "WORKLOADS",
    "CapacityResult",
    "ChunkDecision",
    "CostModel",
    "Distribution",
    "EngineConfig",
    "LinearAttentionCostModel",
    "NonMonotoneCostModelError",
    "Policy",
    "PolicyContext",
    "RequestRecord",
    "RequestStream",
    "SLOWeaveState",
    "ServingError",
    "SimulationResult",
    "Summary",
    "SweepPoint",
    "capacity",
    "check_monotone",
    "choose_chunk",
    "get_cost_model",
    "load_cost_model",
    "make_policy",
    "make_workload",
    "register_cost_model_kind",
    "register_policy",
    "register_workload",
    "require_monotone",
    "run_engine",
    "save_cost_model",
    "simulate",
    "sweep",
]
