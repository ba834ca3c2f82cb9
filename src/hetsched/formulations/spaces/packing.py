r"""Space sharing (Gavel's ``*_packed`` policies): two jobs share one gang of GPUs.

Two jobs with the same scale factor may run together on the same :math:`s` GPUs of type
:math:`k` at throughputs measured for that pair, :math:`T^{pair}_{a|b,k}` and
:math:`T^{pair}_{b|a,k}`. In the allocation space (:mod:`.space`) a pair is one variable
:math:`y_{ab,k}`: it counts :math:`s` GPUs once, charges its time to both jobs, and gives
each member its pair throughput. With relative speeds
:math:`r_a = T^{pair}_{a|b,k} / T_{a,k}`, every policy's coefficient for member a is its
single-row coefficient times :math:`r_a` — so max-min fairness, max-sum throughput, min
makespan and finish-time fairness all pack through the same space:

.. math::

    \mathrm{thr}_j = \sum_k T_{jk}\Big(X_{jk} + \sum_{b} r_{j|b,k}\, y_{jb,k}\Big), \qquad
    \sum_k \Big(X_{jk} + \sum_b y_{jb,k}\Big) \le 1, \qquad
    \sum_j s_j X_{jk} + \sum_{\{a,b\}} s_{ab}\, y_{ab,k} \le C_k .

Pruning (exact at threshold 1)
------------------------------
Gavel builds a row for every pair: :math:`n^2` rows. A pair whose *combined normalized
throughput* :math:`r_a + r_b \le 1` is dominated: replacing :math:`y` by single rows
:math:`X_a = r_a y`, :math:`X_b = r_b y` gives both jobs the same throughputs while using
no more GPU time (:math:`s (r_a + r_b) y \le s y`) and no more of either job's time
(:math:`r_a y \le y`). So dropping pairs with :math:`r_a + r_b \le 1` never changes the
optimum of any policy above. ``threshold > 1`` also drops pairs that help a little; how
much of the optimum that can lose is measured in ``docs/packing.md``.

Pair data
---------
A :class:`Packing` holds a pair table (:class:`~hetsched.inputs.throughputs.PairThroughputs`)
whose rows are *keys*, and the key of each job: for a catalogue workload the key is the
job's catalogue row (:meth:`Packing.from_catalogue`, :meth:`Packing.from_workload`); for
explicit per-job pairs each job is its own key (:meth:`Packing.from_job_pairs`).

Examples
--------
Two jobs, one GPU; alone each runs at 1 step/s, together each at 0.75 (combined 1.5).
Time slicing gives each a normalized share of 0.5; sharing gives 0.75:

>>> import hetsched as hs
>>> from hetsched.formulations.spaces.packing import Packing
>>> jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"])
>>> packing = Packing.from_job_pairs(["a"], ["b"], [[[0.75, 0.75]]], gpu_types=["v100"])
>>> res = hs.solve(hs.policies.MaxMinFairness(packing=packing), jobs, hs.Cluster({"v100": 1}))
>>> round(res.objective, 6), res.effective_throughput.round(6).tolist()
(0.75, [0.75, 0.75])
>>> res.extra["allocation_rows"][["kind", "job", "partner", "fraction"]].values.tolist()
[['pair', 'a', 'b', 1.0]]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError, show
from ...inputs.jobs import JobSet
from ...inputs.throughputs import PairThroughputs, ThroughputCatalogue
from ...inputs.workloads import Workload, catalogue_rows_of
from ...validation import check_bool, check_instance, check_nonneg
from ..tables import job_numbers

__all__ = ["DEFAULT_PAIR_THRESHOLD", "Packing", "PairVariables", "pair_variables"]

log = logging.getLogger(__name__)

#: Default pruning threshold on a pair's combined normalized throughput ``r_a + r_b``:
#: 1 (exact, see the module docstring) plus a margin that drops pairs gaining under 5 %.
DEFAULT_PAIR_THRESHOLD = 1.05


class Packing:
    """Space-sharing parameters of a policy: a pair table, each job's key in it, a threshold.

    Parameters
    ----------
    pairs : PairThroughputs
        Co-location throughputs between keys (``pairs.index`` holds key pairs).
    gpu_types : sequence of str
        Column labels of ``pairs`` (its second axis). Job GPU types missing here cannot
        be shared; extra types are ignored.
    keys : Mapping or pandas.Series
        Job id -> key (a row of ``pairs``; several jobs may share one, e.g. a job type).
    threshold : float, default :data:`DEFAULT_PAIR_THRESHOLD`
        Keep a pair on a type only when its combined normalized throughput
        ``T_pair_a / T_a + T_pair_b / T_b`` exceeds it (1.0 keeps every pair that can
        help and is exact; 0 keeps every pair with a positive throughput).
    names_jobs : bool, default False
        True when keys are the job ids themselves (:meth:`from_job_pairs`): then every
        key must be a job of the JobSet solved ("pairs naming unknown jobs" is an
        error) and jobs without a key simply share with no one. False (a catalogue):
        every job must have a key, and keys no job uses are fine.
    aggregate : bool, default True
        Solve identical jobs (same throughputs, scale factor, weight, policy fields *and*
        key) as one class with pair variables between classes: exact (see
        :func:`~hetsched.formulations.spaces.space.space_classes`) and the reason a catalogue
        workload of thousands of jobs needs only (number of job types)^2 pair variables.

    Notes
    -----
    Only jobs with equal scale factors are paired (Gavel's packed policies crash on mixed
    scale factors; here the other pairs are skipped). A pair throughput that is positive
    where a member's own throughput ``T`` is 0 is an error. A pair throughput above the
    job's own (relative speed > 1) is allowed.
    """

    __slots__ = ("aggregate", "gpu_types", "keys", "names_jobs", "pairs", "threshold")

    def __init__(
        self,
        pairs: PairThroughputs,
        *,
        gpu_types: Sequence[str],
        keys: Mapping[Any, int] | pd.Series,
        threshold: float = DEFAULT_PAIR_THRESHOLD,
        names_jobs: bool = False,
        aggregate: bool = True,
    ) -> None:
        check_instance(pairs, "pairs", PairThroughputs, "a hetsched.PairThroughputs")
        if isinstance(gpu_types, str):
            raise ValidationError(f"`gpu_types` must be a sequence of names; got the string {gpu_types!r}.")
        types = tuple(str(t) for t in gpu_types)
        if len(types) != pairs.n_gpu_types:
            raise ValidationError(
                f"`gpu_types` must label the {pairs.n_gpu_types} GPU columns of `pairs`; got {len(types)}: {list(types)}."
            )
        if len(set(types)) != len(types):
            raise ValidationError(f"`gpu_types` must be unique; got {list(types)}.")
        threshold = check_nonneg(threshold, "threshold")
        ser = keys if isinstance(keys, pd.Series) else pd.Series(dict(keys) if isinstance(keys, Mapping) else keys)
        if not isinstance(keys, (Mapping, pd.Series)):
            raise ValidationError(f"`keys` must map job id -> pair-table row; got {type(keys).__name__}.")
        if not ser.index.is_unique:
            dup = ser.index[ser.index.duplicated()].unique().tolist()[:5]
            raise ValidationError(f"`keys` must name each job once; duplicated: {dup}.")
        vals = pd.to_numeric(ser, errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(vals) | (vals < 0) | (vals != np.round(vals))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValidationError(
                f"`keys` must map job ids to non-negative integer rows of `pairs`; job {show(ser.index[i])} has {ser.iloc[i]!r}."
            )
        self.pairs = pairs
        self.gpu_types = types
        self.keys = pd.Series(vals.astype(np.int64), index=ser.index, copy=True)
        self.threshold = float(threshold)
        self.names_jobs = bool(names_jobs)
        self.aggregate = check_bool(aggregate, "aggregate")

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_catalogue(cls, catalogue: ThroughputCatalogue, rows: Any, job_ids: Any, *,
                       threshold: float = DEFAULT_PAIR_THRESHOLD, aggregate: bool = True) -> Packing:
        """Pairs from a catalogue's pair table; ``rows[i]`` is the catalogue row of ``job_ids[i]``."""
        if not isinstance(catalogue, ThroughputCatalogue):
            raise ValidationError(f"`catalogue` must be a ThroughputCatalogue; got {type(catalogue).__name__}.")
        if catalogue.pairs is None:
            raise ValidationError(
                "`catalogue` has no pair table; use generate_catalogue(pairs=True) or a Gavel-format file with pairs."
            )
        r = np.asarray(rows)
        ids = np.asarray(job_ids)
        if r.shape != ids.shape or r.ndim != 1:
            raise ValidationError(f"`rows` and `job_ids` must be 1-D of equal length; got {r.shape} and {ids.shape}.")
        if r.size and (r.dtype.kind not in "iu" or r.min() < 0 or r.max() >= len(catalogue)):
            raise ValidationError(f"`rows` must be catalogue row numbers in [0, {len(catalogue) - 1}]; got {r[:5].tolist()}...")
        return cls(catalogue.pairs, gpu_types=catalogue.gpu_types, keys=pd.Series(r, index=pd.Index(ids)),
                   threshold=threshold, aggregate=aggregate)

    @classmethod
    def from_workload(cls, workload: Workload, catalogue: ThroughputCatalogue | None = None, *,
                      threshold: float = DEFAULT_PAIR_THRESHOLD, aggregate: bool = True) -> Packing:
        """Pairs for a :class:`~hetsched.inputs.workloads.Workload` sampled from a catalogue.

        Parameters
        ----------
        workload : Workload
            From :func:`~hetsched.sample_jobs` or :func:`~hetsched.generate_workload` (it
            carries each job's catalogue row).
        catalogue : ThroughputCatalogue, optional
            The catalogue with the pair table (default: the workload's own).
        threshold, aggregate
            As for the constructor.

        Raises
        ------
        ValidationError
            ``workload`` is not a workload sampled from a catalogue; the catalogue has no
            pair table.
        """
        cat, rows, ids = catalogue_rows_of(workload, catalogue)
        return cls.from_catalogue(cat, rows, ids, threshold=threshold, aggregate=aggregate)

    @classmethod
    def from_job_pairs(cls, job_a: Sequence[Any], job_b: Sequence[Any], throughputs: Any, *,
                       gpu_types: Sequence[str], threshold: float = DEFAULT_PAIR_THRESHOLD,
                       aggregate: bool = True) -> Packing:
        """Explicit pairs of job ids.

        Parameters
        ----------
        job_a, job_b : sequences of job ids, length n_pairs
        throughputs : array-like, shape (n_pairs, n_gpu_types, 2)
            ``[p, k, 0]``: steps/s of ``job_a[p]`` while sharing type k with ``job_b[p]``;
            ``[p, k, 1]``: that of ``job_b[p]``; ``(0, 0)``: cannot share on that type.
        gpu_types : sequence of str
            Labels of the second axis.
        """
        a = list(job_a)
        b = list(job_b)
        if len(a) != len(b):
            raise ValidationError(f"`job_a` and `job_b` must have equal length; got {len(a)} and {len(b)}.")
        same = [x for x, y in zip(a, b) if x == y]
        if same:
            raise ValidationError(f"a job cannot share with itself; pair ({show(same[0])}, {show(same[0])}).")
        uniq = pd.Index(pd.unique(pd.Series(a + b, dtype=object)))
        ka = uniq.get_indexer(pd.Series(a, dtype=object)).astype(np.int64)
        kb = uniq.get_indexer(pd.Series(b, dtype=object)).astype(np.int64)
        thr = np.array(throughputs, dtype=float)
        if thr.ndim != 3 or thr.shape[0] != len(a) or thr.shape[2] != 2:
            raise ValidationError(
                f"`throughputs` must have shape (n_pairs, n_gpu_types, 2) = ({len(a)}, {len(tuple(gpu_types))}, 2); got {thr.shape}."
            )
        swap = ka > kb
        thr[swap] = thr[swap][:, :, ::-1]
        index = np.stack([np.minimum(ka, kb), np.maximum(ka, kb)], axis=1)
        table = PairThroughputs(index, thr)
        keys = pd.Series(np.arange(len(uniq), dtype=np.int64), index=pd.Index(list(uniq), dtype=object))
        return cls(table, gpu_types=gpu_types, keys=keys, threshold=threshold, names_jobs=True, aggregate=aggregate)

    # ------------------------------------------------------------------ helpers
    def rekeyed(self, ids: np.ndarray) -> Packing:
        """This packing with its keys indexed by job number (``ids[j]`` is job ``j``'s id).

        Explicit pairs (``names_jobs``) name some jobs; every other job number gets a key of
        its own (no pairs), so that sets of active jobs without some named job still solve.
        """
        nums = job_numbers(self.keys.index, ids)
        keys = pd.Series(self.keys.to_numpy(), index=nums)
        if self.names_jobs:
            rest = np.setdiff1d(np.arange(len(ids)), nums[nums >= 0])
            fresh = int(keys.max()) + 1 if len(keys) else 0
            keys = pd.concat([keys[keys.index >= 0], pd.Series(fresh + np.arange(rest.size), index=rest)])
        return Packing(self.pairs, gpu_types=self.gpu_types, keys=keys, threshold=self.threshold,
                       names_jobs=False, aggregate=self.aggregate)

    def job_keys(self, jobs: JobSet) -> np.ndarray:
        """Key of each job of ``jobs`` (-1: no key, shares with no one).

        Raises
        ------
        ValidationError
            A catalogue packing missing a job; job pairs naming a job not in ``jobs``.
        """
        pos = self.keys.index.get_indexer(pd.Index(jobs.ids))
        values = np.append(self.keys.to_numpy(), -1)  # position -1 (absent) reads the -1
        key = values[pos].astype(np.int64)
        if self.names_jobs:
            known = np.zeros(len(self.keys), dtype=bool)
            known[pos[pos >= 0]] = True
            if not known.all():
                missing = self.keys.index[~known].tolist()
                raise ValidationError(
                    f"`packing` names jobs that are not in `jobs`: {missing[:5]}"
                    f"{'' if len(missing) <= 5 else f' and {len(missing) - 5} more'}."
                )
        elif (key < 0).any():
            j = int(np.flatnonzero(key < 0)[0])
            raise ValidationError(
                f"job {show(jobs.ids[j])} has no pair-table row in `packing.keys` "
                f"({int((key < 0).sum())} such job(s)); build the Packing for these jobs."
            )
        return key

    def aligned(self, gpu_types: Sequence[str]) -> np.ndarray:
        """Pair throughputs with columns in ``gpu_types`` order (zeros for unknown types), (P, m, 2)."""
        pos = {t: i for i, t in enumerate(self.gpu_types)}
        out = np.zeros((len(self.pairs), len(gpu_types), 2))
        for k, t in enumerate(gpu_types):
            if t in pos:
                out[:, k, :] = self.pairs.throughputs[:, pos[t], :]
        return out

    def __repr__(self) -> str:
        return (f"Packing(n_pairs={len(self.pairs)}, n_jobs_keyed={len(self.keys)}, gpu_types={list(self.gpu_types)}, "
                f"threshold={self.threshold:g}{', names_jobs=True' if self.names_jobs else ''}"
                f"{'' if self.aggregate else ', aggregate=False'})")


@dataclass(frozen=True)
class PairVariables:
    """Pair variables of a job set: one per (job pair, GPU type) kept after pruning.

    ``time_a`` / ``time_b`` are the members' time coefficients: 1 for two jobs; for rows
    standing for classes of ``mu`` identical jobs, ``1/mu`` (the variable is the total
    time of all job pairs between the two classes; a class paired with itself, ``mu >= 2``,
    has ``job_a == job_b``).
    """

    job_a: np.ndarray
    job_b: np.ndarray
    gpu: np.ndarray
    ratio_a: np.ndarray
    ratio_b: np.ndarray
    time_a: np.ndarray
    time_b: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


def pair_variables(jobs: JobSet, usable: np.ndarray, packing: Packing) -> PairVariables:
    """Enumerate the job pairs that may share each type, and prune them (vectorized).

    A pair (a, b) on type k is a candidate when the pair table has an entry for their keys,
    ``s_a == s_b``, both are usable on k (``usable[a, k]`` and ``usable[b, k]``), and at
    least one pair throughput is positive; it is kept when ``r_a + r_b > threshold``. Two
    jobs with the *same* key (e.g. two copies of one job type) both get the mean of the
    table's two entries, so that which one is "first" does not matter. Rows with
    multiplicity ``mu > 1`` stand for ``mu`` identical jobs (same key): such a row also
    pairs with itself, and members get time coefficient ``1/mu``.

    ``info`` reports ``pair_candidates`` (candidate (pair, type) entries), ``pairs_kept``
    and the threshold.

    Raises
    ------
    ValidationError
        A pair throughput where the member's own throughput is 0.
    """
    m = jobs.n_types
    key = packing.job_keys(jobs)
    tab = packing.aligned(jobs.gpu_types)
    idx = packing.pairs.index
    T = jobs.throughputs
    s = jobs.scale_factors
    mu = jobs.multiplicity
    z = np.zeros(0, np.int64)
    info = {"pair_candidates": 0, "pairs_kept": 0, "pair_threshold": packing.threshold}
    has = key >= 0
    if not has.any() or idx.shape[0] == 0:
        return PairVariables(z, z, z, np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), info=info)
    n_keys = int(max(key.max(), idx.max())) + 1
    order = np.argsort(key, kind="stable")
    order = order[has[order]]
    counts = np.bincount(key[has], minlength=n_keys)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    r1, r2 = idx[:, 0], idx[:, 1]
    live = (tab.max(axis=(1, 2)) > 0) & (counts[r1] > 0) & (counts[r2] > 0)
    p = np.flatnonzero(live)
    n1, n2 = counts[r1[p]], counts[r2[p]]
    sizes = n1 * n2
    total = int(sizes.sum())
    p_of = np.repeat(np.arange(p.shape[0]), sizes)
    local = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    ia, ib = local // n2[p_of], local % n2[p_of]
    a = order[starts[r1[p]][p_of] + ia]
    b = order[starts[r2[p]][p_of] + ib]
    same_key = r1[p][p_of] == r2[p][p_of]
    keep = (~same_key | (ia < ib) | ((ia == ib) & (mu[a] >= 2))) & (s[a] == s[b])
    a, b, pp, same_key = a[keep], b[keep], p[p_of[keep]], same_key[keep]
    out: list[list[np.ndarray]] = [[], [], [], [], []]
    n_cand = 0
    for k in range(m):
        ta, tb = tab[pp, k, 0], tab[pp, k, 1]
        mean = 0.5 * (ta + tb)
        ta, tb = np.where(same_key, mean, ta), np.where(same_key, mean, tb)
        Ta, Tb = T[a, k], T[b, k]
        bad = ((ta > 0) & (Ta <= 0)) | ((tb > 0) & (Tb <= 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            j, o = (a[i], b[i]) if ta[i] > 0 and Ta[i] <= 0 else (b[i], a[i])
            raise ValidationError(
                f"`packing` gives job {show(jobs.ids[j])} a pair throughput on GPU type {jobs.gpu_types[k]!r} "
                f"(with job {show(jobs.ids[o])}) but its own throughput there is 0; "
                f"pair throughputs need single throughputs ({int(bad.sum())} such pair(s))."
            )
        cand = ((ta > 0) | (tb > 0)) & usable[a, k] & usable[b, k]
        n_cand += int(cand.sum())
        ra = np.where(cand, ta / np.where(Ta > 0, Ta, 1.0), 0.0)
        rb = np.where(cand, tb / np.where(Tb > 0, Tb, 1.0), 0.0)
        sel = np.flatnonzero(cand & (ra + rb > packing.threshold))
        for lst, arr in zip(out, (a[sel], b[sel], np.full(sel.shape[0], k, dtype=np.int64), ra[sel], rb[sel])):
            lst.append(arr)
    ja, jb, gk, ra, rb = (np.concatenate(x) for x in out)
    ja, jb = ja.astype(np.int64), jb.astype(np.int64)
    info.update(pair_candidates=n_cand, pairs_kept=int(ja.shape[0]))
    log.debug("packing: %d candidate (pair, type) entries, %d kept at threshold %g",
              n_cand, ja.shape[0], packing.threshold)
    return PairVariables(ja, jb, gk, ra, rb, 1.0 / mu[ja], 1.0 / mu[jb], info=info)
