r"""SLOWeave inside vLLM: a scheduler class ``vllm serve --scheduler-cls`` can load.

:class:`SLOWeaveScheduler` is vLLM 0.19.0's ``Scheduler`` with one change: before each
``schedule()`` it asks a schedlab policy (``sloweave`` or ``sloweave-kv``,
:mod:`schedlab.serving.policies`) for this step's prefill chunks, seeing vLLM's own state
through :class:`VllmView`, and hands vLLM the token budget ``n + \sum c`` (the running
decodes plus those chunks) for that one call. vLLM then forms the batch by its own rules
with that budget:

* its running phase schedules the decodes first, one token each (a partly prefilled
  request is always the newest admitted, hence last in ``running``), then the partial
  prefill with ``min(left, budget left)`` tokens;
* its waiting phase admits requests first come first served, each with
  ``min(left, budget left)`` tokens, and stops at the first that does not fit.

The policy fills chunks in the same order, each as large as its deadline allows, and
stops at the first chunk that does not complete its request, so when vLLM admits what
the policy planned, it schedules exactly the planned chunks; when it admits less (its
gate, its free blocks, a preemption), the batch has fewer tokens, each with the same
prior context, and a cost model non-decreasing in the chunk (``proofs/sloweave.md``)
predicts it no slower. So every step keeps the deadline SLOWeave kept
(``proofs/sloweave.md``): whenever the decode-only batch meets every running decode's
next-token deadline, the step's predicted time does too.

Deadlines are counted from the time of the last step whose output carried tokens, read
from :attr:`SLOWeaveScheduler.clock` (``time.monotonic`` in a real server; schedlab's
virtual clock in simulation). The class supports synchronous scheduling only (a batch
planned one step ahead cannot know when its decodes' latest tokens come): run
``vllm serve --no-async-scheduling``.

Importing this module imports vLLM (it refuses, in one line, a missing or other release).
Configured from the environment in a real server:

=====================================  =================================================
``SCHEDLAB_SLOWEAVE_COST_MODEL``       a cost-model name or JSON file (required)
``SCHEDLAB_SLOWEAVE_TPOT_S``           the TPOT target in seconds (default 0.025)
``SCHEDLAB_SLOWEAVE_POLICY``           ``sloweave`` (default) or ``sloweave-kv``
``SCHEDLAB_SLOWEAVE_MARGIN_S``         SLOWeave's margin (default: the cost model's)
=====================================  =================================================

and in simulation by :meth:`SLOWeaveScheduler.configure`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from schedlab.errors import ServingError
from schedlab.integrations.vllm.release import require_vllm
from schedlab.serving import view as rules
from schedlab.serving.cost_model import CostModel, get_cost_model
from schedlab.serving.engine_config import EngineConfig
from schedlab.serving.policies import Policy, PolicyContext
from schedlab.serving.policy_registry import POLICIES, make_policy
from schedlab.serving.prediction import Estimate
from schedlab.serving.view import RequestView

require_vllm()  # one line naming the extra, before vLLM's own ImportError

from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402

__all__ = [
    "SLOWeaveScheduler",
    "VllmView",
    "check_policy",
    "engine_config_of",
    "vllm_policies",
]

#: Environment variables of a real server's configuration (module docstring).
ENV_COST_MODEL = "SCHEDLAB_SLOWEAVE_COST_MODEL"
ENV_TPOT = "SCHEDLAB_SLOWEAVE_TPOT_S"
ENV_POLICY = "SCHEDLAB_SLOWEAVE_POLICY"
ENV_MARGIN = "SCHEDLAB_SLOWEAVE_MARGIN_S"


def vllm_policies() -> tuple[str, ...]:
    """The built-in and registered policies whose spec says vLLM's token budget
    reproduces their plans (:attr:`~schedlab.serving.policy_registry.PolicySpec.in_vllm`,
    module docstring)."""
    return tuple(name for name, spec in POLICIES.entries().items() if spec.in_vllm)


def check_policy(spec: str) -> str:
    """``spec`` if it names a policy of :func:`vllm_policies` (with or without
    ``:C_max``)."""
    if spec.partition(":")[0] not in vllm_policies():
        raise ServingError(
            f"engine vllm: policy {spec!r}: vLLM's scheduler runs vllm, or "
            f"{' or '.join(vllm_policies())} through SLOWeaveScheduler"
        )
    return spec


class _RequestView:
    """A vLLM request as a policy reads it (:class:`~schedlab.serving.view.RequestView`)."""

    __slots__ = (
        "admitted",
        "done",
        "held_hits",
        "index",
        "predicted_lower",
        "predicted_output",
        "predicted_upper",
        "prompt",
        "request",
        "target",
    )

    def __init__(self, request: Any, admitted: bool, done: int, held_hits: int = 0) -> None:
        self.request = request
        self.index = _index(request.request_id)
        self.prompt = int(request.num_prompt_tokens)
        self.target = int(request.num_tokens)
        self.done = done
        self.held_hits = held_hits
        self.admitted = admitted
        self.predicted_output = int(request.max_tokens)
        self.predicted_lower = self.predicted_upper = self.predicted_output


def _index(request_id: str) -> int:
    return int(request_id) if request_id.isdigit() else abs(hash(request_id))


def _decoding(request: Any) -> bool:
    """A running request whose step computes only its newest token (it has output, and
    every earlier token is in its KV)."""
    return request.num_output_tokens > 0 and request.num_computed_tokens >= request.num_tokens - 1


class VllmView(rules.BlockRules):
    """vLLM's scheduler state as the :class:`~schedlab.serving.view.EngineView` a policy
    plans with, read just before ``schedule()``.

    Decodes attend to their computed tokens plus the new one; waiting requests are
    offered first come first served, each with the tokens vLLM's prefix cache holds for
    it (``KVCacheManager.get_computed_blocks``) and how many of those blocks running
    requests hold; a request's predicted output is its ``max_tokens``. The plan only sets
    the step's token budget (vLLM then schedules by its own rules), so :meth:`take` only
    counts the blocks and seats a chunk uses; a waiting request's hits are those of
    vLLM's cache before the step.
    """

    def __init__(self, scheduler: Any, config: EngineConfig, now_s: float, last_s: float):
        self._scheduler = scheduler
        self.config = config
        self.now_s = now_s
        self.last_token_s = last_s
        running = list(scheduler.running)
        self._decodes = [r for r in running if _decoding(r)]
        self._partials = [r for r in running if not _decoding(r)]
        kv = [r.num_computed_tokens + 1 for r in self._decodes]
        self.n_decode = len(kv)
        self.decode_kv = sum(kv)
        self.decode_kv_max = max(kv) if kv else None
        self.decode_kv_min = min(kv) if kv else None
        self.free_blocks = scheduler.kv_cache_manager.block_pool.get_num_free_blocks()
        self.free_seats = config.max_num_seqs - len(running)
        self.admitting = True

    @property
    def has_prefill_work(self) -> bool:
        return bool(self._partials or len(self._scheduler.waiting))

    def prefill_candidates(self) -> Iterator[RequestView]:
        for request in self._partials:
            yield _RequestView(request, True, int(request.num_computed_tokens))
        manager = self._scheduler.kv_cache_manager
        for request in self._scheduler.waiting:
            done, held = int(request.num_computed_tokens), 0
            if done == 0 and self.config.prefix_caching:
                blocks, hit = manager.get_computed_blocks(request)
                done = int(hit)
                held = sum(block.ref_cnt > 0 for block in blocks.blocks[0])
            yield _RequestView(request, False, done, held)

    def take(self, request: RequestView, chunk: int) -> bool:
        """Count the free blocks and the seat the chunk uses (vLLM allocates later)."""
        self.free_blocks -= self.chunk_blocks(request, chunk)
        self.free_seats -= 0 if request.admitted else 1
        return True

    def projected_kv_peak(self, estimate: Estimate = "point") -> int:
        """:meth:`schedlab.serving.policy_view.PolicyView.projected_kv_peak` on vLLM's requests:
        each decode holds its KV after this step plus a block's slack for
        ``max(max_tokens - generated, 1)`` more steps; a partly prefilled request is
        reserved at the blocks of its final size. A request's whole interval is its
        ``max_tokens``, so every ``estimate`` plans the same."""
        config = self.config
        slack = config.block_size - 1
        holds = [r.num_computed_tokens + 1 + slack for r in self._decodes]
        rests = [max(int(r.max_tokens) - r.num_output_tokens, 1) for r in self._decodes]
        reserved = sum(
            rules.reserved_tokens(
                config, _RequestView(r, True, int(r.num_computed_tokens)), estimate
            )
            for r in self._partials
        )
        return reserved + rules.decode_kv_peak(holds, rests)


def engine_config_of(vllm_config: Any) -> EngineConfig:
    """The :class:`EngineConfig` a vLLM configuration describes (the inverse of
    :func:`~schedlab.integrations.vllm.config.config_mapping`)."""
    cache, scheduler = vllm_config.cache_config, vllm_config.scheduler_config
    return EngineConfig(
        kv_tokens=(cache.num_gpu_blocks - 1) * cache.block_size,
        block_size=cache.block_size,
        max_num_seqs=scheduler.max_num_seqs,
        max_num_batched_tokens=scheduler.max_num_batched_tokens,
        prefix_caching=bool(cache.enable_prefix_caching),
        reserve_full_prompt=bool(scheduler.scheduler_reserve_full_isl),
        async_scheduling=False,
    )


def _settings_from(environ: Mapping[str, str]) -> tuple[str, CostModel, float, float | None]:
    """``(policy, cost model, TPOT, margin)`` from a real server's environment."""
    spec = environ.get(ENV_COST_MODEL)
    if not spec:
        raise ServingError(f"SLOWeaveScheduler: set {ENV_COST_MODEL} to a cost-model name or file")
    numbers: dict[str, float | None] = {}
    for name, default in ((ENV_TPOT, 0.025), (ENV_MARGIN, None)):
        text = environ.get(name)
        try:
            value = default if text is None else float(text)
        except ValueError:
            raise ServingError(f"SLOWeaveScheduler: {name}: not a number: {text!r}") from None
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ServingError(f"SLOWeaveScheduler: {name}: must be finite and >= 0, got {text}")
        numbers[name] = value
    tpot = numbers[ENV_TPOT]
    assert tpot is not None
    policy = check_policy(environ.get(ENV_POLICY, "sloweave"))
    return policy, get_cost_model(spec), tpot, numbers[ENV_MARGIN]


class SLOWeaveScheduler(Scheduler):
    """vLLM's scheduler with SLOWeave's deadline-safe prefill (module docstring).

    Attributes
    ----------
    clock
        Where time is read (``time.monotonic`` unless :meth:`configure` gives another).
    last_token_s
        When the last step that carried tokens ended (``None`` before the first).
    planner
        The schedlab policy whose plan sets each step's token budget (vLLM's own
        ``policy`` attribute is its queue order, ``fcfs``).
    """

    max_num_scheduled_tokens: int  # vLLM's token budget of one schedule(), set by vLLM

    def __init__(
        self, *args: Any, planning: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """vLLM's arguments; ``planning``: the arguments of :meth:`configure` (default:
        read from the environment, as a real server's are).

        Raises
        ------
        ServingError
            Under asynchronous scheduling, or when neither ``planning`` nor the
            environment gives a cost model.
        """
        super().__init__(*args, **kwargs)
        if self.scheduler_config.async_scheduling:
            raise ServingError(
                "SLOWeaveScheduler: needs synchronous scheduling (vllm serve "
                "--no-async-scheduling): a batch planned a step ahead cannot know when its "
                "decodes' latest tokens come"
            )
        self.engine_config = engine_config_of(self.vllm_config)
        self.clock: Callable[[], float] = time.monotonic
        self.last_token_s: float | None = None
        self.planner: Policy
        if planning is None:
            self.configure(*_settings_from(os.environ))
        else:
            self.configure(**planning)

    def configure(
        self,
        policy: str,
        model: CostModel,
        tpot_s: float,
        margin_s: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """Plan with schedlab policy ``policy`` on cost model ``model`` for a TPOT of
        ``tpot_s`` (and SLOWeave's margin), reading time from ``clock``."""
        context = PolicyContext(model, self.engine_config, tpot_s, margin_s)
        self.planner = make_policy(check_policy(policy), context)
        if clock is not None:
            self.clock = clock

    def schedule(self) -> Any:
        """vLLM's ``schedule()`` under the token budget of the policy's plan."""
        now = self.clock()
        last = now if self.last_token_s is None else self.last_token_s
        view = VllmView(self, self.engine_config, now, last)
        if not view.has_prefill_work:
            return super().schedule()
        plan = self.planner.plan(view)
        budget = view.n_decode + sum(chunk for _, chunk in plan)
        saved = self.max_num_scheduled_tokens
        self.max_num_scheduled_tokens = min(saved, budget)
        try:
            return super().schedule()
        finally:
            self.max_num_scheduled_tokens = saved

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        """vLLM's, noting the time when the step carried tokens."""
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        if any(model_runner_output.sampled_token_ids):
            self.last_token_s = self.clock()
        return outputs
