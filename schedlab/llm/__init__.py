"""Facts about LLMs and their traffic, shared by the offline and the online halves.

* :mod:`~schedlab.llm.traces` — readers of real request traces (Azure, length statistics,
  Mooncake, vLLM benchmark output);
* :mod:`~schedlab.llm.lengths` — the shipped prompt/output length tables derived from them;
* :mod:`~schedlab.llm.models` — model shapes, KV bytes per token and KV capacity (vLLM's
  memory profiling);
* :mod:`~schedlab.llm.gpus` — the GPUs known, their memory and its source;
* :mod:`~schedlab.llm.gpu_deployment` — the GPUs a calibrated cost model describes, and
  the KV capacity they imply;
* :mod:`~schedlab.llm.interconnect` — links between GPUs and the time of collectives.
"""
