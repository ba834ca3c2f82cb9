"""What the adaptive round schedulers (:class:`~hetsched.schedulers.pollux.Pollux`,
:class:`~hetsched.schedulers.sia_adaptive.AdaptiveSia`) share: their state across rounds,
the configuration set, learning from what ran, and turning a choice of configurations into
the round's rows.

A configuration is a GPU type and a GPU count on one node (1, 2, 4, ... up to the node
size) or on whole nodes (Sia's set, :func:`hetsched.formulations.sia.configurations.configuration_set`),
so any choice within each type's GPU count packs onto the servers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import ValidationError
from ..formulations.sia.configurations import ConfigurationSet, configuration_set
from ..rounds.protocol import RoundRows, RoundView
from .goodput_beliefs import GoodputBeliefs

__all__ = ["AdaptiveRounds", "AdaptiveState", "adaptive_progress", "fair_replicas", "forget_cluster", "held_configs",
           "prepare_state", "record", "relink", "restart_factor", "rows_for_choice"]


@dataclass
class AdaptiveState:
    """State of an adaptive scheduler across rounds (mutable; one per simulation).

    Attributes
    ----------
    beliefs : GoodputBeliefs or None
        Created at the first round from the workload's adaptive jobs.
    current : dict
        Job number -> (type column, GPUs) it ran on in the last round it ran.
    restarts : dict
        Job number -> restarts so far (changes of configuration after its first start).
    progress : dict
        Job number -> progress when the round was planned (what its report is measured at).
    ever_ran : set
        Jobs that have run (a first start is not a restart).
    configs : ConfigurationSet or None
        The configuration set (built once per cluster).
    """

    beliefs: GoodputBeliefs | None = None
    current: dict[int, tuple[int, int]] = field(default_factory=dict)
    restarts: dict[int, int] = field(default_factory=dict)
    progress: dict[int, float] = field(default_factory=dict)
    configs: ConfigurationSet | None = None
    rounds: int = 0
    ever_ran: set[int] = field(default_factory=set)


class AdaptiveRounds:
    """What the adaptive schedulers' round interface shares: a fresh :class:`AdaptiveState`,
    and learning from what ran (:func:`record`).

    ``adaptive = True`` tells the round loops that the scheduler plans adaptive jobs (it
    reads their :class:`~hetsched.inputs.adaptive.AdaptiveJobs` from the view's context):
    the online scheduler then needs the models' profiles."""

    adaptive: ClassVar[bool] = True

    def initial_state(self, start_time: float = 0.0) -> AdaptiveState:
        """Nothing learned yet."""
        return AdaptiveState()

    def record_round(self, state: AdaptiveState, ran: RoundRows, seconds: np.ndarray) -> AdaptiveState:
        """Learn from what ran (see :func:`record`)."""
        return record(state, ran, seconds)


def adaptive_progress(view: RoundView, who: str) -> Any:
    """The adaptive jobs of the round (:class:`~hetsched.inputs.adaptive.AdaptiveJobs`: the
    simulated truth, or an online scheduler's jobs), or a clear error."""
    prog = view.context.get("adaptive")
    if prog is None:
        raise ValidationError(f"{who} schedules adaptive jobs: pass a hetsched.inputs.adaptive.AdaptiveWorkload "
                              "(e.g. hetsched.inputs.adaptive.sia_workload('philly', 1)) as the workload.")
    return prog


def prepare_state(state: AdaptiveState, view: RoundView, *, per_type: bool, seed_single_gpu: bool,
                  max_gpus: int | None) -> Any:
    """Create the beliefs and configuration set at the first round; see every active job."""
    prog = view.context["adaptive"]
    if state.beliefs is None:
        state.beliefs = GoodputBeliefs(prog, per_type=per_type, seed_single_gpu=seed_single_gpu)
    relink(state, prog)
    if state.configs is None:
        state.configs = configuration_set(view.cluster, view.gpu_types, max_gpus=max_gpus)
    for j, done in zip(view.jobs.tolist(), (prog.completion[view.jobs] - view.remaining).tolist()):
        state.beliefs.see(j)
        state.progress[j] = done
    return prog


def relink(state: Any, jobs: Any) -> None:
    """Link a state's beliefs to ``jobs`` (an :class:`~hetsched.inputs.adaptive.AdaptiveJobs`):
    a stored state comes back without that link (:mod:`hetsched.online.codec`), and its
    next :meth:`~AdaptiveRounds.record_round` reads the reports through it."""
    beliefs = getattr(state, "beliefs", None)
    if beliefs is not None:
        beliefs.progress = jobs


def forget_cluster(state: Any) -> None:
    """Drop what a state derived from the cluster (its configuration set, and Optimus's
    per-job configurations), so that the next plan rebuilds them from the round's cluster:
    an online scheduler resized (a node lost or added). What was learned is kept; a job
    whose configuration no longer exists counts as holding none (:func:`held_configs`)."""
    if hasattr(state, "configs"):
        state.configs = None
    if hasattr(state, "configs_of"):
        state.configs_of = {}


def held_configs(view: RoundView, state: AdaptiveState) -> np.ndarray:
    """Index in the configuration set of the configuration each active job holds (-1: none,
    or one no longer in the set)."""
    cs = state.configs
    held = np.full(view.n_jobs, -1)
    for i, j in enumerate(view.jobs.tolist()):
        cur = state.current.get(j)
        if cur is not None:
            hit = np.flatnonzero((cs.type_index == cur[0]) & (cs.gpus == cur[1]))
            held[i] = hit[0] if hit.size else -1
    return held


def restart_factor(age: np.ndarray, restarts: np.ndarray, delay: np.ndarray) -> np.ndarray:
    """Share of a configuration change's value a scheduler keeps (Pollux's and Sia's rule):
    ``max(age - restarts * delay, 0) / (age + delay)``, where ``age`` is the job's time since
    submission and ``delay`` the restart cost it is charged with."""
    age = np.asarray(age, dtype=float)
    return np.maximum(age - np.asarray(restarts, dtype=float) * delay, 0.0) / (age + delay)


def rows_for_choice(view: RoundView, state: AdaptiveState, choice: np.ndarray, batch: np.ndarray,
                    rate: np.ndarray, info: dict[str, Any]) -> RoundRows:
    """The round's rows for ``choice`` (configuration index per active job, -1: none) at
    ``batch`` (total batch per job) and the believed ``rate`` per job."""
    cs = state.configs
    take = np.flatnonzero(choice >= 0)
    c = choice[take]
    gpus = cs.gpus[c].astype(np.int64)
    nodes = cs.nodes[c].astype(np.int64)
    return RoundRows(view.jobs[take], cs.type_index[c].astype(np.int64), gpus, rate[take],
                     consolidated=(nodes == 1) & (gpus > 1), batch_size=batch[take], info=info)


def record(state: AdaptiveState, ran: RoundRows, seconds: np.ndarray) -> AdaptiveState:
    """After a round: every row that computed reports (what it measured is learned; a job that
    reported nothing, online, teaches nothing), and configurations and restarts are updated."""
    prog = state.beliefs.progress
    for i in range(ran.n_rows):
        j, k, g = int(ran.job[i]), int(ran.gpu_type[i]), int(ran.gpus[i])
        if seconds[i] <= 0:
            continue
        rep = prog.report(j, k, g, int(ran.batch_size[i]), state.progress.get(j, 0.0))
        if rep is not None:
            state.beliefs.observe(j, rep)
        prev = state.current.get(j)
        if prev is not None and prev != (k, g):
            state.restarts[j] = state.restarts.get(j, 0) + 1
        state.current[j] = (k, g)
        state.ever_ran.add(j)
    ran_now = set(ran.job.tolist())
    for j in list(state.current):
        if j not in ran_now:   # preempted (or finished): its next start is a restart too
            if j in state.progress and state.current[j] is not None:
                state.restarts[j] = state.restarts.get(j, 0) + 1
            del state.current[j]
    state.rounds += 1
    return state


def fair_replicas(total_gpus: int, n_jobs: int) -> int:
    """GPUs per job under an even split (Pollux's fair share), at least 1."""
    return max(1, math.ceil(total_gpus / max(n_jobs, 1)))
