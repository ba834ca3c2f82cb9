"""What the driver reads from Slurm and asks of it: nodes, jobs, starts (plain records).

Both command layers (:class:`~hetsched.slurm.commands.SlurmCommands` for the real
``sinfo``/``squeue``/``scontrol``/``scancel``, :class:`~hetsched.slurm.fake.FakeSlurm` for
tests and benchmarks) return and take these, so the driver never sees Slurm's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ALIVE_STATES", "FINISHED_STATES", "GRACE_SIGNAL", "RUNNING_STATES", "SlurmJob", "SlurmNode", "Start",
           "expand_hostlist", "parse_gres"]

#: Job states in which a job holds (or is about to hold) its node's GPUs.
RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "SUSPENDED"})
#: Job states of a job that is still Slurm's to run (pending, held, running, being requeued).
ALIVE_STATES = RUNNING_STATES | {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "COMPLETING",
                                 "STAGE_OUT", "SIGNALING", "RESV_DEL_HOLD", "STOPPED"}
#: Job states after which a job never runs again (COMPLETED: finished by itself).
FINISHED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                             "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED"})

#: ``SIGUSR1`` (Linux's number): the signal the driver sends ``--grace-seconds`` before a preemption.
GRACE_SIGNAL = 10

#: Node state flags that take a node's GPUs away from the plan.
UNUSABLE_FLAGS = frozenset({"DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "MAINT", "NOT_RESPONDING",
                            "POWERED_DOWN", "POWERING_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED", "INVALID_REG",
                            "RESERVED"})
#: Node base states without usable GPUs.
UNUSABLE_STATES = frozenset({"DOWN", "UNKNOWN", "FUTURE", "ERROR", "DRAIN", "DRAINED", "DRAINING", "FAIL"})

_GRES_ITEM = re.compile(r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))?(?::(?P<count>\d+))?(?:\((?P<extra>[^)]*)\))?$")


@dataclass(frozen=True)
class SlurmNode:
    """A Slurm node as the plan sees it.

    Attributes
    ----------
    name : str
    gpus : dict of str to int
        GRES GPU type -> count configured on the node (typed GRES only).
    usable : bool
        The node takes jobs (not down, drained, draining, failing or not responding).
    state : str
        Slurm's state and flags, e.g. ``"mixed+DRAIN"`` (for logs).
    untyped_gpus : int
        GPUs configured without a type (the driver cannot plan them; it says so).
    """

    name: str
    gpus: dict[str, int]
    usable: bool
    state: str
    untyped_gpus: int = 0


@dataclass(frozen=True)
class SlurmJob:
    """A job of the hetsched partition, as ``squeue`` shows it.

    Attributes
    ----------
    job_id : str
    state : str
        Slurm's job state (``PENDING``, ``RUNNING``, ``COMPLETED``, ...).
    held : bool
        Pending with priority 0 (``sbatch --hold``, ``scontrol hold``, ``requeuehold``).
    gpus : int
        GPUs per node it asks for (its ``--gres=gpu[:type]:N``; 0 when it asks for none).
    gpu_type : str or None
        The GRES type it asks for (None: untyped).
    nodes : tuple of str
        The nodes it runs on (running jobs) or was pinned to.
    comment : str
    start_time : float
        Unix time of its current start (0 when it has not started).
    reason : str
        Slurm's reason for its state (``JobHeldUser``, ``Resources``, ...).
    user_id : int or None
        The uid it runs as (its progress file must be owned by it or by root).
    exit_signal : int or None
        The signal that ended its last run, from ``squeue --json``'s exit code (None: it
        exited by itself, has not ended, or the text format, which shows no exit code).
    """

    job_id: str
    state: str
    held: bool = False
    gpus: int = 0
    gpu_type: str | None = None
    nodes: tuple[str, ...] = ()
    comment: str = ""
    start_time: float = 0.0
    reason: str = ""
    user_id: int | None = None
    exit_signal: int | None = None

    @property
    def alive(self) -> bool:
        """Still Slurm's to run (not finished)."""
        return self.state in ALIVE_STATES

    @property
    def running(self) -> bool:
        """Holding GPUs now."""
        return self.state in RUNNING_STATES

    @property
    def killed_by_grace_signal(self) -> bool:
        """Failed because ``SIGUSR1``, the driver's grace signal, ended its run: it arrived
        before the job installed its handler (a job just started, still importing), so the
        job did not checkpoint and exit as asked; it is requeued, not lost."""
        return self.state == "FAILED" and self.exit_signal == GRACE_SIGNAL


@dataclass(frozen=True)
class Start:
    """A job to start: ``gpus`` GPUs of GRES type ``gpu_type`` on each of ``nodes``.

    Attributes
    ----------
    job_id : str
    gpu_type : str
    gpus : int
        GPUs per node.
    nodes : tuple of str
        Nodes to pin it to (empty: Slurm chooses).
    batch : tuple of int or None
        An adaptive job's (total batch, per-GPU batch, accumulation steps) in the plan,
        written to its lease; None for a job with a fixed batch.
    n_nodes : int
        Without ``nodes``: how many nodes Slurm is asked for (0: one); with them, ignored
        (``len(nodes)``).
    """

    job_id: str
    gpu_type: str
    gpus: int
    nodes: tuple[str, ...] = field(default=())
    batch: tuple[int, int, int] | None = None
    n_nodes: int = 0

    @property
    def node_count(self) -> int:
        """Nodes the job runs on: ``len(nodes)`` when pinned, else ``n_nodes`` (at least one)."""
        return len(self.nodes) if self.nodes else max(self.n_nodes, 1)

    @property
    def tres(self) -> str:
        """Its ``TresPerNode`` value, e.g. ``gres:gpu:v100:2``."""
        return f"gres:gpu:{self.gpu_type}:{self.gpus}"


def parse_gres(text: str) -> tuple[dict[str, int], int]:
    """The GPUs of a GRES string such as ``gpu:v100:2,gpu:k80:4(S:0),gres:gpu:1``.

    Parameters
    ----------
    text : str

    Returns
    -------
    (dict of str to int, int)
        Typed GPUs per type, and GPUs without a type. Other GRES (``mps``, ``shard``) are left out.

    Examples
    --------
    >>> parse_gres("gpu:v100:2,gpu:k80:4(S:0-1),mps:100")
    ({'v100': 2, 'k80': 4}, 0)
    >>> parse_gres("gres:gpu:3")
    ({}, 3)
    """
    typed: dict[str, int] = {}
    untyped = 0
    for item in _split_top(text or ""):
        item = item.strip()
        if item.startswith("gres:") or item.startswith("gres/"):
            item = item[5:]
        if not item or item in ("(null)", "N/A"):
            continue
        m = _GRES_ITEM.match(item)
        if m is None or m.group("name") != "gpu":
            continue
        kind, count = m.group("type"), m.group("count")
        if kind is not None and count is None and kind.isdigit():   # gpu:2
            kind, count = None, kind
        n = int(count) if count is not None else 1
        if kind is None:
            untyped += n
        else:
            typed[kind] = typed.get(kind, 0) + n
    return typed, untyped


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and parentheses."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [s for s in out if s]


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Node names of a Slurm hostlist (``node[01-03,7],gpu9``).

    Examples
    --------
    >>> expand_hostlist("n[01-03,7],gpu9")
    ('n01', 'n02', 'n03', 'n7', 'gpu9')
    >>> expand_hostlist("")
    ()
    """
    names: list[str] = []
    for item in _split_top(text or ""):
        m = re.fullmatch(r"(?P<pre>[^\[\]]*)\[(?P<ranges>[^\]]+)\](?P<post>.*)", item)
        if m is None:
            if item not in ("(null)", "None assigned"):
                names.append(item)
            continue
        for part in m.group("ranges").split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                names.append(f"{m.group('pre')}{lo}{m.group('post')}")
                continue
            width = len(lo)
            for i in range(int(lo), int(hi) + 1):
                names.append(f"{m.group('pre')}{i:0{width}d}{m.group('post')}")
    return tuple(names)
