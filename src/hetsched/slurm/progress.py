"""Progress from inside a job: one call appends a line to the job's file in the spool
directory, which the driver reads every round.

Python (in the training script)::

    import hetsched.slurm
    hetsched.slurm.report(steps_done)          # steps done in all, since the job first started

Shell::

    python -m hetsched.slurm 12000      # the same
    python -m hetsched.slurm --lease    # prints "v100 2": the GPU type and count it runs on

An adaptive job (the driver runs Pollux, the adaptive Sia or Optimus) reads the batch the
plan runs it at, and reports what its agent measured, from which the scheduler fits the
job's goodput model (:data:`hetsched.inputs.adaptive.REPORT_KEYS`)::

    bsz, atomic_bsz, accum_steps = hetsched.slurm.lease_batch()
    hetsched.slurm.report(progress, measured={"nodes": 1, "replicas": 2, "atomic_bsz": 64,
                                              "accum_steps": 0, "step_time": 0.21, "sync_time": 0.02,
                                              "grad_sqr": 1.3, "grad_var": 4.1})

(``python -m hetsched.slurm --lease`` then prints ``v100 2 128 64 0``; the shell form of the
report is ``python -m hetsched.slurm PROGRESS '{"nodes":1,...}'``.)

The spool directory is ``$HETSCHED_SPOOL`` (default :data:`DEFAULT_SPOOL`), shared by the
driver and the nodes; the job is ``$SLURM_JOB_ID``. Each report appends ``<unix time>
<steps> <GPU type>`` to ``<spool>/<job id>.progress`` in one ``write`` (``O_APPEND``), so
lines never interleave; the type is read from ``<spool>/<job id>.lease``, which the
driver writes before it starts the job. No network port is opened: the file's owner,
checked by the driver against the job's user, says who wrote it, and the spool works
wherever the nodes share a file system with the driver, as Slurm clusters do.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ValidationError

__all__ = ["DEFAULT_SPOOL", "SPOOL_ENV", "lease", "lease_batch", "main", "report", "spool_dir"]

#: The environment variable naming the spool directory.
SPOOL_ENV = "HETSCHED_SPOOL"
#: The spool directory when ``$HETSCHED_SPOOL`` is not set.
DEFAULT_SPOOL = "/var/spool/hetsched"


def spool_dir(spool: str | os.PathLike | None = None) -> Path:
    """``spool``, else ``$HETSCHED_SPOOL``, else :data:`DEFAULT_SPOOL`."""
    return Path(spool if spool is not None else os.environ.get(SPOOL_ENV) or DEFAULT_SPOOL)


def _job(job_id: str | int | None) -> str:
    jid = str(job_id) if job_id is not None else os.environ.get("SLURM_JOB_ID", "")
    if not jid or "/" in jid or jid.startswith("."):
        raise ValidationError(f"`job_id` must be a Slurm job id (default $SLURM_JOB_ID); got {jid!r}.")
    return jid


def lease(*, job_id: str | int | None = None, spool: str | os.PathLike | None = None) -> tuple[str, int] | None:
    """The GPU type and count (per node) the driver started the job on, or None before any start.

    Parameters
    ----------
    job_id : str or int, optional
        Default ``$SLURM_JOB_ID``.
    spool : path, optional
        Default :func:`spool_dir`.
    """
    text = _lease_fields(job_id, spool)
    return (text[0], int(text[1])) if len(text) >= 2 else None


def lease_batch(*, job_id: str | int | None = None, spool: str | os.PathLike | None = None
                ) -> tuple[int, int, int] | None:
    """An adaptive job's batch in its lease: (total batch, per-GPU batch, accumulation
    steps), or None (no lease yet, or the scheduler does not adapt jobs).

    Parameters
    ----------
    job_id : str or int, optional
        Default ``$SLURM_JOB_ID``.
    spool : path, optional
        Default :func:`spool_dir`.
    """
    text = _lease_fields(job_id, spool)
    return (int(text[2]), int(text[3]), int(text[4])) if len(text) >= 5 else None


def _lease_fields(job_id: str | int | None, spool: str | os.PathLike | None) -> list[str]:
    """The words of the job's lease file (none before the driver wrote one)."""
    try:
        return (spool_dir(spool) / f"{_job(job_id)}.lease").read_text().split()
    except OSError:
        return []


def report(steps: float, *, job_id: str | int | None = None, spool: str | os.PathLike | None = None,
           now: float | None = None, measured: Mapping[str, Any] | None = None) -> None:
    """Tell the driver the job has done ``steps`` steps in all (never fewer than reported before).

    Parameters
    ----------
    steps : float
        Steps done since the job first started, over all its runs (restart from a checkpoint
        with its count); a report below an earlier one is refused by the driver.
    job_id : str or int, optional
        Default ``$SLURM_JOB_ID``.
    spool : path, optional
        Default :func:`spool_dir`.
    now : float, optional
        Unix time of the count (default: now).
    measured : mapping, optional
        An adaptive job's measurement since its last report (keys of
        :data:`hetsched.inputs.adaptive.REPORT_KEYS`; ``gpu_type`` defaults to the lease's).
        The driver checks it and refuses (logs and counts) a bad one.

    Raises
    ------
    ValidationError
        ``steps`` negative, not a number or not finite, no job id, or ``measured`` not a
        mapping of JSON values with finite numbers.
    OSError
        The spool directory cannot be written.
    """
    try:
        value = float(steps)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValidationError(f"`steps` must be a finite number >= 0; got {steps!r}.")
    jid = _job(job_id)
    got = lease(job_id=jid, spool=spool)
    t = time.time() if now is None else float(now)
    extra = ""
    if measured is not None:
        if not isinstance(measured, Mapping):
            raise ValidationError(f"`measured` must be a mapping of REPORT_KEYS; got {type(measured).__name__}.")
        data = dict(measured)
        if got is not None:
            data.setdefault("gpu_type", got[0])
        try:
            extra = " " + json.dumps(data, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"`measured` must hold JSON values with finite numbers; got {data!r} ({exc}).") \
                from None
    line = f"{t:.3f} {value!r} {got[0] if got else '-'}{extra}\n".encode()
    fd = os.open(spool_dir(spool) / f"{jid}.progress", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """``python -m hetsched.slurm STEPS`` / ``--lease`` (:mod:`hetsched.slurm`); returns
    the exit code: 0, 1 for ``--lease`` before any start, 2 for bad arguments or an unwritable spool."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["--lease"]:
            text = _lease_fields(None, None)    # the lease as written: type, GPUs[, batch fields]
            if len(text) < 2:
                print("no lease", file=sys.stderr)
                return 1
            print(" ".join(text[:5] if len(text) >= 5 else text[:2]))
            return 0
        if len(args) not in (1, 2):
            print("usage: python -m hetsched.slurm STEPS [MEASURED_JSON] | --lease", file=sys.stderr)
            return 2
        measured = None
        if len(args) == 2:
            try:
                measured = json.loads(args[1])
            except ValueError as exc:
                raise ValidationError(f"MEASURED_JSON must be a JSON object; got {args[1]!r} ({exc}).") from None
        report(args[0], measured=measured)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0



