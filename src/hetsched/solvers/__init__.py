"""Solver backends: HiGHS (default), Clarabel, cvxpy, PuLP/CBC; statuses; registry; capabilities.

Each backend registers itself where it is defined (``@register_backend``); the imports below
make the built-in ones known. None of them imports its solver package at import time.
"""

from . import clarabel_backend, cvxpy_backend, highs, pulp_backend
from .base import STATUSES, SUCCESS_STATUSES, Backend, Capabilities, SolverOutput
from .registry import (
    available_solvers,
    capabilities,
    choose_auto,
    get_backend,
    register_backend,
    registered_solvers,
)
from .structured import backend as _structured_backend

__all__ = [
    "STATUSES",
    "SUCCESS_STATUSES",
    "Backend",
    "Capabilities",
    "SolverOutput",
    "available_solvers",
    "capabilities",
    "choose_auto",
    "get_backend",
    "register_backend",
    "registered_solvers",
]
