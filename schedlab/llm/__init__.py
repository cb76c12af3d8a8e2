"""Facts about LLMs and their traffic, shared by the offline and the online halves.

* :mod:`~schedlab.llm.traces` — readers of real request traces (Azure, length statistics,
  Mooncake, vLLM benchmark output);
* :mod:`~schedlab.llm.lengths` — the shipped prompt/output length tables derived from them;
* :mod:`~schedlab.llm.models` — model shapes, KV bytes per token and KV capacity;
* :mod:`~schedlab.llm.interconnect` — links between GPUs and the time of collectives.
"""
