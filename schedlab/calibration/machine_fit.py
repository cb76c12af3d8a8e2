r"""Fitting a machine file on one recorded run: the terms a kernel profile cannot hold.

Given a recorded run and the calibrated kernel model of its model and GPU,
:func:`fit_machine` finds the machine's terms (:mod:`schedlab.calibration.machine_file`)
under which the simulator reproduces the run's per-request timings best:

- the host time of a step :math:`H`, always;
- the bandwidth :math:`\beta` of the link between the GPUs, when the run has a
  collective (tensor parallelism, or expert parallelism over data-parallel replicas);
  its per-message latency :math:`\ell` stays at the published figure for the GPU, or
  the assumed one (:func:`~schedlab.llm.link_evidence.link_for`; the file's
  ``fit.latency_published`` says which): a step pays :math:`H` once and
  :math:`\ell` a fixed number of times, so a run's timings cannot tell them apart, while
  :math:`\beta` scales with the tokens a step moves.

Each step of the simulated run lasts

.. math:: d_j = k_j + H + b_j / \beta,

with :math:`k_j` the kernels' time and :math:`b_j / \beta` the bandwidth part of its
collectives (:math:`b_j` bytes on the critical path; both from the cost model at two
bandwidths, exactly, the time being affine in :math:`1/\beta`). A request :math:`i` that
decoded without a break from the end of step :math:`a_i` to the end of step :math:`z_i`
on its replica took :math:`D_i = \sum_{a_i < j \le z_i} d_j`, which the run measured as
:math:`\hat D_i` (first to last token). Given the steps of one simulation, the terms are
linear: the fit solves

.. math::

    \min_{H \ge 0,\ 1/\beta \ge 0} \sum_i \Bigl(\frac{\hat D_i - K_i - n_i H - B_i/\beta}
        {\hat D_i}\Bigr)^2,
    \quad n_i = z_i - a_i,\ K_i = \sum k_j,\ B_i = \sum b_j,

by non-negative least squares (relative errors: every request weighs alike). The first
round simulates :math:`H = 0` and the published :math:`\beta`; the terms then move part
of the way to the regression's (:data:`FIRST_SHARE`, :math:`1/\beta` moving linearly, the
share halved after each round that fits no better than the one before: a schedule
depends on its step times, and full steps can cycle between two schedules), the run is
simulated again, and so on until the terms stop moving, at most ``rounds`` times (a work
budget, :data:`ROUNDS`). Of the rounds, the terms whose simulation reproduces the
requests best are kept, by

.. math::

    J = \frac{1}{n} \sum_i \log^2 \frac{D_i}{\hat D_i},

so the answer is deterministic. On a run the simulator made itself with known terms the
rounds reach them (the regression is exact once the schedule is), which the tests check.
TTFT is not fitted on: it also carries the data-parallel placement and the queueing,
which are the engine's, not the machine's; requests preempted (decoding in several
pieces) are left out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from schedlab.calibration.deployment import (
    MODELLED_RELEASE,
    Deployment,
    check_modelled,
    deployment_of,
)
from schedlab.calibration.machine_file import MachineFile, requests_sha256
from schedlab.calibration.profile_model import MAX_HOST_S, ProfileCostModel
from schedlab.calibration.recorded_run import RecordedRun
from schedlab.calibration.replay import simulate_recorded
from schedlab.calibration.run_model import mismatch
from schedlab.errors import CalibrationError
from schedlab.llm.gpus import find_gpu
from schedlab.llm.interconnect import MIN_BANDWIDTH_BPS, Link
from schedlab.llm.link_evidence import LinkEvidence, link_for
from schedlab.serving.cost_model import BatchShape, batch_time, lockstep_time
from schedlab.serving.driver import EngineRun

__all__ = ["ROUNDS", "fit_machine"]

#: Default budget of rounds (simulations of the run).
ROUNDS = 50
#: The rounds stop when the host time moves less than this (seconds) plus
#: :data:`SETTLED_SHARE` of itself, and the bandwidth less than that share of itself.
SETTLED_S = 1e-9
SETTLED_SHARE = 1e-5
#: The share of the way to the regression's terms a round moves at first; halved after
#: every round that fits no better than the one before (the schedule moves with the
#: terms, and a full step can cycle between two schedules).
FIRST_SHARE = 0.5
#: The two bandwidths at which a step's time is split into :math:`k_j` and :math:`b_j`.
_PROBES_BPS = (1e10, 1e11)


def fit_machine(
    run: RecordedRun,
    cost_model: ProfileCostModel,
    *,
    deployment: Deployment | None = None,
    rounds: int = ROUNDS,
    progress: Callable[[int, float], None] | None = None,
) -> MachineFile:
    """The machine file of ``run``'s machine, fitted on ``run`` (module docstring).

    Parameters
    ----------
    run
        The recorded run, of the vLLM release the simulator models.
    cost_model
        The calibrated kernel model of the run's model and GPU.
    deployment
        Default :func:`~schedlab.calibration.deployment.deployment_of` the run.
    rounds
        Most simulations of the run.
    progress
        Called after each round with its number and :math:`J`.

    Raises
    ------
    CalibrationError
        If the run's GPU is unknown, its deployment has a setting the simulator does not
        model, ``cost_model`` is of another model, GPU or tensor-parallel degree, or fewer
        than two of its requests decoded without a break.
    """
    deployment = deployment or deployment_of(run)
    check_modelled(deployment, allow=False, where=str(run.path))
    found = mismatch(cost_model, deployment)
    if found is not None:
        raise CalibrationError(
            f"{found}: a machine file is fitted with the run's own kernel model, or the "
            "difference would be taken for the machine's"
        )
    spec = find_gpu(deployment.hardware)
    if spec is None:
        raise CalibrationError(
            f"{run.path}: the run names no GPU schedlab knows ({deployment.hardware!r}); a "
            "machine file is of one GPU kind (schedlab.llm.gpus)"
        )
    collective = _collective(deployment)
    published = link_for(spec.name)
    latency = published.link.latency_s
    host_s, bandwidth = 0.0, published.link.bandwidth_Bps if collective else None
    tried: list[tuple[float, float, float | None]] = []
    share = FIRST_SHARE
    settled = False
    for count in range(1, rounds + 1):
        link = None if bandwidth is None else _candidate(Link(bandwidth, latency))
        model = cost_model.deployed(host_s=host_s, link=link, ep=deployment.ep)
        result, _ = simulate_recorded(run, model, deployment)
        spans = _spans(run, result)
        steps = _steps(result, cost_model, deployment, latency)
        found_s, found_Bps = _regress(spans, steps, collective, spec.link_peak_Bps)
        tried.append((_misfit(spans, result), host_s, bandwidth))
        if progress is not None:
            progress(count, tried[-1][0])
        if len(tried) > 1 and tried[-1][0] >= tried[-2][0]:
            share /= 2  # no better than the round before: smaller steps
        step_s = share * (found_s - host_s)
        host_s += step_s
        settled = abs(step_s) < SETTLED_S + SETTLED_SHARE * host_s
        if bandwidth is not None and found_Bps is not None:
            inverse = 1 / bandwidth + share * (1 / found_Bps - 1 / bandwidth)
            settled = settled and abs(1 / inverse - bandwidth) < SETTLED_SHARE * bandwidth
            bandwidth = 1 / inverse
        if settled:
            break
    misfit, host_s, bandwidth = min(tried, key=lambda t: t[0])
    return MachineFile(
        gpu=spec.name,
        vllm=".".join(map(str, MODELLED_RELEASE)),
        host_s=host_s,
        link=None if bandwidth is None else Link(bandwidth, latency),
        collective=collective,
        run=run.directory.name,
        requests_sha256=requests_sha256(run),
        cost_model=cost_model.name,
        fit={
            "misfit": misfit,
            "rounds": float(len(tried)),
            "settled": float(settled),
        }
        | ({"latency_published": float(published.kind == "published")} if collective else {}),
    )


#: The requests fitted on: the steps ending before their first and at their last token
#: (indices into the run's steps, all replicas in turn), and the measured decode time.
Spans = tuple[np.ndarray, np.ndarray, np.ndarray]


def _spans(run: RecordedRun, result: EngineRun) -> Spans:
    """The requests that decoded without a break, in the simulation and the run."""
    first, last, measured = [], [], []
    for record in result.records:
        decoded = run.tpot_s[record.index] * (record.output - 1)
        if record.finished and len(record.segments) == 1 and decoded > 0:
            a, z = record.segments[0]
            first.append(a)
            last.append(z)
            measured.append(decoded)
    if len(measured) < 2:
        raise CalibrationError(
            f"{run.path}: fewer than two requests decoded without a break: nothing to fit on"
        )
    return np.array(first), np.array(last), np.array(measured)


def _steps(
    result: EngineRun, cost_model: ProfileCostModel, deployment: Deployment, latency: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each step's kernel time :math:`k_j` (with the links' latencies) and bytes
    :math:`b_j` (module docstring), from the model without host time at two bandwidths;
    a lockstep step is timed for the whole group, an idle replica's dummy batch included."""
    low, high = (
        cost_model.deployed(host_s=0.0, link=_candidate(Link(b, latency)), ep=deployment.ep)
        for b in _PROBES_BPS
    )
    shapes = [batch.shape for batch in result.batches if batch.shape is not None]
    if len(shapes) != len(result.batches):
        raise CalibrationError("the simulation recorded steps without their batch shape")
    if deployment.lockstep:
        group: dict[float, list[int]] = {}
        for j, batch in enumerate(result.batches):
            group.setdefault(batch.start_s, []).append(j)
        idle = BatchShape(1, 1, ())

        def times(model: ProfileCostModel) -> np.ndarray:
            out = np.empty(len(shapes))
            for members in group.values():
                together = [shapes[j] for j in members]
                together += [idle] * (deployment.replicas - len(members))
                out[members] = lockstep_time(model, together)
            return out

    else:

        def times(model: ProfileCostModel) -> np.ndarray:
            return np.array([batch_time(model, shape) for shape in shapes])

    slow, fast = times(low), times(high)
    moved = (slow - fast) / (1 / _PROBES_BPS[0] - 1 / _PROBES_BPS[1])
    return slow - moved / _PROBES_BPS[0], moved


def _regress(
    spans: Spans, steps: tuple[np.ndarray, np.ndarray], collective: str, peak_Bps: float
) -> tuple[float, float | None]:
    """The host time and bandwidth that fit ``spans`` best on these steps (module
    docstring), within their ranges."""
    first, last, measured = spans
    kernels, moved = (np.concatenate([[0.0], np.cumsum(x)]) for x in steps)
    k = kernels[last + 1] - kernels[first + 1]
    columns = [(last - first).astype(float)]
    if collective:
        columns.append(moved[last + 1] - moved[first + 1])
    from scipy.optimize import nnls

    a = np.column_stack(columns) / measured[:, None]
    y = (measured - k) / measured
    solution, _ = nnls(a, y)
    host_s = float(min(solution[0], MAX_HOST_S))
    if not collective:
        return host_s, None
    inverse = float(solution[1])
    bandwidth = peak_Bps if inverse <= 1 / peak_Bps else max(1 / inverse, MIN_BANDWIDTH_BPS)
    return host_s, bandwidth


def _misfit(spans: Spans, result: EngineRun) -> float:
    """:math:`J` of a simulation (module docstring)."""
    first, last, measured = spans
    ends = result.iteration_end_s
    return float(np.mean(np.log((ends[last] - ends[first]) / measured) ** 2))


def _candidate(link: Link) -> LinkEvidence:
    """A link the fit tries."""
    return LinkEvidence(link, "machine", "a link the machine fit tries")


def _collective(deployment: Deployment) -> str:
    """The collective whose link the run shows (``""``: none)."""
    if deployment.lockstep:
        return "expert-parallel all-gather and reduce-scatter"
    if deployment.tp > 1:
        return "tensor-parallel all-reduce"
    return ""
