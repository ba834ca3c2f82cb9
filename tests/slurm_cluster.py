"""A throw-away Slurm cluster on this machine for tests/test_slurm_real.py: munged, slurmctld and
two slurmd (nodes ``hsnode1``: 2 V100 + 4 K80, ``hsnode2``: 2 V100) started from a temporary
configuration, GPUs as GRES with ``AutoDetect=off`` and empty files as devices. Installs
nothing: where the binaries are missing or this is not root, :func:`start` raises
:class:`Unavailable` with the reason (the tests skip with it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel")
NODES = {"hsnode1": {"v100": 2, "k80": 4}, "hsnode2": {"v100": 2}}
PARTITION = "hetsched"
JOB_SCRIPT = Path(__file__).resolve().parent / "fixtures" / "slurm" / "fake_training_job.sh"


class Unavailable(RuntimeError):
    """Slurm cannot run here (the message says why)."""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class SlurmCluster:
    """The running cluster; :meth:`stop` ends every daemon it started (by pid)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.pidfiles: list[Path] = []

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=30)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def submit(self, gpus: int, *, comment: str, env: dict[str, str], hold: bool = True) -> str:
        """sbatch the fake training job; returns its id."""
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in env.items())])
        args = ["sbatch", "--parsable", "-p", PARTITION, f"--gres=gpu:{gpus}", f"--comment={comment}",
                "-o", "/dev/null", f"--export={export}", *(["--hold"] if hold else []), str(JOB_SCRIPT)]
        return self.run(*args).strip().split(";")[0]

    def states(self) -> dict[str, str]:
        """Job id -> state of every job Slurm remembers."""
        text = self.run("squeue", "-h", "-t", "all", "-o", "%i %T")
        return dict(line.split() for line in text.splitlines() if line.strip())

    def node(self, name: str, state: str) -> None:
        self.run("scontrol", "update", f"NodeName={name}", f"State={state}",
                 *(["Reason=test"] if state == "DRAIN" else []))

    def wait_idle(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
            states = dict(line.split() for line in text.splitlines() if line.strip())
            if len(states) == len(NODES) and all(s in ("idle", "mixed", "allocated") for s in states.values()):
                return
            time.sleep(0.5)
        raise Unavailable(f"the nodes did not come up within {timeout:g} s: {states}; "
                          f"slurmctld log: {(self.root / 'log' / 'slurmctld.log').read_text()[-2000:]}")

    def stop(self) -> None:
        self.run("scancel", "-p", PARTITION, check=False)
        deadline = time.monotonic() + 15      # let the jobs end before their slurmd does
        while time.monotonic() < deadline:
            try:
                if not any(s in ("RUNNING", "COMPLETING", "CONFIGURING") for s in self.states().values()):
                    break
            except (RuntimeError, subprocess.SubprocessError):
                break
            time.sleep(0.5)
        pids = []
        for f in reversed(self.pidfiles):
            try:
                pids.append(int(f.read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for pid in pids:
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def start(root: Path) -> SlurmCluster:
    """Configure and start the cluster under ``root``; raises :class:`Unavailable` where it cannot run."""
    missing = [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if missing:
        raise Unavailable(f"Slurm is not installed here (missing {missing}; Debian: apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        raise Unavailable("slurmd must run as root to start jobs; these tests run Slurm only as root")
    sbin = lambda b: shutil.which(b) or f"/usr/sbin/{b}"  # noqa: E731
    c = SlurmCluster(root)
    for d in ("state", "log", "dev", "munge", "spool"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    ctl_port, *node_ports = _free_ports(1 + len(NODES))
    host = socket.gethostname()
    lines = ["ClusterName=hetschedtest", f"SlurmctldHost={host}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
             f"SlurmctldPort={ctl_port}", f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool/%n",
             f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd-%n.pid",
             f"SlurmctldLogFile={root}/log/slurmctld.log", f"SlurmdLogFile={root}/log/slurmd-%n.log",
             "AuthType=auth/munge", f"AuthInfo=socket={root}/munge/socket",
             "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
             "SelectTypeParameters=CR_Core", "SchedulerType=sched/backfill", "GresTypes=gpu", "JobRequeue=1",
             "ReturnToService=2", "MpiDefault=none", "SwitchType=switch/none", "KillWait=2", "MinJobAge=600",
             "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
             "SchedulerParameters=sched_interval=1"]
    gres = ["AutoDetect=off"]
    for (name, gpus), port in zip(NODES.items(), node_ports):
        spec = ",".join(f"gpu:{t}:{n}" for t, n in gpus.items())
        lines.append(f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} Gres={spec} CPUs=2 "
                     "RealMemory=1000 State=UNKNOWN")
        for t, n in gpus.items():
            for i in range(n):
                (root / "dev" / f"{name}-{t}{i}").touch()
            gres.append(f"NodeName={name} Name=gpu Type={t} File={root}/dev/{name}-{t}[0-{n - 1}]")
    lines.append(f"PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP "
                 "OverSubscribe=FORCE:16")
    c.conf.write_text("\n".join(lines) + "\n")
    (root / "gres.conf").write_text("\n".join(gres) + "\n")
    c.pidfiles.append(root / "munge" / "munged.pid")
    subprocess.run([sbin("munged"), "--force", f"--key-file={key}", f"--socket={root}/munge/socket",
                    f"--log-file={root}/munge/munged.log", f"--pid-file={root}/munge/munged.pid",
                    f"--seed-file={root}/munge/seed"], check=True, timeout=30)
    try:
        c.pidfiles.append(root / "slurmctld.pid")
        subprocess.run([sbin("slurmctld"), "-c", "-f", str(c.conf)], env=c.env, check=True, timeout=30)
        for name in NODES:
            c.pidfiles.append(root / f"slurmd-{name}.pid")
            subprocess.run([sbin("slurmd"), "-N", name, "-f", str(c.conf)], env=c.env, check=True, timeout=30)
        c.wait_idle()
    except BaseException:
        c.stop()
        raise
    return c
