"""An in-memory Slurm with the command layer's interface, for unit tests and the driver's
speed benchmark: jobs are submitted held, started, held, signalled, requeued and finished
as the methods of :class:`~hetsched.slurm.commands.SlurmCommands` say, instantly, and
failures can be injected per command.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from .commands import SlurmCommandError, group_starts
from .records import SlurmJob, SlurmNode, Start

__all__ = ["FakeSlurm"]


class FakeSlurm:
    """A fake Slurm partition (see the module docstring).

    Parameters
    ----------
    nodes : mapping node name -> mapping GRES type -> count
        The partition's nodes, all usable.
    clock : callable, optional
        Returns the time a start is stamped with (default 0.0).

    Attributes
    ----------
    stats : collections.Counter
        Calls per command name, as :class:`SlurmCommands` counts them (``calls``,
        ``failures``, ``"scontrol update"``, ...).
    log : list of (str, tuple of str)
        Every command run: its name and the job ids it was given.
    fail : collections.Counter
        Command name -> how many of its next calls fail (``"squeue"``, ``"sinfo"``,
        ``"scontrol update"``, ``"scontrol release"``, ``"scontrol hold"``,
        ``"scontrol requeuehold"``, ``"scancel"``).
    signals : list of (str, str)
        ``(job id, signal)`` of every signal sent.
    restarts : collections.Counter
        Job id -> times it was requeued while running.
    """

    def __init__(self, nodes: Mapping[str, Mapping[str, int]], *, clock: Callable[[], float] | None = None) -> None:
        self._nodes = {name: SlurmNode(name, dict(g), True, "idle") for name, g in nodes.items()}
        self._jobs: dict[str, SlurmJob] = {}
        self._clock = clock or (lambda: 0.0)
        self.stats: Counter[str] = Counter()
        self.log: list[tuple[str, tuple[str, ...]]] = []
        self.fail: Counter[str] = Counter()
        self.signals: list[tuple[str, str]] = []
        self.restarts: Counter[str] = Counter()
        self._next_id = 1

    # ------------------------------------------------------------------ the test's side
    def submit(self, gpus: int, *, comment: str = "", held: bool = True, user_id: int | None = None) -> str:
        """A new job asking for ``gpus`` GPUs (held, as hetsched's users submit), of the user
        ``user_id`` (None: unknown); returns its id."""
        jid = str(self._next_id)
        self._next_id += 1
        self._jobs[jid] = SlurmJob(jid, "PENDING", held, gpus, None, (), comment, 0.0,
                                   "JobHeldUser" if held else "Priority", user_id=user_id)
        return jid

    def finish(self, job_id: str, state: str = "COMPLETED", *, exit_signal: int | None = None) -> None:
        """The job ends in ``state`` (by itself, or cancelled outside hetsched); ``exit_signal``:
        the signal that ended its run (``squeue --json``'s exit code)."""
        self._set(job_id, state=state, held=False, exit_signal=exit_signal)

    def forget(self, job_id: str) -> None:
        """Slurm no longer shows the job (it aged out of ``squeue``)."""
        del self._jobs[job_id]

    def set_node(self, name: str, *, usable: bool | None = None, gpus: Mapping[str, int] | None = None) -> None:
        """Drain or resume a node (``usable``), or add one / change its GRES (``gpus``)."""
        old = self._nodes.get(name, SlurmNode(name, {}, True, "idle"))
        ok = old.usable if usable is None else usable
        self._nodes[name] = SlurmNode(name, dict(old.gpus if gpus is None else gpus), ok,
                                      "idle" if ok else "idle+DRAIN")

    def remove_node(self, name: str) -> None:
        """The node leaves the partition."""
        del self._nodes[name]

    def job(self, job_id: str) -> SlurmJob:
        """The job as Slurm shows it now."""
        return self._jobs[job_id]

    def _set(self, job_id: str, **changes: object) -> None:
        self._jobs[job_id] = dataclasses.replace(self._jobs[job_id], **changes)

    def _call(self, name: str, ids: Sequence[str] = ()) -> None:
        self.stats["calls"] += 1
        self.stats[name] += 1
        self.log.append((name, tuple(ids)))
        if self.fail[name] > 0:
            self.fail[name] -= 1
            self.stats["failures"] += 1
            raise SlurmCommandError(f"`{name}` failed (injected by FakeSlurm.fail)")

    # ------------------------------------------------------------------ the command layer's interface
    def nodes(self) -> list[SlurmNode]:
        """See :meth:`SlurmCommands.nodes`."""
        self._call("sinfo")
        return list(self._nodes.values())

    def jobs(self) -> list[SlurmJob]:
        """See :meth:`SlurmCommands.jobs`."""
        self._call("squeue")
        return list(self._jobs.values())

    def start(self, starts: Sequence[Start]) -> None:
        """See :meth:`SlurmCommands.start`: each job runs at once where it was pinned, else on
        the first usable node with enough free GPUs of its type, else waits (``Resources``)."""
        if not starts:
            return
        self._call("scontrol update", [s.job_id for s in starts])
        by_id = {s.job_id: s for s in starts}
        for (_, nodes, _), ids in group_starts(starts).items():
            for chunk in ([[j] for j in ids] if nodes else [ids]):
                self._call("scontrol update", chunk)
        self._call("scontrol release", list(by_id))
        now = self._clock()
        free = self._free()
        for jid, s in by_id.items():
            nodes = s.nodes or tuple([n for n, f in free.items() if f.get(s.gpu_type, 0) >= s.gpus][:s.node_count])
            if len(nodes) < s.node_count:
                nodes = ()
            if not nodes or any(free.get(n, {}).get(s.gpu_type, 0) < s.gpus for n in nodes):
                # as Slurm: released, waiting for resources
                self._set(jid, held=False, gpu_type=s.gpu_type, gpus=s.gpus, reason="Resources")
                continue
            for n in nodes:
                free[n][s.gpu_type] -= s.gpus
            self._set(jid, state="RUNNING", held=False, gpu_type=s.gpu_type, gpus=s.gpus, nodes=nodes,
                      start_time=now, reason="None")

    def _free(self) -> dict[str, dict[str, int]]:
        """GPUs per usable node and type that no running job holds."""
        free = {n: dict(node.gpus) for n, node in self._nodes.items() if node.usable}
        for job in self._jobs.values():
            if job.running and job.gpu_type is not None:
                for n in job.nodes:
                    if n in free:
                        free[n][job.gpu_type] = free[n].get(job.gpu_type, 0) - job.gpus
        return free

    def hold(self, job_ids: Sequence[str]) -> None:
        """See :meth:`SlurmCommands.hold`."""
        self._call("scontrol hold", job_ids)
        for jid in job_ids:
            if self._jobs[jid].state == "PENDING":
                self._set(jid, held=True, reason="JobHeldUser")

    def signal(self, job_ids: Sequence[str], signal: str = "USR1") -> None:
        """See :meth:`SlurmCommands.signal`."""
        self._call("scancel", job_ids)
        self.signals.extend((jid, signal) for jid in job_ids)

    def requeue_hold(self, job_ids: Sequence[str]) -> None:
        """See :meth:`SlurmCommands.requeue_hold`."""
        self._call("scontrol requeuehold", job_ids)
        for jid in job_ids:
            if self._jobs[jid].running:
                self.restarts[jid] += 1
            self._set(jid, state="PENDING", held=True, nodes=(), start_time=0.0, reason="JobHeldUser",
                      exit_signal=None)
