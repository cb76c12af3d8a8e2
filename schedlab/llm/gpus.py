"""GPUs schedlab knows: the memory vLLM sizes its KV cache from, and their multiprocessors.

vLLM reads a GPU's memory from CUDA (``mem_get_info``'s total), a little less than the
datasheet's figure: the driver keeps some. Where a recorded run measured that total, the
table holds it, with the file it was read from; otherwise the datasheet's figure, in GiB
(a "24 GB" card carries 24 GiB of memory chips), which overstates what CUDA reports by
about 2 % (the RTX 4090: 25,250,627,584 bytes reported against 24 GiB =
25,769,803,776). The streaming multiprocessors size one buffer of vLLM's sampler
(:func:`schedlab.llm.models.profile_peak_bytes`).

==========  ==============  ====  ===============================================
name        memory          SMs   source
==========  ==============  ====  ===============================================
RTX4090     25,250,627,584  128   as CUDA reports it (shared run's ``meta.json``)
RTXPRO6000  96 GiB          188   datasheet (96 GB GDDR7; 24,064 cores)
A100-80GB   80 GiB          108   datasheet
A100-40GB   40 GiB          108   datasheet
H100        80 GiB          132   datasheet (SXM5)
L40S        48 GiB          142   datasheet
L4          24 GiB          58    datasheet
==========  ==============  ====  ===============================================

A GPU is looked up by either name, ignoring case, spaces and punctuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schedlab.errors import UnknownNameError

__all__ = ["KNOWN_GPUS", "GpuSpec", "find_gpu", "get_gpu"]

_GIB = 2**30


@dataclass(frozen=True)
class GpuSpec:
    """One GPU.

    Attributes
    ----------
    name
        Short name, as profiles and run configurations spell it (``RTX4090``).
    device_name
        The name CUDA reports (``torch.cuda.get_device_name``).
    memory_bytes
        Its memory (module docstring).
    sms
        Streaming multiprocessors.
    source
        Where ``memory_bytes`` and ``sms`` come from.
    """

    name: str
    device_name: str
    memory_bytes: int
    sms: int
    source: str


#: The table of the module docstring.
KNOWN_GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        "RTX4090",
        "NVIDIA GeForce RTX 4090",
        25_250_627_584,
        128,
        "as CUDA reports it: hardware.device_total_memory_bytes of the shared run "
        "vllm-0.19.0_RTX4090_Llama-3.1-8B/meta.json (LLMServingSim, MIT; datasheet 24 GB); "
        "SMs: NVIDIA Ada whitepaper",
    ),
    GpuSpec(
        "RTXPRO6000",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        96 * _GIB,
        188,
        "datasheet of the RTX PRO 6000 Blackwell Server Edition: 96 GB GDDR7, 24,064 CUDA "
        "cores (188 SMs of 128)",
    ),
    GpuSpec("A100-80GB", "NVIDIA A100-SXM4-80GB", 80 * _GIB, 108, "NVIDIA A100 datasheet"),
    GpuSpec("A100-40GB", "NVIDIA A100-SXM4-40GB", 40 * _GIB, 108, "NVIDIA A100 datasheet"),
    GpuSpec("H100", "NVIDIA H100 80GB HBM3", 80 * _GIB, 132, "NVIDIA H100 datasheet (SXM5)"),
    GpuSpec("L40S", "NVIDIA L40S", 48 * _GIB, 142, "NVIDIA L40S datasheet"),
    GpuSpec("L4", "NVIDIA L4", 24 * _GIB, 58, "NVIDIA L4 datasheet"),
)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_KEY = {_key(n): gpu for gpu in KNOWN_GPUS for n in (gpu.name, gpu.device_name)}


def find_gpu(name: str) -> GpuSpec | None:
    """The GPU of ``name`` (short or CUDA name, module docstring), ``None`` if unknown."""
    return _BY_KEY.get(_key(name))


def get_gpu(name: str) -> GpuSpec:
    """The GPU of ``name``.

    Raises
    ------
    UnknownNameError
        Listing the known names.
    """
    found = find_gpu(name)
    if found is None:
        raise UnknownNameError("GPU", name, [gpu.name for gpu in KNOWN_GPUS])
    return found
