"""The offline problem: memory-constrained batching of a backlog of LLM requests.

The model (``docs/design.md``, section "Offline model"): a KV-cache budget ``M`` and
requests with prompt, output and release; choose start rounds minimising total latency.

Modules, from the bottom up:

* :mod:`~schedlab.offline.instance`, :mod:`~schedlab.offline.instance_io` — the data and
  its JSON format; :mod:`~schedlab.offline.schedule` — start rounds and their metrics;
  :mod:`~schedlab.offline.verify` — the independent verifier;
  :mod:`~schedlab.offline.result` — what a solve returns;
* :mod:`~schedlab.offline.backlogs`, :mod:`~schedlab.offline.families` — generators of
  instances (seeded backlogs from real length tables; the worst-case families);
* :mod:`~schedlab.offline.decoder` — list scheduling: a priority order in, a feasible
  schedule out; :mod:`~schedlab.offline.priority` — the rules' priority keys and the best
  rule's schedule;
* :mod:`~schedlab.offline.bounds` — certified lower bounds;
  :mod:`~schedlab.offline.solvers` — every solver, in one registry;
* :mod:`~schedlab.offline.solve`, :mod:`~schedlab.offline.compare`,
  :mod:`~schedlab.offline.report`, :mod:`~schedlab.offline.export` — solving, tables and
  the exact model for other MILP solvers.
"""
