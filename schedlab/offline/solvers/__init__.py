"""Every offline solver, in one registry.

The built-in solvers are listed as data in :data:`BUILTIN_SOLVERS`, and :data:`SOLVERS`
(a :class:`~schedlab.registry.Registry`) holds them all; a user adds one with
:func:`register_solver`, and an installed package with a :class:`SolverInfo` in the
entry-point group :data:`ENTRY_POINTS` (:mod:`schedlab.plugins`). Each is a function
keeping the contract of :mod:`schedlab.offline.solvers.contract` (``fn(instance, *,
budget, seed, **own options) -> SolverOutput``), which :func:`schedlab.solve` enforces for
all of them: it refuses unknown options, verifies the schedule and recomputes the
objective. Importing this package loads no heavy backend: OR-Tools and HiGHS are imported
when a solver that needs them runs.

========================  =====  ==========================================================
solver                    exact  module
========================  =====  ==========================================================
``fcfs`` ... ``mc-sf``    no     :mod:`~schedlab.offline.solvers.rules` (list-scheduling rules)
``sorted-f(-seq)``        no     :mod:`~schedlab.offline.solvers.sorted_f`
``local-search``          no     :mod:`~schedlab.offline.solvers.local_search`
``alns``                  no     :mod:`~schedlab.offline.solvers.alns`
``sorted-lp``, ``lp-*``   no     :mod:`~schedlab.offline.solvers.lp_guided`
``receding-horizon``      no     :mod:`~schedlab.offline.solvers.receding_horizon`
``dp``                    yes    :mod:`~schedlab.offline.solvers.dp`
``cpsat``                 yes    :mod:`~schedlab.offline.solvers.cpsat`
``brute-force``           yes    :mod:`~schedlab.offline.solvers.brute_force`
``a-max``, ``a-min``,     no     :mod:`~schedlab.offline.solvers.online` (online policies
``mc-sf-predicted``,             with predicted lengths and eviction; option
``fcfs-preempt``                 ``predictions``)
========================  =====  ==========================================================

*Exact* solvers return ``OPTIMAL`` only when they proved it.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedlab.errors import InputError
from schedlab.offline.solvers import (
    alns,
    brute_force,
    cpsat,
    dp,
    local_search,
    lp_guided,
    online,
    receding_horizon,
    rules,
    sorted_f,
)
from schedlab.offline.solvers.contract import (
    RESERVED_OPTIONS,
    OptionSpec,
    SolverFn,
    accepted_options,
    option_specs,
)
from schedlab.registry import Registry

__all__ = [
    "BUILTIN_SOLVERS",
    "ENTRY_POINTS",
    "SOLVERS",
    "SolverFn",
    "SolverInfo",
    "available_solvers",
    "get_solver",
    "register_solver",
]


@dataclass(frozen=True)
class SolverInfo:
    """A registered solver.

    Attributes
    ----------
    name
        Registry name.
    fn
        The solver function.
    exact
        Whether it proves optimality (``OPTIMAL`` only then).
    """

    name: str
    fn: SolverFn
    exact: bool = False

    @property
    def options(self) -> tuple[str, ...]:
        """The options it accepts (keyword-only parameters of ``fn``)."""
        return accepted_options(self.fn)

    @property
    def option_specs(self) -> tuple[OptionSpec, ...]:
        """Its options with their types and defaults, as ``fn`` declares them (what
        ``schedlab solvers`` lists)."""
        return option_specs(self.fn)

    def describe(self) -> str:
        """Its name, whether exact, and its options, one a line (``schedlab solvers``)."""
        head = f"{self.name}{' (exact)' if self.exact else ''}"
        options = [f"  {spec.describe()}" for spec in self.option_specs] or ["  (no options)"]
        return "\n".join([head, *options])


#: The built-in solvers.
BUILTIN_SOLVERS: tuple[SolverInfo, ...] = (
    *(SolverInfo(rule, fn) for rule, fn in rules.RULE_SOLVERS.items()),
    SolverInfo("sorted-f", sorted_f.sorted_f),
    SolverInfo("sorted-f-seq", sorted_f.sorted_f_seq),
    SolverInfo("local-search", local_search.local_search),
    SolverInfo("alns", alns.alns),
    SolverInfo("sorted-lp", lp_guided.sorted_lp),
    SolverInfo("lp-swap", lp_guided.lp_swap),
    SolverInfo("lp-search", lp_guided.lp_search),
    SolverInfo("receding-horizon", receding_horizon.receding_horizon),
    SolverInfo("dp", dp.solve_dp, exact=True),
    SolverInfo("cpsat", cpsat.solve_cpsat, exact=True),
    SolverInfo("brute-force", brute_force.brute_force, exact=True),
    *(SolverInfo(name, fn) for name, fn in online.ONLINE_SOLVERS.items()),
)

#: Entry-point group of installed solvers: ``name = "module:SOLVER_INFO"``.
ENTRY_POINTS = "schedlab.solvers"


def _check_solver(name: str, info: SolverInfo) -> None:
    """Refuse a solver with an option :func:`schedlab.solve` takes itself."""
    clash = sorted(set(accepted_options(info.fn)) & set(RESERVED_OPTIONS))
    if clash:
        raise InputError(
            f"solver {name!r}: option(s) {', '.join(clash)}, which schedlab.solve takes "
            "itself; rename them"
        )


#: Every solver by name: the built-ins, those added by :func:`register_solver` and the
#: installed ones (:class:`~schedlab.registry.Registry`).
SOLVERS: Registry[SolverInfo] = Registry(
    "solver",
    SolverInfo,
    ENTRY_POINTS,
    ((info.name, info) for info in BUILTIN_SOLVERS),
    check=_check_solver,
    named=True,
)


def register_solver(name: str, fn: SolverFn, *, exact: bool = False) -> None:
    """Add a solver keeping the contract of :mod:`~schedlab.offline.solvers.contract`
    (``SOLVERS.register(name, SolverInfo(name, fn, exact))``).

    Parameters
    ----------
    name
        Its name for :func:`schedlab.solve`; must be new.
    fn
        ``fn(instance, *, budget, seed, **own keyword-only options) -> SolverOutput``.
    exact
        Whether it returns ``OPTIMAL`` only when it proved it (the contract test holds
        exact solvers to the brute-force optimum).

    Raises
    ------
    RegistrationError
        If the name is taken (:meth:`~schedlab.registry.Registry.register`).
    InputError
        If an option's name is one :func:`schedlab.solve` takes itself.
    """
    SOLVERS.register(name, SolverInfo(name, fn, exact))


def available_solvers() -> list[str]:
    """Names accepted by :func:`schedlab.solve`, sorted: built-in, registered and
    installed."""
    return sorted(SOLVERS.names())


def get_solver(name: str) -> SolverInfo:
    """The solver registered or installed under ``name`` (:meth:`SOLVERS.get
    <schedlab.registry.Registry.get>`).

    Raises
    ------
    UnknownNameError
        (a ``ValueError``) listing the known names.
    InputTypeError, InputError
        For an installed entry that is not a :class:`SolverInfo` of that name, or whose
        options clash with :func:`schedlab.solve`'s own.
    """
    return SOLVERS.get(name)
