"""GPUs schedlab knows: the memory vLLM sizes its KV cache from, and their multiprocessors.

vLLM reads a GPU's memory from CUDA (``mem_get_info``'s total), a little less than the
datasheet's figure: the driver keeps some. Where a recorded run measured that total, the
table holds it, with the file it was read from; otherwise the datasheet's figure, in GiB
(a "24 GB" card carries 24 GiB of memory chips), which overstates what CUDA reports by
about 2 % (the RTX 4090: 25,250,627,584 bytes reported against 24 GiB =
25,769,803,776). The streaming multiprocessors size one buffer of vLLM's sampler
(:func:`schedlab.llm.models.profile_peak_bytes`).

==========  ==============  ====  ========  =======================================
name        memory          SMs   link      source
==========  ==============  ====  ========  =======================================
RTX4090     25,250,627,584  128   31.5      as CUDA reports it (shared run's ``meta.json``)
RTXPRO6000  96 GiB          188   63.0      datasheet (96 GB GDDR7; 24,064 cores)
A100-80GB   80 GiB          108   300       datasheet
A100-40GB   40 GiB          108   300       datasheet
H100        80 GiB          132   450       datasheet (SXM5)
L40S        48 GiB          142   31.5      datasheet
L4          24 GiB          58    31.5      datasheet
==========  ==============  ====  ========  =======================================

The link column is the peak of the GPU's fastest link to a peer, one direction, GB/s:
PCIe 4.0 x16 moves 16 GT/s on 16 lanes at 128b/130b, 31.5 GB/s; PCIe 5.0 x16 twice that;
NVLink 3 (A100 SXM4) 600 GB/s and NVLink 4 (H100 SXM5) 900 GB/s both directions together
(NVIDIA datasheets). No collective can move more; a machine file claiming more is refused
(:mod:`schedlab.calibration.machine_file`).

A GPU is looked up by either name, ignoring case, spaces and punctuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schedlab.errors import UnknownNameError

__all__ = ["KNOWN_GPUS", "GpuSpec", "find_gpu", "get_gpu"]

_GIB = 2**30
#: PCIe 4.0 x16, one direction: 16 GT/s x 16 lanes x 128/130 / 8 bits (module docstring).
_PCIE4 = 16e9 * 16 * 128 / 130 / 8


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
    link_peak_Bps
        The peak of its fastest link to a peer, one direction, bytes a second (module
        docstring).
    """

    name: str
    device_name: str
    memory_bytes: int
    sms: int
    source: str
    link_peak_Bps: float


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
        _PCIE4,
    ),
    GpuSpec(
        "RTXPRO6000",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        96 * _GIB,
        188,
        "datasheet of the RTX PRO 6000 Blackwell Server Edition: 96 GB GDDR7, 24,064 CUDA "
        "cores (188 SMs of 128)",
        2 * _PCIE4,
    ),
    GpuSpec("A100-80GB", "NVIDIA A100-SXM4-80GB", 80 * _GIB, 108, "NVIDIA A100 datasheet", 300e9),
    GpuSpec("A100-40GB", "NVIDIA A100-SXM4-40GB", 40 * _GIB, 108, "NVIDIA A100 datasheet", 300e9),
    GpuSpec("H100", "NVIDIA H100 80GB HBM3", 80 * _GIB, 132, "NVIDIA H100 datasheet, SXM5", 450e9),
    GpuSpec("L40S", "NVIDIA L40S", 48 * _GIB, 142, "NVIDIA L40S datasheet", _PCIE4),
    GpuSpec("L4", "NVIDIA L4", 24 * _GIB, 58, "NVIDIA L4 datasheet", _PCIE4),
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
