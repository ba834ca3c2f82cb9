"""Sia policy: configuration set, goodput bootstrap, hand-derived optima, cross-checks.

Notation (see ``hetsched.formulations.sia.policy``): a configuration c = (type k_c, n_c GPUs);
G[j, c] goodput, Ĝ = G / min_c G (over the job's available configurations), times
(1 - δ_j) on every configuration other than a running job's current one;
u = sgn(p) Ĝ^p (p != 0) or log Ĝ (p = 0); the ILP maximises
sum_j w_j [u[j, c_j] if allocated else -λ] subject to sum_{j on k} n_{c_j} <= C_k.

Every optimum asserted below is derived by hand in the test's docstring; the random
cross-checks compare the ILP with an exhaustive enumeration written here (it shares no
code with the policy), HiGHS with CBC, the reduced ILP with the full one, and feed every
solution to an independent checker that knows only the chosen (type, count) per job.
"""

from __future__ import annotations

import itertools
import logging
import math

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.formulations.sia.configurations import (
    bootstrap_goodput,
    configuration_set,
    impute_type_throughputs,
    scaling_factor,
)
from hetsched.formulations.sia.policy import Sia, lagrangian_bound

REL = 1e-9


# ------------------------------------------------------------------------------ helpers
def table(rows: dict, labels: list[tuple[str, int]]) -> pd.DataFrame:
    """A goodput table: job id -> goodputs aligned with ``labels``."""
    cols = pd.MultiIndex.from_tuples(labels, names=["gpu_type", "gpus"])
    return pd.DataFrame(list(rows.values()), index=list(rows), columns=cols, dtype=float)


def jobs_for(ids, types) -> hs.JobSet:
    """A JobSet whose throughputs are only there to pass validation (the table overrides)."""
    return hs.JobSet(np.ones((len(ids), len(types))), gpu_types=types, ids=ids)


def chosen(res) -> dict:
    """job id -> (gpu_type, gpus) or None."""
    df = res.extra["configurations"]
    return {j: (None if t is None else (t, int(g))) for j, t, g in zip(df.index, df["gpu_type"], df["gpus"])}


def check_configurations(res, cluster: hs.Cluster, allowed: set | None = None) -> list[str]:
    """Independent checker: knows only X, the chosen counts and the cluster.

    * X is 0/1, each row has at most one 1;
    * a row with a 1 has gpus >= 1 and the 1 sits in the chosen type's column;
      a zero row has gpus == 0 and no type;
    * capacity: sum_j gpus_j X[j, k] <= C_k;
    * every chosen (type, gpus) is in ``allowed`` when given.
    """
    problems = []
    X = np.asarray(res.X, dtype=float)
    df = res.extra["configurations"]
    gpus = df["gpus"].to_numpy(dtype=float)
    types = list(res.gpu_types)
    if not np.isin(X, (0.0, 1.0)).all():
        problems.append("X is not 0/1")
    if (X.sum(axis=1) > 1).any():
        problems.append("a row has more than one type")
    for r, (t, g) in enumerate(zip(df["gpu_type"], gpus)):
        if X[r].sum() == 1:
            if g < 1 or t != types[int(np.argmax(X[r]))]:
                problems.append(f"row {r}: X says {types[int(np.argmax(X[r]))]}, configuration says ({t}, {g})")
            if allowed is not None and (t, int(g)) not in allowed:
                problems.append(f"row {r}: ({t}, {g}) is not an allowed configuration")
        elif g != 0 or t is not None:
            problems.append(f"row {r}: zero row but configuration ({t}, {g})")
    used = gpus @ X
    cap = cluster.capacities(types)
    for k in np.flatnonzero(used > cap + 1e-9):
        problems.append(f"type {types[k]}: {used[k]} GPUs used > {cap[k]}")
    return problems


def pack_onto_servers(res, cluster: hs.Cluster) -> list[str]:
    """Place the chosen configurations on the topology's servers (first fit, largest first):
    multi-node configurations take whole empty servers of the type's largest size."""
    topo = cluster.topology
    free = topo.server_gpus.astype(int).copy()
    problems = []
    df = res.extra["configurations"]
    order = np.argsort(-df["gpus"].to_numpy(), kind="stable")
    for r in order:
        t, g, nodes = df["gpu_type"].iloc[r], int(df["gpus"].iloc[r]), int(df["nodes"].iloc[r])
        if t is None:
            continue
        servers = np.flatnonzero(topo.server_type == topo.gpu_types.index(t))
        if nodes == 1:
            fit = [s for s in servers if free[s] >= g]
            if not fit:
                problems.append(f"job {df.index[r]}: no server of {t} has {g} free GPUs")
                continue
            free[fit[0]] -= g
        else:
            size = topo.server_gpus[servers].max()
            empty = [s for s in servers if free[s] == size == topo.server_gpus[s]]
            if len(empty) < nodes or nodes * size != g:
                problems.append(f"job {df.index[r]}: {nodes} whole servers of {t} not free")
                continue
            free[empty[:nodes]] = 0
    return problems


def utilities(G, fits, p, current, delta):
    """Independent utility table (NaN where unavailable)."""
    avail = (G > 0) & fits[None, :]
    Gmin = np.array([G[j, avail[j]].min() for j in range(G.shape[0])])
    Gn = G / Gmin[:, None]
    for j, c0 in enumerate(current):
        if c0 != -1:
            Gn[j] = [g * (1 - delta[j]) if c != c0 else g for c, g in enumerate(Gn[j])]
    with np.errstate(divide="ignore", invalid="ignore"):
        U = np.log(Gn) if p == 0 else np.sign(p) * Gn ** p
    return np.where(avail, U, np.nan)


def enumerate_optimum(U, w, lam, cfg_type, cfg_gpus, cap):
    """Best objective over every assignment (each job: one available configuration or none)."""
    n = U.shape[0]
    if lam is None:
        rng_ = np.nanmax(U, axis=1) - np.nanmin(U, axis=1)
        lam = float(np.max(w * rng_) / np.min(w) - np.nanmin(U) + 1.0)
    options = [[-1] + [c for c in range(U.shape[1]) if not np.isnan(U[j, c])] for j in range(n)]
    best = -math.inf
    for combo in itertools.product(*options):
        used = np.zeros(len(cap))
        value = 0.0
        for j, c in enumerate(combo):
            if c < 0:
                value -= w[j] * lam
            else:
                value += w[j] * U[j, c]
                used[cfg_type[c]] += cfg_gpus[c]
        if (used <= cap + 1e-12).all() and value > best:
            best = value
    return best, lam


# ------------------------------------------------------------------- configuration set
def test_configuration_set_follows_topology():
    """8-GPU servers: 1, 2, 4, 8 in one node, then whole nodes 16, 24 (3 servers); 4-GPU
    servers of the second type: 1, 2, 4, then 8 (2 servers); the 2-GPU remainder server of
    the third type does not change its node size of 4 (only one full node: no multi-node)."""
    c = hs.Cluster.from_servers({"a100": 24, "v100": 8, "k80": 6},
                                gpus_per_server={"a100": 8, "v100": 4, "k80": 4})
    cs = configuration_set(c)
    assert cs.labels() == [("a100", 1), ("a100", 2), ("a100", 4), ("a100", 8), ("a100", 16), ("a100", 24),
                           ("v100", 1), ("v100", 2), ("v100", 4), ("v100", 8),
                           ("k80", 1), ("k80", 2), ("k80", 4)]
    assert cs.nodes.tolist() == [1, 1, 1, 1, 2, 3, 1, 1, 1, 2, 1, 1, 1]
    # explicit node size wins over the topology; cap and type order follow the arguments
    cs2 = configuration_set(c, ["k80", "a100", "h100"], gpus_per_node=2, max_gpus=4)
    assert cs2.labels() == [("k80", 1), ("k80", 2), ("k80", 4), ("a100", 1), ("a100", 2), ("a100", 4)]
    assert cs2.nodes.tolist() == [1, 1, 2, 1, 1, 2]


def test_configuration_set_without_topology():
    """Default node size 8; a type with fewer GPUs than a node gets powers of two up to its
    count plus the whole (partial) node; a node size that is not a power of two is a
    configuration itself (a whole node)."""
    cs = configuration_set(hs.Cluster({"v100": 20, "k80": 6}))
    assert cs.labels() == [("v100", 1), ("v100", 2), ("v100", 4), ("v100", 8), ("v100", 16),
                           ("k80", 1), ("k80", 2), ("k80", 4), ("k80", 6)]
    cs6 = configuration_set(hs.Cluster({"t4": 18}), gpus_per_node=6)
    assert cs6.labels() == [("t4", 1), ("t4", 2), ("t4", 4), ("t4", 6), ("t4", 12), ("t4", 18)]
    assert configuration_set(hs.Cluster({"a": 512}), max_gpus=None).n_configs == 4 + 63
    assert configuration_set(hs.Cluster({"a": 512})).labels()[-1] == ("a", 64)


def test_bootstrap_goodput_hand_values():
    """o_intra = 0.1, o_inter = 0.3, node size 4 (configurations 1, 2, 4, 8 GPUs; 8 = 2 nodes):
    g = 1, 2/1.1, 4/1.1, 8/1.3. Job 0 measured at 1 GPU (T = 3): 3 g. Job 1 measured at
    s = 2 GPUs (T = 5): 5 g / g(2) = 5 g * 1.1 / 2. Job 2 cannot run on the type (T = 0)."""
    cs = configuration_set(hs.Cluster({"a": 8}), gpus_per_node=4)
    G = bootstrap_goodput(np.array([[3.0], [5.0], [0.0]]), np.array([1, 2, 1]), cs)
    g = np.array([1.0, 2 / 1.1, 4 / 1.1, 8 / 1.3])
    np.testing.assert_allclose(G[0], 3 * g, rtol=REL)
    np.testing.assert_allclose(G[1], 5 * g * 1.1 / 2, rtol=REL)
    np.testing.assert_allclose(G[2], 0.0)
    # statistical efficiency (Pollux): nu = 1 halves the 1 -> 2 GPU gain: 2/1.1 * 2/3
    assert scaling_factor(np.array([2]), np.array([1]), noise_scale_ratio=1.0)[0] == pytest.approx(2 / 1.1 * 2 / 3)


def test_ratio_model_across_types():
    """Learned ratio v100/k80 = geometric mean of 4/1 and 6/2 = sqrt(12); the job measured
    only on k80 (T = 2) gets 2 sqrt(12) on v100; given speeds {v100: 5, k80: 1} give 10."""
    T = np.array([[4.0, 1.0], [6.0, 2.0], [0.0, 2.0]])
    learned = impute_type_throughputs(T, ["v100", "k80"], "learned")
    assert learned[2, 0] == pytest.approx(2 * math.sqrt(12), rel=REL)
    np.testing.assert_array_equal(learned[:2], T[:2])
    given = impute_type_throughputs(T, ["v100", "k80"], {"v100": 5.0, "k80": 1.0})
    assert given[2, 0] == pytest.approx(10.0)
    jobs = hs.JobSet(T, gpu_types=["v100", "k80"])
    cluster = hs.Cluster({"v100": 2, "k80": 2})
    plain = Sia(gpus_per_node=2).goodput_table(jobs, cluster)
    assert (plain.loc[2, "v100"] == 0).all()  # no imputation: job 2 cannot use a v100
    filled = Sia(gpus_per_node=2, type_speedups={"v100": 5.0, "k80": 1.0}).goodput_table(jobs, cluster)
    np.testing.assert_allclose(filled.loc[2, "v100"].to_numpy(), [10.0, 20.0 / 1.1])
    res = hs.solve(Sia(type_speedups="learned", mip_gap=0.0), jobs, cluster)
    assert res.success and check_configurations(res, cluster) == []


# -------------------------------------------------------------------- hand-derived optima
def test_two_types_choose_type_and_count():
    """T = [[4, 1], [2, 1]] (v100, k80), 4 GPUs of each in nodes of 4, o_intra = 0.1, p = -0.5.

    Normalised goodput (each job's least is its 1-GPU k80 value 1): job a on v100 1/2/4 GPUs:
    4, 7.27, 14.55; on k80 1, 1.82, 3.64. Job b on v100: 2, 3.64, 7.27; on k80 as a.
    u = -Ĝ^-0.5. Both jobs allocated (default λ) with one type each:
    a:v100x4 + b:k80x4 = -0.262 - 0.524 = -0.786;  a:k80x4 + b:v100x4 = -0.524 - 0.371 = -0.895;
    sharing v100 (2 + 2) = -0.371 - 0.524 = -0.895; any smaller configuration is worse
    (u increases with Ĝ). So a gets 4 v100s (its speedup there is 4x), b gets 4 k80s.
    """
    jobs = hs.JobSet([[4.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"], ids=["a", "b"])
    cluster = hs.Cluster({"v100": 4, "k80": 4})
    res = hs.solve(Sia(gpus_per_node=4, mip_gap=0.0), jobs, cluster)
    assert res.success
    assert chosen(res) == {"a": ("v100", 4), "b": ("k80", 4)}
    assert res.objective == pytest.approx(-(14.545454545 ** -0.5) - (3.6363636363 ** -0.5), rel=1e-8)
    assert res.X.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert check_configurations(res, cluster) == []


FAIR_LABELS = [("a", 1), ("a", 2), ("a", 4)]


@pytest.mark.parametrize("p, y_gets", [(1.0, None), (-1.0, None), (-4.0, ("a", 2))])
def test_fairness_power_feeds_a_starving_job(p, y_gets):
    """One type, 4 GPUs, Sia's λ = 1.1. Job x scales super-linearly (Ĝ = 1, 2, 5 on 1, 2, 4
    GPUs), job y hardly scales (Ĝ = 1, 1.05, 1.1). The candidates (others are dominated):

    * x on 4, y starves:  sgn(p) 5^p - 1.1
    * x on 2, y on 2:     sgn(p) (2^p + 1.05^p)
    * x on 2, y on 1:     sgn(p) (2^p + 1)

    p = 1:  3.9 vs 3.05 vs 3.0            -> y starves.
    p = -1: -1.3 vs -1.452 vs -1.5        -> y starves.
    p = -4: -1.1016 vs -0.8852 vs -1.0625 -> x 2, y 2: the fairer power feeds y.
    """
    ids = ["x", "y"]
    G = table({"x": [1.0, 2.0, 5.0], "y": [1.0, 1.05, 1.1]}, FAIR_LABELS)
    res = hs.solve(Sia(goodput=G, fairness_power=p, lambda_unallocated=1.1, mip_gap=0.0),
                   jobs_for(ids, ["a"]), hs.Cluster({"a": 4}))
    got = chosen(res)
    assert got["y"] == y_gets
    assert got["x"] == (("a", 4) if y_gets is None else ("a", 2))
    expected = {1.0: 5 - 1.1, -1.0: -0.2 - 1.1, -4.0: -(2.0 ** -4) - 1.05 ** -4}[p]
    assert res.objective == pytest.approx(expected, rel=1e-12)


def test_default_lambda_never_starves_where_capacity_allows():
    """Same instance, default λ: for p = 1, u ranges over [1, 5] for x and [1, 1.1] for y, so
    λ = 4 - 1 + 1 = 4 and x on 4 alone (5 - 4 = 1) loses to x 2 + y 2 (2 + 1.05 = 3.05)."""
    G = table({"x": [1.0, 2.0, 5.0], "y": [1.0, 1.05, 1.1]}, FAIR_LABELS)
    for p in (1.0, 0.0, -0.5, -1.0):
        res = hs.solve(Sia(goodput=G, fairness_power=p, mip_gap=0.0), jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 4}))
        assert all(v is not None for v in chosen(res).values()), p
    res = hs.solve(Sia(goodput=G, fairness_power=1.0, mip_gap=0.0), jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 4}))
    assert res.extra["lambda_unallocated"] == pytest.approx(4.0)
    assert chosen(res) == {"x": ("a", 2), "y": ("a", 2)}


def test_fairness_power_equalises_normalised_goodput():
    """One type, 6 GPUs (configurations 1, 2, 4, 6), x scales linearly (Ĝ = 1, 2, 4, 6), y
    poorly (Ĝ = 1, 1.5, 2, 2.5); both must run (default λ). Splits: (x4, y2): Ĝ = (4, 1.5);
    (x2, y4): Ĝ = (2, 2). p = 1: 5.5 vs 4; p = -1: -(0.25 + 0.667) = -0.917 vs -1.0;
    p = -4: -(0.0039 + 0.1975) = -0.2014 vs -0.125. Efficiency gives x the GPUs; the fair
    power equalises normalised goodput. p = 0 (log form): log 6 = 1.79 vs log 4 = 1.39."""
    labels = [("a", 1), ("a", 2), ("a", 4), ("a", 6)]
    G = table({"x": [1.0, 2.0, 4.0, 6.0], "y": [1.0, 1.5, 2.0, 2.5]}, labels)
    expect = {1.0: {"x": ("a", 4), "y": ("a", 2)}, -1.0: {"x": ("a", 4), "y": ("a", 2)},
              0.0: {"x": ("a", 4), "y": ("a", 2)}, -4.0: {"x": ("a", 2), "y": ("a", 4)}}
    for p, want in expect.items():
        res = hs.solve(Sia(goodput=G, fairness_power=p, mip_gap=0.0), jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 6}))
        assert chosen(res) == want, p
    res = hs.solve(Sia(goodput=G, fairness_power=0.0, mip_gap=0.0), jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 6}))
    assert res.objective == pytest.approx(math.log(6.0), rel=1e-12)


@pytest.mark.parametrize("delta, stays", [(0.0, False), (0.3, False), (0.39, False), (0.41, True), (0.5, True)])
def test_restart_penalty_keeps_a_running_job_in_place(delta, stays):
    """One job on one type with 4 GPUs, running on 2 (Ĝ = 1.8); 4 GPUs give Ĝ = 3 but a move
    loses the fraction δ: 3 (1 - δ) vs 1.8, so the job moves iff δ < 0.4 (gain 3/1.8 = 1.67
    against the penalty factor 1/(1 - δ)). Monotone utilities make this hold for every p."""
    G = table({"x": [1.0, 1.8, 3.0]}, FAIR_LABELS)
    for p in (-0.5, 0.0, 1.0):
        res = hs.solve(Sia(goodput=G, fairness_power=p, restart_penalty=delta, current={"x": ("a", 2)}, mip_gap=0.0),
                       jobs_for(["x"], ["a"]), hs.Cluster({"a": 4}))
        assert chosen(res)["x"] == (("a", 2) if stays else ("a", 4)), (p, delta)
        assert bool(res.extra["configurations"]["changed"].iloc[0]) is (not stays)


def test_restart_penalty_per_job_and_current_from_previous_round():
    """Two jobs, 8 GPUs (configurations 1, 2, 4, 8), both linear (Ĝ = n). Round 1 (nothing
    running): x and y share 4 + 4 (p = -0.5: 2 * -4^-0.5 = -1 beats 8 + 0 under default λ).
    Round 2 with a third job z: someone has to give up GPUs. With δ = 0.9 for x (its goodput
    after a change would be a tenth) and 0 for y, only y moves: x 4, y 2, z 2."""
    labels = [("a", 1), ("a", 2), ("a", 4), ("a", 8)]
    G = table({"x": [1, 2, 4, 8], "y": [1, 2, 4, 8], "z": [1, 2, 4, 8]}, labels)
    cluster = hs.Cluster({"a": 8})
    r1 = hs.solve(Sia(goodput=G, mip_gap=0.0), jobs_for(["x", "y"], ["a"]), cluster)
    assert chosen(r1) == {"x": ("a", 4), "y": ("a", 4)}
    r2 = hs.solve(Sia(goodput=G, mip_gap=0.0, restart_penalty=[0.9, 0.0, 0.0], current=r1.extra["configurations"]),
                  jobs_for(["x", "y", "z"], ["a"]), cluster)
    assert chosen(r2) == {"x": ("a", 4), "y": ("a", 2), "z": ("a", 2)}
    assert r2.extra["configurations"]["changed"].tolist() == [False, True, False]
    # passing the same round back keeps everything in place
    r3 = hs.solve(Sia(goodput=G, mip_gap=0.0, restart_penalty=0.1, current=r2.extra["configurations"]),
                  jobs_for(["x", "y", "z"], ["a"]), cluster)
    assert chosen(r3) == chosen(r2) and not r3.extra["configurations"]["changed"].any()


def test_non_monotone_table_is_allowed(caplog):
    """Goodput 1, 3, 2 on 1, 2, 4 GPUs: 4 GPUs are never better than 2 (same type, fewer
    GPUs, more goodput), so the job gets 2 even with 4 free; the table is logged, not rejected."""
    G = table({"x": [1.0, 3.0, 2.0]}, FAIR_LABELS)
    with caplog.at_level(logging.INFO, logger="hetsched.formulations.sia.policy"):
        res = hs.solve(Sia(goodput=G, fairness_power=1.0, mip_gap=0.0), jobs_for(["x"], ["a"]), hs.Cluster({"a": 4}))
    assert chosen(res) == {"x": ("a", 2)}
    assert "not monotone" in caplog.text


# ---------------------------------------------------------------------- cross-checks
def random_table_instance(rng, n_jobs, labels, types):
    G = rng.uniform(0.5, 4.0, (n_jobs, len(labels)))
    G[rng.random(G.shape) < 0.25] = 0.0
    G[rng.random(G.shape) < 0.1] = np.nan
    cap = {t: int(rng.integers(1, 6)) for t in types}
    # every job keeps a 1-GPU configuration on some type with capacity
    for j in range(n_jobs):
        ones = [c for c, (t, g) in enumerate(labels) if g == 1]
        c = ones[int(rng.integers(len(ones)))]
        if not G[j, c] > 0:
            G[j, c] = rng.uniform(0.5, 4.0)
    ids = [f"j{j}" for j in range(n_jobs)]
    return ids, G, cap


LABEL_SETS = [
    ([("a", 1), ("a", 2), ("b", 1), ("b", 2)], ["a", "b"]),
    ([("a", 1), ("a", 2), ("a", 4)], ["a"]),
    ([("a", 1), ("a", 3), ("b", 1), ("b", 4)], ["a", "b"]),
    ([("a", 1), ("b", 1), ("c", 1), ("c", 2)], ["a", "b", "c"]),
]


@pytest.mark.parametrize("seed", range(24))
def test_ilp_matches_exhaustive_enumeration(seed):
    """<= 6 jobs x <= 4 configurations, random tables with holes, weights, powers, λ (given
    or default), running jobs with restart penalties; full and reduced ILP (HiGHS) against
    the enumeration of every assignment."""
    rng = np.random.default_rng(seed)
    labels, types = LABEL_SETS[seed % len(LABEL_SETS)]
    n = int(rng.integers(2, 7))
    ids, G, cap = random_table_instance(rng, n, labels, types)
    w = rng.uniform(0.5, 2.0, n)
    p = [-1.0, -0.5, 0.0, 0.5, 1.0][seed % 5]
    lam = None if seed % 3 else float(rng.uniform(0.5, 3.0))
    current = {ids[j]: labels[int(rng.integers(len(labels)))] for j in range(n) if rng.random() < 0.5}
    delta = rng.uniform(0.0, 0.6, n)
    cluster = hs.Cluster(cap)
    jobs = hs.JobSet(np.ones((n, len(types))), gpu_types=types, ids=ids, weights=w)
    cfg_type = np.array([types.index(t) for t, _ in labels])
    cfg_gpus = np.array([g for _, g in labels], dtype=float)
    fits = cfg_gpus <= np.array([cap[t] for t, _ in labels])
    Gz = np.nan_to_num(G, nan=0.0)
    if not ((Gz > 0) & fits[None, :]).any(axis=1).all():
        pytest.skip("a job has no configuration that fits")  # (not hit for these seeds)
    cur_idx = np.array([labels.index(current[i]) if i in current else -1 for i in ids])
    U = utilities(Gz, fits, p, cur_idx, delta)
    best, lam_used = enumerate_optimum(U, w, lam, cfg_type, cfg_gpus, np.array([cap[t] for t in types], float))
    for reduce in (False, True):
        pol = Sia(goodput=table(dict(zip(ids, G.tolist())), labels), fairness_power=p, lambda_unallocated=lam,
                  restart_penalty=delta, current=current, mip_gap=0.0, column_reduction=reduce)
        res = hs.solve(pol, jobs, cluster)
        assert res.success, res.message
        assert res.extra["lambda_unallocated"] == pytest.approx(lam_used, rel=1e-12)
        assert res.objective == pytest.approx(best, rel=1e-7, abs=1e-9), (reduce, res.extra["rounds"])
        assert check_configurations(res, cluster, set(labels)) == []
        # the objective of the returned configurations, recomputed here
        got = chosen(res)
        val = sum(w[j] * (U[j, labels.index(got[i])] if got[i] else -lam_used) for j, i in enumerate(ids))
        assert val == pytest.approx(res.objective, rel=1e-9, abs=1e-12)
        assert res.extra["lp_bound"] >= res.objective - 1e-9


def bootstrap_instance(seed, n_jobs, gpus, n_types, server=8):
    rng = np.random.default_rng(seed)
    types = [f"g{k}" for k in range(n_types)]
    speed = np.exp(rng.normal(0.0, 0.7, n_types))
    T = speed[None, :] * np.exp(rng.normal(0.0, 0.3, (n_jobs, n_types)))
    T[rng.random(T.shape) < 0.15] = 0.0
    T[np.arange(n_jobs), T.argmax(axis=1)] = np.maximum(T.max(axis=1), 0.1)
    jobs = hs.JobSet(T, gpu_types=types, weights=rng.choice([1.0, 2.0], n_jobs))
    sizes = {t: (server if k % 2 == 0 else server // 2) for k, t in enumerate(types)}
    cluster = hs.Cluster.from_servers({t: gpus // n_types for t in types}, gpus_per_server=sizes)
    return jobs, cluster


@pytest.mark.parametrize("seed, n_jobs, gpus, n_types, p", [(0, 6, 16, 2, -0.5), (1, 9, 24, 3, 1.0), (2, 12, 32, 2, 0.0)])
def test_highs_and_cbc_agree(seed, n_jobs, gpus, n_types, p):
    """The same ILP, whole and reduced, through HiGHS and through PuLP/CBC, to gap 0."""
    jobs, cluster = bootstrap_instance(seed, n_jobs, gpus, n_types)
    objs = {}
    for solver in ("highs", "pulp"):
        for reduce in (False, True):
            res = hs.solve(Sia(fairness_power=p, mip_gap=0.0, column_reduction=reduce), jobs, cluster, solver=solver)
            assert res.success, (solver, res.message)
            assert solver in res.solver
            assert check_configurations(res, cluster) == []
            objs[solver, reduce] = res.objective
    ref = objs["highs", False]
    for key, value in objs.items():
        assert value == pytest.approx(ref, rel=1e-7), key


def test_lp_bound_is_the_lp_relaxation():
    """Kelley's Lagrangian bound equals the LP relaxation of ``formulate()`` solved by HiGHS."""
    jobs, cluster = bootstrap_instance(3, 40, 48, 3)
    pol = Sia()
    lp = pol.formulate(jobs, cluster)
    from dataclasses import replace

    relax = replace(lp, integrality=None)
    out = hs.solvers.registry.get_backend("highs").solve(relax)
    prob = pol.problem(jobs, cluster)
    bound = lagrangian_bound(prob.value, prob.keep, prob.configs, cluster.capacities(jobs.gpu_types))
    assert bound.value == pytest.approx(out.objective, rel=1e-8)
    assert bound.lower <= out.objective * (1 + 1e-12)
    res = hs.solve(pol, jobs, cluster)
    assert res.extra["lp_bound"] == pytest.approx(out.objective + lp.meta["offset"], rel=1e-8)


@pytest.mark.parametrize("seed", range(4))
def test_larger_instances_respect_capacity_and_pack(seed):
    """Bootstrap goodput on clusters of 8- and 4-GPU servers (powers of two), 0.5-2x as many
    jobs as GPUs, the reduced ILP: the independent checker and a first-fit placement onto the
    servers both accept the result, the proven gap is within the request, and no job is left
    without GPUs while a type it can use has an idle GPU."""
    gpus = [64, 96, 128, 64][seed]
    n_jobs = [32, 96, 256, 80][seed]
    jobs, cluster = bootstrap_instance(10 + seed, n_jobs, gpus, [2, 3, 4, 2][seed])
    res = hs.solve(Sia(fairness_power=[-0.5, 1.0, 0.0, -1.0][seed], column_reduction=True), jobs, cluster)
    assert res.success, res.message
    assert check_configurations(res, cluster, set(Sia().configurations(jobs, cluster).labels())) == []
    assert pack_onto_servers(res, cluster) == []
    assert res.extra["mip_gap"] <= 0.01 + 1e-12
    assert res.extra["lp_bound"] >= res.objective - 1e-9
    df = res.extra["configurations"]
    used = df["gpus"].to_numpy() @ res.X
    idle = cluster.capacities(jobs.gpu_types) - used
    starving = df["gpus"].to_numpy() == 0
    can_use = (jobs.throughputs > 0) & (idle[None, :] >= 1)
    assert not (starving[:, None] & can_use).any()
    # ... nor while a job holds two or more GPUs of a type it can use (default lambda)
    donors = np.zeros(jobs.n_types, dtype=bool)
    for t, g in zip(df["gpu_type"], df["gpus"]):
        if g >= 2:
            donors[list(jobs.gpu_types).index(t)] = True
    assert not (starving[:, None] & (jobs.throughputs > 0) & donors[None, :]).any()


def test_polish_gives_a_starving_job_a_gpu():
    """x holds all 4 GPUs, y none (a solution a MIP gap could accept): polish shrinks x to
    its best configuration that leaves room (2 GPUs; 3 is not a configuration) and gives y its
    smallest one. p = -0.5: u = -1, -0.707, -0.5 for both, so the default λ = 0.5 + 1 + 1 = 2.5
    and the objective rises from -0.5 - 2.5 = -3 to -2^-0.5 - 1 = -1.707."""
    from hetsched.formulations.sia.policy import polish

    G = table({"x": [1.0, 2.0, 4.0], "y": [1.0, 2.0, 4.0]}, FAIR_LABELS)
    jobs, cluster = jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 4})
    prob = Sia(goodput=G).problem(jobs, cluster)
    before = np.array([2, -1])
    after, moves = polish(before, prob, cluster.capacities(["a"]))
    assert moves == 1 and after.tolist() == [1, 0]
    assert prob.lam == pytest.approx(2.5)
    assert prob.objective(before) == pytest.approx(-3.0)
    assert prob.objective(after) == pytest.approx(-(2 ** -0.5) - 1.0)
    assert prob.objective(after) > prob.objective(before)
    # nothing to do when everyone has GPUs, or when nobody can make room
    assert polish(after, prob, cluster.capacities(["a"]))[1] == 0
    assert polish(np.array([0, -1]), prob, np.array([1.0]))[1] == 0


def test_time_limit_without_solution():
    """A time limit that runs out before the ILP: status "time_limit", X NaN, NA configurations."""
    jobs, cluster = bootstrap_instance(5, 30, 32, 2)
    res = hs.solve(Sia(), jobs, cluster, time_limit=1e-9)
    assert res.status == "time_limit" and not res.success
    assert np.isnan(res.X).all()
    assert res.extra["configurations"]["gpus"].isna().all()
    assert res.extra["mip_gap"] is None


def test_result_fields_and_parameters():
    jobs, cluster = bootstrap_instance(6, 10, 16, 2)
    by_name = hs.solve("sia", jobs, cluster)
    assert by_name.success and by_name.policy == "sia" and check_configurations(by_name, cluster) == []
    pol = Sia(fairness_power=-1.0, max_gpus_per_job=4)
    res = hs.solve(pol, jobs, cluster)
    assert res.params["fairness_power"] == -1.0 and res.params["max_gpus_per_job"] == 4
    assert res.sizes["n_classes"] == res.sizes["n_jobs"] == 10  # not aggregated
    df = res.extra["configurations"]
    assert list(df.columns) == ["gpu_type", "gpus", "nodes", "goodput", "normalized_goodput", "changed"]
    assert df["gpus"].max() <= 4
    assert set(res.extra) >= {"mip_gap", "lp_bound", "lp_gap", "lambda_unallocated", "configuration_set", "rounds"}
    table_ = pol.goodput_table(jobs, cluster)
    assert table_.shape == (10, pol.configurations(jobs, cluster).n_configs)
    # the bootstrap table passed back as a table gives the same optimum
    res2 = hs.solve(Sia(fairness_power=-1.0, max_gpus_per_job=4, goodput=table_), jobs, cluster)
    assert res2.objective == pytest.approx(res.objective, rel=1e-9)
    with pytest.raises(NotImplementedError, match="chosen GPU counts"):
        pol.objective_of(res.X, jobs, cluster)


# ------------------------------------------------------------------------- bad input
def test_job_without_feasible_configuration_is_named():
    labels = [("a", 2), ("a", 4)]
    G = table({"x": [1.0, 2.0], "y": [0.0, np.nan]}, labels)
    with pytest.raises(hs.ValidationError, match=r"job 'y' has no feasible configuration: its goodput is 0"):
        hs.solve(Sia(goodput=G), jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 4}))
    with pytest.raises(hs.ValidationError, match=r"job 'x' has no feasible configuration: .* exceed .*max_gpus_per_job"):
        hs.solve(Sia(goodput=G.loc[["x"]], max_gpus_per_job=1), jobs_for(["x"], ["a"]), hs.Cluster({"a": 4}))


@pytest.mark.parametrize("kwargs, match", [
    ({"fairness_power": math.inf}, r"`fairness_power` must be a finite number; got inf"),
    ({"lambda_unallocated": -1.0}, r"`lambda_unallocated` must be a finite number >= 0; got -1.0"),
    ({"max_gpus_per_job": 0}, r"`max_gpus_per_job` must be a positive integer or None; got 0"),
    ({"mip_gap": -0.1}, r"`mip_gap` must be a finite number >= 0"),
    ({"noise_scale_ratio": 0.0}, r"`noise_scale_ratio` must be a positive number"),
    ({"intra_node_overhead": -0.1}, r"`intra_node_overhead` must be a finite number >= 0"),
    ({"goodput": np.ones((2, 2))}, r"`goodput` must be a pandas DataFrame"),
    ({"current": [("a", 1)]}, r"`current` must be a mapping"),
    ({"column_reduction": 1}, r"`column_reduction` must be True, False or None"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(hs.ValidationError, match=match):
        Sia(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"restart_penalty": 1.0}, r"`restart_penalty` must be in \[0, 1\); entry 0 is 1.0"),
    ({"restart_penalty": [0.1, 0.2, 0.3]}, r"`restart_penalty` must have shape \(n_jobs,\) = \(2,\)"),
    ({"current": {"x": ("h100", 1)}}, r"`current\['x'\]` names GPU type 'h100'"),
    ({"current": {"x": ("a", 1.5)}}, r"`current\['x'\]` must have a non-negative integer GPU count"),
    ({"current": {"x": "a"}}, r"`current\['x'\]` must be a \(gpu_type, gpus\) pair"),
    ({"gpus_per_node": {"b": 4}}, r"`gpus_per_node` must give a node size for every GPU type .* missing 'a'"),
    ({"type_speedups": "magic"}, r"`type_speedups` must be None, 'learned' or a mapping"),
    ({"goodput": table({"x": [1.0]}, [("a", 1)])}, r"`goodput` must have a row for every job; missing \['y'\]"),
    ({"goodput": table({"x": [-1.0], "y": [1.0]}, [("a", 1)])}, r"`goodput` must be >= 0 .* job 'x' has -1.0"),
    ({"goodput": table({"x": [1.0], "y": [1.0]}, [("h100", 1)])}, r"names GPU type 'h100', which is not one of"),
    ({"goodput": table({"x": [1.0], "y": [1.0]}, [("a", 0)])}, r"must have a positive integer GPU count"),
    ({"goodput": pd.DataFrame({"a": [1.0, 1.0]}, index=["x", "y"])}, r"`goodput` columns must be \(gpu_type, gpus\) pairs"),
])
def test_bad_inputs_at_solve(kwargs, match):
    with pytest.raises(hs.ValidationError, match=match):
        hs.solve(Sia(**kwargs), jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 4}))


def test_current_outside_the_set_and_unknown_ids():
    """A running job on 3 GPUs (not a configuration) restarts whatever it gets; ids of jobs
    that are gone are ignored; None / 0 GPUs mean "not running"."""
    G = table({"x": [1.0, 1.8, 3.0], "y": [1.0, 1.8, 3.0]}, FAIR_LABELS)
    res = hs.solve(Sia(goodput=G, restart_penalty=0.5, mip_gap=0.0,
                       current={"x": ("a", 3), "gone": ("a", 1), "y": None}),
                   jobs_for(["x", "y"], ["a"]), hs.Cluster({"a": 4}))
    assert res.success
    assert res.extra["configurations"]["changed"].tolist() == [True, False]


def test_p_zero_uses_log_form():
    """p = 0: u = log Ĝ. One job, Ĝ = 1, 1.8, 3 -> it takes 4 GPUs, objective log 3."""
    G = table({"x": [1.0, 1.8, 3.0]}, FAIR_LABELS)
    res = hs.solve(Sia(goodput=G, fairness_power=0.0, mip_gap=0.0), jobs_for(["x"], ["a"]), hs.Cluster({"a": 4}))
    assert res.objective == pytest.approx(math.log(3.0), rel=1e-12)
