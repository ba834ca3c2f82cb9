"""Progress from inside a job: one call appends a line to the job's file in the spool
directory, which the driver reads every round.

Python (in the training script)::

    import hetsched.slurm
    hetsched.slurm.report(steps_done)          # steps done in all, since the job first started

Shell::

    python -m hetsched.slurm 12000      # the same
    python -m hetsched.slurm --lease    # prints "v100 2": the GPU type and count it runs on

The spool directory is ``$HETSCHED_SPOOL`` (default :data:`DEFAULT_SPOOL`), shared by the
driver and the nodes; the job is ``$SLURM_JOB_ID``. Each report appends ``<unix time>
<steps> <GPU type>`` to ``<spool>/<job id>.progress`` in one ``write`` (``O_APPEND``), so
lines never interleave; the type is read from ``<spool>/<job id>.lease``, which the
driver writes before it starts the job. No network port is opened: the file's owner,
checked by the driver against the job's user, says who wrote it, and the spool works
wherever the nodes share a file system with the driver, as Slurm clusters do.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

from ..errors import ValidationError

__all__ = ["DEFAULT_SPOOL", "SPOOL_ENV", "lease", "main", "report", "spool_dir"]

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
    try:
        text = (spool_dir(spool) / f"{_job(job_id)}.lease").read_text().split()
    except OSError:
        return None
    return (text[0], int(text[1])) if len(text) >= 2 else None


def report(steps: float, *, job_id: str | int | None = None, spool: str | os.PathLike | None = None,
           now: float | None = None) -> None:
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

    Raises
    ------
    ValidationError
        ``steps`` negative, not a number or not finite, or no job id.
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
    line = f"{t:.3f} {value!r} {got[0] if got else '-'}\n".encode()
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
            got = lease()
            if got is None:
                print("no lease", file=sys.stderr)
                return 1
            print(f"{got[0]} {got[1]}")
            return 0
        if len(args) != 1:
            print("usage: python -m hetsched.slurm STEPS | --lease", file=sys.stderr)
            return 2
        report(args[0])
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0



