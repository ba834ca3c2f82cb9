"""Policy base class, the outcome record policies return, and the policy registry."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, dataclass_transform

import numpy as np

from ..errors import UnknownPolicyError, ValidationError
from ..inputs.cluster import Cluster
from ..inputs.jobs import JobSet
from ..solvers.base import SolverOutput
from ..solvers.context import SolveContext
from ..solvers.program import LinearProgram
from ..validation import check_bool
from .tables import WORKLOAD, TableBinding

__all__ = [
    "Policy",
    "PolicyOutcome",
    "list_policies",
    "make_policy",
    "policy_parameters",
    "register_policy",
    "registered_policies",
]

_POLICIES: dict[str, type[Policy]] = {}


@dataclass(frozen=True, eq=False)
class PolicyOutcome:
    """What :meth:`Policy.solve` returns (rows follow the JobSet it was given).

    ``X`` is NaN where no solution exists (infeasible, time limit without incumbent).
    """

    X: np.ndarray
    objective: float
    status: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)


class Policy:
    """A scheduling policy: parameters (keyword-only, stored as given) and ``formulate``.

    Subclasses are frozen dataclasses registered with :func:`register_policy`. Single-program
    policies implement :meth:`formulate` and :meth:`objective_of`; policies that need a
    sequence of programs (or none) override :meth:`solve`.

    Class attributes
    ----------------
    name : str
        Registry name, accepted by :func:`hetsched.solve`.
    requires : tuple of str
        Optional JobSet fields the policy cannot run without.
    reads : tuple of str
        Optional JobSet fields the policy reads (besides throughputs, scale factors and
        weights); jobs equal in all of them are interchangeable (aggregation key).
    aggregatable : bool
        Whether identical jobs may be merged into classes (exact for symmetric, concave
        programs).
    uses_n_total : bool
        Whether the math depends on the total number of jobs (true for isolated shares).
    emits_configurations : bool
        Capability: the policy chooses a GPU type *and count* per job
        (``extra["configurations"]``, Sia) rather than time fractions; the round loop then
        runs each configuration the whole round and hands the last one back as ``current``.
    emits_allocation_rows : bool
        Capability: the outcome's ``extra["allocation_rows"]`` lists the rows that run (pairs,
        unconsolidated gangs), which the round loop schedules instead of X. False here; a
        policy over a packed / placement-sensitive space says True (see
        :class:`~hetsched.formulations.spaces.space.SpaceOptions`).
    job_tables : tuple of str
        Capability: the parameters that hold per-job tables keyed by job id (packing,
        placement sensitivity, Sia's goodput). A policy that declares any re-keys them in
        :meth:`bind_tables`; drivers call that and never look the parameters up by name.
    """

    name: ClassVar[str] = ""
    job_tables: ClassVar[tuple[str, ...]] = ()
    emits_configurations: ClassVar[bool] = False
    emits_allocation_rows: ClassVar[bool] = False
    requires: ClassVar[tuple[str, ...]] = ()
    reads: ClassVar[tuple[str, ...]] = ()
    aggregatable: ClassVar[bool] = True

    # ------------------------------------------------------------------ API
    def __post_init__(self) -> None:
        """Check every parameter annotated ``bool`` is a bool (True, False or a NumPy bool).

        Subclasses with rules of their own call ``super().__post_init__()`` first.
        """
        if dataclasses.is_dataclass(self):
            for f in dataclasses.fields(self):
                if f.type in ("bool", bool):
                    check_bool(getattr(self, f.name), f.name)

    def aggregation_fields(self, jobs: JobSet) -> tuple[str, ...]:
        """Optional fields that tell ``jobs`` apart for this policy (the aggregation key).

        Default: :attr:`reads`. A policy whose use of a field depends on its parameters or on
        which fields ``jobs`` carries returns fewer, so that jobs differing only in a field
        the program ignores still merge into one class.
        """
        return self.reads

    def formulate(self, jobs: JobSet, cluster: Cluster) -> LinearProgram:
        """The program whose optimum is this policy's allocation."""
        raise NotImplementedError(f"policy {self.name!r} is not a single program; call solve()")

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """The policy's objective evaluated on allocation ``X`` (independent of any solver)."""
        raise NotImplementedError

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        """Formulate, run through ``ctx`` and read X back."""
        with ctx.building():
            lp = self.formulate(jobs, cluster)
        out = ctx.run(lp)
        return self.outcome(lp, out, jobs, cluster)

    # -------------------------------------------------------------- helpers
    def outcome(self, lp: LinearProgram, out: SolverOutput, jobs: JobSet, cluster: Cluster,
                objective_of: Callable[[np.ndarray], float] | None = None, **extra: Any) -> PolicyOutcome:
        """Turn one solver output into a :class:`PolicyOutcome` (objective from X:
        ``objective_of(X)`` when given, one the caller has the inputs of at hand, else
        :meth:`objective_of`)."""
        if out.has_solution:
            X = lp.extract_X(out.x)
            objective = self.objective_of(X, jobs, cluster) if objective_of is None else objective_of(X)
            report = getattr(lp, "report", None)  # programs over an allocation space describe their rows
            if report is not None:
                extra = {**extra, **report(out.x, jobs)}
        else:
            X = np.full(lp.x_index.shape, np.nan)
            objective = float("nan")
        if out.mip_gap is not None:
            extra.setdefault("mip_gap", out.mip_gap)
        return PolicyOutcome(X=X, objective=objective, status=out.status, message=out.message, extra=extra)

    def bind_tables(self, binding: TableBinding) -> Policy:
        """This policy with its per-job tables (:attr:`job_tables`) keyed by the job numbers
        of ``binding`` and the tables given as ``"workload"`` built (see
        :mod:`hetsched.formulations.tables`). A policy without tables returns itself.
        """
        return self

    def bound_tables(self) -> tuple[str, ...]:
        """The :attr:`job_tables` this policy holds (not None)."""
        return tuple(name for name in self.job_tables if getattr(self, name) is not None)

    def workload_tables(self) -> tuple[str, ...]:
        """The :attr:`job_tables` given as ``"workload"`` (the driver builds them)."""
        return tuple(name for name in self.bound_tables()
                     if isinstance(getattr(self, name), str) and getattr(self, name) == WORKLOAD)

    def params(self) -> dict[str, Any]:
        """The policy's parameters as given."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


@dataclass_transform(kw_only_default=True, frozen_default=True)
def register_policy(cls: type[Policy] | None = None, /, *, eq: bool = True) -> Any:
    """Class decorator: make ``cls`` a frozen, keyword-only dataclass and register it under ``cls.name``.

    Put it on the class in its own module under :mod:`hetsched.formulations`: importing
    :mod:`hetsched.formulations` imports every module of the package, so the policy is then
    known to :func:`make_policy`, :func:`list_policies`, ``hetsched.policies`` and the CLI
    without any further list to edit. A class already made a dataclass by its own decorator is
    registered as it is. ``@register_policy(eq=False)`` turns off the generated ``__eq__``
    (for fields, such as DataFrames, whose comparison is ambiguous).

    Raises
    ------
    ValueError
        ``cls.name`` is empty, or another class is registered under the same name.
    """
    if cls is None:
        return lambda c: register_policy(c, eq=eq)
    if not cls.name:
        raise ValueError("a policy class needs a non-empty `name`")
    if "__dataclass_fields__" not in cls.__dict__:
        cls = dataclass(frozen=True, kw_only=True, eq=eq)(cls)
    other = _POLICIES.get(cls.name)
    if other is not None and other.__qualname__ != cls.__qualname__:
        raise ValueError(f"policy name {cls.name!r} is taken by {other.__module__}.{other.__qualname__}")
    _POLICIES[cls.name] = cls
    return cls


def list_policies() -> list[str]:
    """Names accepted by :func:`hetsched.solve`, sorted."""
    return sorted(_POLICIES)


def registered_policies() -> dict[str, type[Policy]]:
    """Registered name -> policy class (a copy)."""
    return dict(_POLICIES)


def policy_parameters(cls: type[Policy]) -> list[str]:
    """The keyword parameters of policy class ``cls`` (its dataclass fields)."""
    return [f.name for f in dataclasses.fields(cls) if f.init] if dataclasses.is_dataclass(cls) else []


def make_policy(policy: str | Policy, /, **params: Any) -> Policy:
    """The one way from a name to a policy object: ``make_policy("max_min_fairness",
    heterogeneity_aware=False)``.

    Parameters
    ----------
    policy : str or Policy
        A registered name (:func:`list_policies`), or a policy object, returned as is
        (or with ``params`` replaced).
    **params
        Policy parameters; each is checked by the policy's own rules.

    Raises
    ------
    UnknownPolicyError
        ``policy`` is not a registered name (the message lists them).
    ValidationError
        ``policy`` is neither a str nor a Policy; a parameter the policy does not have, or a
        value its rule rejects (the message names the parameter, the rule and the value).
    """
    if isinstance(policy, Policy):
        cls, name = type(policy), policy.name
    elif isinstance(policy, str):
        if policy not in _POLICIES:
            raise UnknownPolicyError(f"`policy` {policy!r} is not a known policy; choose one of {list_policies()}.")
        cls, name = _POLICIES[policy], policy
    else:
        raise ValidationError(
            f"`policy` must be a policy name (str) or a hetsched.policies object; got {type(policy).__name__}."
        )
    if not params:
        return policy if isinstance(policy, Policy) else cls()
    known = policy_parameters(cls)
    unknown = [k for k in params if k not in known]
    if unknown:
        key = unknown[0]
        raise ValidationError(
            f"parameters {sorted(params)} are not all parameters of policy {name!r}: `{key}` must be one of "
            f"{known}; got {key}={params[key]!r}."
        )
    if isinstance(policy, Policy):
        return dataclasses.replace(policy, **params)
    return cls(**params)
