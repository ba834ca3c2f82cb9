"""Solver backends: HiGHS (default), Clarabel, cvxpy, PuLP/CBC; statuses; registry."""

from .base import STATUSES, SUCCESS_STATUSES, Backend, SolverOutput
from .registry import available_solvers, choose_auto, get_backend, register_backend, registered_solvers

__all__ = [
    "Backend",
    "SolverOutput",
    "STATUSES",
    "SUCCESS_STATUSES",
    "available_solvers",
    "choose_auto",
    "get_backend",
    "register_backend",
    "registered_solvers",
]
