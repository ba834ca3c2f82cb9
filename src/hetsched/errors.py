"""Exception hierarchy of hetsched.

Every error raised for bad input derives from :class:`ValidationError` (also a
``ValueError``) and its message names the argument, the rule and the offending value.
Solver crashes raise :class:`SolverError`; infeasible or time-limited solves are *not*
errors: they come back as a status on the result.
"""

from __future__ import annotations

__all__ = [
    "CapabilityError",
    "DataNotFoundError",
    "HetschedError",
    "MainModuleGuardError",
    "MissingFieldError",
    "SchedulerError",
    "SolverError",
    "UnknownPolicyError",
    "UnknownSolverError",
    "ValidationError",
]


class HetschedError(Exception):
    """Base class of every exception raised by hetsched."""


class ValidationError(HetschedError, ValueError):
    """An argument broke a documented rule; the message names argument, rule and value."""


class MissingFieldError(ValidationError):
    """A policy needs a job field (e.g. ``steps_remaining``) that the JobSet does not carry."""


class UnknownPolicyError(ValidationError, KeyError):
    """A policy name that is not registered; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownSolverError(ValidationError, KeyError):
    """A solver name that is not registered or not installed; the message lists the valid names."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class CapabilityError(ValidationError):
    """A backend was asked for something it cannot do (e.g. integer variables on Clarabel)."""


class SolverError(HetschedError, RuntimeError):
    """The solver crashed or returned something unusable (not: infeasible, time limit)."""


class SchedulerError(HetschedError, RuntimeError):
    """A round scheduler returned a plan that breaks a rule of the round loop (over-used GPU
    type, a job twice in one round, a split pair); the message names the round, the job and
    the rule. This is a bug in the scheduler, never trimmed silently."""


class DataNotFoundError(HetschedError, FileNotFoundError):
    """A data file that hetsched looks for on request (e.g. Gavel's measured throughput
    table, :func:`hetsched.gavel_throughputs`) is not present; the message names every
    place that was tried and where the file comes from."""


class MainModuleGuardError(HetschedError, RuntimeError):
    """A default process pool was requested while a spawned worker was still importing the
    user's main script: the script starts parallel work outside an
    ``if __name__ == "__main__":`` block, so every worker would run it again."""


def show(value: object) -> str:
    """``repr`` of a value for error messages, with numpy scalars shown as Python ones."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        value = item()
    return repr(value)
