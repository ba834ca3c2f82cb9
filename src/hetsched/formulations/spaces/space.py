r"""Allocation spaces: the variables of an allocation program when a job can run in more
than one way on a GPU type (space sharing, consolidated or not).

The core programs have one variable per usable (job, type) pair, :math:`X_{jk}`. Gavel's
space sharing adds rows for job *pairs* and placement sensitivity adds a second,
*unconsolidated* row per multi-GPU job. Both are the same thing seen from the LP: a set of
variables :math:`y_v \ge 0` (fraction of wall-clock time that variable v runs), each with

* a GPU type :math:`k(v)`;
* a capacity weight :math:`g_v` (GPUs it occupies: :math:`\mu_j s_j` for a single-job
  row, the gang size :math:`s` for a pair, which runs *one* gang for two jobs);
* one or two member jobs, each with a time coefficient :math:`\tau_{jv}` (1 here) and a
  relative speed :math:`r_{jv}` — the job's throughput in v divided by its throughput
  alone on :math:`k(v)`, :math:`T_{j,k(v)}` (1 for a single row; pair throughput / T for a
  pair member; unconsolidated / consolidated for an unconsolidated row).

Base constraints become

.. math::

    \sum_v \tau_{jv} y_v \le 1\ \ \forall j, \qquad
    \sum_{v: k(v)=k} g_v y_v \le C_k\ \ \forall k, \qquad \text{side rows (e.g. consolidated GPUs)},

and every policy's per-(job, type) coefficient matrix :math:`a` (normalized share,
throughput, ρ-scaled throughput, ...) extends to the space by
:math:`a_{jv} = a_{j,k(v)}\, r_{jv}\, \tau_{jv}`: the policy code does not change. The
unpacked program is the space whose variables are the usable (job, type) pairs in
row-major order, and it is built by the original code path, so it is unchanged.

What a solution reports
-----------------------
``X`` (the result's allocation matrix) is the *isolated-equivalent* time
:math:`X_{jk} = \sum_{v: k(v)=k} r_{jv}\tau_{jv} y_v`: the time alone on type k that gives
job j the progress it gets. Hence ``(T * X).sum(1)`` is each job's true throughput and
every policy's ``objective_of(X)`` is its objective. The actual schedule — which rows run
and for how long — is in ``extra["allocation_rows"]`` and the wall-clock time per (job,
type) in ``extra["time"]`` (see :meth:`AllocationSpace.describe`). With pairs, ``X`` may
exceed capacity when read as wall-clock time (that is the point of sharing); the
capacity of the rows themselves holds.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ...errors import ValidationError
from ...inputs.jobs import RESOURCE_FIELDS, JobSet
from ...solvers.program import LinearProgram
from ...validation import check_instance
from ..aggregation import JobClasses, aggregate_jobs
from ..base import PolicyOutcome
from ..builder import ProgramBuilder
from ..common import usable_mask
from ..resources import add_resource_rows
from ..tables import WORKLOAD, TableBinding
from .kinds import KIND_NAMES, PAIR, SINGLE, UNCONSOLIDATED
from .packing import Packing, pair_variables
from .placement_sensitivity import (
    PlacementSensitivity,
    consolidation_rows,
    unconsolidated_variables,
)

__all__ = [
    "KIND_NAMES",
    "AllocationSpace",
    "SpaceOptions",
    "SpaceProgram",
    "SpaceVars",
    "build_space",
    "expand_class_outcome",
    "space_classes",
]

log = logging.getLogger(__name__)

__all__ += ["PAIR", "SINGLE", "UNCONSOLIDATED"]  # variable kinds (defined in .variable_kinds)

#: Variables below this value are left out of ``extra["allocation_rows"]``.
REPORT_TOL = 1e-9


def check_space_option(value: Any, name: str) -> Any:
    """``packing`` / ``placement_sensitivity``: None, ``"workload"`` (bound by the simulator), or
    the option object (:class:`~hetsched.formulations.spaces.packing.Packing`,
    :class:`~hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity`).

    Examples
    --------
    >>> check_space_option(None, "packing") is None
    True
    """
    if value is None or (isinstance(value, str) and value == "workload"):
        return value
    cls = Packing if name == "packing" else PlacementSensitivity
    return check_instance(value, name, cls, f"a {cls.__module__}.{cls.__name__}, 'workload' (in hetsched.simulate) or None")


class AllocationSpace:
    """Variables of an allocation program: single-job rows, unconsolidated rows, pair rows.

    Local variable numbers run ``0 .. size-1``: first the consolidated single-job rows (one
    per True entry of ``mask``, row-major, exactly the core programs' X block), then the
    other variables in the order given.

    Parameters
    ----------
    mask : ndarray of bool, shape (n_jobs, n_types)
        Usable (job, type) pairs: one consolidated single-job variable each.
    var_type : ndarray of int, shape (n_extra,)
        GPU type of each further variable.
    var_kind : ndarray of int, shape (n_extra,)
        :data:`KIND_NAMES` code (1 unconsolidated, 2 pair).
    var_jobs : ndarray of int, shape (n_extra, 2)
        Member jobs; column 1 is -1 for a single-job variable.
    var_ratio : ndarray of float, shape (n_extra, 2)
        Relative speed of each member (throughput in the variable / ``T[j, type]``).
    var_gang : ndarray of float, shape (n_extra,)
        GPUs a pair variable occupies (ignored for single-job variables, whose weight is
        ``multiplicity * scale_factor`` of their job).
    var_time : ndarray of float, shape (n_extra, 2), optional
        Time coefficient of each member (default 1). A pair variable over classes of
        identical jobs holds the total time of all their job pairs, so each member job
        runs ``1/mu`` of it (see :func:`solve_by_class`).
    side : tuple of arrays ``(rows, vars, vals, ub)``, optional
        Extra ``<=`` rows over local variables (e.g. consolidated-GPU bounds).
    side_labels : list of str, optional
        One label per side row (for messages and reports).
    info : dict, optional
        Facts about how the space was built (pair counts, pruning), copied into results.
    """

    def __init__(
        self,
        mask: np.ndarray,
        *,
        var_type: np.ndarray | None = None,
        var_kind: np.ndarray | None = None,
        var_jobs: np.ndarray | None = None,
        var_ratio: np.ndarray | None = None,
        var_gang: np.ndarray | None = None,
        var_time: np.ndarray | None = None,
        side: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
        side_labels: list[str] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.mask = np.asarray(mask, dtype=bool)
        n, m = self.mask.shape
        self.n_jobs, self.n_types = n, m
        sj, sk = np.nonzero(self.mask)
        S = int(sj.shape[0])
        e = 0 if var_type is None else int(np.asarray(var_type).shape[0])
        ext_type = np.zeros(0, np.int64) if e == 0 else np.asarray(var_type, dtype=np.int64)
        ext_kind = np.zeros(0, np.int8) if e == 0 else np.asarray(var_kind, dtype=np.int8)
        ext_jobs = np.zeros((0, 2), np.int64) if e == 0 else np.asarray(var_jobs, dtype=np.int64).reshape(e, 2)
        ext_ratio = np.zeros((0, 2)) if e == 0 else np.asarray(var_ratio, dtype=float).reshape(e, 2)
        ext_gang = np.zeros(0) if e == 0 else np.asarray(var_gang, dtype=float).reshape(e)
        ext_time = (ext_jobs >= 0).astype(float) if var_time is None or e == 0 \
            else np.asarray(var_time, dtype=float).reshape(e, 2) * (ext_jobs >= 0)
        self.n_single = S
        self.size = S + e
        self.var_type = np.concatenate([sk.astype(np.int64), ext_type])
        self.var_kind = np.concatenate([np.zeros(S, np.int8), ext_kind])
        self.var_jobs = np.concatenate([np.stack([sj, np.full(S, -1)], axis=1).astype(np.int64), ext_jobs])
        self.var_ratio = np.concatenate([np.stack([np.ones(S), np.zeros(S)], axis=1), ext_ratio])
        self.var_gang = np.concatenate([np.zeros(S), ext_gang])
        #: Time coefficient of each member (1: a member runs for the whole time of the row).
        self.var_time = np.concatenate([np.stack([np.ones(S), np.zeros(S)], axis=1), ext_time])
        self.single_index = np.full((n, m), -1, dtype=np.int64)
        self.single_index[sj, sk] = np.arange(S, dtype=np.int64)
        # Member entries (incidence), member 0 of every variable first.
        present = self.var_jobs >= 0
        var_of = np.broadcast_to(np.arange(self.size)[:, None], (self.size, 2))
        order = np.argsort(np.broadcast_to(np.array([0, 1]), (self.size, 2))[present], kind="stable")
        self.entry_var = var_of[present][order]
        self.entry_job = self.var_jobs[present][order]
        self.entry_ratio = self.var_ratio[present][order]
        self.entry_time = self.var_time[present][order]
        if side is None:
            side = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
        self.side = tuple(np.asarray(v) for v in side)
        self.side_labels = list(side_labels or [])
        self.info = dict(info or {})

    # ---------------------------------------------------------------- queries
    @classmethod
    def singles(cls, mask: np.ndarray) -> AllocationSpace:
        """The unpacked space: one variable per True entry of ``mask``."""
        return cls(mask)

    @property
    def n_side_rows(self) -> int:
        """Number of side rows."""
        return int(self.side[3].shape[0])

    @property
    def is_single(self) -> bool:
        """True when the space has only consolidated single-job rows and no side rows."""
        return self.size == self.n_single and self.n_side_rows == 0

    def kinds(self) -> tuple[str, ...]:
        """Kinds of variables present."""
        return tuple(KIND_NAMES[k] for k in np.unique(self.var_kind))

    def entry_coefficients(self, a: np.ndarray) -> np.ndarray:
        """``a[j, type(v)] * r_jv * tau_jv`` for every member entry (j, v)."""
        return a[self.entry_job, self.var_type[self.entry_var]] * self.entry_ratio * self.entry_time

    def values(self, M: np.ndarray) -> np.ndarray:
        """Per variable, ``sum_j M[j, type(v)] r_jv tau_jv`` over its members (shape (size,))."""
        return np.bincount(self.entry_var, weights=self.entry_coefficients(M), minlength=self.size)

    def weights(self, load: np.ndarray) -> np.ndarray:
        """Capacity weight of every variable: ``load[j]`` for a single-job row, the gang for a pair."""
        owner = self.var_jobs[:, 0]
        single = self.var_kind != PAIR
        return np.where(single, load[np.where(single, owner, 0)], self.var_gang)

    def best_throughput(self, T: np.ndarray) -> np.ndarray:
        """Per job, the largest throughput per unit of its time over its variables (0 if none)."""
        best = np.zeros(self.n_jobs)
        np.maximum.at(best, self.entry_job, T[self.entry_job, self.var_type[self.entry_var]] * self.entry_ratio)
        return best

    def x_map(self, start: int, n_vars: int) -> sp.csr_array:
        """Sparse map from the program's x to the isolated-equivalent X (flattened (n*m,))."""
        rows = self.entry_job * self.n_types + self.var_type[self.entry_var]
        return sp.csr_array(
            (self.entry_ratio * self.entry_time, (rows, start + self.entry_var)),
            shape=(self.n_jobs * self.n_types, n_vars),
        )

    def add_to(self, b: ProgramBuilder, *, cost: Any = 0.0) -> SpaceVars:
        """Add the variables to ``b`` (lower bound 0) and return the bound block."""
        block = SpaceVars(self, b.n_vars)
        b.add_vars(self.size, lb=0.0, ub=np.inf, cost=cost)
        return block

    # ---------------------------------------------------------------- results
    def describe(self, y: np.ndarray, jobs: JobSet) -> dict[str, Any]:
        """What a solution ``y`` (local variables) schedules, for ``PolicyOutcome.extra``.

        Returns
        -------
        dict
            ``allocation_rows``: DataFrame, one row per variable with ``y > 1e-9``, columns
            ``kind`` ("single", "unconsolidated", "pair"), ``gpu_type``, ``job``,
            ``partner`` (None unless a pair), ``fraction`` (of wall-clock time the row
            runs), ``gpus`` (GPUs it occupies on average: fraction x gang), ``throughput``
            and ``partner_throughput`` (steps/s of each member while the row runs);
            ``time``: (n_jobs, n_types) wall-clock time of each job on each type;
            ``time_shared`` / ``time_unconsolidated``: the part of ``time`` spent in pair
            / unconsolidated rows (present when the space has such rows);
            ``space``: counts of variables (and pair pruning facts).
        """
        y = np.maximum(np.asarray(y, dtype=float), 0.0)
        n, m = self.n_jobs, self.n_types
        T = jobs.throughputs
        t_entry = y[self.entry_var] * self.entry_time
        flat = self.entry_job * m + self.var_type[self.entry_var]
        time = np.bincount(flat, weights=t_entry, minlength=n * m).reshape(n, m)
        out: dict[str, Any] = {"time": time}
        kind_e = self.var_kind[self.entry_var]
        if (self.var_kind == PAIR).any():
            out["time_shared"] = np.bincount(flat, weights=t_entry * (kind_e == PAIR), minlength=n * m).reshape(n, m)
        if (self.var_kind == UNCONSOLIDATED).any():
            out["time_unconsolidated"] = np.bincount(
                flat, weights=t_entry * (kind_e == UNCONSOLIDATED), minlength=n * m).reshape(n, m)
        used = np.flatnonzero(y > REPORT_TOL)
        a, p = self.var_jobs[used, 0], self.var_jobs[used, 1]
        k = self.var_type[used]
        has_p = p >= 0
        ids = jobs.ids
        partner = np.empty(used.shape[0], dtype=object)
        partner[has_p] = ids[p[has_p]]
        gang = self.weights((jobs.multiplicity * jobs.scale_factors).astype(float))[used]
        p_thr = np.zeros(used.shape[0])
        p_thr[has_p] = T[p[has_p], k[has_p]] * self.var_ratio[used[has_p], 1]
        out["allocation_rows"] = pd.DataFrame({
            "kind": np.asarray(KIND_NAMES, dtype=object)[self.var_kind[used]],
            "gpu_type": np.asarray(jobs.gpu_types, dtype=object)[k],
            "job": ids[a],
            "partner": pd.Series(partner, dtype=object),  # None for single rows (not NaN)
            "fraction": y[used],
            "gpus": y[used] * gang,
            "throughput": T[a, k] * self.var_ratio[used, 0],
            "partner_throughput": p_thr,
        })
        out["space"] = {
            "n_variables": self.size,
            **{f"n_{name}": int((self.var_kind == code).sum()) for code, name in enumerate(KIND_NAMES)},
            "n_side_rows": self.n_side_rows,
            **self.info,
        }
        return out


class SpaceVars:
    """An :class:`AllocationSpace` placed in a program at column ``start``.

    Speaks the same protocol as :class:`~hetsched.formulations.builder.AllocationVars`
    where the core builders need it: ``mask``, ``x_index``, ``cols``, ``size`` and
    ``job`` / ``gpu`` (the variable's first member and type; host-resource rows read
    them, which is exact for single-job variables).
    """

    def __init__(self, space: AllocationSpace, start: int) -> None:
        self.space = space
        self.start = int(start)
        self.size = space.size
        self.mask = space.mask
        self.x_index = np.where(space.single_index >= 0, space.single_index + self.start, -1)
        self.job = space.var_jobs[:, 0]
        self.gpu = space.var_type

    @property
    def cols(self) -> np.ndarray:
        """Variable indices of the block, in order."""
        return np.arange(self.start, self.start + self.size, dtype=np.int64)

    def throughput_rows(self, coeff: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """COO triplets of ``sum_v coeff[j, type(v)] r_jv tau_jv y_v`` (one row per job)."""
        s = self.space
        return s.entry_job, self.start + s.entry_var, s.entry_coefficients(coeff)

    def add_base_rows(self, b: ProgramBuilder, jobs: JobSet, capacities: np.ndarray, *, cluster: Any = None,
                      resources: bool = True) -> tuple[int, int]:
        """Job-time rows, capacity rows (a pair's gang counted once), then the side rows."""
        s = self.space
        n, m = s.n_jobs, s.n_types
        r_jobs = b.add_rows(rows=s.entry_job, cols=self.start + s.entry_var, vals=s.entry_time,
                            lb=-np.inf, ub=1.0, n_rows=n)
        load = (jobs.multiplicity * jobs.scale_factors).astype(float)
        r_cap = b.add_rows(rows=s.var_type, cols=self.cols, vals=s.weights(load), lb=-np.inf, ub=capacities,
                           n_rows=m)
        rows, vars_, vals, ub = s.side
        if ub.shape[0]:
            b.add_rows(rows=rows, cols=self.start + vars_, vals=vals, lb=-np.inf, ub=ub, n_rows=int(ub.shape[0]))
        if resources:
            add_resource_rows(b, self, jobs, cluster)
        return r_jobs, r_cap

    def program(self, lp: LinearProgram, **meta: Any) -> SpaceProgram:
        """``lp`` as a :class:`SpaceProgram` reading X through this space."""
        fields = {f.name: getattr(lp, f.name) for f in dataclasses.fields(LinearProgram)}
        kept = {k: v for k, v in lp.meta.items() if k != "structure"}  # not the plain level LP
        fields["meta"] = {**kept, **meta, "space": self.space}
        return SpaceProgram(**fields, x_map=self.space.x_map(self.start, lp.n_vars), space_vars=self)


@dataclass(frozen=True, eq=False)
class SpaceProgram(LinearProgram):
    """A :class:`~hetsched.solvers.program.LinearProgram` over an allocation space.

    ``extract_X`` returns the isolated-equivalent allocation ``x_map @ x`` (see the module
    docstring); ``report`` describes the rows a solution runs.
    """

    x_map: sp.csr_array | None = None
    space_vars: SpaceVars | None = None

    def extract_X(self, x: np.ndarray) -> np.ndarray:
        """Isolated-equivalent X (n_jobs, n_gpu_types): ``X[j,k] = sum_v r_jv tau_jv y_v``."""
        assert self.x_map is not None
        return (self.x_map @ x).reshape(self.x_index.shape)

    def report(self, x: np.ndarray, jobs: JobSet) -> dict[str, Any]:
        """:meth:`AllocationSpace.describe` of this program's solution ``x``."""
        assert self.space_vars is not None
        s = self.space_vars
        return s.space.describe(x[s.start : s.start + s.size], jobs)


# ------------------------------------------------------------------------ assembly
def build_space(jobs: JobSet, cluster: Any, *, packing: Any = None, placement_sensitivity: Any = None) -> AllocationSpace:
    """The allocation space of ``jobs`` on ``cluster`` with space sharing and/or placement sensitivity.

    Consolidated single-job rows exist where the job is usable (``T > 0`` and at least
    ``s_j`` GPUs); pair rows come from ``packing`` (see
    :func:`~hetsched.formulations.spaces.packing.pair_variables`); unconsolidated rows and
    consolidated-GPU bounds from ``placement_sensitivity`` (see
    :mod:`~hetsched.formulations.spaces.placement_sensitivity`). Pair rows count as consolidated
    gangs.
    """
    cap = cluster.capacities(jobs.gpu_types)
    mask = usable_mask(jobs.throughputs, jobs.scale_factors, cap)
    types, kinds, mjobs, ratios, gangs, times = [], [], [], [], [], []
    info: dict[str, Any] = {}
    _check_options(packing, placement_sensitivity)
    if placement_sensitivity is not None:
        j, k, r = unconsolidated_variables(jobs, mask, placement_sensitivity)
        types.append(k)
        kinds.append(np.full(j.shape[0], UNCONSOLIDATED, np.int8))
        mjobs.append(np.stack([j, np.full(j.shape[0], -1)], axis=1))
        ratios.append(np.stack([r, np.zeros(j.shape[0])], axis=1))
        gangs.append(np.zeros(j.shape[0]))
        times.append(np.stack([np.ones(j.shape[0]), np.zeros(j.shape[0])], axis=1))
    if packing is not None:
        _no_resource_fields(jobs)
        pv = pair_variables(jobs, mask, packing)
        types.append(pv.gpu)
        kinds.append(np.full(pv.gpu.shape[0], PAIR, np.int8))
        mjobs.append(np.stack([pv.job_a, pv.job_b], axis=1))
        ratios.append(np.stack([pv.ratio_a, pv.ratio_b], axis=1))
        gangs.append(jobs.scale_factors[pv.job_a].astype(float))
        times.append(np.stack([pv.time_a, pv.time_b], axis=1))
        info.update(pv.info)
    cat = (lambda parts, shape: np.concatenate(parts) if parts else np.zeros(shape))
    space = AllocationSpace(
        mask,
        var_type=cat(types, (0,)).astype(np.int64),
        var_kind=cat(kinds, (0,)).astype(np.int8),
        var_jobs=cat(mjobs, (0, 2)).astype(np.int64),
        var_ratio=cat(ratios, (0, 2)),
        var_gang=cat(gangs, (0,)),
        var_time=cat(times, (0, 2)),
        info=info,
    )
    if placement_sensitivity is not None:
        side, labels = consolidation_rows(space, jobs, cluster, placement_sensitivity)
        space.side, space.side_labels = side, labels
    return space


def _check_options(packing: Any, placement_sensitivity: Any) -> None:
    resolved_option(packing, "packing")
    resolved_option(placement_sensitivity, "placement_sensitivity")
    if packing is not None and not isinstance(packing, Packing):
        raise ValidationError(
            f"`packing` must be a hetsched.formulations.spaces.packing.Packing; got {type(packing).__name__}."
        )
    if placement_sensitivity is not None and not isinstance(placement_sensitivity, PlacementSensitivity):
        raise ValidationError(
            "`placement_sensitivity` must be a hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity; "
            f"got {type(placement_sensitivity).__name__}."
        )


def resolved_option(value: Any, name: str) -> Any:
    """``value`` unless it is the ``"workload"`` placeholder, which only the simulator binds."""
    if isinstance(value, str) and value == "workload":
        raise ValidationError(
            f"`{name}='workload'` takes its table from a simulated workload's catalogue and works only in "
            f"hetsched.simulate(); for solve(), pass a {'Packing' if name == 'packing' else 'PlacementSensitivity'} "
            "object (e.g. .from_catalogue(catalogue, rows, job_ids)).")
    return value


def _no_resource_fields(jobs: JobSet) -> None:
    for field in RESOURCE_FIELDS:
        if jobs.has(field):
            raise ValidationError(
                f"space sharing (`packing`) does not support host-resource demands yet; the jobs state `{field}`."
            )


# ------------------------------------------------------------ exact class aggregation
def space_classes(jobs: JobSet, fields: Any, *, packing: Any = None, placement_sensitivity: Any = None) -> Any:
    """Classes of interchangeable jobs for a packed / placement-sensitive program, or None.

    Jobs are interchangeable when they agree in everything the core aggregation compares
    (throughputs, scale factor, weight, the policy's ``fields``) *and* in their pair-table
    key and unconsolidated throughputs. Returns a
    :class:`~hetsched.formulations.aggregation.JobClasses`, or None when every class has one job.

    Why it is exact: permuting identical jobs maps the allocation space onto itself (pair
    (a, b) to pair (pi a, pi b), same throughputs; same-key pairs are symmetric, see
    :func:`~hetsched.formulations.spaces.packing.pair_variables`), so averaging an optimum over
    the permutations is feasible and optimal (the programs are convex and symmetric). In
    the average, single rows are equal within a class and pair rows equal within each
    orbit: all pairs between classes c and d (``mu_c mu_d`` of them), or all pairs inside
    class c (``mu_c (mu_c - 1) / 2``). One variable z per orbit (its total time) gives
    each member of c the time ``z / mu_c`` (inside a class: ``2 z / mu_c``) and uses
    ``s z`` GPUs: the class program of :func:`build_space`.
    """
    if jobs.n_jobs == 0:
        return None
    base = aggregate_jobs(jobs, tuple(fields))
    cols: dict[str, np.ndarray] = {"c": base.inverse}
    if packing is not None:
        cols["key"] = packing.job_keys(jobs)
    if placement_sensitivity is not None:
        U = placement_sensitivity.table(jobs)
        cols.update({f"U{k}": U[:, k] for k in range(jobs.n_types)})
    codes = pd.DataFrame(cols, copy=False).groupby(list(cols), sort=False).ngroup().to_numpy().astype(np.int64)
    n_classes = int(codes.max()) + 1
    if n_classes == jobs.n_jobs:
        return None
    first = np.full(n_classes, jobs.n_jobs, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(jobs.n_jobs))
    counts = np.bincount(codes, minlength=n_classes)
    reps = jobs.take(first)._with_multiplicity(counts * jobs.multiplicity[first])
    return JobClasses(reps, codes)


def expand_class_outcome(outcome: Any, policy: Any, classes: Any, jobs: JobSet, cluster: Any) -> Any:
    """A class-level :class:`~hetsched.formulations.base.PolicyOutcome` in terms of ``jobs``.

    X and the per-job arrays are copied to each member; ``allocation_rows`` are split
    into job-level rows (:func:`expand_rows`); the objective is re-evaluated on the jobs.
    """
    inv = classes.inverse
    X = outcome.X[inv]
    objective = outcome.objective
    if X.size and np.isfinite(X).all():
        objective = policy.objective_of(X, jobs, cluster)
    extra = dict(outcome.extra)
    for name in ("time", "time_shared", "time_unconsolidated"):
        if name in extra:
            extra[name] = extra[name][inv]
    if "allocation_rows" in extra:
        extra["allocation_rows"] = expand_rows(extra["allocation_rows"], classes, jobs)
    if "infeasible_rows" in extra:
        extra["infeasible_rows"] = np.flatnonzero(np.isin(inv, np.asarray(extra["infeasible_rows"]))).tolist()
    if "space" in extra:
        extra["space"] = {**extra["space"], "n_classes": classes.n_classes}
    return PolicyOutcome(X=X, objective=objective, status=outcome.status, message=outcome.message, extra=extra)


def expand_rows(rows: pd.DataFrame, classes: Any, jobs: JobSet) -> pd.DataFrame:
    """Split class-level ``allocation_rows`` into rows of individual jobs (exact).

    A single-job row of class c becomes one row per member (same fraction). A pair row
    between classes c != d with total time z gives each member of c the time ``z/mu_c``
    and each member of d ``z/mu_d``; a north-west-corner split of the two time columns
    yields at most ``mu_c + mu_d - 1`` job pairs with those totals. A pair row inside a
    class (``mu >= 2``) gives each member ``2z/mu``: members in a cycle, each adjacent
    pair running ``z/mu`` (one pair running z when ``mu = 2``). Throughputs per row are
    unchanged, so every job's time and throughput equal the class program's.
    """
    cj = classes.jobs
    inv = classes.inverse
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=cj.n_jobs))])
    members = [order[starts[c]: starts[c + 1]] for c in range(cj.n_jobs)]
    index = pd.Index(cj.ids)
    ca = index.get_indexer(rows["job"])
    pair = rows["kind"].to_numpy() == "pair"
    cb = np.full(len(rows), -1, dtype=np.int64)
    if pair.any():
        cb[pair] = index.get_indexer(rows.loc[pair, "partner"])
    ids = jobs.ids
    s = jobs.scale_factors
    out: dict[str, list] = {c: [] for c in ("kind", "gpu_type", "job", "partner", "fraction", "gpus", "throughput",
                                            "partner_throughput")}
    frac = rows["fraction"].to_numpy()
    for i in range(len(rows)):
        kind, gtype = rows["kind"].iat[i], rows["gpu_type"].iat[i]
        thr, pthr = rows["throughput"].iat[i], rows["partner_throughput"].iat[i]
        A = members[ca[i]]
        if not pair[i]:
            parts = [(a, None, frac[i]) for a in A]
        elif ca[i] != cb[i]:
            parts = _north_west(A, members[cb[i]], frac[i])
        elif A.shape[0] == 2:
            parts = [(A[0], A[1], frac[i])]
        else:
            parts = [(A[q], A[(q + 1) % A.shape[0]], frac[i] / A.shape[0]) for q in range(A.shape[0])]
        for a, b, t in parts:
            out["kind"].append(kind)
            out["gpu_type"].append(gtype)
            out["job"].append(ids[a])
            out["partner"].append(None if b is None else ids[b])
            out["fraction"].append(t)
            out["gpus"].append(t * s[a])
            out["throughput"].append(thr)
            out["partner_throughput"].append(pthr)
    out["partner"] = pd.Series(out["partner"], dtype=object)  # keep None, not NaN
    return pd.DataFrame(out)


def _north_west(A: np.ndarray, B: np.ndarray, z: float) -> list[tuple[int, int, float]]:
    """Split time z between job lists A and B: each of A gets z/|A|, each of B z/|B|."""
    cuts = np.union1d(np.arange(1, A.shape[0] + 1) / A.shape[0], np.arange(1, B.shape[0] + 1) / B.shape[0])
    cuts = np.concatenate([[0.0], cuts])
    seg = np.diff(cuts)
    mid = 0.5 * (cuts[1:] + cuts[:-1])
    keep = seg > 1e-12
    ia = np.minimum((mid[keep] * A.shape[0]).astype(np.int64), A.shape[0] - 1)
    ib = np.minimum((mid[keep] * B.shape[0]).astype(np.int64), B.shape[0] - 1)
    return [(A[x], B[y], z * w) for x, y, w in zip(ia, ib, seg[keep])]


# ------------------------------------------------------------------- policy options
@dataclass(frozen=True, kw_only=True)
class SpaceOptions:
    """Policy parameters that widen the allocation space (mixed into LP policies).

    Parameters
    ----------
    packing : Packing, optional
        Space sharing: pairs of jobs may share GPUs at the throughputs of a pair table
        (:class:`~hetsched.formulations.spaces.packing.Packing`).
    placement_sensitivity : PlacementSensitivity, optional
        Multi-GPU jobs may run consolidated (one server) or unconsolidated, at their two
        throughputs, under a bound on GPUs that can host consolidated gangs
        (:class:`~hetsched.formulations.spaces.placement_sensitivity.PlacementSensitivity`).

    Either makes the policy non-aggregatable by ``hetsched.solve`` (identical-looking jobs
    may differ in their pair key or unconsolidated throughputs); the policy then
    aggregates itself with those in the key (:meth:`solve_by_class`, exact), unless the
    option says ``aggregate=False``.
    """

    packing: Any = None
    placement_sensitivity: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_space_option(self.packing, "packing")
        check_space_option(self.placement_sensitivity, "placement_sensitivity")

    #: Capability (:class:`~hetsched.formulations.base.Policy`): both options are per-job tables.
    job_tables: ClassVar[tuple[str, ...]] = ("packing", "placement_sensitivity")

    def bind_tables(self, binding: TableBinding) -> Any:
        """Capability (:meth:`~hetsched.formulations.base.Policy.bind_tables`): a
        ``"workload"`` option built by the driver (from its catalogue: ``from_catalogue``),
        an option object re-keyed to job numbers (``rekeyed``)."""
        builders = {"packing": Packing.from_catalogue, "placement_sensitivity": PlacementSensitivity.from_catalogue}
        changes: dict[str, Any] = {}
        for name in self.bound_tables():  # type: ignore[attr-defined]
            value = getattr(self, name)
            if isinstance(value, str) and value == WORKLOAD:
                changes[name] = binding.workload_table(name, builders[name])
            elif binding.ids is not None:
                changes[name] = value.rekeyed(binding.ids)
        return dataclasses.replace(self, **changes) if changes else self  # type: ignore[type-var]

    @property
    def aggregatable(self) -> bool:  # type: ignore[override]
        """False when packing or placement sensitivity is on (see class docstring)."""
        return self.packing is None and self.placement_sensitivity is None

    @property
    def emits_allocation_rows(self) -> bool:  # type: ignore[override]
        """Capability (:class:`~hetsched.formulations.base.Policy`): True when packing or
        placement sensitivity is on; the outcome then lists the rows that run."""
        return self.packing is not None or self.placement_sensitivity is not None

    def params(self) -> dict[str, Any]:
        """The policy's parameters as given (``packing`` / ``placement_sensitivity`` only when set)."""
        out = super().params()  # type: ignore[misc]
        for name in ("packing", "placement_sensitivity"):
            if out.get(name) is None:
                out.pop(name, None)
        return out

    def solve_by_class(self, jobs: JobSet, cluster: Any, ctx: Any) -> Any:
        """Solve over classes of identical jobs (exact, see :func:`space_classes`), or None.

        None when neither option is set, when an option has ``aggregate=False``, or when
        every job is its own class; then the policy solves job by job.
        """
        opts = [o for o in (self.packing, self.placement_sensitivity) if o is not None]
        if not opts:
            return None
        _check_options(self.packing, self.placement_sensitivity)
        if not all(o.aggregate for o in opts):
            return None
        with ctx.building():
            classes = space_classes(jobs, self.aggregation_fields(jobs), packing=self.packing,  # type: ignore[attr-defined]
                                    placement_sensitivity=self.placement_sensitivity)
        if classes is None:
            return None
        outcome = self.solve(classes.jobs, cluster, ctx)  # type: ignore[attr-defined]
        return expand_class_outcome(outcome, self, classes, jobs, cluster)

    def allocation_space(self, jobs: JobSet, cluster: Any) -> AllocationSpace | None:
        """The space this policy allocates over, or None for the plain (job, type) space."""
        if self.packing is None and self.placement_sensitivity is None:
            return None
        _check_options(self.packing, self.placement_sensitivity)
        return build_space(jobs, cluster, packing=self.packing, placement_sensitivity=self.placement_sensitivity)
