"""The Slurm command layer: ``sinfo``, ``squeue``, ``scontrol`` and ``scancel``, batched, with
timeouts, read as JSON where Slurm supports it (``--json``, Slurm 21.08 and later built with
its JSON plugins; Debian's 22.05 is) and as a parsable ``-o`` format otherwise.

Every method is one command for all the jobs it is given (ids joined with commas, in chunks
of :data:`CHUNK` ids), except :meth:`SlurmCommands.start`, which needs one ``scontrol update``
per distinct GRES request and node list. A command that fails (non-zero exit, a timeout, a
missing binary, output that cannot be read) raises :class:`SlurmCommandError` naming the
command, and is counted in :attr:`SlurmCommands.stats`; the driver logs it and carries on.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from ..errors import HetschedError
from ..validation import check_nonempty_str, check_positive
from .records import (
    UNUSABLE_FLAGS,
    UNUSABLE_STATES,
    SlurmJob,
    SlurmNode,
    Start,
    expand_hostlist,
    parse_gres,
)

__all__ = ["CHUNK", "CommandLayer", "SlurmCommandError", "SlurmCommands", "group_starts"]

log = logging.getLogger(__name__)

#: Job ids per command (a command line stays far below the system's limit).
CHUNK = 2000
_SQUEUE_FORMAT = "%i|%T|%p|%b|%N|%S|%r|%U|%k"
_SINFO_FORMAT = "%N|%T|%G|%P"


class SlurmCommandError(HetschedError, RuntimeError):
    """A Slurm command failed, timed out or printed what could not be read (the message says which)."""


class CommandLayer(Protocol):
    """What the driver asks of Slurm: :class:`SlurmCommands`, or :class:`~hetsched.slurm.fake.FakeSlurm`
    in memory. Every method raises :class:`SlurmCommandError` when Slurm does not do it."""

    def nodes(self) -> list[SlurmNode]: ...

    def jobs(self) -> list[SlurmJob]: ...

    def start(self, starts: Sequence[Start]) -> None: ...

    def hold(self, job_ids: Sequence[str]) -> None: ...

    def signal(self, job_ids: Sequence[str], signal: str = "USR1") -> None: ...

    def requeue_hold(self, job_ids: Sequence[str]) -> None: ...


def group_starts(starts: Iterable[Start]) -> dict[tuple[str, tuple[str, ...], int], list[str]]:
    """Job ids of ``starts`` grouped by ``(TresPerNode, nodes, node count)``: one ``scontrol
    update`` each."""
    groups: dict[tuple[str, tuple[str, ...], int], list[str]] = {}
    for s in starts:
        groups.setdefault((s.tres, s.nodes, s.node_count), []).append(s.job_id)
    return groups


def _chunks(ids: Sequence[str]) -> Iterable[list[str]]:
    for i in range(0, len(ids), CHUNK):
        yield list(ids[i:i + CHUNK])


class SlurmCommands:
    """Runs Slurm's commands for the driver (see the module docstring).

    Parameters
    ----------
    partition : str, default "hetsched"
        The partition whose nodes and jobs hetsched schedules.
    timeout_s : float, default 30
        Seconds one command may take before it is killed and reported as failed.
    use_json : bool or None, default None
        Read ``sinfo``/``squeue`` as JSON (True), as the ``-o`` format (False), or JSON
        when this Slurm supports it (None: tried once, then remembered).

    Attributes
    ----------
    stats : collections.Counter
        ``calls``, ``failures`` and ``timeouts`` in all, and per command (``"squeue"``,
        ``"squeue.failures"``, ...).
    """

    def __init__(self, *, partition: str = "hetsched", timeout_s: float = 30.0, use_json: bool | None = None) -> None:
        self.partition = check_nonempty_str(partition, "partition")
        self.timeout_s = check_positive(timeout_s, "timeout_s", unit="seconds")
        self.use_json = use_json
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------------ running one command
    def _run(self, args: Sequence[str]) -> str:
        name = args[0] if args[0] != "scontrol" else f"scontrol {args[1]}"
        self.stats["calls"] += 1
        self.stats[name] += 1
        shown = " ".join(args) if len(" ".join(args)) < 200 else " ".join(args)[:200] + " ..."
        if shutil.which(args[0]) is None:
            self._failed(name)
            raise SlurmCommandError(f"{args[0]!r} is not on PATH (is Slurm installed here?); command: {shown}")
        t0 = time.perf_counter()
        try:
            out = subprocess.run(list(args), capture_output=True, text=True, timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            self._failed(name, timeout=True)
            raise SlurmCommandError(f"`{shown}` timed out after {self.timeout_s:g} s (timeout_s)") from None
        except OSError as exc:
            self._failed(name)
            raise SlurmCommandError(f"`{shown}` could not run: {exc}") from None
        log.debug("%s: rc %d in %.3f s", shown, out.returncode, time.perf_counter() - t0)
        if out.returncode != 0:
            self._failed(name)
            err = (out.stderr or out.stdout).strip().replace("\n", "; ")[:500]
            raise SlurmCommandError(f"`{shown}` failed with exit code {out.returncode}: {err}")
        return out.stdout

    def _failed(self, name: str, *, timeout: bool = False) -> None:
        self.stats["failures"] += 1
        self.stats[f"{name}.failures"] += 1
        if timeout:
            self.stats["timeouts"] += 1

    def _json(self, args: Sequence[str]) -> dict[str, Any] | None:
        """``args --json`` parsed, or None when this Slurm has no JSON output (remembered)."""
        if self.use_json is False:
            return None
        try:
            text = self._run([*args, "--json"])
        except SlurmCommandError as exc:
            if self.use_json is None and ("json" in str(exc).lower() or "unrecognized" in str(exc).lower()):
                log.info("%s has no --json here (%s); reading its -o format from now on", args[0], exc)
                self.use_json = False
                self.stats["failures"] -= 1   # not a failure: the probe
                self.stats[f"{args[0]}.failures"] -= 1
                return None
            raise
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            self._failed(args[0])
            raise SlurmCommandError(f"`{args[0]} --json` printed what is not JSON ({exc})") from None
        self.use_json = True
        return data

    # ------------------------------------------------------------------ reading
    def nodes(self) -> list[SlurmNode]:
        """The partition's nodes with their typed GPU GRES (one ``sinfo``)."""
        data = self._json(["sinfo"])
        if data is not None:
            return [self._node_json(n) for n in data.get("nodes", []) if self.partition in (n.get("partitions") or [])]
        out = []
        seen = set()
        for line in self._run(["sinfo", "-h", "-N", "-p", self.partition, "-o", _SINFO_FORMAT]).splitlines():
            parts = line.split("|")
            if len(parts) != 4 or parts[0] in seen:
                continue
            seen.add(parts[0])
            state = parts[1].strip().lower()
            typed, untyped = parse_gres(parts[2])
            base, *flags = state.rstrip("*~#!%$@^-").split("+")
            usable = (base.upper() not in UNUSABLE_STATES and not state.endswith("*")
                      and not any(f.upper() in UNUSABLE_FLAGS for f in flags))
            out.append(SlurmNode(parts[0], typed, usable, state, untyped))
        return out

    @staticmethod
    def _node_json(n: dict[str, Any]) -> SlurmNode:
        state = str(n.get("state", "")).upper()
        flags = [str(f).upper() for f in n.get("state_flags") or []]
        typed, untyped = parse_gres(str(n.get("gres", "")))
        usable = state not in UNUSABLE_STATES and not any(f in UNUSABLE_FLAGS for f in flags)
        return SlurmNode(str(n["name"]), typed, usable, "+".join([state.lower(), *flags]), untyped)

    def jobs(self) -> list[SlurmJob]:
        """Every job of the partition Slurm still remembers, in all states (one ``squeue``)."""
        data = self._json(["squeue", "--all"])
        if data is not None:
            return [self._job_json(j) for j in data.get("jobs", []) if j.get("partition") == self.partition]
        out = []
        text = self._run(["squeue", "-h", "--all", "-t", "all", "-p", self.partition, "-o", _SQUEUE_FORMAT])
        for line in text.splitlines():
            parts = line.split("|", 8)
            if len(parts) != 9:
                continue
            jid, state, prio, gres, nodes, start, reason, uid, comment = parts
            typed, untyped = parse_gres(gres)
            try:
                started = datetime.fromisoformat(start).timestamp() if start[:1].isdigit() else 0.0
            except ValueError:
                started = 0.0
            out.append(SlurmJob(jid, state, _held(state, _float(prio), reason), sum(typed.values()) + untyped,
                                next(iter(typed), None), expand_hostlist(nodes) if nodes else (),
                                "" if comment == "(null)" else comment, started, reason,
                                int(uid) if uid.isdigit() else None))
        return out

    @staticmethod
    def _job_json(j: dict[str, Any]) -> SlurmJob:
        typed, untyped = parse_gres(str(j.get("tres_per_node") or ""))
        state = str(j.get("job_state", ""))
        reason = str(j.get("state_reason", ""))
        return SlurmJob(str(j["job_id"]), state, _held(state, float(j.get("priority") or 0), reason),
                        sum(typed.values()) + untyped, next(iter(typed), None),
                        expand_hostlist(str(j.get("nodes") or "")), str(j.get("comment") or ""),
                        float(j.get("start_time") or 0), reason,
                        int(j["user_id"]) if isinstance(j.get("user_id"), int) else None,
                        _exit_signal(j.get("exit_code")))

    # ------------------------------------------------------------------ acting (batched)
    def start(self, starts: Sequence[Start]) -> None:
        """Give each job its GRES type, count and nodes, and release it: one ``scontrol
        update`` clearing the jobs' GRES (Slurm refuses to turn an untyped request into a
        typed one), one per distinct request (one per job for the jobs pinned to nodes:
        Slurm refuses ``NodeList`` for a list of jobs), one ``scontrol release``. Requeued
        jobs are made eligible at once (``StartTime=now``; Slurm otherwise delays them).

        Raises
        ------
        SlurmCommandError
            After releasing every job whose update worked, naming the groups that failed.
        """
        if not starts:
            return
        ids = [s.job_id for s in starts]
        ok: list[str] = []
        errors: list[str] = []
        for chunk in _chunks(ids):
            try:   # a job that ended meanwhile fails here, and below: the others go on
                self._run(["scontrol", "update", f"JobId={','.join(chunk)}", "TresPerNode="])
            except SlurmCommandError as exc:
                errors.append(str(exc))
        for (tres, nodes, count), group in group_starts(starts).items():
            where = [f"NumNodes={len(nodes)}", f"NodeList={','.join(nodes)}"] if nodes else \
                ([f"NumNodes={count}"] if count > 1 else [])
            # Slurm takes NumNodes/NodeList for one job id at a time
            for chunk in ([[j] for j in group] if nodes else _chunks(group)):
                try:
                    self._run(["scontrol", "update", f"JobId={','.join(chunk)}", f"TresPerNode={tres}", *where,
                               "StartTime=now"])
                    ok.extend(chunk)
                except SlurmCommandError as exc:
                    errors.append(str(exc))
        for chunk in _chunks(ok):
            self._run(["scontrol", "release", ",".join(chunk)])
        if errors:
            raise SlurmCommandError(f"{len(errors)} scontrol update(s) failed (the other jobs were released): "
                                    + " | ".join(errors[:3]))

    def hold(self, job_ids: Sequence[str]) -> None:
        """Hold pending jobs again (one ``scontrol hold``)."""
        for chunk in _chunks(list(job_ids)):
            self._run(["scontrol", "hold", ",".join(chunk)])

    def signal(self, job_ids: Sequence[str], signal: str = "USR1") -> None:
        """Send ``signal`` to the jobs' batch scripts and steps (one ``scancel --signal``)."""
        for chunk in _chunks(list(job_ids)):
            self._run(["scancel", f"--signal={signal}", "--full", *chunk])

    def requeue_hold(self, job_ids: Sequence[str]) -> None:
        """Stop running jobs and put them back in the queue, held (one ``scontrol
        requeuehold``; Slurm sends SIGTERM, then SIGKILL after its ``KillWait``)."""
        for chunk in _chunks(list(job_ids)):
            self._run(["scontrol", "requeuehold", ",".join(chunk)])


def _held(state: str, priority: float, reason: str) -> bool:
    return state == "PENDING" and (priority == 0 or reason.startswith("JobHeld") or "held" in reason.lower())


def _exit_signal(code: Any) -> int | None:
    """The signal that ended a job's run, from ``squeue --json``'s ``exit_code``: a raw wait
    status (Slurm 22.05: 768 is ``exit 3``, 10 is "killed by signal 10"), or, from 23.02 on,
    ``{"status": ["SIGNALED"], "signal": {"id": {"number": 10, ...}, "name": "USR1"}}``."""
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        sig = code & 0x7F
        return sig if 0 < sig < 0x7F else None
    if isinstance(code, dict) and "SIGNALED" in (code.get("status") or ()):
        sig = (code.get("signal") or {}).get("id")
        if isinstance(sig, dict):
            sig = sig.get("number") if sig.get("set", True) else None
        return sig if isinstance(sig, int) and not isinstance(sig, bool) and sig > 0 else None
    return None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
