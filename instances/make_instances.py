"""Rebuild the shipped instances: ``python instances/make_instances.py``.

* ``tiny-*.json``: random instances with 5–7 requests on which the best
  list-scheduling rule is *not* optimal; the optimum is proven by exhaustive enumeration
  (solver ``brute-force``) and recorded in ``meta``.
* ``jaillet-*.json``: three draws of Jaillet et al.'s synthetic protocol.
* ``mixed-n{50,200,1000}.json``: half ShareGPT chat, half arXiv summarization, from the
  shipped length tables; ``M`` is :data:`schedlab.offline.backlogs.DEFAULT_KV_TOKENS` (Llama-3.1-8B
  on a 24 GiB GPU). ``mixed-n200.json`` is the README's default instance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from schedlab import Instance, solve, write_instance
from schedlab.offline.backlogs import DEFAULT_KV_TOKENS, jaillet_instance, mixed_backlog

HERE = Path(__file__).parent
RULES = ("fcfs", "sof", "total-size", "svf", "mc-sf-backfill")


def tiny_instances(count: int = 6, seed: int = 2026) -> list[Instance]:
    """Random tiny instances where every rule misses the proven optimum."""
    rng = np.random.default_rng(seed)
    found: list[Instance] = []
    while len(found) < count:
        n = int(rng.integers(5, 8))
        memory = int(rng.integers(6, 16))
        prompt = rng.integers(0, 4, n)
        output = np.array([rng.integers(1, min(8, memory - s) + 1) for s in prompt.tolist()])
        arrival = rng.integers(0, 4, n) if len(found) % 2 else np.zeros(n, dtype=np.int64)
        draft = Instance.from_arrays(memory, prompt, output, arrival)
        exact = solve(draft, "brute-force", bound=None)
        best_rule = min(solve(draft, r, bound=None).objective for r in RULES)
        if best_rule <= exact.objective:
            continue
        meta = {
            "optimum": exact.objective,
            "optimal_starts": exact.starts.tolist(),
            "best_rule_objective": best_rule,
            "proof": "exhaustive enumeration of all start rounds p_i in "
            "[a_i, a_i + U - sum(o)] with U the best rule's objective "
            "(schedlab solver 'brute-force', branch and bound; see its module docs)",
        }
        name = f"tiny-{len(found) + 1}"
        found.append(Instance(memory, draft.requests, name, meta))
    return found


def main() -> None:
    for inst in tiny_instances():
        write_instance(inst, HERE / f"{inst.name}.json")
    for seed in (1, 2, 3):
        inst = jaillet_instance(seed, name=f"jaillet-s{seed}")
        write_instance(inst, HERE / f"{inst.name}.json")
    for n in (50, 200, 1000):
        inst = mixed_backlog(n, DEFAULT_KV_TOKENS, 0.5, seed=n, name=f"mixed-n{n}")
        meta = dict(inst.meta) | {
            "memory_source": "Llama-3.1-8B bf16 (128 KiB KV per token) on a 24 GiB GPU at "
            "gpu_memory_utilization 0.9 with 1 GiB activation reserve: "
            "floor((0.9*24 GiB - 16.06 GB - 1 GiB) / 128 KiB); see schedlab/kv_capacity.py",
            "lengths_source": "schedlab length tables sharegpt (etalon, Apache-2.0) and arxiv "
            "(vidur, MIT)",
        }
        write_instance(
            Instance(inst.kv_tokens, inst.requests, inst.name, meta), HERE / f"{inst.name}.json"
        )
    print("wrote", ", ".join(sorted(p.name for p in HERE.glob("*.json"))))


if __name__ == "__main__":
    main()
