"""schedlab: scheduling theory of LLM serving.

Offline memory-constrained batching (instances, solvers, certified lower bounds) and
deadline-safe chunk sizing on an event-driven serving simulator. See ``docs/design.md``.

The names below are imported when first used (``schedlab.solve`` imports the solvers,
NumPy and SciPy then), so that ``import schedlab`` and ``schedlab --version`` start at
once; so are the subpackages, as attributes (``schedlab.serving``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from schedlab.errors import SchedlabError

if TYPE_CHECKING:
    from schedlab.jobs import Executor
    from schedlab.offline.bounds import Bound, lower_bound
    from schedlab.offline.compare import Comparison, compare
    from schedlab.offline.instance import Instance, Request
    from schedlab.offline.instance_io import read_instance, write_instance
    from schedlab.offline.result import Result, Status
    from schedlab.offline.schedule import Schedule
    from schedlab.offline.solve import available_solvers, solve
    from schedlab.offline.verify import verify

__version__ = "0.1.0"

__all__ = [
    "Bound",
    "Comparison",
    "Executor",
    "Instance",
    "Request",
    "Result",
    "SchedlabError",
    "Schedule",
    "Status",
    "available_solvers",
    "compare",
    "lower_bound",
    "read_instance",
    "solve",
    "verify",
    "write_instance",
]

#: The module each public name is imported from, when first used.
_HOMES = {
    "Executor": "schedlab.jobs",
    "Bound": "schedlab.offline.bounds",
    "lower_bound": "schedlab.offline.bounds",
    "Comparison": "schedlab.offline.compare",
    "compare": "schedlab.offline.compare",
    "Instance": "schedlab.offline.instance",
    "Request": "schedlab.offline.instance",
    "read_instance": "schedlab.offline.instance_io",
    "write_instance": "schedlab.offline.instance_io",
    "Result": "schedlab.offline.result",
    "Status": "schedlab.offline.result",
    "Schedule": "schedlab.offline.schedule",
    "available_solvers": "schedlab.offline.solve",
    "solve": "schedlab.offline.solve",
    "verify": "schedlab.offline.verify",
}

#: The subpackages, listed by ``dir(schedlab)`` (every module is imported as an attribute
#: when first used).
_SUBPACKAGES = (
    "calibration",
    "cli",
    "integrations",
    "llm",
    "offline",
    "plotting",
    "serving",
    "testing",
)


def __getattr__(name: str) -> Any:
    """A public name or a module of the package (``schedlab.serving``,
    ``schedlab.budget``), imported on first use and kept."""
    if name in _HOMES:
        value = getattr(import_module(_HOMES[name]), name)
    else:
        try:
            value = import_module(f"schedlab.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"schedlab.{name}":
                raise
            raise AttributeError(f"module 'schedlab' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Every public name and subpackage, those imported on first use included."""
    return sorted({*globals(), *__all__, *_SUBPACKAGES})
