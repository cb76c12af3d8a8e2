"""The two exact-method prototypes of issue 41 (part 3), measured on Jaillet-style backlogs.

Neither is in the package: neither proved ``jaillet_instance(seed, n=15)`` within 60 s
(``docs/design.md``, "Exact methods tried beyond CP-SAT", holds the figures and the
decision). This script reproduces what was measured.

``--part orders``: is an optimum among the schedules that priority orders give? For
``jaillet_instance(seed, n)``, seeds ``0 .. --trials - 1``, it compares the ``brute-force``
optimum (seeds it does not prove are skipped) with the best over all ``n!`` orders of
(i) the strict list decoder (:class:`~schedlab.offline.decoder.StrictDecoder`: each
request at its first fit no earlier than its predecessor's start) and (ii) the serial
generation scheme (each request at its earliest fit anywhere beside those placed before
it). A branch-and-bound over priority orders can prove optimality only if (i) or (ii)
always reaches the optimum.

``--part order-bb``: depth-first branch-and-bound over strict priority orders. A node is an
order prefix, decoded by :class:`~schedlab.offline.decoder.StrictDecoder` (its starts do not
depend on the rest); with ``t`` the start of its last request and ``R`` the requests not
yet placed, every one of them starts at ``t`` or later and they form a schedule of their
own backlog, so ``sum_prefix C_i + |R| t + LB(R)`` bounds every completion below the node;
``LB(R)`` is the larger of the mean-busy-time and completion-chain bounds of the backlog
``R`` (cached per set). The incumbent is ``local-search``'s schedule; children are tried
shortest output first. It stops at ``--max-nodes`` nodes.

``--part milp``: branch-and-bound on the time-indexed formulation. At these sizes every
start column fits (at most 5,000 for ``n = 15``), so branch-and-price's pricing would
generate nothing the model lacks and the tree is HiGHS's own: one binary per start in the
window of :func:`~schedlab.offline.solvers.cpsat.start_windows` (no schedule as good as
the incumbent starts later), a memory row per round, one thread, the ``local-search``
schedule (left-shifted) as the starting incumbent. It prints the root LP (the root bound a
branch-and-price would have), the ``best`` lower bound, and HiGHS's status, incumbent and
bound at the cap.

Run: ``python benchmarks/exact_prototypes.py --part orders --sizes 6 --trials 30``,
``--part order-bb --sizes 8,10,12 --trials 3 --max-nodes 300000``,
``--part milp --sizes 12,14,15 --trials 5 --time-limit 60``.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from schedlab.offline.backlogs import jaillet_instance
from schedlab.offline.bounds import lower_bound
from schedlab.offline.bounds.mean_busy_time import mean_busy_time_value
from schedlab.offline.bounds.tall_chain import tall_chain_bound
from schedlab.offline.bounds.time_indexed import column_rows
from schedlab.offline.decoder import DecoderState, StrictDecoder
from schedlab.offline.instance import Instance
from schedlab.offline.result import Status
from schedlab.offline.schedule import total_latency
from schedlab.offline.solve import solve
from schedlab.offline.solvers.cpsat import start_windows
from schedlab.offline.solvers.left_shift import left_shift
from schedlab.offline.solvers.local_search import local_search


def serial_objective(instance: Instance, order: tuple[int, ...]) -> int:
    """Total latency of the serial generation scheme: each request in ``order`` at its
    earliest round where it fits beside the requests placed before it (a backlog)."""
    s, o, memory = instance.prompt.tolist(), instance.output.tolist(), instance.kv_tokens
    load = np.zeros(sum(o) + max(o), dtype=np.int64)
    total = 0
    for i in order:
        shape = s[i] + np.arange(1, o[i] + 1)
        t = 0
        while (load[t : t + o[i]] + shape > memory).any():
            t += 1
        load[t : t + o[i]] += shape
        total += t + o[i]
    return total


def strict_objective(instance: Instance, order: tuple[int, ...]) -> int:
    """Total latency of the strict list decode of ``order`` (a backlog)."""
    decoder = StrictDecoder(instance)
    return sum(decoder.place(i) + int(instance.output[i]) for i in order)


def orders_part(n: int, trials: int) -> None:
    """Print the seeds where the best order misses the brute-force optimum."""
    proven, misses = 0, {"strict": 0, "serial": 0}
    schemes: dict[str, Callable[[Instance, tuple[int, ...]], int]] = {
        "strict": strict_objective,
        "serial": serial_objective,
    }
    for seed in range(trials):
        instance = jaillet_instance(seed, n=n)
        optimum = solve(instance, "brute-force", bound=None)
        if optimum.status != Status.OPTIMAL:
            continue
        proven += 1
        best = {
            name: min(fn(instance, p) for p in itertools.permutations(range(n)))
            for name, fn in schemes.items()
        }
        for name, value in best.items():
            misses[name] += value != optimum.objective
        if any(value != optimum.objective for value in best.values()):
            print(f"  seed {seed}: optimum {optimum.objective}, best order {best}", flush=True)
    print(
        f"orders n = {n}: {proven} of {trials} seeds proven by brute-force; best order "
        f"misses the optimum on {misses['strict']} (strict), {misses['serial']} (serial)",
        flush=True,
    )


def order_bb(instance: Instance, max_nodes: int) -> dict[str, object]:
    """Branch-and-bound over strict orders (module docs); its best and node count."""
    n, memory = instance.n, instance.kv_tokens
    s, o = instance.prompt, instance.output
    cache: dict[int, float] = {0: 0.0}

    def rest_bound(mask: int) -> float:
        if mask not in cache:
            members = [i for i in range(n) if mask >> i & 1]
            rest = Instance.from_arrays(memory, s[members], o[members])
            cache[mask] = max(mean_busy_time_value(rest), tall_chain_bound(rest).value)
        return cache[mask]

    start = time.perf_counter()
    incumbent = total_latency(instance, local_search(instance).starts)
    best, nodes = [incumbent], [0]
    children_order = sorted(range(n), key=lambda i: (int(o[i]), int(s[i]), i))
    decoder = StrictDecoder(instance)

    def branch(rest: int, state: DecoderState, cost: int) -> None:
        nodes[0] += 1
        if nodes[0] > max_nodes:
            raise StopIteration
        if not rest:
            best[0] = min(best[0], cost)
            return
        children = []
        for i in children_order:
            if rest >> i & 1:
                decoder.restore(state)
                t = decoder.place(i)
                children.append((i, t, decoder.state()))
        for i, t, child in children:
            left = rest & ~(1 << i)
            value = cost + t + int(o[i])
            if value + left.bit_count() * t + rest_bound(left) < best[0]:
                branch(left, child, value)

    decoder.reset()
    try:
        branch((1 << n) - 1, decoder.state(), 0)
        finished = True
    except StopIteration:
        finished = False
    return {
        "incumbent": incumbent,
        "best": best[0],
        "finished": finished,
        "nodes": min(nodes[0], max_nodes),
        "root_bound": round(rest_bound((1 << n) - 1), 1),
        "wall_s": round(time.perf_counter() - start, 1),
    }


def time_indexed_milp(instance: Instance, time_limit: float) -> dict[str, object]:
    """The time-indexed integer programme on HiGHS (module docs): root LP and the run."""
    import highspy

    start = time.perf_counter()
    warm, _ = left_shift(instance, local_search(instance).starts)
    upper = total_latency(instance, warm)
    width = np.asarray(start_windows(instance, upper), dtype=np.int64) + 1
    n, columns = instance.n, int(width.sum())
    req = np.repeat(np.arange(n), width)
    first = np.cumsum(width) - width
    tau = instance.arrival[req] + np.arange(columns) - first[req]
    horizon = int((tau + instance.output[req]).max())
    starts, rows, values = column_rows(instance, np.arange(horizon + 1), req, tau)
    memory_rows = sp.csc_matrix((values, rows, starts), shape=(horizon, columns))
    assign = sp.csc_matrix((np.ones(columns), (req, np.arange(columns))), shape=(n, columns))
    matrix = sp.vstack([assign, memory_rows]).tocsc()
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = columns, n + horizon
    model.col_cost_ = (tau + instance.output[req] - instance.arrival[req]).astype(float)
    model.col_lower_, model.col_upper_ = np.zeros(columns), np.ones(columns)
    model.row_lower_ = np.concatenate([np.ones(n), np.full(horizon, -highspy.kHighsInf)])
    model.row_upper_ = np.concatenate([np.ones(n), np.full(horizon, float(instance.kv_tokens))])
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = matrix.indptr
    model.a_matrix_.index_ = matrix.indices
    model.a_matrix_.value_ = matrix.data

    def highs() -> highspy.Highs:
        solver = highspy.Highs()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("threads", 1)
        return solver

    relaxation = highs()
    relaxation.passModel(model)
    relaxation.run()
    root = relaxation.getInfo().objective_function_value
    model.integrality_ = [highspy.HighsVarType.kInteger] * columns
    mip = highs()
    mip.setOptionValue("time_limit", float(time_limit))
    mip.setOptionValue("mip_rel_gap", 0.0)
    mip.setOptionValue("mip_abs_gap", 0.99)  # integer objective
    mip.passModel(model)
    incumbent = np.zeros(columns)
    incumbent[first + warm - instance.arrival] = 1.0
    solution = highspy.HighsSolution()
    solution.col_value = incumbent.tolist()
    mip.setSolution(solution)
    mip.run()
    info = mip.getInfo()
    return {
        "columns": columns,
        "root_lp": round(root, 1),
        "incumbent": upper,
        "status": mip.modelStatusToString(mip.getModelStatus()),
        "objective": round(info.objective_function_value, 1),
        "bound": round(info.mip_dual_bound, 1),
        "nodes": info.mip_node_count,
        "wall_s": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("orders", "order-bb", "milp"), required=True)
    parser.add_argument("--sizes", default="6")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--max-nodes", type=int, default=300_000)
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    for n in (int(x) for x in args.sizes.split(",")):
        if args.part == "orders":
            orders_part(n, args.trials)
            continue
        for seed in range(args.trials):
            instance = jaillet_instance(seed, n=n)
            if args.part == "order-bb":
                row = order_bb(instance, args.max_nodes)
            else:
                row = time_indexed_milp(instance, args.time_limit)
                row["best_bound"] = round(lower_bound(instance, "best").value, 1)
            print(f"{args.part} n = {n} seed {seed}: {row}", flush=True)


if __name__ == "__main__":
    main()
