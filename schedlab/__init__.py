"""schedlab: scheduling theory of LLM serving.

Offline memory-constrained batching (instances, solvers, certified lower bounds) and
deadline-safe chunk sizing on an event-driven serving simulator. See ``docs/design.md``.
"""

from schedlab.errors import SchedlabError
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
