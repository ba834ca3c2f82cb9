"""The driver's side of the spool directory (:mod:`hetsched.slurm.progress` is the jobs'):
lease files written before a start, progress lines read back incrementally.

A lease is ``<GPU type> <GPUs per node>``, and for an adaptive job (Pollux, the adaptive
Sia, Optimus) also ``<total batch> <per-GPU batch> <accumulation steps>``: what the plan
runs it at. A progress line is ``<unix time> <steps> <GPU type or ->``, and for an adaptive
job also ``<measurement>``: one JSON object without spaces, the keys of
:data:`hetsched.inputs.adaptive.REPORT_KEYS` its agent measured since its last line.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ProgressLine", "Spool"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProgressLine:
    """One report of a job: at unix ``time`` it had done ``steps`` in all, on ``gpu_type``
    (None: the job had no lease file); ``measured``: an adaptive job's measurement (a dict of
    :data:`~hetsched.inputs.adaptive.REPORT_KEYS`), else None."""

    time: float
    steps: float
    gpu_type: str | None
    measured: dict[str, Any] | None = None


class Spool:
    """The spool directory (created when absent, mode 1777 so that every user's job can
    report; an operator may pre-create it with tighter rights).

    Parameters
    ----------
    path : path
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.exists():
            self.path.mkdir(parents=True)
            os.chmod(self.path, 0o1777)
        self._dir = str(self.path)
        self._offset: dict[str, int] = {}
        self._lease: dict[str, str] = {}      # what this process last wrote to each lease file

    def write_lease(self, job_id: str, gpu_type: str, gpus: int, batch: tuple[int, int, int] | None = None) -> None:
        """``<job>.lease``: the GPU type and count (per node) the job is about to start on,
        and for an adaptive job ``batch``, its (total batch, per-GPU batch, accumulation
        steps); skipped when this process wrote the same lease last.

        Written in place, not through a renamed temporary file: the job is not running while
        its lease changes (it is held or requeued until the driver releases it), and ext4
        flushes a file renamed over another at once, which made thousands of leases per
        round wait on the disk."""
        text = f"{gpu_type} {gpus}\n" if batch is None else f"{gpu_type} {gpus} {batch[0]} {batch[1]} {batch[2]}\n"
        if self._lease.get(job_id) == text:
            return
        fd = os.open(f"{self._dir}/{job_id}.lease", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        self._lease[job_id] = text

    def changed(self) -> set[str]:
        """Jobs whose progress file grew since it was last read (one directory scan).

        Raises
        ------
        OSError
            The directory cannot be read.
        """
        out = set()
        offset = self._offset
        with os.scandir(self._dir) as it:
            for e in it:
                name = e.name
                if name.endswith(".progress"):
                    jid = name[:-9]
                    try:
                        if e.stat().st_size > offset.get(jid, 0):
                            out.add(jid)
                    except FileNotFoundError:
                        continue
        return out

    def owner(self, job_id: str) -> int | None:
        """The uid owning the job's progress file (None when it has none)."""
        try:
            return (self.path / f"{job_id}.progress").stat().st_uid
        except OSError:
            return None

    def read_new(self, job_id: str) -> tuple[list[ProgressLine], list[str]]:
        """The complete lines the job appended since the last call (all of them after a
        restart of the driver), and the lines that could not be read."""
        path = f"{self._dir}/{job_id}.progress"
        start = self._offset.get(job_id, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(start)
                data = fh.read()
        except FileNotFoundError:
            return [], []
        end = data.rfind(b"\n") + 1        # a line still being written waits for the next read
        self._offset[job_id] = start + end
        lines, bad = [], []
        for raw in data[:end].decode(errors="replace").splitlines():
            parts = raw.split(maxsplit=3)
            try:
                t, steps = float(parts[0]), float(parts[1])
                kind = parts[2] if len(parts) > 2 and parts[2] != "-" else None
                measured = json.loads(parts[3]) if len(parts) > 3 else None
            except (IndexError, ValueError):
                bad.append(raw)
                continue
            if measured is not None and not isinstance(measured, dict):
                bad.append(raw)
                continue
            lines.append(ProgressLine(t, steps, kind, measured))
        return lines, bad

    def remove(self, job_id: str) -> None:
        """Forget a finished job: its cursor, lease and progress files."""
        self._offset.pop(job_id, None)
        self._lease.pop(job_id, None)
        for suffix in (".lease", ".progress"):
            try:
                (self.path / f"{job_id}{suffix}").unlink()
            except FileNotFoundError:
                pass
