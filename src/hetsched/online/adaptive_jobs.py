"""Adaptive jobs in the online scheduler: the jobs an adaptive round scheduler (Pollux, the
adaptive Sia, Optimus) plans, with the measurements their workers report.

A job is submitted with its model (a :class:`~hetsched.inputs.profiles.ModelProfile` of the
``profiles`` the :class:`~hetsched.online.OnlineScheduler` was given: batch limits, per-GPU
batch range, restart cost, and for Sia its one-GPU profiling run), the GPUs and batch size
it was submitted with, and its target progress. After each round its worker reports, beside
the progress made (Pollux's statistical-efficiency-weighted iterations), what Pollux's agent
measures (:data:`~hetsched.inputs.adaptive.REPORT_KEYS`): placement, per-GPU batch and
accumulation steps, step and sync time, gradient statistics; and, for Optimus, the
validation metric at the end of each epoch it completed. The next plan's
``record_round`` reads them through :meth:`OnlineAdaptiveJobs.report` and
:meth:`OnlineAdaptiveJobs.observed_metrics`, as the simulator's reads the simulated truth
(:class:`~hetsched.inputs.adaptive.AdaptiveProgress`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..inputs.adaptive import REPORT_KEYS, AdaptiveJobs
from ..inputs.cluster import Cluster
from ..inputs.profiles import ModelProfile
from ..validation import check_int, check_real
from .table import CANCELLED

__all__ = ["OnlineAdaptiveJobs"]

_INT_KEYS = ("nodes", "replicas", "atomic_bsz", "accum_steps")


class OnlineAdaptiveJobs(AdaptiveJobs):
    """The adaptive jobs submitted to an online scheduler, and what their workers reported
    since the last plan (see the module docstring).

    Parameters
    ----------
    cluster : Cluster
    profiles : Mapping[str, ModelProfile]
        The models jobs may name (e.g. :func:`hetsched.inputs.profiles.load_sia_profiles`).

    Raises
    ------
    ValidationError
        ``profiles`` empty, or not a mapping of model name -> ModelProfile.
    """

    def __init__(self, cluster: Cluster, profiles: Mapping[str, ModelProfile]) -> None:
        if not isinstance(profiles, Mapping) or not profiles:
            raise ValidationError("`profiles` must be a non-empty mapping model name -> hetsched.inputs.profiles."
                                  f"ModelProfile (e.g. load_sia_profiles()); got {type(profiles).__name__}.")
        for name, prof in profiles.items():
            if not isinstance(prof, ModelProfile):
                raise ValidationError(f"`profiles[{name!r}]` must be a ModelProfile; got {type(prof).__name__}.")
        super().__init__(cluster, profiles)
        self.profiles = dict(profiles)
        #: job number -> what it measured since the last plan (one dict of REPORT_KEYS)
        self.pending: dict[int, dict[str, Any]] = {}
        #: job number -> [(progress at the end of an epoch, validation metric there), ...]
        self.metrics: dict[int, list[tuple[float, float]]] = {}
        #: the online scheduler's job table (its ``done`` column: the progress reported in all)
        self.table: Any = None

    def resize(self, cluster: Cluster) -> None:
        """Plan on ``cluster`` (the same GPU types): its GPUs per type and per node; every
        job, profile and measurement is kept."""
        self._size_nodes(cluster, self.profiles)

    # ------------------------------------------------------------------ jobs
    def check_job(self, job_id: Any, model: Any, replicas: int, batch_size: Any) -> tuple[ModelProfile, int]:
        """The profile of ``model`` and the submitted batch (default: the model's initial
        batch), checked against the profiles and the cluster."""
        if not isinstance(model, str) or model not in self.profiles:
            raise ValidationError(f"`model` of adaptive job {job_id!r} must name one of the scheduler's profiles "
                                  f"{sorted(self.profiles)}; got {model!r}.")
        prof = self.profiles[model]
        runs = [k for k, t in enumerate(self.types) if t in prof.machines and self.capacity[k] > 0]
        if not runs:
            raise ValidationError(f"model {model!r} of job {job_id!r} has a profile on none of the cluster's GPU "
                                  f"types {list(self.types)}; profiled: {sorted(prof.machines)}.")
        b = int(prof.init_batch_size) if batch_size is None else check_int(batch_size, "batch_size", low=1)
        if b > int(prof.max_batch_size):
            raise ValidationError(f"`batch_size` {b} of job {job_id!r} is above model {model!r}'s largest batch "
                                  f"{int(prof.max_batch_size)}.")
        return prof, b

    def add(self, job_id: Any, prof: ModelProfile, replicas: int, batch: int) -> int:
        """Append a job checked by :meth:`check_job` (its columns grow by one entry each, in
        constant Python work per submit); returns its number."""
        self.models.append(prof)
        values = {"names": job_id, "submitted_replicas": int(replicas), "submitted_batch": int(batch),
                  "completion": prof.completion_progress, "restart_seconds": prof.restart_seconds,
                  "init_batch": prof.init_batch_size, "max_batch": prof.max_batch_size}
        for col, v in values.items():
            old = getattr(self, col)
            new = np.empty(old.shape[0] + 1, dtype=old.dtype)
            new[:-1] = old
            new[-1] = v
            setattr(self, col, new)
        return len(self.models) - 1

    def pop_last(self) -> None:
        """Undo the last :meth:`add` (a submit whose store write failed)."""
        self.models.pop()
        for col in ("names", "submitted_replicas", "submitted_batch", "completion", "restart_seconds", "init_batch",
                    "max_batch"):
            setattr(self, col, getattr(self, col)[:-1].copy())

    # ------------------------------------------------------------------ measurements
    def check_measured(self, num: int, gpu_type: str, measured: Any) -> tuple[dict[str, Any], list[tuple[float, float]]]:
        """``measured`` as a report dict with every :data:`~hetsched.inputs.adaptive.REPORT_KEYS`
        checked, and its validation points (``"metrics"``: pairs (progress, metric),
        optional)."""
        if not isinstance(measured, Mapping):
            raise ValidationError(f"`measured` must be a mapping with keys {list(REPORT_KEYS)} (and optionally "
                                  f"'metrics', 'epoch'); got {type(measured).__name__}.")
        extra = sorted(set(measured) - set(REPORT_KEYS) - {"metrics", "epoch"})
        if extra:
            raise ValidationError(f"`measured` has unknown key(s) {extra}; allowed: {list(REPORT_KEYS)}, 'metrics', "
                                  "'epoch'.")
        missing = [k for k in REPORT_KEYS if k not in measured]
        if missing:
            raise ValidationError(f"`measured` lacks {missing}: a goodput model is fitted from all of "
                                  f"{list(REPORT_KEYS)}.")
        if measured["gpu_type"] != gpu_type:
            raise ValidationError(f"`measured['gpu_type']` {measured['gpu_type']!r} differs from the report's "
                                  f"`gpu_type` {gpu_type!r}.")
        rep: dict[str, Any] = {"gpu_type": gpu_type}
        k = self.types.index(gpu_type)
        for key in _INT_KEYS:
            rep[key] = check_int(measured[key], f"measured['{key}']", low=0 if key == "accum_steps" else 1)
        if rep["replicas"] > int(self.capacity[k]):
            raise ValidationError(f"`measured['replicas']` {rep['replicas']} exceeds the {int(self.capacity[k])} "
                                  f"GPU(s) of {gpu_type!r}.")
        if rep["nodes"] > rep["replicas"]:
            raise ValidationError(f"`measured['nodes']` {rep['nodes']} exceeds `measured['replicas']` "
                                  f"{rep['replicas']}: every node holds at least one replica.")
        rep["step_time"] = check_real(measured["step_time"], "measured['step_time']", low=0.0, low_open=True)
        rep["sync_time"] = check_real(measured["sync_time"], "measured['sync_time']", low=0.0,
                                      high=rep["step_time"])
        rep["grad_sqr"] = check_real(measured["grad_sqr"], "measured['grad_sqr']", low=0.0)
        rep["grad_var"] = check_real(measured["grad_var"], "measured['grad_var']", low=0.0)
        if "epoch" in measured:
            rep["epoch"] = check_int(measured["epoch"], "measured['epoch']", low=0)
        points: list[tuple[float, float]] = []
        for i, pt in enumerate(measured.get("metrics") or ()):
            if not isinstance(pt, (tuple, list)) or len(pt) != 2:
                raise ValidationError(f"`measured['metrics'][{i}]` must be a pair (progress at an epoch's end, "
                                      f"validation metric); got {pt!r}.")
            x = check_real(pt[0], f"measured['metrics'][{i}][0]", low=0.0, low_open=True)
            y = check_real(pt[1], f"measured['metrics'][{i}][1]")
            points.append((x, y))
        known = self.metrics.get(num, [])
        last = known[-1][0] if known else 0.0
        for x, _ in points:
            if x <= last:
                raise ValidationError(f"`measured['metrics']` must add epochs in order: progress {x!r} is not after "
                                      f"the last reported {last!r}.")
            last = x
        return rep, points

    def measured(self, num: int, rep: dict[str, Any], points: list[tuple[float, float]]) -> None:
        """Keep a checked report until the next plan, and its validation points for good."""
        self.pending[num] = rep
        if points:
            self.metrics.setdefault(num, []).extend(points)

    def clear_pending(self) -> None:
        """The last round is recorded: its reports are spent."""
        self.pending.clear()

    def report(self, job: int, k: int, gpus: int, batch: int, progress: float, spread: bool = False
               ) -> dict[str, Any] | None:
        """What ``job``'s worker reported since the last plan on type column ``k`` (None: no
        measurement, or one of another type)."""
        rep = self.pending.get(job)
        if rep is None or rep["gpu_type"] != self.types[k]:
            return None
        return rep

    def ended_at(self, job: int) -> float:
        """The progress at which a finished ``job`` ended: the progress its workers reported,
        or its target when they reported it within 1e-9 (relative) or beyond (a job
        completed at its target ends there, as in :meth:`AdaptiveJobs.ended_at`); NaN for a
        cancelled job (it did not end by finishing)."""
        target = float(self.completion[job])
        if self.table is None:
            return target
        if int(self.table.status[job]) == CANCELLED:
            return math.nan
        done = float(self.table.done[job])
        return done if done < target * (1 - 1e-9) else target

    def observed_metrics(self, job: int, progress: float) -> tuple[np.ndarray, np.ndarray]:
        """The validation points ``job`` reported, up to ``progress``."""
        pts = [p for p in self.metrics.get(job, ()) if p[0] <= progress]
        if not pts:
            return np.zeros(0), np.zeros(0)
        arr = np.array(pts, dtype=float)
        return arr[:, 0], arr[:, 1]

    def __repr__(self) -> str:
        return f"OnlineAdaptiveJobs(jobs={len(self.models)}, models={len(self.profiles)}, pending={len(self.pending)})"

