"""Synergy (OSDI'22): the sensitivity model by hand, Synergy-OPT on instances whose optimum is
derived by hand (the issue's done-when), TUNE against OPT and proportional on random
instances, the JCT gain on a CPU- and memory-hungry trace, bad input, and the scheduler
through simulate, the online scheduler (with a reopened store), the CLI and the demo."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched import cli
from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.inputs.host_profiles import (
    HostSensitivity,
    best_case_demand,
    default_sensitivity,
    sensitivity_for,
    speed_fraction,
)
from hetsched.online import OnlineScheduler
from hetsched.schedulers.names import make_scheduler
from hetsched.schedulers.synergy import Synergy
from hetsched.schedulers.synergy_alloc import (
    HostServers,
    opt,
    opt_program,
    proportional,
    tune,
)


def _sens(cpu, data=None, ratio=None) -> HostSensitivity:
    n = len(cpu)
    return HostSensitivity(np.asarray(cpu, float), np.zeros(n) if data is None else np.asarray(data, float),
                           np.zeros(n) if ratio is None else np.asarray(ratio, float))


# --------------------------------------------------------------------------- the model
def test_speed_fraction_by_hand() -> None:
    """c* = 4, D = 100 GB, r = 4, one GPU.
    (2 cores, 100 GB): CPU half speed, all cached -> 0.5.
    (8 cores, 50 GB): h = 0.5, 4 * 0.5 = 2 epochs of reads per epoch -> 0.5.
    (8 cores, 0 GB): 4 epochs of reads -> 0.25. (8 cores, 75 GB): 4 * 0.25 = 1 -> 1.
    (1 core, 25 GB): min(0.25, 1 / 3) = 0.25."""
    f = speed_fraction([2.0, 8.0, 8.0, 8.0, 1.0], [100.0, 50.0, 0.0, 75.0, 25.0], [1] * 5,
                       cpu_demand=[4.0] * 5, dataset_gb=[100.0] * 5, io_ratio=[4.0] * 5)
    assert f.tolist() == pytest.approx([0.5, 0.5, 0.25, 1.0, 0.25])


def test_best_case_demand_by_hand() -> None:
    """m* = D/s * (1 - 1/r): 100/2 * 3/4 = 37.5 GB per GPU; r <= 1 needs no memory."""
    sens = _sens([4.0, 2.0], [100.0, 500.0], [4.0, 0.8])
    c, m = best_case_demand(sens, np.array([2, 4]))
    assert c.tolist() == [4.0, 2.0] and m.tolist() == [37.5, 0.0]


@settings(max_examples=60, deadline=None)
@given(c_star=st.floats(0.1, 64.0), data=st.floats(0.0, 5000.0), ratio=st.floats(0.0, 50.0),
       s=st.sampled_from([1, 2, 4, 8]), c=st.floats(0.0, 100.0), m=st.floats(0.0, 2000.0),
       dc=st.floats(0.0, 10.0), dm=st.floats(0.0, 100.0))
@example(c_star=1.0, data=5e-324, ratio=2.0, s=1, c=0.0, m=0.0, dc=0.0, dm=0.0)   # a subnormal dataset
def test_speed_is_a_monotone_fraction_that_saturates_at_the_demand(c_star, data, ratio, s, c, m, dc, dm) -> None:
    kw = {"cpu_demand": c_star, "dataset_gb": data, "io_ratio": ratio}
    f = float(speed_fraction(c, m, s, **kw))
    assert 0.0 <= f <= 1.0
    assert float(speed_fraction(c + dc, m + dm, s, **kw)) >= f - 1e-12
    cs, ms = best_case_demand(_sens([c_star], [data], [ratio]), np.array([s]))
    assert float(speed_fraction(cs[0], ms[0], s, **kw)) == pytest.approx(1.0)
    if ms[0] > 1e-6:                                     # less memory than the demand is slower
        assert float(speed_fraction(cs[0], ms[0] * 0.9, s, **kw)) < 1.0


# --------------------------------------------------------------------------- Synergy-OPT, known optima
def test_opt_cpu_known_optimum() -> None:
    """Two 1-GPU jobs, 2 GPUs, 7 cores (3.5 per GPU), no memory sensitivity.
    A needs 6 cores: f_A = c/6, proportional 3.5/6 = 7/12. B needs 2: proportional f_B = 1.
    Fairness keeps B at f_B >= 1, i.e. on its configurations with c >= 2 (2 or 3.5), so B
    takes at least 2 cores and A at most 5: f_A = 5/6, a speed-up of (5/6)/(7/12) = 10/7.
    Optimum: 10/7 + 1 = 17/7, with A on 5 cores on average and B on 2."""
    sens = _sens([6.0, 2.0])
    kw = {"cpus": np.array([7.0]), "memory": np.array([100.0]), "prop_cpus": np.array([3.5]),
          "prop_mem": np.array([50.0])}
    out = opt(np.array([0, 0]), np.array([1, 1]), sens, **kw)
    assert out.info["solve_status"] == "optimal"
    assert out.info["objective"] == pytest.approx(17.0 / 7.0, rel=1e-7)
    assert out.speed.tolist() == pytest.approx([5.0 / 6.0, 1.0], rel=1e-7)
    assert out.cpus.tolist() == pytest.approx([5.0, 2.0], rel=1e-7)


def test_opt_memory_known_optimum() -> None:
    """One 1-GPU job: c* = 1 (4 cores given), D = 100 GB, r = 4, so m* = 75 GB; 50 GB of memory.
    Its grid: m in {0, 18.75, 37.5, 56.25, 75} and 50 (proportional), with
    f = 0.25, 1/3.25, 0.4, 1/1.75, 1, 0.5. Average memory <= 50: the upper concave hull at 50
    runs from (0, 0.25) to (75, 1): 0.25 + 0.75 * 50/75 = 0.75 (the other points lie below
    it), so the optimum mixes 1/3 of the time at 0 GB and 2/3 at 75 GB: f = 0.75, a speed-up
    of 0.75 / 0.5 = 1.5 over proportional."""
    sens = _sens([1.0], [100.0], [4.0])
    out = opt(np.array([0]), np.array([1]), sens, cpus=np.array([4.0]), memory=np.array([50.0]),
              prop_cpus=np.array([4.0]), prop_mem=np.array([50.0]))
    assert out.info["objective"] == pytest.approx(1.5, rel=1e-7)
    assert out.speed[0] == pytest.approx(0.75, rel=1e-7) and out.mem[0] == pytest.approx(50.0, rel=1e-7)


def test_integral_opt_known_optima() -> None:
    """One configuration per job (the MILP). CPU instance above: B must sit on 2 or 3.5 cores,
    so A has at most 5 and its best grid point is 4.5 = 3/4 * 6: f_A = 0.75, a speed-up of
    0.75 / (7/12) = 9/7; total 9/7 + 1 = 16/7. Memory instance above: the points within 50 GB
    are 0, 18.75, 37.5 and 50 GB (f 0.25, 0.31, 0.4, 0.5): the proportional point wins,
    speed-up 1 - no mixing, no gain."""
    kw = {"cpus": np.array([7.0]), "memory": np.array([100.0]), "prop_cpus": np.array([3.5]),
          "prop_mem": np.array([50.0])}
    out = opt(np.array([0, 0]), np.array([1, 1]), _sens([6.0, 2.0]), integral=True, mip_gap=0.0, **kw)
    assert out.info["solve_status"] == "optimal"
    assert out.info["objective"] == pytest.approx(16.0 / 7.0, rel=1e-7)
    assert out.cpus.tolist() == pytest.approx([4.5, 2.0])
    out = opt(np.array([0]), np.array([1]), _sens([1.0], [100.0], [4.0]), cpus=np.array([4.0]),
              memory=np.array([50.0]), prop_cpus=np.array([4.0]), prop_mem=np.array([50.0]), integral=True,
              mip_gap=0.0)
    assert out.info["objective"] == pytest.approx(1.0) and out.mem.tolist() == pytest.approx([50.0])


def test_opt_lp_agrees_with_an_independent_scipy_formulation() -> None:
    """The same optimum from scipy's linprog on a model written here from the docstring."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(7)
    n = 5
    sens = _sens(rng.uniform(1, 10, n), rng.uniform(0, 400, n), rng.uniform(0, 5, n))
    s = np.array([1, 2, 1, 4, 1])
    k = np.array([0, 0, 1, 1, 0])
    cpus, mem = np.array([12.0, 20.0]), np.array([300.0, 500.0])
    gpus = np.array([4.0, 5.0])
    pc, pm = cpus / gpus, mem / gpus
    lp = opt_program(k, s, sens, cpus=cpus, memory=mem, prop_cpus=pc, prop_mem=pm)
    out = opt(k, s, sens, cpus=cpus, memory=mem, prop_cpus=pc, prop_mem=pm)
    # independent: enumerate the grid per job with loops, build dense rows
    dc, dm = best_case_demand(sens, s)
    cols, obj, A_eq, A_ub, b_ub, fair = [], [], [], [], [], []
    for j in range(n):
        cs = [dc[j] * q for q in (0.25, 0.5, 0.75, 1.0)] + [pc[k[j]]]
        ms = [dm[j] * q for q in (0.0, 0.25, 0.5, 0.75, 1.0)] + [pm[k[j]]]
        fp = float(speed_fraction(pc[k[j]], pm[k[j]], s[j], cpu_demand=sens.cpu_demand[j],
                                  dataset_gb=sens.dataset_gb[j], io_ratio=sens.io_ratio[j]))
        for c, m in itertools.product(cs, ms):
            f = float(speed_fraction(c, m, s[j], cpu_demand=sens.cpu_demand[j], dataset_gb=sens.dataset_gb[j],
                                     io_ratio=sens.io_ratio[j]))
            cols.append((j, c, m, f, fp))
    nv = len(cols)
    for j in range(n):
        A_eq.append([1.0 if col[0] == j else 0.0 for col in cols])
        fair.append([-col[3] if col[0] == j else 0.0 for col in cols])
        b_ub.append(-cols[[i for i, col in enumerate(cols) if col[0] == j][0]][4])
    for kk in range(2):
        A_ub.append([s[col[0]] * col[1] if k[col[0]] == kk else 0.0 for col in cols])
        A_ub.append([s[col[0]] * col[2] if k[col[0]] == kk else 0.0 for col in cols])
    obj = [-col[3] / col[4] for col in cols]
    ref = linprog(obj, A_ub=fair + A_ub, b_ub=b_ub + [cpus[0], mem[0], cpus[1], mem[1]], A_eq=A_eq,
                  b_eq=[1.0] * n, bounds=[(0, 1)] * nv, method="highs")
    assert ref.status == 0 and 0 < lp.n_vars <= nv        # dominated grid points get no variable
    assert out.info["objective"] == pytest.approx(-ref.fun, rel=1e-7)


# --------------------------------------------------------------------------- TUNE vs OPT vs proportional
@st.composite
def _instances(draw):
    n_types = draw(st.integers(1, 2))
    gps = draw(st.sampled_from([1, 2, 4, 8]))
    n_servers = draw(st.lists(st.integers(1, 3), min_size=n_types, max_size=n_types))
    per_gpu_c = draw(st.lists(st.floats(0.5, 8.0), min_size=n_types, max_size=n_types))
    per_gpu_m = draw(st.lists(st.floats(0.0, 200.0), min_size=n_types, max_size=n_types))
    srv_type = np.repeat(np.arange(n_types), n_servers)
    gpus = np.full(srv_type.shape[0], gps)
    servers = HostServers(srv_type, gpus, np.asarray(per_gpu_c)[srv_type] * gps, np.asarray(per_gpu_m)[srv_type] * gps)
    # jobs whose gangs fit their type's GPUs (the GPU walk's guarantee)
    free = np.bincount(srv_type, weights=gpus, minlength=n_types).astype(int)
    n_jobs = draw(st.integers(1, 8))
    ks, ss = [], []
    for _ in range(n_jobs):
        k = draw(st.integers(0, n_types - 1))
        sz = draw(st.sampled_from([1, 2, 4, 8]))
        if sz <= free[k]:
            free[k] -= sz
            ks.append(k)
            ss.append(sz)
    if not ks:
        ks, ss = [0], [1]
    n = len(ks)
    sens = _sens(draw(st.lists(st.floats(0.1, 16.0), min_size=n, max_size=n)),
                 draw(st.lists(st.floats(0.0, 1000.0), min_size=n, max_size=n)),
                 draw(st.lists(st.floats(0.0, 8.0), min_size=n, max_size=n)))
    return servers, np.asarray(ks), np.asarray(ss), sens, np.asarray(per_gpu_c), np.asarray(per_gpu_m)


@settings(max_examples=60, deadline=None)
@given(inst=_instances())
def test_tune_never_below_proportional_within_capacity_and_below_opt(inst) -> None:
    """On random instances (gangs up to the largest server, tiny capacities): every job TUNE
    places runs at least at its proportional speed; the cores and memory it hands out fit
    every type's totals; and OPT (whose grid holds TUNE's choices) is at least as good."""
    servers, k, s, sens, pc, pm = inst
    order = np.arange(k.shape[0])
    t = tune(order, k, s, sens, servers, prop_cpus=pc, prop_mem=pm)
    p = proportional(k, s, sens, prop_cpus=pc, prop_mem=pm)
    assert t.placed.all()
    assert (t.speed >= p.speed - 1e-9).all()
    cpus = np.bincount(servers.gpu_type, weights=servers.cpus, minlength=pc.shape[0])
    mem = np.bincount(servers.gpu_type, weights=servers.memory, minlength=pc.shape[0])
    used_c = np.bincount(k, weights=s * t.cpus, minlength=pc.shape[0])
    used_m = np.bincount(k, weights=s * t.mem, minlength=pc.shape[0])
    assert (used_c <= cpus * (1 + 1e-9) + 1e-9).all() and (used_m <= mem * (1 + 1e-9) + 1e-9).all()
    o = opt(k, s, sens, cpus=cpus, memory=mem, prop_cpus=pc, prop_mem=pm)
    assert o.info["solve_status"] == "optimal"
    assert (o.speed >= p.speed - 1e-7).all()
    gain = lambda a: float(np.sum(a.speed / p.speed))  # noqa: E731
    assert gain(o) >= gain(t) - 1e-6
    assert gain(t) >= k.shape[0] - 1e-9


def test_tune_takes_back_from_peers_by_hand() -> None:
    """One server: 2 GPUs, 8 cores (4 per GPU). A (first, 1 GPU) needs 7 cores and gets them;
    B (1 GPU) needs 6: neither its demand nor its proportional 4 fits the 1 core left, so A
    is cut to its fallback min(7, 4) = 4 and B gets min(6, 4) = 4. Both at proportional."""
    servers = HostServers(np.array([0]), np.array([2]), np.array([8.0]), np.array([100.0]))
    out = tune(np.array([0, 1]), np.array([0, 0]), np.array([1, 1]), _sens([7.0, 6.0]), servers,
               prop_cpus=np.array([4.0]), prop_mem=np.array([50.0]))
    assert out.cpus.tolist() == [4.0, 4.0] and out.info["peers_cut"] == 1
    assert out.speed.tolist() == pytest.approx([4 / 7, 4 / 6])


def test_tune_spreads_a_gang_gpu_by_gpu() -> None:
    """Two servers of 2 GPUs and 4 cores. A 1-GPU job needing 3 cores takes server 0 (a tie
    on free GPUs: the first); a 2-GPU job needing 2 cores per GPU fits whole only on server
    1. Then a 3-GPU gang (1 core per GPU) behind a 1-GPU job fits no server whole: it takes
    the 1 GPU left on server 0 (the fullest) and 2 on server 1."""
    servers = HostServers(np.array([0, 0]), np.array([2, 2]), np.array([4.0, 4.0]), np.array([10.0, 10.0]))
    out = tune(np.array([0, 1]), np.array([0, 0]), np.array([1, 2]), _sens([3.0, 2.0]), servers,
               prop_cpus=np.array([2.0]), prop_mem=np.array([5.0]))
    assert out.cpus.tolist() == [3.0, 2.0] and out.servers.tolist() == [1, 1]
    # a 3-GPU job (1 core per GPU) behind a 1-GPU job: 1 GPU left on one server, 2 on the other
    out = tune(np.array([0, 1]), np.array([0, 0]), np.array([1, 3]), _sens([1.0, 1.0]), servers,
               prop_cpus=np.array([2.0]), prop_mem=np.array([5.0]))
    assert out.servers.tolist() == [1, 2] and out.speed.tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------- whole runs
def _hungry_trace() -> tuple[hs.JobSet, dict]:
    """Twelve 1-GPU jobs of one hour at 1 step/s, all at t = 0: four CPU-hungry (8 cores per
    GPU), four memory-hungry (300 GB, r = 4: 225 GB per GPU), four insensitive (1 core)."""
    ids = [f"j{i}" for i in range(12)]
    table = {}
    for i, jid in enumerate(ids):
        kind = i % 3
        table[jid] = ({"cpu_demand": 8.0, "dataset_gb": 1.0, "io_ratio": 0.5} if kind == 0 else
                      {"cpu_demand": 2.0, "dataset_gb": 300.0, "io_ratio": 4.0} if kind == 1 else
                      {"cpu_demand": 1.0, "dataset_gb": 1.0, "io_ratio": 0.5})
    jobs = hs.JobSet([[1.0]] * 12, gpu_types=["v100"], ids=ids, steps_remaining=[3600.0] * 12)
    return jobs, table


def test_jct_gain_over_proportional_on_a_cpu_and_memory_hungry_trace() -> None:
    """8 GPUs with 3 cores and 62.5 GB each (Synergy's server): proportional starves the
    CPU-hungry jobs (3/8) and the memory-hungry ones (h = 62.5/300, 4 * (1 - h) = 3.17 epochs
    of reads: 0.32); TUNE moves the insensitive jobs' spare to them. TUNE's average JCT is
    lower, and OPT (an upper bound per round) at least as low."""
    jobs, table = _hungry_trace()
    cluster = hs.Cluster({"v100": 8}, cpus={"v100": 24.0}, memory={"v100": 500.0})
    jct = {}
    for alloc in ("proportional", "tune", "opt"):
        res = hs.simulate(Synergy(allocation=alloc, sensitivity=table), jobs, cluster,
                          options=hs.SimOptions(round_seconds=360.0, record_runs=False))
        assert int(res.summary["n_completed"]) == 12
        jct[alloc] = float(res.summary["avg_jct_s"])
    assert jct["tune"] < 0.95 * jct["proportional"]
    assert jct["opt"] <= jct["tune"] * 1.001


def test_first_round_rates_by_hand() -> None:
    """Round 0 of the trace above, FIFO: j0..j7 run on the one 8-GPU server (24 cores, 500 GB;
    3 cores and 62.5 GB per GPU). Kinds: j0 j3 j6 CPU-hungry, j1 j4 j7 memory-hungry
    (demand 2 cores, 225 GB), j2 j5 insensitive (1 core).

    Proportional: CPU-hungry 3/8; memory-hungry 1 / (4 * (1 - 62.5/300)) = 0.3158; others 1.

    TUNE: j0 8 cores, j1 2 + 225 GB, j2 1, j3 8, j4 2 + 225 GB, j5 1: 2 cores and 50 GB left.
    j6 fits neither 8 nor its fallback 3 cores: cut peers one at a time, most cores first:
    j0 to 3 (7 free), j6 takes 3 (4 cores, 50 GB left). j7 fits neither 225 nor 62.5 GB: cut
    j3 to 3 cores (9 free, still 50 GB), then j1 to 62.5 GB (212.5 GB free): j7 takes 2 cores
    and 62.5 GB. So cores [3, 2, 1, 3, 2, 1, 3, 2], memory [0, 62.5, 0, 0, 225, 0, 0, 62.5]:
    j4 alone keeps its memory demand and runs at 1."""
    jobs, table = _hungry_trace()
    servers = HostServers(np.array([0]), np.array([8]), np.array([24.0]), np.array([500.0]))
    sens = sensitivity_for([f"j{i}" for i in range(8)], table)
    out = tune(np.arange(8), np.zeros(8, np.int64), np.ones(8, np.int64), sens, servers,
               prop_cpus=np.array([3.0]), prop_mem=np.array([62.5]))
    assert out.cpus.tolist() == [3.0, 2.0, 1.0, 3.0, 2.0, 1.0, 3.0, 2.0]
    assert out.mem.tolist() == [0.0, 62.5, 0.0, 0.0, 225.0, 0.0, 0.0, 62.5]
    assert out.info["peers_cut"] == 3
    jobs, table = _hungry_trace()
    cluster = hs.Cluster({"v100": 8}, cpus={"v100": 24.0}, memory={"v100": 500.0})
    res = hs.simulate(Synergy(allocation="proportional", sensitivity=table), jobs, cluster,
                      options=hs.SimOptions(round_seconds=360.0, max_time=360.0))
    r = res.runs.set_index("job")["rate"]
    mem_speed = 1.0 / (4.0 * (1.0 - 62.5 / 300.0))
    assert r.loc[[0, 3, 6]].tolist() == pytest.approx([3 / 8] * 3)
    assert r.loc[[1, 4, 7]].tolist() == pytest.approx([mem_speed] * 3)
    assert r.loc[[2, 5]].tolist() == pytest.approx([1.0, 1.0])
    res = hs.simulate(Synergy(allocation="tune", sensitivity=table), jobs, cluster,
                      options=hs.SimOptions(round_seconds=360.0, max_time=360.0))
    t = res.runs.set_index("job")["rate"]
    assert t.loc[range(8)].tolist() == pytest.approx([3 / 8, mem_speed, 1, 3 / 8, 1, 1, 3 / 8, mem_speed])


def test_simulate_by_name_with_every_order_and_allocation() -> None:
    w = hs.generate_workload(10, rate_per_hour=20.0, seed=2, long_job_prob=0.0)
    cluster = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    for order in ("fifo", "srtf", "las"):
        for alloc in ("proportional", "tune", "opt"):
            res = hs.simulate(make_scheduler("synergy", order=order, allocation=alloc), w, cluster,
                              options=hs.SimOptions(round_seconds=360.0, record_runs=False))
            assert int(res.summary["n_completed"]) == 10, (order, alloc)


def test_online_scheduler_reopened_store_plans_like_its_twin(tmp_path) -> None:
    cluster = hs.Cluster.from_servers({"v100": 4, "k80": 4}, gpus_per_server=2)

    def make() -> Synergy:
        return Synergy(order="las", seed=2)

    twin = OnlineScheduler(make(), cluster, store=tmp_path / "twin.db", round_seconds=360.0)
    path = tmp_path / "cut.db"
    other = OnlineScheduler(make(), cluster, store=path, round_seconds=360.0)
    for s in (twin, other):
        for i in range(7):
            s.submit(f"j{i}", scale_factor=1 + (i % 2), throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e5,
                     arrival=0.0)
    for t in (0.0, 360.0, 720.0):
        assert other.next_round(t).key() == twin.next_round(t).key()
        other.close()
        other = OnlineScheduler(make(), cluster, store=path, round_seconds=360.0)
    assert twin.next_round(1080.0).key() == other.next_round(1080.0).key()
    twin.close()
    other.close()


def test_cli_simulate_and_demo_run_synergy(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`simulate --policy` by name with parameters, and the demo's entries (its adaptive part,
    which does not involve this scheduler, is skipped to keep the test fast)."""
    monkeypatch.setattr(cli, "_demo_adaptive", lambda args, out, notes: 0)
    assert main(["simulate", "--policy", "synergy", "--param", "allocation=opt", "--param", "order=srtf",
                 "--jobs", "6", "--no-progress"]) == 0
    assert main(["demo", "--jobs", "8", "--policies", "synergy"]) == 0
    out = capsys.readouterr().out
    assert any(line.split()[:1] == ["synergy"] for line in out.splitlines()) and "error" not in out


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("table, match", [
    ({"x": {"cpu_demand": 1.0, "dataset_gb": 1.0, "io_ratio": 1.0}}, r"`sensitivity` has no entry for job 'a'"),
    ({"a": {"cpu_demand": 0.0, "dataset_gb": 1.0, "io_ratio": 1.0}},
     r"`sensitivity\['a'\]\['cpu_demand'\]` must be a finite positive number; got 0.0"),
    ({"a": {"cpu_demand": 1.0, "dataset_gb": -5, "io_ratio": 1.0}},
     r"`sensitivity\['a'\]\['dataset_gb'\]` must be a finite non-negative number; got -5"),
    ({"a": {"cpu_demand": 1.0, "dataset_gb": 1.0, "io_ratio": float("inf")}}, r"\['io_ratio'\]` must be a finite"),
    ({"a": {"cpu_demand": True, "dataset_gb": 1.0, "io_ratio": 1.0}}, r"\['cpu_demand'\]` must be a finite"),
    ({"a": {"cpu_demand": 1.0, "dataset_gb": 1.0}}, r"`sensitivity\['a'\]` must give 'io_ratio'"),
    ({"a": {"cpu_demand": 1.0, "dataset_gb": 1.0, "io_ratio": 1.0, "gpus": 2}}, r"unknown field 'gpus'"),
    ({"a": 3.0}, r"`sensitivity\['a'\]` must be a mapping"),
])
def test_bad_sensitivity_names_the_job_field_and_value(table, match) -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], ids=["a"], steps_remaining=[10.0])
    with pytest.raises(ValidationError, match=match):
        hs.simulate(Synergy(sensitivity=table), jobs, hs.Cluster({"v100": 1}),
                    options=hs.SimOptions(round_seconds=60.0, max_time=60.0))


@pytest.mark.parametrize("kw, match", [
    ({"allocation": "greedy"}, "allocation"), ({"order": "edf"}, "order"), ({"seed": 1.5}, "seed"),
    ({"host_cpus_per_gpu": 0}, "host_cpus_per_gpu"), ({"host_mem_per_gpu": -1.0}, "host_mem_per_gpu"),
    ({"gpus_per_server": 0}, "gpus_per_server"), ({"sticky": "yes"}, "sticky"), ({"sensitivity": [1]}, "sensitivity"),
    ({"solver": "gurobi"}, "solver"), ({"opt_integral": 1}, "opt_integral"), ({"seed": True}, "seed"),
])
def test_bad_parameters(kw, match) -> None:
    with pytest.raises(ValidationError, match=match):
        Synergy(**kw)


def test_cluster_without_cores_is_refused() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], ids=["a"], steps_remaining=[10.0])
    with pytest.raises(ValidationError, match=r"`cluster.cpus` must be positive .* type 'v100' has 0"):
        hs.simulate(Synergy(), jobs, hs.Cluster({"v100": 1}, cpus={"v100": 0.0}, memory={"v100": 10.0}),
                    options=hs.SimOptions(round_seconds=60.0, max_time=60.0))


def test_default_sensitivity_depends_only_on_seed_and_id() -> None:
    a = default_sensitivity(["x", "y", "z", 7], seed=3)
    b = sensitivity_for(["z", "x"], None, seed=3)
    assert b.cpu_demand.tolist() == a.cpu_demand[[2, 0]].tolist()
    assert default_sensitivity([7], seed=4).cpu_demand[0] != a.cpu_demand[3]
    big = default_sensitivity(list(range(300)), seed=0)
    assert (big.cpu_demand > 0).all() and (big.dataset_gb >= 0).all() and (big.io_ratio >= 0).all()
    kinds = np.select([big.cpu_demand >= 6, big.dataset_gb >= 200], [0, 1], 2)
    assert np.bincount(kinds, minlength=3).min() > 60          # each third is present
