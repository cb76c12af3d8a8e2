"""The vLLM release the integration drives, and importing it quietly and offline."""

from __future__ import annotations

import logging
import os

from schedlab.errors import ServingError

__all__ = ["ANY_VERSION_ENV", "SUPPORTED_VERSION", "require_vllm"]

#: The vLLM release the integration is written against and tested with (the recorded
#: runs' version).
SUPPORTED_VERSION = "0.19.0"
#: Set to ``1`` to run with another vLLM release (``benchmarks/vllm_differential.py
#: --any-version``): the differential test then reports how that release differs.
ANY_VERSION_ENV = "SCHEDLAB_VLLM_ANY_VERSION"


def require_vllm() -> str:
    """Import vLLM quietly and offline; its version.

    Raises
    ------
    ServingError
        If vLLM is not installed (naming the extra), or is another release than
        :data:`SUPPORTED_VERSION` while :data:`ANY_VERSION_ENV` is not set.
    """
    # torch warns, on every import on a machine without CUDA, that it found no CUDA
    # runtime: a scheduler on a CPU needs none, and a one-line error stays one line
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    try:
        import vllm
    except ImportError as error:
        raise ServingError(
            f"engine vllm: needs vLLM {SUPPORTED_VERSION}, not installed ({error}); install "
            "the extra: pip install -e '.[vllm]'"
        ) from None
    version = str(getattr(vllm, "__version__", "unknown"))
    if version != SUPPORTED_VERSION and os.environ.get(ANY_VERSION_ENV) != "1":
        raise ServingError(
            f"engine vllm: vLLM {version} is installed; schedlab drives {SUPPORTED_VERSION} "
            f"(pip install -e '.[vllm]'; set {ANY_VERSION_ENV}=1 to try another release)"
        )
    return version
