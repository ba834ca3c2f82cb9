"""hetsched drives a Slurm partition (see ``docs/slurm.md``).

* :class:`SlurmDriver` — every round: read Slurm, reconcile the online store with it, read
  the jobs' progress, plan with an :class:`~hetsched.online.OnlineScheduler`, apply
  (:mod:`.driver`); ``python -m hetsched slurm ...`` runs it (:mod:`.command`);
* :class:`SlurmCommands` — ``sinfo``/``squeue``/``scontrol``/``scancel``, batched, with
  timeouts (:mod:`.commands`); :class:`FakeSlurm` — the same interface in memory (:mod:`.fake`);
* :func:`read_cluster` — Slurm's nodes and GRES GPU types as a hetsched cluster (:mod:`.cluster`);
* :func:`report` / :func:`lease` — what a training script calls (:mod:`.progress`;
  ``python -m hetsched.slurm STEPS`` from a shell).
"""

from __future__ import annotations

from .cluster import SlurmCluster, read_cluster
from .commands import SlurmCommandError, SlurmCommands
from .driver import RoundSummary, SlurmDriver
from .fake import FakeSlurm
from .progress import lease, lease_batch, report
from .records import SlurmJob, SlurmNode, Start

__all__ = [
    "FakeSlurm",
    "RoundSummary",
    "SlurmCluster",
    "SlurmCommandError",
    "SlurmCommands",
    "SlurmDriver",
    "SlurmJob",
    "SlurmNode",
    "Start",
    "lease",
    "lease_batch",
    "read_cluster",
    "report",
]
