"""AntMan (OSDI'20): eviction when the host grows (the issue's done-when), throttling, the
interference bound, the report's numbers by hand, bad input, and the scheduler through
simulate, the online scheduler (with a reopened store), the CLI and the demo."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched import cli
from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.inputs.gpu_memory import GPU_MEMORY_GB, gpu_memory_of
from hetsched.online import OnlineScheduler
from hetsched.rounds.protocol import RoundView
from hetsched.schedulers.antman import AntMan, antman_report
from hetsched.schedulers.names import make_scheduler

TWO = {"job_class": {"g": "guaranteed", "o": "opportunistic"}, "utilization": {"g": 0.3, "o": 0.5}}


def _two(steps: float, memory: dict, *, round_seconds: float = 600.0, **kw) -> tuple[AntMan, hs.SimulationResult]:
    """A guaranteed job "g" and an opportunistic "o", 1 step/s each, on one 16 GB V100."""
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["g", "o"], steps_remaining=[steps, steps])
    sched = AntMan(**TWO, gpu_memory=memory, **kw)
    res = hs.simulate(sched, jobs, hs.Cluster({"v100": 1}),
                      options=hs.SimOptions(round_seconds=round_seconds, record_runs=True))
    return sched, res


# --------------------------------------------------------------------------- growth: evict and throttle
def test_opportunistic_job_is_evicted_when_its_host_grows() -> None:
    """g needs 8 GB, then 14 GB from 600 s of running; o needs 4 GB; the V100 has 16 GB.

    Round 0 (0-600 s): 8 + 4 <= 16, they share: g at 1 - 0.05 * 0.5 = 0.975 (585 steps),
    o at min(1, (1 - 0.3) / 0.5) = 1 (600 steps). Round 1: g has run 600 s and needs 14 GB;
    14 + 4 > 16, so o is evicted and g runs alone (600 steps: 1185), round 2 (1785), and
    its last 15 steps at 1800-1815 s. o gets the GPU back only in round 4 (2400 s) and
    runs its last 1200 steps alone: it ends at 3600 s.
    """
    sched, res = _two(1800.0, {"g": [(0, 8.0), (600, 14.0)], "o": 4.0})
    runs = res.runs
    r0 = runs[runs["round"] == 0].set_index("job")
    assert r0.loc[0, "partner"] == 1 and r0.loc[1, "partner"] == 0
    assert r0.loc[0, "rate"] == pytest.approx(0.975) and r0.loc[1, "rate"] == pytest.approx(1.0)
    assert runs[runs["round"] == 1]["job"].tolist() == [0]            # o evicted in round 1
    assert runs[runs["round"].isin([1, 2, 3])]["partner"].eq(-1).all()
    assert res.jobs["jct_s"].tolist() == pytest.approx([1815.0, 3600.0])
    rep = antman_report(res, sched)
    assert rep["evictions"] == 1
    # slowdown of g: 1815 s run for 585 + 600 + 600 + 15 = 1800 s of work at full speed
    assert rep["guaranteed_slowdown"] == pytest.approx(1815.0 / 1800.0)
    # GPU held 600 * 3 + 15 + 1200 = 3015 of 3600 s; busy 0.3*0.975*600 + 0.5*600 + 0.3*1215 + 0.5*1200 = 1440
    assert rep["gpu_allocated"] == pytest.approx(3015.0 / 3600.0)
    assert rep["gpu_busy"] == pytest.approx(1440.0 / 3600.0)


def _view(now: float, round_index: int) -> RoundView:
    """The round loop's view of g (driver job 0) and o (driver job 1) on one V100."""
    return RoundView(now=now, round_index=round_index, round_seconds=600.0, cluster=hs.Cluster({"v100": 1}),
                     gpu_types=("v100",), capacities=np.array([1]), jobs=np.array([0, 1]),
                     throughputs=np.ones((2, 1)), unconsolidated=None, scale_factors=np.array([1, 1]),
                     weights=np.ones(2), remaining=np.full(2, 1e5), arrival=np.zeros(2), isolated_time=np.zeros(2),
                     context={"ids": np.array(["g", "o"], dtype=object)})


def test_the_state_counts_the_eviction() -> None:
    """Driving plan_round / record_round by hand: round 0 pairs o with g; after 600 s of
    running g needs 14 GB, the round-1 plan leaves o out and the state counts one eviction."""
    sched = AntMan(**TWO, gpu_memory={"g": [(0, 8.0), (600, 14.0)], "o": 4.0})
    state = sched.initial_state()
    rows = sched.plan_round(_view(0.0, 0), state)
    assert rows.job.tolist() == [0] and rows.partner.tolist() == [1]
    state = sched.record_round(state, rows, np.array([600.0]))
    assert state.run_seconds.tolist() == [600.0, 600.0] and state.partner.tolist() == [1, 0]
    rows = sched.plan_round(_view(600.0, 1), state)
    assert rows.job.tolist() == [0] and rows.partner.tolist() == [-1]
    state = sched.record_round(state, rows, np.array([600.0]))
    assert state.evictions.tolist() == [0, 1] and state.partner.tolist() == [-1, -1]
    rows = sched.plan_round(_view(1200.0, 2), state)          # no new eviction: o was not paired
    assert sched.record_round(state, rows, np.array([600.0])).evictions.tolist() == [0, 1]


def test_throttled_partner_keeps_running_on_what_fits() -> None:
    """Throttle: in round 1 only 16 - 14 = 2 of o's 4 GB fit: o runs at 1 * 1 * 2/4 = 0.5."""
    sched, res = _two(1800.0, {"g": [(0, 8.0), (600, 14.0)], "o": 4.0}, on_grow="throttle")
    r1 = res.runs[res.runs["round"] == 1].set_index("job")
    assert r1.loc[1, "partner"] == 0 and r1.loc[1, "rate"] == pytest.approx(0.5)
    assert r1.loc[0, "rate"] == pytest.approx(0.975)
    assert antman_report(res, sched)["evictions"] == 0


def test_throttled_partner_is_evicted_when_nothing_fits() -> None:
    """g grows to the whole 16 GB: nothing of o fits, so even throttling evicts it."""
    _, res = _two(1800.0, {"g": [(0, 8.0), (600, 16.0)], "o": 4.0}, on_grow="throttle")
    assert res.runs[res.runs["round"] == 1]["job"].tolist() == [0]


# --------------------------------------------------------------------------- interference
@settings(max_examples=15, deadline=None)
@given(u_g=st.floats(0.0, 1.0), u_o=st.floats(0.0, 1.0), kappa=st.floats(0.0, 0.5),
       t_g=st.floats(0.1, 100.0), t_o=st.floats(0.1, 100.0))
def test_pair_rates_follow_the_interference_model(u_g, u_o, kappa, t_g, t_o) -> None:
    """Any utilisations: g keeps at least (1 - kappa) of its speed; o gets the idle share."""
    jobs = hs.JobSet([[t_g], [t_o]], gpu_types=["v100"], ids=["g", "o"], steps_remaining=[1e6, 1e6])
    sched = AntMan(job_class=TWO["job_class"], utilization={"g": u_g, "o": u_o}, gpu_memory={"g": 8.0, "o": 4.0},
                   max_slowdown=kappa)
    res = hs.simulate(sched, jobs, hs.Cluster({"v100": 1}),
                      options=hs.SimOptions(round_seconds=100.0, record_runs=True, max_time=100.0))
    r = res.runs.set_index("job")
    if u_g < 1.0:
        assert r.loc[0, "partner"] == 1
        assert r.loc[0, "rate"] == pytest.approx(t_g * (1 - kappa * u_o))
        assert r.loc[0, "rate"] >= t_g * (1 - kappa) - 1e-9
        idle = 1.0 if u_o == 0 else min(1.0, (1 - u_g) / u_o)
        assert r.loc[1, "rate"] == pytest.approx(t_o * idle)
    else:                                         # a fully busy GPU takes no partner
        assert list(r.index) == [0] and r.loc[0, "rate"] == pytest.approx(t_g)


def test_lowest_utilisation_host_first_and_idle_gpus_before_sharing() -> None:
    """Two guaranteed 1-GPU jobs (u 0.8 and 0.2) on 3 GPUs; three opportunistic jobs. The
    first takes the idle GPU (utilisation 0), the second the 0.2 host, the third the 0.8."""
    ids = ["g1", "g2", "o1", "o2", "o3"]
    jobs = hs.JobSet([[1.0]] * 5, gpu_types=["v100"], ids=ids, steps_remaining=[1e5] * 5,
                     arrival_times=[0.0] * 5)
    sched = AntMan(job_class={"g1": "guaranteed", "g2": "guaranteed", "o1": "opportunistic", "o2": "opportunistic",
                              "o3": "opportunistic"},
                   utilization={"g1": 0.8, "g2": 0.2, "o1": 0.5, "o2": 0.5, "o3": 0.1},
                   gpu_memory=dict.fromkeys(ids, 4.0))
    res = hs.simulate(sched, jobs, hs.Cluster({"v100": 3}),
                      options=hs.SimOptions(round_seconds=100.0, record_runs=True, max_time=100.0))
    r = res.runs.set_index("job")
    assert r.loc[2, "partner"] == -1                       # o1 alone on the idle GPU
    assert r.loc[3, "partner"] == 1 and r.loc[4, "partner"] == 0
    assert r.loc[4, "rate"] == pytest.approx(1.0)          # min(1, 0.2 / 0.1)
    assert r.loc[3, "rate"] == pytest.approx(1.0)          # min(1, 0.8 / 0.5)


def test_guaranteed_jobs_take_back_idle_gpus() -> None:
    """An opportunistic job on the only GPU gives it back the round a guaranteed job arrives
    (and shares it when memory allows)."""
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["o", "g"], steps_remaining=[1e5, 1e5],
                     arrival_times=[0.0, 150.0])
    sched = AntMan(job_class={"o": "opportunistic", "g": "guaranteed"}, utilization={"o": 0.5, "g": 0.3},
                   gpu_memory={"o": 4.0, "g": 14.0})
    res = hs.simulate(sched, jobs, hs.Cluster({"v100": 1}),
                      options=hs.SimOptions(round_seconds=100.0, record_runs=True, max_time=300.0))
    assert res.runs[res.runs["round"] == 0]["job"].tolist() == [0]
    assert res.runs[res.runs["round"] == 2]["job"].tolist() == [1]     # 14 + 4 > 16: o waits


# --------------------------------------------------------------------------- whole runs
def test_simulate_a_mixed_workload_respects_capacity_and_completes() -> None:
    """Seeded defaults on a generated workload: every job completes; at most one opportunistic
    partner per row and never more GPUs held than present (checked from the run log)."""
    w = hs.generate_workload(30, rate_per_hour=30.0, seed=3, long_job_prob=0.0)
    cluster = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    sched = AntMan(seed=3)
    res = hs.simulate(sched, w, cluster, options=hs.SimOptions(round_seconds=360.0, record_runs=True))
    assert int(res.summary["n_completed"]) == 30
    runs = res.runs
    held = runs.drop_duplicates(["round", "unit"]).groupby(["round", "gpu_type"])["gpus"].sum()
    for (_, k), g in held.items():
        assert g <= res.capacities[k]
    rep = antman_report(res, sched)
    assert 1.0 <= rep["guaranteed_slowdown"] <= 1.0 / (1.0 - 0.05) + 1e-9
    assert 0.0 < rep["gpu_busy"] <= rep["gpu_allocated"] <= 1.0


@settings(max_examples=20, deadline=None)
@given(data=st.data(), n=st.integers(1, 6), gpus=st.sampled_from([1, 2, 4]))
def test_random_instances_keep_the_pair_rules(data, n, gpus) -> None:
    """Random classes, memories (up to the whole 16 GB) and utilisations, gangs up to the
    cluster's size, one job or several: every pair is (guaranteed, opportunistic), fits the
    GPU's memory, its opportunistic gang is no larger than its host's, and the guaranteed job
    keeps at least 1 - kappa of its speed; the loop's own row check passes every round."""
    ids = [f"j{i}" for i in range(n)]
    mem = {j: data.draw(st.floats(0.5, 16.0)) for j in ids}
    util = {j: data.draw(st.floats(0.0, 1.0)) for j in ids}
    cls = {j: data.draw(st.sampled_from(["guaranteed", "opportunistic"])) for j in ids}
    sizes = [data.draw(st.sampled_from([g for g in (1, 2, 4) if g <= gpus])) for _ in ids]
    jobs = hs.JobSet([[2.0]] * n, gpu_types=["v100"], ids=ids, scale_factors=sizes, steps_remaining=[1500.0] * n)
    sched = AntMan(job_class=cls, gpu_memory=mem, utilization=util, max_slowdown=0.1)
    res = hs.simulate(sched, jobs, hs.Cluster({"v100": gpus}), options=hs.SimOptions(round_seconds=300.0))
    assert bool(res.jobs["completed"].all())
    runs = res.runs
    pairs = runs[(runs["partner"] >= 0)]
    for row in pairs.itertuples(index=False):
        me, other = ids[row.job], ids[row.partner]
        assert cls[me] != cls[other]
        g, o = (me, other) if cls[me] == "guaranteed" else (other, me)
        assert mem[g] + mem[o] <= 16.0 + 1e-9
        assert sizes[ids.index(o)] <= sizes[ids.index(g)]
        if me == g:
            assert row.rate >= 2.0 * (1 - 0.1) - 1e-9


def test_online_scheduler_reopened_store_plans_like_its_twin(tmp_path) -> None:
    """AntMan's state (run seconds, partners, evictions) survives a closed and reopened store."""
    cluster = hs.Cluster.from_servers({"v100": 2, "k80": 2}, gpus_per_server=2)

    def make() -> AntMan:
        return AntMan(seed=1, opportunistic_fraction=0.6)

    twin = OnlineScheduler(make(), cluster, store=tmp_path / "twin.db", round_seconds=360.0)
    path = tmp_path / "cut.db"
    other = OnlineScheduler(make(), cluster, store=path, round_seconds=360.0)
    for s in (twin, other):
        for i in range(6):
            s.submit(f"j{i}", scale_factor=1 + (i % 2), throughputs={"v100": 2.0, "k80": 1.0}, total_steps=1e5,
                     arrival=0.0)
    keys = []
    for t in (0.0, 360.0, 720.0):
        keys.append(twin.next_round(t).key())
        assert other.next_round(t).key() == keys[-1]
        other.close()
        other = OnlineScheduler(make(), cluster, store=path, round_seconds=360.0)
    assert twin.next_round(1080.0).key() == other.next_round(1080.0).key()
    twin.close()
    other.close()


def test_cli_simulate_and_demo_run_antman(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`simulate --policy` by name with parameters, and the demo's entries (its adaptive part,
    which does not involve this scheduler, is skipped to keep the test fast)."""
    monkeypatch.setattr(cli, "_demo_adaptive", lambda args, out, notes: 0)
    assert main(["simulate", "--policy", "antman", "--param", "on_grow=throttle", "--jobs", "6",
                 "--no-progress"]) == 0
    assert main(["demo", "--jobs", "8", "--policies", "antman"]) == 0
    out = capsys.readouterr().out
    assert "antman" in out and "error" not in out


def test_registered_name_and_parameters() -> None:
    s = make_scheduler("antman", max_slowdown=0.1, on_grow="throttle")
    assert isinstance(s, AntMan) and s.max_slowdown == 0.1
    with pytest.raises(ValidationError, match="no parameter 'speed'"):
        make_scheduler("antman", speed=2)


# --------------------------------------------------------------------------- bad input
def _plan(sched: AntMan, gpu: str = "v100", ids=("a",)) -> None:
    jobs = hs.JobSet([[1.0]] * len(ids), gpu_types=[gpu], ids=list(ids), steps_remaining=[10.0] * len(ids))
    hs.simulate(sched, jobs, hs.Cluster({gpu: 1}), options=hs.SimOptions(round_seconds=60.0, max_time=100.0))


@pytest.mark.parametrize("kw, match", [
    ({"gpu_memory": {"a": 20.0}}, r"job 'a': `gpu_memory` reaches 20 GB per GPU, more than the largest GPU it can "
                                  r"use \(16 GB\)"),
    ({"gpu_memory": {"a": [(0, 8.0), (100, 40.0)]}}, r"job 'a': `gpu_memory` reaches 40 GB"),
    ({"gpu_memory": {"a": -1.0}}, r"`gpu_memory\['a'\]` must be positive GB per GPU; got -1.0"),
    ({"gpu_memory": {"a": [(5, 8.0)]}}, r"must start at run_seconds 0"),
    ({"gpu_memory": {"a": [(0, 8.0), (0, 9.0)]}}, r"increase strictly"),
    ({"gpu_memory": {"a": "big"}}, r"`gpu_memory\['a'\]` must be"),
    ({"gpu_memory": {"b": 4.0}}, r"`gpu_memory` has no entry for job 'a'"),
    ({"utilization": {"a": 1.5}}, r"`utilization\['a'\]` must be a number in \[0, 1\]; got 1.5"),
    ({"utilization": {"a": -0.1}}, r"`utilization\['a'\]` must be a number in \[0, 1\]; got -0.1"),
    ({"utilization": {"a": float("nan")}}, r"`utilization\['a'\]` must be a number in \[0, 1\]"),
    ({"utilization": {"a": True}}, r"`utilization\['a'\]` must be a number in \[0, 1\]; got True"),
    ({"job_class": {"a": "best-effort"}}, r"`job_class\['a'\]` must be one of \['guaranteed', 'opportunistic'\]"),
])
def test_bad_per_job_values_name_the_job_field_and_value(kw, match) -> None:
    with pytest.raises(ValidationError, match=match):
        _plan(AntMan(**kw))


def test_unknown_gpu_type_needs_its_memory() -> None:
    with pytest.raises(ValidationError, match=r"GPU type 'mi250' has no default memory"):
        _plan(AntMan(), gpu="mi250")
    _plan(AntMan(gpu_memory_gb={"mi250": 64.0}), gpu="mi250")


@pytest.mark.parametrize("kw, match", [
    ({"max_slowdown": 1.5}, "max_slowdown"),
    ({"on_grow": "kill"}, "on_grow"),
    ({"opportunistic_fraction": -0.1}, "opportunistic_fraction"),
    ({"seed": -1}, "seed"),
    ({"share_idle": 1}, "share_idle"),
    ({"job_class": ["a"]}, "job_class"),
    ({"gpu_memory_gb": {"v100": 0}}, r"gpu_memory_gb\['v100'\]"),
])
def test_bad_parameters(kw, match) -> None:
    with pytest.raises(ValidationError, match=match):
        AntMan(**kw)


def test_gpu_memory_table() -> None:
    """Datasheet values (GB): K80 12 per die, P100 16, V100 16/32, A100 40/80."""
    assert gpu_memory_of(["k80", "p100", "v100", "v100-32gb", "a100", "a100-80gb"]).tolist() == \
        [12.0, 16.0, 16.0, 32.0, 40.0, 80.0]
    assert all(v > 0 for v in GPU_MEMORY_GB.values())


def test_seeded_defaults_depend_only_on_seed_and_id() -> None:
    a = AntMan(seed=4).jobs_of(["x", "y", "z"])
    b = AntMan(seed=4).jobs_of(["z", "x"])
    assert a.utilization[[2, 0]].tolist() == b.utilization.tolist()
    assert ((a.utilization >= 0.1) & (a.utilization <= 0.9)).all()
    assert np.array_equal(a.opportunistic[[2, 0]], b.opportunistic)
    assert AntMan(seed=5).jobs_of(["x", "y", "z"]).utilization.tolist() != a.utilization.tolist()


def _hosts_reference(kind, size, room, util, jobs, spill):
    """AntMan's host choice written the plain way (one pass over every gang per job): the
    previous host when it can still have the job, else the free host with the lowest
    utilisation, ties to the earlier gang."""
    free = np.ones(kind.size, bool)
    out = []
    for gpus, can, mem, prev in jobs:
        cand = free & (size >= gpus) & can[kind] & (util < 1.0)
        ok = cand & ((room >= mem) | ((np.arange(kind.size) == prev) & spill & (room > 0)))
        if not ok.any():
            out.append(-1)
            continue
        c = np.flatnonzero(ok)
        pick = int(c[np.lexsort((c, util[c], c != prev))[0]])
        free[pick] = False
        out.append(pick)
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 300), st.booleans())
def test_indexed_host_search_matches_the_plain_scan(seed, n_hosts, spill) -> None:
    """The grouped, sorted host search (``antman._Hosts``) picks exactly the hosts the plain
    scan over every gang picks, job after job, on random gangs (types, sizes, room, ties in
    utilisation, some fully utilised) and random jobs (some with a previous host)."""
    from hetsched.schedulers.antman import _Hosts

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 4))
    kind = rng.integers(0, m, n_hosts)
    size = rng.choice([1, 2, 4, 8], n_hosts)
    room = rng.choice([0.0, 2.0, 8.0, 16.0, 30.0], n_hosts) * rng.uniform(0.5, 1.0, n_hosts)
    util = rng.choice([0.2, 0.5, 0.5, 0.9, 1.0], n_hosts)
    jobs = [(int(rng.choice([1, 2, 4, 8])), rng.random(m) < 0.8, float(rng.uniform(1, 20)),
             int(rng.integers(-1, n_hosts)) if rng.random() < 0.3 else -1) for _ in range(int(rng.integers(1, 400)))]
    hosts = _Hosts(np.arange(n_hosts), kind, size, room, util)
    got = [hosts.pick(g, c, mem, prev, spill=spill) for g, c, mem, prev in jobs]
    assert got == _hosts_reference(kind, size, room, util, jobs, spill)
