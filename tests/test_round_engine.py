"""The round engine as a package of its own (issue 24): one options record for the
mechanism, an engine that imports nothing of its drivers, and simulate's typed face."""

from __future__ import annotations

import ast
import dataclasses
import warnings
from pathlib import Path

import pandas as pd
import pytest

import hetsched as hs
import hetsched.rounds
from hetsched.errors import ValidationError
from hetsched.rounds import MechanismOptions, PolicyScheduler, RoundOptions
from hetsched.rounds.loop import as_scheduler
from hetsched.sim import SimOptions, generate_workload

ROUNDS = Path(hetsched.rounds.__file__).resolve().parent
CLUSTER = hs.Cluster({"v100": 4, "p100": 4, "k80": 4})


def _own_fields(cls: type) -> set[str]:
    """Fields a dataclass declares itself (not inherited)."""
    return {name for name in cls.__dict__.get("__annotations__", {}) if not name.startswith("_")}


def _same_run(a: hs.SimulationResult, b: hs.SimulationResult) -> None:
    pd.testing.assert_frame_equal(a.jobs, b.jobs)
    pd.testing.assert_frame_equal(a.runs, b.runs)
    timing = [c for c in a.rounds if c.endswith("_s")]
    pd.testing.assert_frame_equal(a.rounds.drop(columns=timing), b.rounds.drop(columns=timing))


# ----------------------------------------------------------------------------- MechanismOptions
@pytest.mark.parametrize(("kw", "match"), [
    ({"work_conserving": "yes"}, r"`work_conserving` must be True or False; got 'yes'"),
    ({"reset_shares": 1}, r"`reset_shares` must be True or False; got 1"),
    ({"backfill": None}, r"`backfill` must be True or False; got None"),
    ({"mechanism": "fluid"}, r"`mechanism` must be one of \['rounds', 'ideal'\]; got 'fluid'"),
    ({"rule": "lottery"}, r"`rule` must be one of \['gavel', 'deficit'\]; got 'lottery'"),
    ({"arrivals": "queue"}, r"`arrivals` must be one of \['carve', 'wait'\]; got 'queue'"),
    ({"reallocate": "sometimes"}, r"`reallocate` must be 'on_change' or a positive number of seconds; got 'sometimes'"),
    ({"reallocate": 0.0}, r"`reallocate` must be a positive finite number of seconds; got 0\.0"),
    ({"solve_time_limit": -1.0}, r"`solve_time_limit` must be a positive finite number of seconds or None; got -1\.0"),
    ({"min_solve_interval": -5.0}, r"`min_solve_interval` must be a finite number of seconds >= 0; got -5\.0"),
    ({"stickiness": -0.5}, r"`stickiness` must be a finite number >= 0; got -0\.5"),
    ({"solver_options": [("tol", 1)]}, r"`solver_options` must be a mapping or None"),
])
def test_mechanism_options_name_the_argument(kw, match) -> None:
    with pytest.raises(ValidationError, match=match):
        MechanismOptions(**kw)
    with pytest.raises(ValidationError, match=match):   # the same rule, checked once, wherever it is given
        PolicyScheduler("max_min_fairness", **kw)
    with pytest.raises(ValidationError, match=match):
        SimOptions(**kw)


def test_unknown_and_conflicting_names_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"unknown mechanism option\(s\) \['round_seconds'\]; valid: \["):
        MechanismOptions().replace(round_seconds=60.0)
    with pytest.raises(ValidationError, match=r"unknown mechanism option\(s\) \['round_seconds'\]"):
        PolicyScheduler("fifo", round_seconds=60.0)
    with pytest.raises(ValidationError, match=r"`options` must be a hetsched\.MechanismOptions or None; got dict"):
        PolicyScheduler("fifo", {"rule": "deficit"})
    with pytest.raises(ValidationError, match="give `mode` or `mechanism`, not both"):
        PolicyScheduler("fifo", mode="ideal", mechanism="ideal")
    with pytest.raises(ValidationError, match=r"`mode` must be one of \['rounds', 'ideal'\]; got 'fluid'"):
        PolicyScheduler("fifo", mode="fluid")
    with pytest.raises(ValidationError, match=r"`options` must be a hetsched\.MechanismOptions or None; got str"):
        as_scheduler("fifo", "fast")
    with pytest.raises(TypeError):   # keyword-only: no positional options whose order could change
        MechanismOptions("rounds")


def test_each_option_is_declared_once() -> None:
    mech, loop, sim = _own_fields(MechanismOptions), _own_fields(RoundOptions), _own_fields(SimOptions)
    assert mech == {"mechanism", "reallocate", "rule", "stickiness", "work_conserving", "reset_shares", "solver",
                    "solve_time_limit", "solver_options", "min_solve_interval", "arrivals", "backfill"}
    assert not (mech & loop) and not (mech & sim) and not (loop & sim)
    assert {f.name for f in dataclasses.fields(SimOptions)} == mech | loop | sim
    assert sim == {"learn_throughputs", "report_noise", "throughput_reference", "network"}


def test_sim_options_embed_the_mechanism_options() -> None:
    opts = SimOptions(rule="deficit", reallocate=720.0, arrivals="wait", backfill=False, round_seconds=60.0, seed=4)
    assert isinstance(opts, MechanismOptions) and isinstance(opts, RoundOptions)
    assert opts.rule == "deficit" and opts.round_seconds == 60.0
    mech = opts.mechanism_options
    assert type(mech) is MechanismOptions
    assert mech == MechanismOptions(rule="deficit", reallocate=720.0, arrivals="wait", backfill=False)
    assert mech.mechanism_options is mech
    # round trip: the mechanism part back into a SimOptions gives the same record
    back = SimOptions(round_seconds=60.0, seed=4, **{f.name: getattr(mech, f.name)
                                                     for f in dataclasses.fields(MechanismOptions)})
    assert back == opts
    assert SimOptions.preset("gavel").mechanism_options.min_solve_interval == 1920.0
    assert type(opts.replace(rule="gavel")) is SimOptions


def test_policy_scheduler_takes_the_record() -> None:
    rec = MechanismOptions(rule="deficit", reallocate=720.0, arrivals="wait", backfill=False)
    a = PolicyScheduler("max_min_fairness", rec)
    b = PolicyScheduler("max_min_fairness", rule="deficit", reallocate=720.0, arrivals="wait", backfill=False)
    c = PolicyScheduler("max_min_fairness", MechanismOptions(rule="deficit"), reallocate=720.0, arrivals="wait",
                        backfill=False)
    assert a.options == b.options == c.options == rec
    assert (b.rule, b.backfill, b.arrivals, b.period, b.mode) == ("deficit", False, "wait", 720.0, "rounds")
    assert PolicyScheduler("fifo", mode="ideal").options.mechanism == "ideal"   # the older keyword
    assert PolicyScheduler("fifo", SimOptions(rule="deficit", round_seconds=60.0)).options == \
        MechanismOptions(rule="deficit")
    assert as_scheduler("fifo", SimOptions(rule="deficit", round_seconds=60.0)).options == \
        MechanismOptions(rule="deficit")
    with pytest.raises(AttributeError):
        _ = a.round_seconds
    # same plans on a small run
    trace = generate_workload(12, rate_per_hour=6.0, seed=3, long_job_prob=0.0)
    _same_run(hs.simulate(a, trace, CLUSTER), hs.simulate(b, trace, CLUSTER))
    _same_run(hs.simulate(a, trace, CLUSTER),
              hs.simulate("max_min_fairness", trace, CLUSTER, options=SimOptions(**dataclasses.asdict(rec))))


# ----------------------------------------------------------------------------- layering
def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module an engine file imports (module level or inside functions), absolute."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:   # hetsched.rounds.<file>: level 1 is hetsched.rounds, 2 is hetsched
                pkg = ["hetsched", "rounds"][: 3 - node.level]
                base = ".".join(pkg + ([node.module] if node.module else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def test_the_engine_imports_nothing_of_its_drivers() -> None:
    files = sorted(ROUNDS.glob("*.py"))
    assert {p.stem for p in files} >= {"__init__", "protocol", "options", "loop", "policy_scheduler", "ledger",
                                       "placing"}
    banned = ("hetsched.sim", "hetsched.online", "hetsched.schedulers", "hetsched.reproduce", "hetsched.cli")
    bad = [f"{p.name}:{line} imports {mod}" for p in files for line, mod in _imports(p)
           if mod == "hetsched" or any(mod == b or mod.startswith(b + ".") for b in banned)]
    assert bad == []


def test_old_homes_forward_to_the_engine() -> None:
    from hetsched.rounds.options import progress_wanted, window_mask
    from hetsched.sim.metrics import window_mask as old_window_mask
    from hetsched.sim.provenance import progress_wanted as old_progress_wanted

    assert old_window_mask is window_mask and old_progress_wanted is progress_wanted
    assert hs.MechanismOptions is MechanismOptions and "MechanismOptions" in hs.__all__
    assert "MechanismOptions" in hetsched.rounds.__all__
    assert hs.sim.PolicyScheduler is PolicyScheduler and hs.SimOptions is SimOptions


# ----------------------------------------------------------------------------- simulate's face
def test_option_keywords_warn_once_and_match_options() -> None:
    trace = generate_workload(10, rate_per_hour=6.0, seed=1, long_job_prob=0.0)
    new = hs.simulate("max_min_fairness", trace, CLUSTER, options=SimOptions(round_seconds=120.0, rule="deficit"))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        old = hs.simulate("max_min_fairness", trace, CLUSTER, round_seconds=120.0, rule="deficit")
    dep = [w for w in rec if issubclass(w.category, DeprecationWarning)]
    assert len(dep) == 1
    msg = str(dep[0].message)
    assert "['round_seconds', 'rule']" in msg and "options=SimOptions(...)" in msg
    assert Path(dep[0].filename).resolve() == Path(__file__).resolve()   # blamed on the caller
    _same_run(new, old)
    # beside a preset or a record, keywords override it (and warn)
    with pytest.warns(DeprecationWarning, match=r"\['min_solve_interval'\]"):
        a = hs.simulate("max_min_fairness", trace, CLUSTER, preset="gavel", min_solve_interval=0.0)
    _same_run(a, hs.simulate("max_min_fairness", trace, CLUSTER,
                             options=SimOptions.preset("gavel", min_solve_interval=0.0)))


def test_simulate_online_keywords_warn_once() -> None:
    from hetsched.sim.replay import simulate_online

    trace = generate_workload(6, rate_per_hour=6.0, seed=2, long_job_prob=0.0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        old = simulate_online("fifo", trace, CLUSTER, learn=False, seed=2)
    assert [str(w.message).split(":")[0] for w in rec if issubclass(w.category, DeprecationWarning)] == \
        ["simulate_online()"]
    _same_run(old, simulate_online("fifo", trace, CLUSTER, learn=False, options=SimOptions(seed=2)))


def test_options_and_bad_keywords_raise_without_warning() -> None:
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], steps_remaining=[100.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        hs.simulate("fifo", jobs, hs.Cluster({"v100": 1}), options=SimOptions(round_seconds=60.0))
        hs.simulate("fifo", jobs, hs.Cluster({"v100": 1}), preset="gavel")
        with pytest.raises(ValidationError, match=r"unknown simulation option\(s\) \['round_secs'\]"):
            hs.simulate("fifo", jobs, hs.Cluster({"v100": 1}), round_secs=60.0)
        with pytest.raises(ValidationError, match=r"`rule` must be one of"):
            hs.simulate("fifo", jobs, hs.Cluster({"v100": 1}), rule="lottery")
