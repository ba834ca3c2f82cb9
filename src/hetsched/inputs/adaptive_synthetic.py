r"""Built-in adaptive jobs: model profiles generated from Pollux's throughput model, for the
demo, tests and users without Sia's artifact data.

Every number here is illustrative, not measured: the profiles have the *shape* of Sia's
(per GPU type: measured placements, larger spreads, validation runs per batch size) and are
generated, noise-free, from the model that Pollux fits (OSDI'21, §3.2), so a scheduler's fit
can recover them. For a study, use measured profiles
(:func:`hetsched.inputs.adaptive.sia_workload`, ``docs/adaptive.md``).

Step and sync time of model :math:`i` on type :math:`t` with :math:`K` replicas on :math:`N`
nodes at per-GPU batch :math:`m`:

.. math::

    t_\text{compute} = (\alpha_i + \beta_i m) / s_t, \qquad
    t_\text{sync} = \begin{cases} \sigma_i / s_t & K = 1 \\
                                  \rho_i (1 + 0.1 (K - 2)) & N = 1 \\
                                  \nu_i (1 + 0.2 (K - 2)) & N > 1 \end{cases}, \qquad
    t_\text{step} = t_\text{compute} + t_\text{sync},

with :math:`s_t` the type's relative speed (:data:`SPEED`; 1 for a T4) and the model's
constants drawn once per seed. The validation runs (one per total batch :math:`M_0 2^r`,
:math:`r = 0 \ldots 3`) share epoch boundaries of :math:`E` iterations at :math:`M_0` each
(a fixed dataset); the gradient's square norm falls and its variance rises over training
(:math:`|g|^2_e = g_0 / (1 + e)`, :math:`\sigma^2_e = v_0 (1 + e)`), so a larger batch pays
off later in training, as Pollux observes; the validation metric is a loss
:math:`1 / (0.5 e + 1) + 0.1` (Optimus's curve).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..errors import ValidationError
from ..validation import check_int, check_positive
from .adaptive import AdaptiveWorkload
from .profiles import MachineProfile, ModelProfile
from .traces.sia import AdaptiveJobTable

__all__ = ["SPEED", "synthetic_adaptive_workload", "synthetic_profiles"]

#: Relative speed of each GPU type the generator knows (T4 = 1). Illustrative ratios of the
#: order of the published FP32 throughputs; not measured.
SPEED = {"k80": 0.5, "t4": 1.0, "p100": 1.3, "rtx": 1.6, "v100": 2.2, "a100": 4.0}
#: GPUs per node of each type (the machines of Sia's artifact for t4, rtx, a100).
NODE_GPUS = {"k80": 4, "t4": 4, "p100": 4, "rtx": 8, "v100": 8, "a100": 8}
#: (name, compute alpha s, compute beta s/example, one-GPU sync s, intra-node sync s,
#: inter-node sync s, initial batch, epochs, iterations per epoch at the initial batch,
#: g0, v0, restart s)
_MODELS = (
    ("resnet-s", 0.02, 0.0025, 0.002, 0.05, 0.25, 64, 10, 2000, 1.0, 4.0, 25.0),
    ("bert-s", 0.05, 0.0100, 0.004, 0.12, 0.60, 16, 6, 3000, 1.0, 2.0, 45.0),
    ("lstm-s", 0.01, 0.0008, 0.001, 0.02, 0.10, 128, 12, 1250, 1.0, 8.0, 15.0),
    ("yolo-s", 0.04, 0.0060, 0.003, 0.08, 0.40, 32, 8, 2500, 1.0, 3.0, 35.0),
)


def _times(mod: tuple, speed: float, nodes: int, replicas: int, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, a, b, s1, rho, nu = mod[:6]
    if replicas == 1:
        sync = s1 / speed
    elif nodes == 1:
        sync = rho * (1 + 0.1 * (replicas - 2))
    else:
        sync = nu * (1 + 0.2 * (replicas - 2))
    sync_arr = np.full(local.shape, float(sync))
    return (a + b * local) / speed + sync_arr, sync_arr


def _machine(mod: tuple, gpu_type: str, scale: float) -> MachineProfile:
    speed, R = SPEED[gpu_type] * scale, NODE_GPUS[gpu_type]
    m0 = int(mod[6])
    local = np.array([max(m0 // 4, 1), max(m0 // 2, 1), m0, 2 * m0], dtype=np.int64)
    layouts = [str(2 ** i) for i in range(4) if 2 ** i <= R] + ["11", "22", f"{R}{R}"]
    rows = []
    for p in layouts:
        n, k = len(p), sum(int(c) for c in p)
        step, sync = _times(mod, speed, n, k, local.astype(float))
        rows += [(p, int(b), float(s), float(y), n, k) for b, s, y in zip(local, step, sync)]
    placements = pd.DataFrame(rows, columns=["placement", "local_bsz", "step_time", "sync_time", "num_nodes",
                                             "num_replicas"])
    srows = []
    for n in (3, 4):
        step, sync = _times(mod, speed, n, n * R, local.astype(float))
        srows += [(n, n * R, int(b), float(s), float(y)) for b, s, y in zip(local, step, sync)]
    scal = pd.DataFrame(srows, columns=["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"])
    return MachineProfile(mod[0], gpu_type, R, placements, scal, int(local.min()), int(local.max()))


def _validation(mod: tuple) -> dict[int, pd.DataFrame]:
    m0, epochs, iters, g0, v0 = int(mod[6]), int(mod[7]), int(mod[8]), float(mod[9]), float(mod[10])
    e = np.arange(epochs, dtype=float)
    out = {}
    for r in range(4):
        out[m0 * 2 ** r] = pd.DataFrame({
            "progress": (e + 1) * iters, "iteration": (e + 1) * iters / 2 ** r, "metric": 1 / (0.5 * e + 1) + 0.1,
            "grad_sqr": g0 / (1 + e), "grad_var": v0 * (1 + e)})
    return out


def synthetic_profiles(gpu_types: Sequence[str] = ("t4", "rtx", "a100"), *, n_models: int = 4, seed: int = 0
                       ) -> dict[str, ModelProfile]:
    """Generated profiles of ``n_models`` models on ``gpu_types`` (see the module docstring).

    Parameters
    ----------
    gpu_types : sequence of str
        Types of :data:`SPEED`.
    n_models : int, default 4
        1 to 4 (``resnet-s``, ``bert-s``, ``lstm-s``, ``yolo-s``).
    seed : int, default 0
        Each model's speed on each type is scaled by a factor in [0.8, 1.25] drawn from it
        (so that types are not uniformly faster for every model, as measured ones are not).

    Raises
    ------
    ValidationError
        An unknown or repeated GPU type, no types, ``n_models`` out of range.
    """
    types = list(gpu_types) if not isinstance(gpu_types, str) else [gpu_types]
    if not types:
        raise ValidationError("`gpu_types` must name at least one GPU type; got none.")
    unknown = [t for t in types if t not in SPEED]
    if unknown or len(set(types)) != len(types):
        raise ValidationError(f"`gpu_types` must be distinct types of {sorted(SPEED)}; got {types}.")
    n = check_int(n_models, "n_models", low=1, high=len(_MODELS))
    rng = np.random.default_rng(check_int(seed, "seed", low=0))
    out = {}
    for mod in _MODELS[:n]:
        scale = np.exp(rng.uniform(math.log(0.8), math.log(1.25), len(types)))
        out[mod[0]] = ModelProfile(
            mod[0], {t: _machine(mod, t, float(f)) for t, f in zip(types, scale)}, _validation(mod),
            init_batch_size=int(mod[6]), max_batch_size=int(mod[6]) * 8, max_epochs=int(mod[7]),
            restart_seconds=float(mod[11]), calibration=1.0)
    return out


def synthetic_adaptive_workload(n_jobs: int = 24, *, gpu_types: Sequence[str] = ("t4", "rtx", "a100"),
                                rate_per_hour: float = 20.0, n_models: int = 4, seed: int = 0) -> AdaptiveWorkload:
    """``n_jobs`` adaptive jobs of :func:`synthetic_profiles`'s models, Poisson arrivals at
    ``rate_per_hour``, each submitted with 1, 2 or 4 GPUs (probabilities 0.6, 0.3, 0.1) at
    its model's initial batch times its GPUs (at most the model's largest batch).

    Raises
    ------
    ValidationError
        As :func:`synthetic_profiles`; ``n_jobs`` < 1; a rate that is not positive.
    """
    n = check_int(n_jobs, "n_jobs", low=1)
    rate = check_positive(rate_per_hour, "rate_per_hour")
    profiles = synthetic_profiles(gpu_types, n_models=n_models, seed=seed)
    rng = np.random.default_rng(check_int(seed, "seed", low=0) + 1)
    names = list(profiles)
    model = rng.choice(len(names), size=n)
    arrival = np.concatenate([[0.0], np.cumsum(rng.exponential(3600.0 / rate, n - 1))])
    replicas = rng.choice([1, 2, 4], size=n, p=[0.6, 0.3, 0.1])
    batch = [min(profiles[names[i]].init_batch_size * int(r), profiles[names[i]].max_batch_size)
             for i, r in zip(model, replicas)]
    frame = pd.DataFrame({"name": [f"{names[i]}-{j}" for j, i in enumerate(model)], "arrival": arrival,
                          "model": [names[i] for i in model], "num_replicas": replicas.astype(np.int64),
                          "batch_size": np.array(batch, dtype=np.int64)})
    source = f"synthetic adaptive workload (seed {seed})"
    return AdaptiveWorkload(AdaptiveJobTable(frame, source), profiles, source=source,
                            meta={"generator": "synthetic_adaptive_workload", "seed": seed, "n_jobs": n,
                                  "rate_per_hour": rate})
