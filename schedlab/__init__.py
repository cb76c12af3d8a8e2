"""schedlab: scheduling theory of LLM serving.

Offline memory-constrained batching (instances, solvers, certified lower bounds) and
deadline-safe chunk sizing on an event-driven serving simulator. See DESIGN.md.
"""

from schedlab.bounds import Bound, lower_bound
from schedlab.compare import Comparison, compare
from schedlab.errors import SchedlabError
from schedlab.instance import Instance, Request
from schedlab.instance_io import read_instance, write_instance
from schedlab.result import Result, Status
from schedlab.schedule import Schedule
from schedlab.solve import available_solvers, solve
from schedlab.verify import verify

__version__ = "0.1.0"

__all__ = [
    "Bound",
    "Comparison",
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
