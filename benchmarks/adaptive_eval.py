"""Goodput evaluation of a round: every active job on every configuration, at its best batch.

What an adaptive scheduler computes each round before its search: for each job and each
configuration (GPU type, GPUs, nodes) of the paper's 64-GPU cluster, the goodput at the batch
size that maximises it under the job's fitted model (:class:`hetsched.schedulers.goodput_beliefs.GoodputBeliefs`,
per-type models as Sia keeps them). Jobs are Sia's Philly workload 1's models, cycled to
``--jobs``, each with its one-GPU profile on every type and one multi-GPU measurement per
type (so each model is fitted with network terms). Timed: the fits (once per job and type,
outside a round) and one round's evaluation (inside the round: ``GoodputBeliefs.table``, one
numpy pass per GPU type over every job and configuration), beside the reference the same run
measures: the same evaluation one job at a time (``per_job``: each job's own
``GoodputModel.optimize``); both must agree.

Columns: ``jobs, configs, fit_s, round_s, scalar_round_s, speedup``; ``round_s`` is the
target (< 0.1 s at 500 jobs, issue 25). Runs with one BLAS thread (set before numpy loads). Needs Sia's artifact
data (``../shared/data/sia`` or ``$HETSCHED_SIA_DATA``).

Usage::

    python benchmarks/adaptive_eval.py --quick     # 50 jobs
    python benchmarks/adaptive_eval.py             # 50, 200 and 500 jobs
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):   # tiny matrices: BLAS threads only contend
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from hetsched.errors import ValidationError  # noqa: E402
from hetsched.formulations.sia.configurations import configuration_set  # noqa: E402
from hetsched.inputs.adaptive import AdaptiveProgress, AdaptiveWorkload, sia_workload  # noqa: E402
from hetsched.inputs.traces.sia import AdaptiveJobTable  # noqa: E402
from hetsched.reproduce.sia_table3 import table3_cluster  # noqa: E402
from hetsched.schedulers.goodput_beliefs import GoodputBeliefs  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "adaptive_eval.csv"


def workload(n: int) -> AdaptiveWorkload:
    """Philly workload 1's jobs cycled to ``n`` (names made unique)."""
    base = sia_workload("philly", 1)
    frame = base.table.frame
    idx = np.arange(n) % len(frame)
    f = frame.iloc[idx].reset_index(drop=True).copy()
    f["name"] = [f"{a}-{i}" for i, a in enumerate(f["name"])]
    return AdaptiveWorkload(AdaptiveJobTable(f, base.table.source), base.profiles, source="benchmark")


def per_job(beliefs: GoodputBeliefs, j: int, k: int, nodes: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """The reference: job ``j``'s goodput at its best batch on each (nodes, replicas) of type
    ``k``, one ``GoodputModel.optimize`` call per per-GPU batch limit (vectorised over that
    job's configurations only)."""
    t = beliefs.progress.types[k]
    prof = beliefs.progress.models[j]
    good = np.zeros(replicas.shape)
    if t not in prof.machines:
        return good
    m, mach = beliefs.model(j, t), prof.machines[t]
    hi = np.zeros(replicas.shape, np.int64)
    for i, (N, K) in enumerate(zip(nodes.tolist(), replicas.tolist())):
        try:
            hi[i] = mach.max_atomic_bsz(N, K)
        except ValidationError:     # a placement the profile cannot interpolate: not runnable
            hi[i] = 0
    for h in np.unique(hi).tolist():
        sel = np.flatnonzero(hi == h)
        if h >= int(mach.min_local_bsz):
            good[sel] = m.optimize(nodes[sel], replicas[sel], max_batch_size=int(prof.max_batch_size),
                                   atomic_bsz_range=(int(mach.min_local_bsz), h))[0]
    return good


def run(n: int) -> dict[str, float]:
    cluster = table3_cluster()
    prog = AdaptiveProgress(workload(n), cluster)
    beliefs = GoodputBeliefs(prog, per_type=True, seed_single_gpu=True)
    cs = configuration_set(cluster, prog.types, max_gpus=64)
    t0 = time.perf_counter()
    for j in range(n):
        beliefs.see(j)
        for k, t in enumerate(prog.types):
            g = int(min(4, prog.node_gpus[k]))
            rep = prog.report(j, k, g, prog.batch_of(j, 0), 0.0)
            beliefs.observe(j, rep)
            beliefs.perf(j, t)
    fit_s = time.perf_counter() - t0
    cols = [np.flatnonzero(cs.type_index == k) for k in range(len(prog.types))]
    jobs = list(range(n))
    for k, c in enumerate(cols):   # warm the per-placement batch limits (cached once per model and placement)
        beliefs.table(jobs, k, cs.nodes[c], cs.gpus[c])
    t0 = time.perf_counter()
    vec = np.zeros((n, cs.n_configs))
    for k, c in enumerate(cols):        # one vectorised evaluation per GPU type (what the schedulers call)
        vec[:, c] = beliefs.table(jobs, k, cs.nodes[c], cs.gpus[c])[0]
    round_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = np.zeros((n, cs.n_configs))
    for j in range(n):                  # the reference: one job at a time (vectorised over its configurations)
        for k, c in enumerate(cols):
            ref[j, c] = per_job(beliefs, j, k, cs.nodes[c], cs.gpus[c])
    scalar_s = time.perf_counter() - t0
    assert np.allclose(vec, ref), "vectorised and scalar evaluation disagree"
    return {"jobs": n, "configs": cs.n_configs, "fit_s": fit_s, "round_s": round_s, "scalar_round_s": scalar_s,
            "speedup": scalar_s / round_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    args = ap.parse_args()
    sizes = (50,) if args.quick else (50, 200, 500)
    rows = [run(n) for n in sizes]
    print(f"{'jobs':>6} {'configs':>8} {'fit_s':>8} {'round_s':>8} {'scalar_s':>9} {'speedup':>8}")
    for r in rows:
        print(f"{r['jobs']:>6} {r['configs']:>8} {r['fit_s']:>8.2f} {r['round_s']:>8.3f} {r['scalar_round_s']:>9.3f} "
              f"{r['speedup']:>8.1f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
