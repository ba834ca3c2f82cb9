r"""Sia (Jayaram Subramanya et al., SOSP'23): elastic jobs choose a GPU type *and* a count.

Each round, every job gets at most one *configuration* ``c = (k_c, n_c)`` — ``n_c`` GPUs of
type ``k_c`` (see :mod:`hetsched.formulations.sia.configurations` for the set and the goodput bootstrap) —
from one integer program over all jobs.

Math
----
:math:`G_{jc} \ge 0` is job j's goodput on configuration c (a user table, or the bootstrap
model); c is *available* to j when :math:`G_{jc} > 0`, :math:`n_c \le C_{k_c}` and
:math:`n_c \le` ``max_gpus_per_job``. Following Sia (SOSP'23 §3–4) and its artifact's
``adaptdl_sched/policy/mip.py`` (``optimize_mip_inv``: normalisation, restart factor, power,
``lambda_n``; defaults ``p_fairness = -0.5``, ``lambda_n = 1.1``):

.. math::

    \hat G_{jc} = \frac{G_{jc}}{\min_{c' \text{ available}} G_{jc'}}\,
                  (1 - \delta_j)^{[\,c_j^0 \ne \varnothing,\ c \ne c_j^0\,]}

    u_{jc} = \begin{cases} \operatorname{sgn}(p)\, \hat G_{jc}^{\,p} & p \ne 0 \\
                           \log \hat G_{jc} & p = 0 \end{cases}

    \max_{x \in \{0,1\}}\ \sum_j w_j \Big[\sum_c u_{jc} x_{jc} - \lambda \big(1 - \sum_c x_{jc}\big)\Big]
    \quad\text{s.t.}\quad \sum_c x_{jc} \le 1\ \ \forall j, \qquad
    \sum_j \sum_{c:\,k_c = k} n_c\, x_{jc} \le C_k\ \ \forall k .

Normalising by the job's least goodput makes :math:`\hat G \ge 1` (before the restart
discount), so one scale fits every job. :math:`p < 0` favours fairness (Sia's artifact
defaults to :math:`p = -0.5`, as does this class); :math:`p = 1` maximises total normalised
goodput. For :math:`p = 0` this module uses the log form (proportional fairness), the limit
of :math:`(\hat G^p - 1)/p`, rather than rejecting it. Sia's own objective is
:math:`\min \sum \hat G^p + \lambda\,\#\text{unallocated}` for :math:`p < 0` (and a
maximisation for :math:`p > 0`): the same program as here. The restart discount below
applies to every change, migrations included, as in the artifact's simulator (``sia.py``,
where the migrate factor equals the re-allocation factor); the artifact's physical-cluster
policy (``adaptdl_sched/policy/mip.py``) discounts only re-allocations within the current
GPU type.
:math:`c_j^0` is the job's current configuration (``current``): every *other* configuration
has its goodput multiplied by :math:`1 - \delta_j` (``restart_penalty``; Sia's factor is
:math:`(\mathrm{age} - \mathrm{restarts}\cdot t_r)/(\mathrm{age} + t_r)`, i.e.
:math:`\delta = 1 -` that). A running job therefore moves only when the new goodput exceeds
the current one by more than the factor :math:`1/(1-\delta_j)`.

:math:`\lambda` (``lambda_unallocated``) is what a job left without GPUs costs. By default
it is set just high enough that an optimum never leaves a job without GPUs while a GPU of
a type it can use is idle or held by a job with two or more GPUs of that type:

.. math::

    \lambda = \frac{\max_j w_j (\max_c u_{jc} - \min_c u_{jc})}{\min_j w_j} - \min_{j,c} u_{jc} + 1

(taking one GPU from such a job costs it less than the first term; giving it to the idle job
gains at least :math:`\lambda + \min u`). The argument needs each job that uses type k to
have a one-GPU configuration on k, which the bootstrap always provides. Sia's artifact uses
:math:`\lambda = 1.1`, which can leave a job out in favour of another job's extra GPUs.

The constant :math:`-\lambda \sum_j w_j` is kept out of the integer program, whose
objective :math:`\sum_{jc} v_{jc} x_{jc}`, :math:`v_{jc} = w_j (u_{jc} + \lambda)`, is then
positive, so relative gaps are well defined; ``objective`` adds the constant back. Columns
that cannot be in any optimum are dropped before solving: :math:`v_{jc} \le 0` (worse than
no GPUs) and configurations with more GPUs of the same type but no higher value.

Solving
-------
Gaps are relative to ``objective`` (Sia's objective above, constant included):
:math:`(\text{upper bound} - \text{objective}) / |\text{objective}|`.

1. *LP bound.* :func:`lagrangian_bound` minimises the Lagrangian of the capacity rows over
   the ``n_types`` prices :math:`\mu` (Kelley's cutting planes): :math:`L = L(\mu^*)` is the
   LP relaxation's optimum, an upper bound on the ILP (``extra["lp_bound"]``).
2. *Small ILPs* (at most :data:`REDUCE_MIN_COLUMNS` columns) go to the MIP solver whole.
3. *Large ILPs: column reduction.* With reduced costs
   :math:`r_{jc} = v_{jc} - \mu_{k_c} n_c - \pi_j \le 0`,
   :math:`\pi_j = \max(0, \max_c v_{jc} - \mu_{k_c} n_c)`, every integer solution that uses
   column (j, c) is worth at most :math:`L + r_{jc}`. A reduced ILP keeps the columns with
   :math:`r_{jc} \ge -\tau`, so anything it leaves out is worth less than :math:`L - \tau`,
   and :math:`\max(U_r, L - \tau)` bounds the full ILP, :math:`U_r` being the MIP solver's
   bound on the reduced one. The first :math:`\tau` is :data:`REDUCE_TAU` times the largest
   :math:`v` (about one column per job); when the gap this proves exceeds ``mip_gap``, the
   next program takes :math:`\tau = L - z -` :data:`NEXT_ROUND_SHARE` ``· mip_gap · |z|``
   (z: the value found), which leaves out only columns that cannot beat the gap.
4. *Polish.* A solution within the gap may still leave a job without GPUs while a GPU it
   can use is idle or held by a job with two or more GPUs of that type (each such case costs
   at least 1 under the default :math:`\lambda`, little against a large objective).
   :func:`polish` then gives the job a configuration (shrinking that job's) whenever this
   raises the objective; the gap can only shrink.

The MIP solver is asked for the relative gap on the ILP's own objective (without the
constant) that corresponds to ``mip_gap`` on ``objective`` (HiGHS ``mip_rel_gap``, CBC
``gapRel``). ``extra["mip_gap"]`` is the gap proven for the returned solution, from
:math:`L` and the solver's bound; ``extra["lp_gap"]`` is :math:`(L - z)/|z|` alone. With the
default :math:`p < 0` the LP relaxation is nearly integral (at most ``n_types`` jobs are
fractional at a vertex) and one reduced program of about one column per job settles it;
see ``docs/sia.md`` for timings, including the harder :math:`p = 1` at low load.

In numpy (``u`` of shape (n_jobs, n_configs), ``choice[j]`` the chosen configuration or -1)::

    objective = (w * np.where(choice >= 0, u[np.arange(n), choice], -lam)).sum()
    used[k]   = gpus[choice[(choice >= 0) & (type_index[choice] == k)]].sum()   # <= C[k]

Result
------
``X[j, k] = 1`` on the chosen type (the job runs all of the round on its ``n_c`` GPUs), 0
elsewhere; a job without GPUs has a zero row. Capacity holds as
:math:`\sum_j n_j X_{jk} \le C_k` with :math:`n_j` the *chosen* count — not the JobSet's
scale factors, which Sia does not use as gang sizes (they only say at how many GPUs
``T[j, k]`` was measured). ``res.extra["configurations"]`` is a DataFrame indexed by job id
with ``gpu_type`` (None when unallocated), ``gpus``, ``nodes``, ``goodput``,
``normalized_goodput`` and ``changed`` (a running job whose configuration changes);
``extra`` also holds ``mip_gap`` (proven relative gap, see "Solving"), ``lp_bound`` (LP
relaxation bound on ``objective``), ``lp_gap`` ((``lp_bound`` - ``objective``) /
|``objective``|), ``lambda_unallocated``, ``configuration_set`` (DataFrame), ``n_columns``
(ILP columns before reduction) and ``rounds`` (one dict per program solved: columns,
threshold, status, value, solver gap, seconds, polish moves, proven gap).

Sia is not aggregated (``aggregatable = False``): identical jobs may get different
configurations in an integer optimum, and ``current``, ``restart_penalty`` and goodput
tables are per job. (An exact class form exists — integer counts per class and
configuration — but the result would need per-member expansion, which ``solve`` does not do.)

Examples
--------
>>> import hetsched as hs
>>> jobs = hs.JobSet([[4.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"], ids=["a", "b"])
>>> cluster = hs.Cluster({"v100": 4, "k80": 4})
>>> res = hs.solve(hs.policies.Sia(gpus_per_node=4, mip_gap=0.0), jobs, cluster)
>>> res.status, res.X.tolist()
('optimal', [[1.0, 0.0], [0.0, 1.0]])
>>> res.extra["configurations"][["gpu_type", "gpus"]].to_dict("list")
{'gpu_type': ['v100', 'k80'], 'gpus': [4, 4]}
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError, show
from ...inputs.cluster import Cluster
from ...inputs.jobs import JobSet
from ...solvers.base import SolverOutput
from ...solvers.context import SolveContext
from ...solvers.program import LinearProgram
from ...validation import (
    check_instance,
    check_int,
    check_real,
    check_vector,
    fail,
    fail_at,
    is_real,
    is_whole,
)
from ..base import Policy, PolicyOutcome, register_policy
from ..builder import ProgramBuilder
from ..tables import TableBinding, job_numbers
from .configurations import (
    DEFAULT_MAX_GPUS,
    ConfigurationSet,
    bootstrap_goodput,
    configuration_set,
    configurations_from_labels,
    impute_type_throughputs,
)

__all__ = ["LagrangianBound", "Sia", "SiaProblem", "lagrangian_bound", "polish"]

log = logging.getLogger(__name__)

# Backend options come from the backend's capabilities: the MIP gap through ``gap_option``
# (backends without one get none) and presolve off through ``presolve_off``. HiGHS 1.12's MIP
# presolve spent 0.6 s on a reduced 2,133-column Sia ILP that it then solved at the root in
# 0.03 s with presolve off (2,048 GPUs, 4 types, 2,048 jobs); the programs built here have no
# dominated columns and no singleton job rows, so there is little left for presolve to do.
# User options win.
#: ILPs with more columns than this are solved by column reduction (``column_reduction=None``).
REDUCE_MIN_COLUMNS = 5_000
#: First reduced-cost threshold, relative to the largest ILP coefficient.
REDUCE_TAU = 1e-3
#: Programs solved at most by column reduction (the second normally certifies the gap).
MAX_ROUNDS = 4
#: Share of ``mip_gap`` left to the columns a further reduced program leaves out.
NEXT_ROUND_SHARE = 0.9
#: Kelley iterations at most, and the relative tolerance at which they stop.
KELLEY_MAX_ITER = 500
KELLEY_RTOL = 1e-9
#: Margin added to the smallest lambda that guarantees "one GPU per job where capacity allows".
LAMBDA_MARGIN = 1.0


@dataclasses.dataclass(frozen=True, eq=False)
class SiaProblem:
    """Everything :class:`Sia` derives from its inputs before building the ILP.

    Attributes
    ----------
    configs : ConfigurationSet
    goodput : ndarray, shape (n_jobs, n_configs)
        Raw goodput (0 where unavailable).
    available : ndarray of bool, shape (n_jobs, n_configs)
    normalized : ndarray, shape (n_jobs, n_configs)
        :math:`\\hat G` before the restart discount (NaN where unavailable).
    utility : ndarray, shape (n_jobs, n_configs)
        :math:`u_{jc}` (NaN where unavailable).
    current : ndarray of int, shape (n_jobs,)
        Current configuration index, -1 when not running, -2 when running on a configuration
        outside the set.
    lam : float
        :math:`\\lambda` used.
    value : ndarray, shape (n_jobs, n_configs)
        ILP coefficients :math:`w_j (u_{jc} + \\lambda)`, -inf where unavailable.
    keep : ndarray of bool, shape (n_jobs, n_configs)
        Columns that enter the ILP (available, positive value, not dominated).
    weights : ndarray, shape (n_jobs,)
        :math:`w_j`.
    """

    configs: ConfigurationSet
    goodput: np.ndarray
    available: np.ndarray
    normalized: np.ndarray
    utility: np.ndarray
    current: np.ndarray
    lam: float
    value: np.ndarray
    keep: np.ndarray
    weights: np.ndarray

    def objective(self, choice: np.ndarray) -> float:
        """Policy objective of a choice (configuration index per job, -1 for none)."""
        choice = np.asarray(choice, dtype=np.int64)
        rows = np.arange(choice.shape[0])
        u = np.where(choice >= 0, self.utility[rows, np.maximum(choice, 0)], -self.lam)
        return float((self.weights * u).sum())


@register_policy(eq=False)  # eq on DataFrame fields would be ambiguous
class Sia(Policy):
    """Sia's goodput ILP: each job gets one configuration (GPU type, GPU count) or none.

    Parameters
    ----------
    goodput : pandas.DataFrame, optional
        Full goodput table: index = job ids (every job of the JobSet; other rows are
        ignored), columns = ``(gpu_type, gpus)`` pairs (a MultiIndex or tuples), values
        >= 0 with 0 or NaN for "not possible". The columns then *are* the configuration set
        (no power-of-two restriction). Rows need not be monotone in the GPU count (allowed;
        a configuration with more GPUs and no more goodput is simply never chosen). Without
        a table, goodput comes from the bootstrap model below.
    fairness_power : float, default -0.5
        Sia's ``p``: ``p < 0`` favours fairness, ``p = 1`` total normalised goodput,
        ``p = 0`` uses the log form (proportional fairness).
    lambda_unallocated : float, optional
        Cost of a job without GPUs, in utility units (>= 0). None: the smallest value that
        guarantees one GPU per job where capacity allows, plus 1 (see the module docstring).
        Sia's artifact uses 1.1.
    restart_penalty : float or array-like of shape (n_jobs,), default 0.0
        Fraction of goodput, in [0, 1), lost by a running job that changes configuration.
    current : Mapping or pandas.DataFrame, optional
        Current configuration of running jobs: job id -> ``(gpu_type, gpus)`` (or None), or a
        DataFrame indexed by job id with ``gpu_type`` and ``gpus`` columns, such as the
        previous round's ``res.extra["configurations"]``. Jobs not listed are not running;
        ids not in the JobSet are ignored (finished jobs).
    max_gpus_per_job : int or None, default 64
        Largest configuration any job may get (None: no cap).
    gpus_per_node : int or Mapping[str, int], optional
        Node size per type; default: the cluster's topology, else 8.
    intra_node_overhead, inter_node_overhead : float, default 0.1, 0.3
        Bootstrap scaling model: synchronisation cost relative to a step's compute inside a
        node and across nodes (:func:`hetsched.formulations.sia.configurations.scaling_factor`).
    noise_scale_ratio : float, default inf
        Pollux statistical-efficiency parameter (gradient noise scale over the one-GPU
        batch); inf: goodput is plain throughput.
    type_speedups : Mapping[str, float] or "learned", optional
        Ratio model across types for jobs with zero throughput on some types: relative
        single-GPU speeds, or ratios learned from jobs measured on both types. None: a zero
        throughput means the job cannot run on that type.
    mip_gap : float, default 0.01
        Relative MIP gap at which the solver stops (HiGHS ``mip_rel_gap``, CBC ``gapRel``).
    column_reduction : bool, optional
        Solve a reduced ILP (columns whose LP reduced cost is near 0) and enlarge it only
        if the LP bound does not certify the gap. None: when the ILP has more than
        :data:`REDUCE_MIN_COLUMNS` columns. Exact either way (see "Solving").
    """

    name = "sia"
    aggregatable = False
    emits_configurations = True
    job_tables = ("goodput",)
    goodput: Any = None
    fairness_power: float = -0.5
    lambda_unallocated: float | None = None
    restart_penalty: Any = 0.0
    current: Any = None
    max_gpus_per_job: int | None = DEFAULT_MAX_GPUS
    gpus_per_node: Any = None
    intra_node_overhead: float = 0.1
    inter_node_overhead: float = 0.3
    noise_scale_ratio: float = math.inf
    type_speedups: Any = None
    mip_gap: float = 0.01
    column_reduction: bool | None = None

    def bind_tables(self, binding: TableBinding) -> Sia:
        """Capability (:meth:`~hetsched.formulations.base.Policy.bind_tables`): the
        ``goodput`` table's rows re-keyed to job numbers."""
        if self.goodput is None or binding.ids is None:
            return self
        return dataclasses.replace(self, goodput=self.goodput.set_axis(job_numbers(self.goodput.index, binding.ids),
                                                                       axis=0))

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real(self.fairness_power, "fairness_power")
        check_real(self.lambda_unallocated, "lambda_unallocated", low=0.0, allow_none=True,
                   rule="a finite number >= 0")
        check_int(self.max_gpus_per_job, "max_gpus_per_job", low=1, allow_none=True)
        check_real(self.intra_node_overhead, "intra_node_overhead", low=0.0)
        check_real(self.inter_node_overhead, "inter_node_overhead", low=0.0)
        nu = self.noise_scale_ratio
        if not is_real(nu) or not nu > 0:  # nan fails too
            raise fail("noise_scale_ratio", "a positive number (inf allowed)", nu)
        check_real(self.mip_gap, "mip_gap", low=0.0)
        if self.column_reduction is not None and not isinstance(self.column_reduction, (bool, np.bool_)):
            raise fail("column_reduction", "True, False or None", self.column_reduction)
        if np.ndim(self.restart_penalty) == 0:  # a vector's length is checked against the jobs at solve
            if not is_real(self.restart_penalty):
                raise fail("restart_penalty", "a number in [0, 1) or an array of n_jobs such numbers",
                           self.restart_penalty)
            _restart_vector(self.restart_penalty, 1)
        else:
            _restart_vector(self.restart_penalty, int(np.shape(self.restart_penalty)[0]))
        _check_gpus_per_node(self.gpus_per_node)
        _check_type_speedups(self.type_speedups)
        check_instance(self.goodput, "goodput", pd.DataFrame, "a pandas DataFrame (job ids x (gpu_type, gpus) columns)",
                       allow_none=True)
        if self.current is not None and not isinstance(self.current, (Mapping, pd.DataFrame)):
            raise ValidationError(
                f"`current` must be a mapping job id -> (gpu_type, gpus) or a DataFrame; got {type(self.current).__name__}."
            )

    # ------------------------------------------------------------------ inputs
    def configurations(self, jobs: JobSet, cluster: Cluster) -> ConfigurationSet:
        """The configuration set: the goodput table's columns, else Sia's set for ``cluster``."""
        if self.goodput is not None:
            return configurations_from_labels(_table_labels(self.goodput), cluster, jobs.gpu_types,
                                              self.gpus_per_node)
        return configuration_set(cluster, jobs.gpu_types, gpus_per_node=self.gpus_per_node,
                                 max_gpus=self.max_gpus_per_job)

    def goodput_table(self, jobs: JobSet, cluster: Cluster) -> pd.DataFrame:
        """Goodput per job (rows, by id) and configuration (``(gpu_type, gpus)`` columns).

        The table given as ``goodput``, restricted to the jobs, or the bootstrap estimate;
        editing it and passing it back as ``goodput=`` is the way to correct the model.
        """
        configs = self.configurations(jobs, cluster)
        G = self._raw_goodput(jobs, configs)
        cols = pd.MultiIndex.from_tuples(configs.labels(), names=["gpu_type", "gpus"])
        return pd.DataFrame(G, index=pd.Index(jobs.ids, name="job_id"), columns=cols)

    def _raw_goodput(self, jobs: JobSet, configs: ConfigurationSet) -> np.ndarray:
        if self.goodput is not None:
            return _table_values(self.goodput, jobs, configs)
        T = jobs.throughputs
        if self.type_speedups is not None:
            T = impute_type_throughputs(T, jobs.gpu_types, self.type_speedups)
        return bootstrap_goodput(
            T, jobs.scale_factors, configs,
            intra_node_overhead=float(self.intra_node_overhead),
            inter_node_overhead=float(self.inter_node_overhead),
            noise_scale_ratio=float(self.noise_scale_ratio),
        )

    def problem(self, jobs: JobSet, cluster: Cluster) -> SiaProblem:
        """Configurations, goodputs, utilities, lambda and ILP coefficients for ``jobs``.

        Raises
        ------
        ValidationError
            A job with no feasible configuration (named), bad ``current`` or
            ``restart_penalty`` values, utilities that overflow.
        """
        n = jobs.n_jobs
        configs = self.configurations(jobs, cluster)
        G = self._raw_goodput(jobs, configs)
        cap = cluster.capacities(jobs.gpu_types)
        fits = configs.gpus <= cap[configs.type_index]
        if self.max_gpus_per_job is not None:
            fits &= configs.gpus <= int(self.max_gpus_per_job)
        avail = (G > 0) & fits[None, :]
        none = ~avail.any(axis=1)
        if none.any():
            raise ValidationError(self._no_config_message(jobs, cluster, configs, G, fits, np.flatnonzero(none)))
        Gmin = np.where(avail, G, np.inf).min(axis=1)
        Gn = np.where(avail, G / Gmin[:, None], np.nan)
        current = self._current_index(jobs, configs)
        delta = _restart_vector(self.restart_penalty, n)
        running = current != -1
        discount = running[:, None] & (np.arange(configs.n_configs)[None, :] != current[:, None])
        Geff = np.where(discount, Gn * (1.0 - delta)[:, None], Gn)
        p = float(self.fairness_power)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if p == 0.0:
                U = np.log(Geff)
            else:
                U = np.sign(p) * np.power(Geff, p)
        U = np.where(avail, U, np.nan)
        if not np.isfinite(U[avail]).all():
            raise ValidationError(
                f"`fairness_power` = {p!r} with `restart_penalty` makes some utilities infinite "
                f"(normalised goodputs up to {np.nanmax(Geff):.3g}); use a smaller |p| or a restart_penalty below 1."
            )
        w = np.asarray(jobs.weights, dtype=float)
        if self.lambda_unallocated is None:
            umax = np.nanmax(U, axis=1)
            umin = np.nanmin(U, axis=1)
            lam = float(np.max(w * (umax - umin)) / np.min(w) - np.min(umin) + LAMBDA_MARGIN)
            lam = max(lam, 0.0)
        else:
            lam = float(self.lambda_unallocated)
        V = np.where(avail, w[:, None] * (U + lam), -np.inf)
        keep = avail & (V > 0) & _not_dominated(V, configs)
        return SiaProblem(configs, np.where(avail, G, 0.0), avail, Gn, U, current, lam, V, keep, w)

    # ------------------------------------------------------------------ program
    def formulate(self, jobs: JobSet, cluster: Cluster) -> LinearProgram:
        """The full ILP: binary ``x[j, c]`` per column that can be in an optimum.

        ``x_index`` is all -1 (X is not a variable: ``X[j, k_c] = x[j, c]``); ``meta`` holds
        ``job`` and ``config`` per variable and the constant ``offset`` left out of ``c``.
        """
        prob = self.problem(jobs, cluster)
        return self._build(prob, jobs, cluster, prob.keep)

    def _build(self, prob: SiaProblem, jobs: JobSet, cluster: Cluster, keep: np.ndarray) -> LinearProgram:
        n, m = jobs.n_jobs, jobs.n_types
        job, cfg = np.nonzero(keep)
        nv = job.shape[0]
        b = ProgramBuilder()
        x = b.add_vars(nv, lb=0.0, ub=1.0, cost=prob.value[job, cfg], integer=True)
        cols = x + np.arange(nv)
        # one "at most one configuration" row per job with two or more columns (x <= 1 covers the rest)
        multi = np.bincount(job, minlength=n) >= 2
        row_of = np.cumsum(multi) - 1
        sel = multi[job]
        b.add_rows(rows=row_of[job[sel]], cols=cols[sel], vals=1.0, lb=-np.inf, ub=1.0, n_rows=int(multi.sum()))
        cap = cluster.capacities(jobs.gpu_types)
        b.add_rows(rows=prob.configs.type_index[cfg], cols=cols, vals=prob.configs.gpus[cfg].astype(float),
                   lb=-np.inf, ub=cap, n_rows=m)
        return b.build(
            sense="max", x_index=np.full((n, m), -1, dtype=np.int64), name=self.name,
            meta={"job": job, "config": cfg, "offset": -prob.lam * float(prob.weights.sum())},
        )

    def objective_of(self, X: np.ndarray, jobs: JobSet, cluster: Cluster) -> float:
        """Not defined on X alone: Sia's objective depends on the GPU counts chosen.

        Use :meth:`SiaProblem.objective` with a configuration index per job.
        """
        raise NotImplementedError(
            "Sia's objective depends on the chosen GPU counts, not on X alone; "
            "use Sia().problem(jobs, cluster).objective(choice)."
        )

    def solve(self, jobs: JobSet, cluster: Cluster, ctx: SolveContext) -> PolicyOutcome:
        """Bound the ILP by its LP relaxation, solve it (reduced when large), read configurations.

        See "Solving" in the module docstring.
        """
        with ctx.building():
            prob = self.problem(jobs, cluster)
            cap = cluster.capacities(jobs.gpu_types)
            bound = lagrangian_bound(prob.value, prob.keep, prob.configs, cap)
        n_cols = int(prob.keep.sum())
        reduce = self.column_reduction if self.column_reduction is not None else n_cols > REDUCE_MIN_COLUMNS
        offset = -prob.lam * float(prob.weights.sum())
        programs = self._solve_programs(prob, jobs, cluster, ctx, cap, bound, reduce, offset)
        return _outcome(jobs, prob, bound, offset, n_cols, programs)

    def _solve_programs(self, prob: SiaProblem, jobs: JobSet, cluster: Cluster, ctx: SolveContext,
                        cap: np.ndarray, bound: LagrangianBound, reduce: bool, offset: float) -> _Programs:
        """Solve the ILP whole, or (``reduce``) on the columns with reduced cost >= -tau, with
        tau raised until the gap is proven or :data:`MAX_ROUNDS` programs were solved; each
        solution is polished. ``offset`` is the constant left out of the program."""
        n = jobs.n_jobs
        L = bound.value  # program units; L + offset is the bound on `objective`
        options: dict[str, Any] = {}
        rounds: list[dict[str, Any]] = []
        if reduce:
            rc = bound.reduced_costs(prob.value, prob.configs)
            tau = REDUCE_TAU * max(1.0, float(np.max(prob.value[prob.keep], initial=0.0)))
        else:
            rc, tau = None, math.inf
        choice: np.ndarray | None = None
        gap = math.inf
        while True:
            keep = prob.keep if rc is None else prob.keep & (rc >= -tau)
            with ctx.building():
                lp = self._build(prob, jobs, cluster, keep)
            if not rounds:
                options = self._program_options(ctx, lp, L, offset)
            out = ctx.run(lp, options=options)
            info = {"columns": lp.n_vars, "tau": tau, "status": out.status, "ilp_value": out.objective,
                    "solver_mip_gap": out.mip_gap, "solve_s": out.solve_s, "polish_moves": 0}
            rounds.append(info)
            if not out.has_solution:
                break
            choice = _choice(out.x, lp.meta["job"], lp.meta["config"], n)
            with ctx.building():
                choice, info["polish_moves"] = polish(choice, prob, cap)
            z = prob.objective(choice) - offset  # program units
            if not info["polish_moves"] and abs(z - out.objective) > 1e-6 * max(1.0, abs(z)):
                log.warning("sia: objective recomputed from the choice (%.9g) differs from the solver's (%.9g)",
                            z, out.objective)
            gap = _proven_gap(out, z, L, tau, offset)
            info["gap"] = gap
            if out.status != "optimal" or gap <= self.mip_gap or rc is None:
                break
            if len(rounds) >= MAX_ROUNDS:
                log.warning("sia: gap %.3g after %d reduced programs (requested %.3g)", gap, len(rounds), self.mip_gap)
                break
            # the next program holds every column of every solution better than
            # z + NEXT_ROUND_SHARE * mip_gap * |objective|, so its own bound certifies the gap
            tau_next = (L - z) - NEXT_ROUND_SHARE * self.mip_gap * _denominator(z + offset)
            tau = max(tau_next * (1.0 + 1e-9), 2.0 * tau)
        return _Programs(lp=lp, out=out, choice=choice, gap=gap, rounds=rounds)

    def _program_options(self, ctx: SolveContext, lp: LinearProgram, L: float, offset: float) -> dict[str, Any]:
        """Backend options for these ILPs, by what the backend can do: presolve off, and the
        relative MIP gap on the program (bound ``L``, constant ``offset`` left out) that keeps
        ``mip_gap`` on the objective."""
        caps = ctx.capabilities(lp)
        options = dict(caps.presolve_off)
        if caps.gap_option is not None:
            options[caps.gap_option] = _program_gap(float(self.mip_gap), L, offset)
        return options

    # ------------------------------------------------------------------ helpers
    def _current_index(self, jobs: JobSet, configs: ConfigurationSet) -> np.ndarray:
        n = jobs.n_jobs
        cur = np.full(n, -1, dtype=np.int64)
        if self.current is None:
            return cur
        pairs = _current_pairs(self.current)
        row = {_key(i): r for r, i in enumerate(jobs.ids.tolist())}
        index = configs.index()
        types = set(jobs.gpu_types)
        outside = 0
        for jid, value in pairs:
            r = row.get(_key(jid))
            if r is None:
                continue
            if value is None:
                continue
            if not (isinstance(value, tuple) and len(value) == 2):
                raise ValidationError(
                    f"`current[{jid!r}]` must be a (gpu_type, gpus) pair or None; got {value!r}."
                )
            t, g = value
            if t is None or (isinstance(t, float) and math.isnan(t)):
                continue
            if t not in types:
                raise ValidationError(
                    f"`current[{jid!r}]` names GPU type {t!r}, which is not one of the jobs' GPU types {list(jobs.gpu_types)}."
                )
            if not is_whole(g) or g < 0:
                raise ValidationError(f"`current[{jid!r}]` must have a non-negative integer GPU count; got {g!r}.")
            if int(g) == 0:
                continue
            c = index.get((t, int(g)))
            if c is None:
                cur[r] = -2
                outside += 1
            else:
                cur[r] = c
        if outside:
            log.info("sia: %d running job(s) use a configuration outside the set; any choice restarts them", outside)
        return cur

    @staticmethod
    def _no_config_message(jobs: JobSet, cluster: Cluster, configs: ConfigurationSet, G: np.ndarray,
                           fits: np.ndarray, rows: np.ndarray) -> str:
        j = int(rows[0])
        jid = show(jobs.ids[j])
        more = f" ({rows.size} such job(s))"
        if configs.n_configs == 0:
            return f"no configuration fits the cluster {cluster.as_dict()} for the job types {list(jobs.gpu_types)}{more}."
        if not (G[j] > 0).any():
            return f"job {jid} has no feasible configuration: its goodput is 0 on every configuration{more}."
        big = [lab for lab, ok, g in zip(configs.labels(), fits, G[j]) if g > 0 and not ok]
        return (
            f"job {jid} has no feasible configuration: the ones with positive goodput {big[:5]} exceed "
            f"the cluster's GPU counts or `max_gpus_per_job`{more}."
        )


# ---------------------------------------------------------------------- functions
def _check_gpus_per_node(value: Any) -> None:
    """``gpus_per_node``: None, a positive int, or a mapping GPU type -> positive int
    (which types it must name is checked against the cluster at solve)."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for t, v in value.items():
            check_int(v, f"gpus_per_node[{t!r}]", low=1)
        return
    check_int(value, "gpus_per_node", low=1,
              rule="a positive integer, a mapping of GPU type -> positive integer, or None")


def _check_type_speedups(value: Any) -> None:
    """``type_speedups``: None, "learned", or a mapping GPU type -> positive finite speed."""
    rule = "None, 'learned' or a mapping of GPU type -> relative speed"
    if value is None or (isinstance(value, str) and value == "learned"):
        return
    if not isinstance(value, Mapping):
        raise fail("type_speedups", rule, value)
    for t, v in value.items():
        check_real(v, f"type_speedups[{t!r}]", low=0.0, low_open=True, rule="a positive number")


def _key(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) and getattr(value, "ndim", None) == 0 else value


def _restart_vector(value: Any, n: int) -> np.ndarray:
    arr = check_vector(value, "restart_penalty", n)
    bad = ~np.isfinite(arr) | (arr < 0) | (arr >= 1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise fail_at("restart_penalty", "in [0, 1)", f"entry {j}", arr[j])
    return arr


def _current_pairs(current: Any) -> list[tuple[Any, Any]]:
    if isinstance(current, pd.DataFrame):
        missing = [c for c in ("gpu_type", "gpus") if c not in current.columns]
        if missing:
            raise ValidationError(f"`current` as a DataFrame needs columns 'gpu_type' and 'gpus'; missing {missing}.")
        out = []
        for jid, t, g in zip(current.index.tolist(), current["gpu_type"].tolist(), current["gpus"].tolist()):
            if t is None or (isinstance(t, float) and math.isnan(t)) or g is pd.NA or (isinstance(g, float) and math.isnan(g)):
                out.append((jid, None))
            else:
                out.append((jid, (t, g)))
        return out
    return [(k, (tuple(v) if isinstance(v, list) else v)) for k, v in current.items()]


def _table_labels(table: pd.DataFrame) -> list[tuple[str, int]]:
    cols = table.columns
    if isinstance(cols, pd.MultiIndex):
        if cols.nlevels != 2:
            raise ValidationError(f"`goodput` columns must have two levels (gpu_type, gpus); got {cols.nlevels}.")
        return [(str(t), g) for t, g in cols.tolist()]
    labels = cols.tolist()
    for lab in labels:
        if not (isinstance(lab, tuple) and len(lab) == 2):
            raise ValidationError(f"`goodput` columns must be (gpu_type, gpus) pairs; got {lab!r}.")
    return [(str(t), g) for t, g in labels]


def _table_values(table: pd.DataFrame, jobs: JobSet, configs: ConfigurationSet) -> np.ndarray:
    ids = pd.Index(jobs.ids)
    if not table.index.is_unique:
        dup = table.index[table.index.duplicated()].unique().tolist()[:5]
        raise ValidationError(f"`goodput` index must have unique job ids; duplicated: {dup}.")
    missing = ids.difference(table.index)
    if len(missing):
        raise ValidationError(
            f"`goodput` must have a row for every job; missing {missing.tolist()[:5]} ({len(missing)} job(s))."
        )
    try:
        vals = table.loc[ids].to_numpy(dtype=float)
    except (TypeError, ValueError):
        raise ValidationError("`goodput` values must be numeric.") from None
    labels = [(str(t), int(g)) for t, g in _table_labels(table)]
    pos = {lab: i for i, lab in enumerate(labels)}
    order = np.asarray([pos[lab] for lab in configs.labels()], dtype=np.int64)
    vals = vals[:, order] if order.size else np.zeros((jobs.n_jobs, 0))
    bad = np.isinf(vals) | (vals < 0)
    if bad.any():
        j, c = np.argwhere(bad)[0]
        raise ValidationError(
            f"`goodput` must be >= 0 (0 or NaN: not possible); job {show(jobs.ids[j])} has {show(vals[j, c])} "
            f"on {configs.labels()[c]!r}."
        )
    vals = np.nan_to_num(vals, nan=0.0)
    _log_non_monotone(vals, configs, jobs)
    return vals


def _log_non_monotone(G: np.ndarray, configs: ConfigurationSet, jobs: JobSet) -> None:
    same = configs.type_index[1:] == configs.type_index[:-1]
    if not same.any() or G.shape[0] == 0:
        return
    both = (G[:, 1:] > 0) & (G[:, :-1] > 0) & same[None, :]
    drops = both & (G[:, 1:] < G[:, :-1])
    if drops.any():
        j = int(np.flatnonzero(drops.any(axis=1))[0])
        log.info("sia: goodput table is not monotone in the GPU count for %d job(s), e.g. %r (allowed)",
                 int(drops.any(axis=1).sum()), jobs.ids[j])


def _not_dominated(V: np.ndarray, configs: ConfigurationSet) -> np.ndarray:
    """True where no configuration of the same type with fewer GPUs has a value >= V."""
    keep = np.ones(V.shape, dtype=bool)
    t = configs.type_index
    if t.size == 0:
        return keep
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    ends = np.r_[starts[1:], t.size]
    for a, b in zip(starts, ends):
        if b - a < 2:
            continue
        block = V[:, a:b]
        prev = np.maximum.accumulate(block, axis=1)[:, :-1]
        keep[:, a + 1:b] = block[:, 1:] > prev
    return keep


def _denominator(objective: float) -> float:
    """|objective| for relative gaps (tiny floor: a zero objective gives an infinite gap)."""
    return max(abs(objective), 1e-300)


def _program_gap(mip_gap: float, L: float, offset: float) -> float:
    """The solver's relative gap (on the ILP's objective, without the constant ``offset``) that
    keeps the gap on ``objective`` within ``mip_gap``, estimated from the bound ``L``."""
    if mip_gap == 0.0 or not math.isfinite(L) or L <= 0:
        return mip_gap
    return min(mip_gap, mip_gap * abs(L + offset) / max(L, 1.0) / (1.0 + mip_gap))


@dataclasses.dataclass
class _Programs:
    """What :meth:`Sia._solve_programs` leaves: the last program and its solver output, the
    last choice read (None before any), the gap proven for it and one dict per program."""

    lp: LinearProgram
    out: SolverOutput
    choice: np.ndarray | None
    gap: float
    rounds: list[dict[str, Any]]


def _proven_gap(out: SolverOutput, z: float, L: float, tau: float, offset: float) -> float:
    """Relative gap on the objective proven for the value ``z`` (program units) found by the
    program just solved (columns with reduced cost >= ``-tau``), from the bound ``L``."""
    # Upper bounds on the full ILP: L; and, for the program just solved, its solver bound
    # (HiGHS and CBC measure gaps against at most max(1, |incumbent|)) or, for a column
    # outside it, L - tau.
    upper = L
    if out.mip_gap is not None and out.status == "optimal":
        solver_bound = out.objective + out.mip_gap * max(1.0, abs(out.objective))
        upper = min(L, max(solver_bound, L - tau))
    return max(0.0, upper - z) / _denominator(z + offset)


def _outcome(jobs: JobSet, prob: SiaProblem, bound: LagrangianBound, offset: float, n_cols: int,
             programs: _Programs) -> PolicyOutcome:
    """The policy outcome: X (1 on each allocated job's chosen type; NaN without a solution),
    Sia's objective and ``extra`` (bounds, gaps, rounds, configurations)."""
    n, m = jobs.n_jobs, jobs.n_types
    out, choice, gap, rounds = programs.out, programs.choice, programs.gap, programs.rounds
    L = bound.value
    extra: dict[str, Any] = {
        "lambda_unallocated": prob.lam,
        "configuration_set": prob.configs.to_frame(),
        "n_columns": n_cols,
        "lp_bound": L + offset,
        "lp_bound_iterations": bound.iterations,
        "rounds": rounds,
    }
    if out.has_solution and choice is not None:
        X = np.zeros((n, m))
        alloc = choice >= 0
        X[np.flatnonzero(alloc), prob.configs.type_index[choice[alloc]]] = 1.0
        objective = prob.objective(choice)
        extra["mip_gap"] = float(gap)
        extra["lp_gap"] = max(0.0, L + offset - objective) / _denominator(objective)
        message = (f"{out.message}; {int(alloc.sum())}/{n} jobs allocated, gap {gap:.3g} "
                   f"({len(rounds)} program(s), {programs.lp.n_vars} of {n_cols} columns)")
    else:
        choice = None
        X = np.full((n, m), np.nan)
        objective = float("nan")
        extra["mip_gap"] = None
        extra["lp_gap"] = float("nan")
        message = out.message
    extra["configurations"] = _configurations_frame(jobs, prob, choice)
    return PolicyOutcome(X=X, objective=objective, status=out.status, message=message, extra=extra)


def _choice(x: np.ndarray, job: np.ndarray, cfg: np.ndarray, n: int) -> np.ndarray:
    choice = np.full(n, -1, dtype=np.int64)
    sel = x > 0.5
    choice[job[sel]] = cfg[sel]
    if np.bincount(job[sel], minlength=n).max(initial=0) > 1:
        raise AssertionError("sia: solver returned more than one configuration for a job")
    return choice


def _configurations_frame(jobs: JobSet, prob: SiaProblem, choice: np.ndarray | None) -> pd.DataFrame:
    n = jobs.n_jobs
    idx = pd.Index(jobs.ids, name="job_id")
    if choice is None:
        return pd.DataFrame({
            "gpu_type": pd.Series([None] * n, index=idx, dtype=object),
            "gpus": pd.array([pd.NA] * n, dtype="Int64"),
            "nodes": pd.array([pd.NA] * n, dtype="Int64"),
            "goodput": np.full(n, np.nan),
            "normalized_goodput": np.full(n, np.nan),
            "changed": pd.array([pd.NA] * n, dtype="boolean"),
        }, index=idx)
    cs = prob.configs
    alloc = choice >= 0
    c = np.maximum(choice, 0)
    rows = np.arange(n)
    types = np.asarray(cs.gpu_types, dtype=object)
    gpu_type = np.where(alloc, types[cs.type_index[c]] if cs.n_configs else None, None)
    running = prob.current != -1
    return pd.DataFrame({
        "gpu_type": pd.Series(gpu_type, index=idx, dtype=object),
        "gpus": np.where(alloc, cs.gpus[c] if cs.n_configs else 0, 0).astype(np.int64),
        "nodes": np.where(alloc, cs.nodes[c] if cs.n_configs else 0, 0).astype(np.int64),
        "goodput": np.where(alloc, prob.goodput[rows, c] if cs.n_configs else 0.0, 0.0),
        "normalized_goodput": np.where(alloc, prob.normalized[rows, c] if cs.n_configs else 0.0, 0.0),
        "changed": running & (choice != prob.current),
    }, index=idx)


@dataclasses.dataclass(frozen=True, eq=False)
class LagrangianBound:
    """Result of :func:`lagrangian_bound`.

    Attributes
    ----------
    value : float
        :math:`L(\\mu)` at the best prices found: an upper bound on the ILP (program units,
        without the constant), equal to the LP relaxation's optimum when ``converged``.
    lower : float
        Kelley's model minimum: the LP relaxation's optimum is in ``[lower, value]``.
    mu : ndarray, shape (n_types,)
        Prices per GPU of each type.
    iterations : int
    """

    value: float
    lower: float
    mu: np.ndarray
    iterations: int

    @property
    def converged(self) -> bool:
        """Whether ``value - lower`` is within the relative tolerance."""
        return self.value - self.lower <= KELLEY_RTOL * max(1.0, abs(self.value)) * 10

    def reduced_costs(self, value: np.ndarray, configs: ConfigurationSet) -> np.ndarray:
        """:math:`v_{jc} - \\mu_{k_c} n_c - \\pi_j` (<= 0; -inf where ``value`` is -inf)."""
        A = value - (self.mu[configs.type_index] * configs.gpus)[None, :]
        pi = np.maximum(A.max(axis=1, initial=-np.inf), 0.0)
        return A - pi[:, None]


def lagrangian_bound(value: np.ndarray, keep: np.ndarray, configs: ConfigurationSet, capacities: np.ndarray,
                     *, rtol: float = KELLEY_RTOL, max_iter: int = KELLEY_MAX_ITER) -> LagrangianBound:
    r"""The ILP's LP relaxation bound, by Kelley's cutting planes on the capacity prices.

    Relaxing the capacity rows with prices :math:`\mu \ge 0` leaves one choice per job:

    .. math::

        L(\mu) = \sum_j \max\big(0, \max_c\, v_{jc} - \mu_{k_c} n_c\big) + \sum_k \mu_k C_k
        \;\ge\; \text{LP relaxation} \;\ge\; \text{ILP},

    with equality to the LP relaxation at the minimising :math:`\mu` (LP duality: the rows
    left are one simplex per job, whose vertices are integral). :math:`L` is convex and
    piecewise linear in ``n_types`` variables, so Kelley's method (a small LP over the cuts
    :math:`L(\mu_i) + g_i^\top(\mu - \mu_i)`, with subgradient
    :math:`g_k = C_k - \sum_j n_{c_j} [k_{c_j} = k]` at the maximising choices) reaches it in
    finitely many steps; each step costs one pass over the (n_jobs, n_configs) values. The
    cut LPs go to HiGHS through :func:`scipy.optimize.linprog`.

    Any :math:`\mu \ge 0` also bounds every integer solution that uses a column of
    reduced cost :math:`r_{jc} = v_{jc} - \mu_{k_c} n_c - \pi_j` (with
    :math:`\pi_j = \max(0, \max_c v_{jc} - \mu_{k_c} n_c)`) by :math:`L(\mu) + r_{jc}`, which
    is what makes column reduction exact.

    Examples
    --------
    >>> from hetsched import Cluster
    >>> from hetsched.formulations.sia.configurations import configuration_set
    >>> cs = configuration_set(Cluster({"a": 2}), gpus_per_node=2)      # (a,1), (a,2)
    >>> v = np.array([[1.0, 1.5], [1.0, 1.5]])
    >>> round(lagrangian_bound(v, v > 0, cs, np.array([2.0])).value, 9)  # both on one GPU
    2.0
    """
    from scipy.optimize import linprog

    V = np.where(keep, value, -np.inf)
    n, m = V.shape[0], capacities.shape[0]
    ty = configs.type_index
    gp = configs.gpus.astype(float)
    C = np.asarray(capacities, dtype=float)
    rows = np.arange(n)

    def evaluate(mu: np.ndarray) -> tuple[float, np.ndarray]:
        A = V - (mu[ty] * gp)[None, :]
        best = A.argmax(axis=1) if A.shape[1] else np.zeros(n, dtype=np.int64)
        h = A[rows, best] if A.shape[1] else np.zeros(n)
        pos = h > 0
        use = np.bincount(ty[best[pos]], weights=gp[best[pos]], minlength=m)
        return float(np.maximum(h, 0.0).sum() + mu @ C), C - use

    finite = np.where(np.isfinite(V), V, 0.0)
    mu_max = np.array([float(finite[:, ty == k].max(initial=0.0)) for k in range(m)])
    mu = np.zeros(m)
    cuts_g: list[np.ndarray] = []
    cuts_a: list[float] = []
    best_val, best_mu, lower = math.inf, mu, -math.inf
    it = 0
    while it < max_iter:
        it += 1
        val, g = evaluate(mu)
        if val < best_val:
            best_val, best_mu = val, mu.copy()
        if best_val - lower <= rtol * max(1.0, abs(best_val)):
            break
        cuts_g.append(g)
        cuts_a.append(val - float(g @ mu))
        A_ub = np.hstack([np.asarray(cuts_g), -np.ones((len(cuts_g), 1))])
        res = linprog(np.r_[np.zeros(m), 1.0], A_ub=A_ub, b_ub=-np.asarray(cuts_a),
                      bounds=[(0.0, b) for b in mu_max] + [(None, None)], method="highs")
        if res.status != 0:  # pragma: no cover - the cut LP is bounded and feasible
            log.warning("sia: Kelley cut LP ended with status %s (%s)", res.status, res.message)
            break
        lower = max(lower, float(res.fun))
        mu = np.clip(res.x[:m], 0.0, mu_max)
        if best_val - lower <= rtol * max(1.0, abs(best_val)):
            break
    return LagrangianBound(best_val, lower, best_mu, it)


def polish(choice: np.ndarray, prob: SiaProblem, capacities: np.ndarray) -> tuple[np.ndarray, int]:
    """Give GPUs to jobs left without any, where that raises the objective.

    For each job without GPUs (best ILP value first): take its best configuration that fits
    the idle GPUs of its type; else its smallest configuration on a type k, made room for by
    one job on k with two or more GPUs moving to its best smaller configuration on k (or to
    none), when :math:`v_{j,c} + v_{A,c'} - v_{A,c_A} > 0`. Every move keeps the solution
    feasible and raises the objective, so it can only shrink the gap; with the default
    :math:`\\lambda` such a move exists whenever a job is left out while a GPU of a type it
    can use is idle or held by a job with two or more GPUs of that type (the guarantee of the
    module docstring, which a solution within ``mip_gap`` need not meet on its own).

    Returns the new choice and the number of moves.
    """
    choice = choice.copy()
    cs = prob.configs
    ty, gp = cs.type_index, cs.gpus.astype(float)
    V, keep = prob.value, prob.keep
    m = capacities.shape[0]
    alloc = choice >= 0
    used = np.bincount(ty[choice[alloc]], weights=gp[choice[alloc]], minlength=m)
    idle = np.asarray(capacities, dtype=float) - used
    waiting = np.flatnonzero(~alloc & keep.any(axis=1))
    if waiting.size == 0:
        return choice, 0
    best_v = np.where(keep, V, -np.inf).max(axis=1)
    moves = 0
    tol = 1e-12 * max(1.0, float(np.max(np.abs(V[keep]))))
    big = alloc & (gp[np.maximum(choice, 0)] >= 2)
    n_donors = np.bincount(ty[choice[big]], minlength=m)  # jobs with >= 2 GPUs, per type
    for j in waiting[np.argsort(-best_v[waiting], kind="stable")]:
        cols = np.flatnonzero(keep[j])
        fit = cols[gp[cols] <= idle[ty[cols]] + 1e-9]
        if fit.size:
            c = int(fit[np.argmax(V[j, fit])])
            choice[j] = c
            idle[ty[c]] -= gp[c]
            n_donors[ty[c]] += gp[c] >= 2
            moves += 1
            continue
        types_j = np.unique(ty[cols])
        types_j = types_j[n_donors[types_j] > 0]
        best = (tol, -1, -1, -1)  # (gain, donor, donor's new column or -1, j's column)
        for k in types_j:
            mine = cols[ty[cols] == k]
            c = int(mine[np.argmin(gp[mine])])
            cur = np.maximum(choice, 0)
            donors = np.flatnonzero((choice >= 0) & (ty[cur] == k) & (gp[cur] >= 2))
            have = gp[choice[donors]]
            room = have + idle[k] - gp[c]  # GPUs the donor may keep
            kcols = np.flatnonzero(ty == k)
            ok = keep[donors][:, kcols] & (gp[kcols][None, :] <= room[:, None]) & (gp[kcols][None, :] < have[:, None])
            alt = np.where(ok, V[donors][:, kcols], -np.inf)
            alt_i = alt.argmax(axis=1)
            alt_v = alt[np.arange(donors.size), alt_i]
            alt_col = np.where(np.isfinite(alt_v), kcols[alt_i], -1)
            alt_v = np.where(np.isfinite(alt_v), alt_v, 0.0)  # the donor may also stop
            gain = np.where(room >= 0, V[j, c] + alt_v - V[donors, choice[donors]], -np.inf)
            i = int(np.argmax(gain))
            if gain[i] > best[0]:
                best = (float(gain[i]), int(donors[i]), int(alt_col[i]), c)
        if best[1] < 0:
            continue
        _, a, a_new, c = best
        k = ty[c]
        idle[k] += gp[choice[a]] - (gp[a_new] if a_new >= 0 else 0.0) - gp[c]
        n_donors[k] += -1 + (a_new >= 0 and gp[a_new] >= 2) + (gp[c] >= 2)
        choice[a] = a_new
        choice[j] = c
        moves += 1
    return choice, moves
