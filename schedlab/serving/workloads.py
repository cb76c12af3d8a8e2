r"""Request streams for the simulator: lengths, arrival processes, trace replay.

Named workloads (:data:`WORKLOADS`):

``chat``
    ShareGPT conversations (Llama-2 tokenizer; the shipped ``sharegpt`` quantile table),
    Poisson arrivals.
``long``
    arXiv long-document summarization (``arxiv`` table): long prompts, short outputs,
    Poisson arrivals.
``mixed``
    Each request independently ``chat`` or ``long`` with probability 1/2 each, Poisson
    arrivals: short conversations and long-context summarization in one queue. The even
    split is a neutral choice, not fitted to any result.
``bursty``
    ``chat`` lengths with Gamma inter-arrival times of coefficient of variation 3
    (shape :math:`k = 1/\mathrm{CV}^2 = 1/9`, mean :math:`1/\lambda`): bursts of closely
    spaced requests separated by long gaps, at the same mean rate as Poisson (CV 1).
``conversations``
    ``chat`` lengths with shared prefixes (:class:`~schedlab.serving.prefix.SharedPrefixModel`
    at its defaults: 8 system prompts of 1,024 tokens that 80% of new conversations start
    with; half the requests continue one of the 64 latest conversations, resending its
    last prompt), Poisson arrivals.
``azure-code``, ``azure-conv``
    Replay of the Azure LLM inference traces (Patel et al., "Splitwise", ISCA 2024;
    CC-BY-4.0), lengths and timestamps, read from ``DATA_DIR/traces``: the directory the
    caller passes, else the one the environment variable ``SCHEDLAB_DATA`` names, else
    ``shared/data`` beside the checkout (:func:`data_directory`).
``mooncake``
    Replay of the Mooncake trace (Qin et al., FAST 2025; Apache-2.0) from
    ``DATA_DIR/traces``, with its shared prefixes (:mod:`schedlab.serving.prefix`).

Any trace file path (see :mod:`schedlab.llm.traces`) is also a workload: replayed if it has
timestamps, otherwise its lengths are resampled under Poisson arrivals. The named
workloads are data in :data:`WORKLOADS`; :func:`register_workload` adds one, and an
installed package adds one with a :class:`WorkloadSpec` in the entry-point group
:data:`ENTRY_POINTS` (:mod:`schedlab.plugins`).

Random streams use common random numbers: for a seed, request ``k`` gets the same unit-rate
inter-arrival gap and the same lengths at every rate (arrival times are the unit-rate
times divided by :math:`\lambda`), so attainment varies smoothly with the rate and a
capacity bisection compares like with like.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from schedlab.arguments_check import check_types
from schedlab.errors import DataNotFoundError, ServingError, UnknownNameError
from schedlab.llm.lengths import builtin_table
from schedlab.llm.traces import Trace, check_lengths, check_time_order, read_trace
from schedlab.registry import Registry
from schedlab.serving.prefix import SharedPrefixes, SharedPrefixModel

__all__ = [
    "BUILTIN_WORKLOADS",
    "DEFAULT_RATE_RPS",
    "DEFAULT_WORKLOAD",
    "ENTRY_POINTS",
    "MAX_WINDOW_S",
    "WORKLOADS",
    "EmpiricalLengths",
    "LengthSampler",
    "RandomWorkload",
    "RequestStream",
    "TraceReplay",
    "Workload",
    "WorkloadSpec",
    "check_trace",
    "data_directory",
    "get_workload",
    "make_workload",
    "register_workload",
    "workload_names",
]

#: The environment variable naming the directory of the real data (``traces/`` ...).
DATA_ENV = "SCHEDLAB_DATA"

#: Draws are made in blocks of this many requests, so request ``k``'s random numbers do
#: not depend on how many requests a rate needs.
BLOCK = 4096

#: The most requests a stream may hold unless the caller raises it (``max_requests``):
#: each costs the simulator about half a kilobyte, so the default keeps a run near 1 GB.
MAX_REQUESTS = 2_000_000


def _check_size(name: str, expected: float, max_requests: int, what: str) -> None:
    """Refuse a stream of about ``expected`` requests beyond ``max_requests``, before
    drawing it."""
    if expected > max_requests:
        raise ServingError(
            f"workload {name!r}: about {expected:,.0f} requests ({what}) exceed the limit of "
            f"{max_requests:,}; lower the rate or the window (simulate and cluster also "
            "take a higher limit: --max-requests N; Python: max_requests=N)"
        )


#: The longest arrival window, and the latest arrival, of a stream (seconds; 11.6 days).
#: Event times are absolute floats: at 10**6 s their spacing is 1.2e-10 s, under the 1 ns
#: tolerance of every SLO test (:data:`schedlab.serving.metrics.TIME_TOLERANCE_S`); at
#: 10**13 s it is 2 ms, and a window of 5e13 s measured every TPOT as 0.
MAX_WINDOW_S = 1e6


#: The workload simulated when none is named.
DEFAULT_WORKLOAD = "chat"

#: The mean arrival rate (requests/s) of a synthetic workload when none is given: on
#: ``chat`` with the default cost model and SLO, SLOWeave and fixed 2,048-token chunks
#: meet it (attainment 1.000) while vLLM's default budget does not (0.115) (README,
#: "Serving simulator and SLOWeave").
DEFAULT_RATE_RPS = 15.0

#: Coefficient of variation of the ``bursty`` workload's inter-arrival times.
BURSTY_CV = 3.0


@dataclass(frozen=True)
class RequestStream:
    """Requests to simulate, in arrival order.

    Attributes
    ----------
    name
        Workload name.
    arrival_s
        Arrival times (seconds), non-decreasing, ``>= 0``.
    prompt, output
        Token counts, ``>= 1`` each (an engine prefills at least one token and emits at
        least one).
    duration_s
        The arrival window (goodput is per second of it).
    prefix
        Which prompts share prefixes (:mod:`schedlab.serving.prefix`), or ``None``: no
        two requests share a token.
    """

    name: str
    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    duration_s: float
    prefix: SharedPrefixes | None = None

    def __post_init__(self) -> None:
        n = self.arrival_s.size
        if self.prompt.size != n or self.output.size != n:
            raise ServingError(f"stream {self.name!r}: arrival, prompt and output lengths differ")
        where = self.name
        bad = np.flatnonzero(~np.isfinite(self.arrival_s) | (self.arrival_s < 0))
        if bad.size:
            raise ServingError(f"stream {where!r}: request {bad[0]}: arrival must be finite >= 0")
        bad = np.flatnonzero(np.diff(self.arrival_s) < 0)
        if bad.size:
            raise ServingError(
                f"stream {where!r}: request {bad[0] + 1}: arrivals must be non-decreasing"
            )
        for column in ("prompt", "output"):
            values = getattr(self, column)
            bad = np.flatnonzero(values < 1)
            if bad.size:
                raise ServingError(
                    f"stream {where!r}: request {bad[0]}: {column} must be >= 1, "
                    f"got {values[bad[0]]}"
                )
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ServingError(
                f"stream {where!r}: duration must be positive, got {self.duration_s}"
            )
        if self.prefix is not None:
            self.prefix.check(self.prompt, f"stream {where!r}")
        latest = max(self.duration_s, float(self.arrival_s[-1]) if n else 0.0)
        if latest > MAX_WINDOW_S:
            raise ServingError(
                f"stream {where!r}: arrivals over {latest:,.0f} s, beyond the "
                f"{MAX_WINDOW_S:,.0f} s that times are resolved to 1 ns in (MAX_WINDOW_S); "
                "shorten the window"
            )

    def __len__(self) -> int:
        return int(self.arrival_s.size)


class LengthSampler(Protocol):
    """Draws ``n`` (prompt, output) pairs, ``int64`` arrays."""

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class EmpiricalLengths:
    """Resample the (prompt, output) pairs of a trace uniformly with replacement."""

    prompt: np.ndarray
    output: np.ndarray

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        pick = rng.integers(0, self.prompt.size, n)
        return self.prompt[pick], self.output[pick]


def _positive(value: float | None, what: str) -> float:
    if value is None or not (math.isfinite(value) and value > 0):
        raise ServingError(f"{what}: must be a positive finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RandomWorkload:
    """A mixture of length samplers under a renewal arrival process.

    Attributes
    ----------
    name
        Workload name.
    mix
        ``(weight, sampler)`` pairs; each request picks one with these probabilities.
    arrival_cv
        Coefficient of variation of inter-arrival times: 1 is Poisson (exponential gaps),
        otherwise Gamma gaps with shape :math:`1/\\mathrm{CV}^2`.
    shared_prefixes
        System prompts and multi-turn conversations added to the drawn prompts
        (:class:`~schedlab.serving.prefix.SharedPrefixModel`), or ``None``.
    """

    name: str
    mix: tuple[tuple[float, LengthSampler], ...]
    arrival_cv: float = 1.0
    shared_prefixes: SharedPrefixModel | None = None

    def generate(
        self,
        rate: float | None,
        duration_s: float,
        seed: int,
        *,
        max_requests: int = MAX_REQUESTS,
    ) -> RequestStream:
        """Requests arriving in ``[0, duration_s)`` at mean rate ``rate`` (per second;
        ``None``: :data:`DEFAULT_RATE_RPS`); refused beforehand when ``rate * duration_s``
        exceeds ``max_requests``."""
        rate = _positive(
            DEFAULT_RATE_RPS if rate is None else rate, f"workload {self.name!r}: rate"
        )
        duration_s = _positive(duration_s, f"workload {self.name!r}: duration")
        _check_size(self.name, rate * duration_s, max_requests, f"{rate:g}/s x {duration_s:g} s")
        streams = np.random.SeedSequence(seed).spawn(2 + len(self.mix))
        gap_rng, pick_rng, *length_rngs = (np.random.default_rng(s) for s in streams)
        horizon = rate * duration_s  # in unit-rate time
        unit: list[np.ndarray] = []
        total = 0.0
        while total < horizon:
            block = np.cumsum(self._gaps(gap_rng)) + total
            unit.append(block)
            total = float(block[-1])
        times = np.concatenate(unit)
        n = int(np.searchsorted(times, horizon, side="left"))
        blocks = -(-n // BLOCK)
        weights = np.array([w for w, _ in self.mix], dtype=float)
        choice = np.searchsorted(
            np.cumsum(weights / weights.sum()), pick_rng.random(blocks * BLOCK), side="right"
        )[:n]
        choice = np.minimum(choice, len(self.mix) - 1)
        prompt = np.empty(n, np.int64)
        output = np.empty(n, np.int64)
        for j, ((_, sampler), rng) in enumerate(zip(self.mix, length_rngs, strict=True)):
            drawn = [sampler.sample(BLOCK, rng) for _ in range(blocks)]
            p = np.concatenate([d[0] for d in drawn] or [np.empty(0, np.int64)])[:n]
            o = np.concatenate([d[1] for d in drawn] or [np.empty(0, np.int64)])[:n]
            mask = choice == j
            prompt[mask] = p[mask]
            output[mask] = o[mask]
        drawn_prompt = np.maximum(prompt, 1)
        prefix = None
        if self.shared_prefixes is not None:  # its own stream: the lengths stay the same
            rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(3 + len(self.mix))[-1])
            drawn_prompt, prefix = self.shared_prefixes.apply(drawn_prompt, rng)
        return RequestStream(
            self.name, times[:n] / rate, drawn_prompt, np.maximum(output, 1), duration_s, prefix
        )

    def _gaps(self, rng: np.random.Generator) -> np.ndarray:
        if self.arrival_cv == 1.0:
            return rng.exponential(1.0, BLOCK)
        shape = 1.0 / self.arrival_cv**2
        return rng.gamma(shape, 1.0 / shape, BLOCK)


@dataclass(frozen=True)
class TraceReplay:
    """Replay a trace's timestamps and lengths, optionally time-scaled.

    With ``rate`` given, times are multiplied by ``native_rate / rate`` (native rate =
    requests per second of the trace's span), so the replay keeps the trace's burst
    structure at the requested mean rate; the stream's name says so
    (``azure-code (timestamps x0.31 to 4 req/s)``). Requests arriving at or after
    ``duration_s`` are dropped (``None`` keeps the whole trace). The trace must list its
    requests in time order and give each at least one prompt and one output token
    (:func:`check_trace`).
    """

    name: str
    path: Path
    #: The checked trace where the caller has read it already (:func:`make_workload` reads
    #: a file to tell a replay from a table of lengths); ``None``: read on first use.
    known: Trace | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def trace(self) -> Trace:
        """The checked trace (:func:`check_trace`), read from :attr:`path` at most once."""
        if self.known is not None:
            return self.known
        return check_trace(read_trace(self.path), self.path)

    def generate(
        self,
        rate: float | None,
        duration_s: float | None,
        seed: int,
        *,
        max_requests: int = MAX_REQUESTS,
    ) -> RequestStream:
        """The replayed stream; ``seed`` is unused (a replay has no randomness)."""
        del seed
        trace = self.trace
        _check_size(self.name, trace.prompt.size, max_requests, "the trace's")
        if trace.arrival_s is None:
            raise ServingError(f"{self.path}: has no timestamps to replay")
        times = trace.arrival_s - trace.arrival_s[0]
        name = self.name
        if rate is not None:
            span = float(times[-1])
            if span <= 0:
                raise ServingError(f"{self.path}: all requests arrive at once; cannot rescale")
            factor = (times.size / span) / _positive(rate, f"replay {self.name!r}: rate")
            times = times * factor
            name = f"{self.name} (timestamps x{factor:.3g} to {rate:g} req/s)"
        if duration_s is None:  # the whole trace; its span is the arrival window
            keep = np.ones(times.size, dtype=bool)
            duration_s = float(times[-1]) if times[-1] > 0 else 1.0
        else:
            keep = times < _positive(duration_s, f"replay {self.name!r}: duration")
        prefix = None
        if trace.hash_ids is not None:
            prefix = SharedPrefixes(trace.hash_block_tokens, trace.hash_ids).subset(keep)
        return RequestStream(
            name, times[keep], trace.prompt[keep], trace.output[keep], float(duration_s), prefix
        )


Workload = RandomWorkload | TraceReplay


#: The data directory when neither a caller nor ``$SCHEDLAB_DATA`` names one:
#: ``shared/data`` beside the checkout the package runs from (``docs/getting-started.md``).
BESIDE_CHECKOUT = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def data_directory(data_dir: str | Path | None = None, *, holding: str = "traces/") -> Path:
    """The data directory: ``data_dir`` if given, else ``$SCHEDLAB_DATA``, else
    :data:`BESIDE_CHECKOUT` if it exists.

    Raises
    ------
    DataNotFoundError
        If none is, naming what the directory must hold (``holding``).
    """
    if data_dir is not None:
        return Path(data_dir)
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    if BESIDE_CHECKOUT.is_dir():
        return BESIDE_CHECKOUT
    raise DataNotFoundError(
        f"no data directory: pass it (--data-dir) or set {DATA_ENV} to the folder holding "
        f"{holding}"
    )


def _replay(name: str, file: str, what: str) -> Callable[[Path | None], Workload]:
    def factory(data_dir: Path | None) -> Workload:
        path = data_directory(data_dir) / "traces" / file
        if not path.is_file():
            raise DataNotFoundError(
                f"{path}: {what} trace not found; pass the data directory (--data-dir) "
                f"or set {DATA_ENV}"
            )
        return TraceReplay(name, path)

    return factory


@dataclass(frozen=True)
class WorkloadSpec:
    """A named workload: a one-line description and ``factory(data_dir) -> Workload``."""

    description: str
    factory: Callable[[Path | None], Workload]


#: The built-in workloads, by name.
BUILTIN_WORKLOADS: dict[str, WorkloadSpec] = {
    "chat": WorkloadSpec(
        "ShareGPT lengths, Poisson arrivals",
        lambda _: RandomWorkload("chat", ((1.0, builtin_table("sharegpt")),)),
    ),
    "long": WorkloadSpec(
        "arXiv summarization lengths, Poisson arrivals",
        lambda _: RandomWorkload("long", ((1.0, builtin_table("arxiv")),)),
    ),
    "mixed": WorkloadSpec(
        "1/2 chat + 1/2 long per request, Poisson arrivals",
        lambda _: RandomWorkload(
            "mixed", ((0.5, builtin_table("sharegpt")), (0.5, builtin_table("arxiv")))
        ),
    ),
    "bursty": WorkloadSpec(
        f"chat lengths, Gamma inter-arrivals with CV {BURSTY_CV:g}",
        lambda _: RandomWorkload(
            "bursty", ((1.0, builtin_table("sharegpt")),), arrival_cv=BURSTY_CV
        ),
    ),
    "conversations": WorkloadSpec(
        "chat lengths after shared prefixes (SharedPrefixModel's defaults: 8 system "
        "prompts of 1,024 tokens, half the requests next turns), Poisson arrivals",
        lambda _: RandomWorkload(
            "conversations",
            ((1.0, builtin_table("sharegpt")),),
            shared_prefixes=SharedPrefixModel(),
        ),
    ),
    "azure-code": WorkloadSpec(
        "replay of AzureLLMInferenceTrace_code.csv (DATA_DIR/traces)",
        _replay("azure-code", "AzureLLMInferenceTrace_code.csv", "Azure"),
    ),
    "azure-conv": WorkloadSpec(
        "replay of AzureLLMInferenceTrace_conv.csv (DATA_DIR/traces)",
        _replay("azure-conv", "AzureLLMInferenceTrace_conv.csv", "Azure"),
    ),
    "mooncake": WorkloadSpec(
        "replay of mooncake_synthetic_trace.jsonl with its shared prefixes (DATA_DIR/traces)",
        _replay("mooncake", "mooncake_synthetic_trace.jsonl", "Mooncake"),
    ),
}


#: Entry-point group of installed workloads: ``name = "module:WORKLOAD_SPEC"``.
ENTRY_POINTS = "schedlab.workloads"

#: Every named workload: the built-ins, those added by :func:`register_workload` and the
#: installed ones (:class:`~schedlab.registry.Registry`).
WORKLOADS: Registry[WorkloadSpec] = Registry(
    "workload", WorkloadSpec, ENTRY_POINTS, BUILTIN_WORKLOADS.items()
)


def register_workload(
    name: str, description: str, factory: Callable[[Path | None], Workload]
) -> None:
    """Add a named workload; ``factory(data_dir)`` builds it (``data_dir`` may be
    ``None``; ``WORKLOADS.register(name, WorkloadSpec(description, factory))``).

    Raises
    ------
    InputTypeError
        If ``name`` or ``description`` is no string, or ``factory`` is not callable.
    RegistrationError
        If the name is empty or taken.
    """
    check_types(
        "register_workload",
        name=(name, (str,)),
        description=(description, (str,)),
        factory=(factory, (Callable,)),
    )
    WORKLOADS.register(name, WorkloadSpec(description, factory))


def workload_names() -> tuple[str, ...]:
    """The named workloads: built-in, registered, then installed."""
    return WORKLOADS.names()


def get_workload(name: str) -> WorkloadSpec:
    """The workload registered or installed as ``name`` (:meth:`WORKLOADS.get
    <schedlab.registry.Registry.get>`).

    Raises
    ------
    UnknownNameError
        Listing the known names.
    InputTypeError
        For an installed entry that is not a :class:`WorkloadSpec`.
    """
    return WORKLOADS.get(name)


def make_workload(name: str, *, data_dir: str | Path | None = None) -> Workload:
    """A workload of :func:`workload_names` or a trace file path.

    Raises
    ------
    InputTypeError
        If ``name`` is no string or ``data_dir`` no path.
    UnknownNameError
        For an unknown name that is not an existing file.
    DataNotFoundError
        When a replayed trace is not under the data directory.
    """
    check_types("make_workload", name=(name, (str,)), data_dir=(data_dir, (str, Path, type(None))))
    if name in WORKLOADS:
        return WORKLOADS.get(name).factory(None if data_dir is None else Path(data_dir))
    path = Path(name)
    if path.is_file():
        trace = check_trace(read_trace(path), path)
        if trace.arrival_s is not None:
            return TraceReplay(path.stem, path, trace)
        return RandomWorkload(path.stem, ((1.0, EmpiricalLengths(trace.prompt, trace.output)),))
    if path.suffix or path.parent != Path("."):  # meant as a file
        known = ", ".join(workload_names())
        raise DataNotFoundError(f"{path}: no such trace file (and not a workload: {known})")
    raise UnknownNameError("workload (or a trace path)", name, workload_names())


def check_trace(trace: Trace, path: Path) -> Trace:
    """``trace`` if it can be served as recorded: every request with a prompt and an
    output token, in time order (:func:`~schedlab.llm.traces.check_lengths`,
    :func:`~schedlab.llm.traces.check_time_order`)."""
    return check_time_order(check_lengths(trace, path, min_prompt=1), path)
