"""No option is silently ignored (issue 30, "no silent failures at first contact").

An option that the rest of the command line makes ineffective -- ``--jobs`` with ``--trace``
(the trace brings its own jobs), ``--seed`` / ``--rate`` on ``sweep`` (it runs ``--seeds`` x
``--loads``), ``--runs`` without ``--out``, a workload flag beside ``--config`` ... -- used to
be accepted and dropped without a word. Each such combination is now exit 2, before anything
runs, with one line naming the option, the rule and the value; the valid combinations run as
before."""

from __future__ import annotations

from pathlib import Path

import pytest

import hetsched as hs
from hetsched.cli import _given_options, main

FIX = Path(__file__).parent / "fixtures"
TRACE, TPUT = str(FIX / "gavel_small.trace"), str(FIX / "gavel_throughputs_small.json")
PHILLY = str(FIX / "philly_cluster_job_log_small.json")
CLUSTER = ["--cluster", "v100=2,p100=2,k80=2"]
ON_TRACE = ["--trace", TRACE, "--throughputs", TPUT, *CLUSTER, "--no-progress"]
TINY = ["--jobs", "4", "--long-job-prob", "0", "--cluster", "v100=4,p100=4,k80=4"]   # a generated workload
SWEEP = ["sweep", "--policies", "fifo", "--workers", "1", "--no-progress"]


def _cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _config(tmp_path: Path) -> Path:
    p = tmp_path / "one.toml"
    p.write_text('policy = "fifo"\n[cluster]\nv100 = 4\nk80 = 4\n[workload]\nn_jobs = 4\nload = 6.0\n'
                 'long_job_prob = 0.0\nscale_factor_probs = {1 = 1.0}\n')
    return p


# (argv, substrings of the one error line: the option, the rule, the value given)
REFUSED = {
    # the options of a generated workload beside --trace, on every command that takes --trace
    "simulate-trace-jobs": (["simulate", *ON_TRACE, "--jobs", "10"],
                            ["`--jobs` sets the number of jobs of a generated workload",
                             f"`--trace` {TRACE!r} brings its own jobs and arrival times", "got --jobs 10",
                             "drop --jobs or --trace"]),
    "simulate-trace-jobs-at-default": (["simulate", *ON_TRACE, "--jobs", "200"], ["got --jobs 200"]),
    "simulate-trace-rate": (["simulate", *ON_TRACE, "--rate", "3"],
                            ["`--rate` sets the arrival rate of a generated workload", "got --rate 3.0"]),
    "simulate-trace-load-alias": (["simulate", *ON_TRACE, "--load", "3"], ["`--rate` sets the arrival rate"]),
    "simulate-trace-single-gpu": (["simulate", *ON_TRACE, "--single-gpu"],
                                  ["`--single-gpu` makes a generated workload of 1-GPU jobs only", "got --single-gpu",
                                   "drop --single-gpu or --trace"]),
    "simulate-trace-long-job-prob": (["simulate", *ON_TRACE, "--long-job-prob", "0.5"],
                                     ["`--long-job-prob` sets the share of long jobs", "got --long-job-prob 0.5"]),
    "solve-trace-jobs": (["solve", *ON_TRACE[:-1], "--jobs", "5"], ["`--jobs` sets the number of jobs", "got --jobs 5"]),
    "solve-trace-single-gpu": (["solve", *ON_TRACE[:-1], "--single-gpu"], ["`--single-gpu`"]),
    "sweep-trace-jobs": ([*SWEEP, *ON_TRACE, "--jobs", "7"], ["`--jobs` sets the number of jobs", "got --jobs 7"]),
    "sweep-trace-rate": ([*SWEEP, *ON_TRACE, "--rate", "2"], ["`--rate` sets the arrival rate of a generated workload",
                                                              "brings its own jobs and arrival times"]),
    "sweep-trace-single-gpu": ([*SWEEP, *ON_TRACE, "--single-gpu"], ["`--single-gpu`", "drop --single-gpu or --trace"]),
    "sweep-trace-long-job-prob": ([*SWEEP, *ON_TRACE, "--long-job-prob", "0"], ["got --long-job-prob 0.0"]),
    # a seed where nothing is drawn: a gavel trace fixes every job, the simulation is deterministic
    "simulate-gavel-trace-seed": (["simulate", *ON_TRACE, "--seed", "3"],
                                  ["`--seed` seeds a generated workload, or the job types drawn for a cluster log",
                                   "is a gavel trace, which fixes every job", "got --seed 3", "drop --seed"]),
    "solve-gavel-trace-seed": (["solve", *ON_TRACE[:-1], "--seed", "1"], ["`--seed` seeds", "got --seed 1"]),
    "sweep-gavel-trace-seeds": ([*SWEEP, *ON_TRACE, "--seeds", "3"],
                                ["`--seeds` seeds a generated workload", "is a gavel trace", "got --seeds 3",
                                 "drop --seeds"]),
    "sweep-gavel-trace-seed": ([*SWEEP, *ON_TRACE, "--seed", "3"], ["`--seed` seeds", "drop --seed"]),
    "sweep-cluster-log-two-seeds": ([*SWEEP, "--trace", PHILLY, *CLUSTER, "--seeds", "0,1"],
                                    ["`--seeds` lists the seeds of generated workloads",
                                     "every seed after the first would repeat the runs of the first",
                                     "got --seeds 0,1", "give one seed"]),
    # the options of a trace without one
    "trace-format-without-trace": (["simulate", *TINY, "--trace-format", "philly"],
                                   ["`--trace-format` is the format of `--trace`", "no --trace is given",
                                    "got --trace-format philly", "drop --trace-format or add --trace PATH"]),
    "profiles-without-trace": (["simulate", *TINY, "--profiles", "prof"],
                               ["`--profiles` is the profile folder of a Sia `--trace`", "got --profiles prof"]),
    "task-path-without-trace": (["solve", *TINY, "--task-path", "tasks.csv"],
                                ["`--task-path` is the task table of a PAI `--trace`", "got --task-path tasks.csv"]),
    # ... or with a trace of another format
    "profiles-with-a-gavel-trace": (["simulate", *ON_TRACE, "--profiles", "prof"],
                                    ["`--profiles` is the profile folder of a Sia workload", "read as a gavel trace",
                                     "got --profiles prof", "--trace-format sia"]),
    "task-path-with-a-philly-trace": (["simulate", "--trace", PHILLY, *CLUSTER, "--task-path", "t.csv"],
                                      ["`--task-path` is the task table of a PAI trace", "read as a philly trace",
                                       "got --task-path t.csv", "--trace-format pai"]),
    "throughputs-with-a-sia-trace": (["simulate", "--trace", "w.csv", "--trace-format", "sia", "--throughputs", TPUT],
                                     ["`--throughputs` is the throughput table of a generated workload or of a gavel",
                                      "takes its throughputs from its profiles", f"got --throughputs {TPUT}"]),
    # sweep: --seeds and --loads say what --seed and --rate say for one run
    "sweep-seed": ([*SWEEP, *TINY, "--seed", "3"],
                   ["`--seed` sets the seed of one run; a sweep runs every seed of --seeds", "got --seed 3",
                    "--seeds 3"]),
    "sweep-rate": ([*SWEEP, *TINY, "--rate", "6"],
                   ["`--rate` sets the arrival rate of one generated workload; a sweep runs every rate of --loads",
                    "got --rate 6.0", "--loads 6"]),
    "sweep-arrival-rate-alias": ([*SWEEP, *TINY, "--arrival-rate", "6"], ["`--rate` sets the arrival rate of one"]),
    # outputs without --out
    "simulate-runs-without-out": (["simulate", *TINY, "--runs"],
                                  ["`--runs` writes DIR/runs.csv into the directory of `--out DIR`",
                                   "no --out is given", "got --runs"]),
    "sweep-plot-without-out": ([*SWEEP, *TINY, "--plot"],
                               ["`--plot` writes DIR/jct_vs_load.png", "no --out is given", "got --plot"]),
    # simulation options another option makes moot
    "window-unit-without-window": (["simulate", *TINY, "--window-unit", "seconds"],
                                   ["`--window-unit` says what the numbers of `--window` count", "no --window",
                                    "got --window-unit seconds"]),
    "rule-with-the-ideal-mechanism": (["simulate", *TINY, "--mechanism", "ideal", "--rule", "deficit"],
                                      ["`--rule` orders the jobs of the round mechanism", "`--mechanism ideal`",
                                       "got --rule deficit", "drop --rule or --mechanism ideal"]),
    "sweep-rule-with-the-ideal-mechanism": ([*SWEEP, *TINY, "--mechanism", "ideal", "--rule", "gavel"],
                                            ["`--rule` orders", "got --rule gavel"]),
}


@pytest.mark.parametrize(("argv", "parts"), list(REFUSED.values()), ids=list(REFUSED))
def test_refused_combination_is_exit_2_naming_option_rule_and_value(argv: list[str], parts: list[str],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, (part, err)


def test_config_refuses_every_flag_it_would_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    code, out, err = _cli(capsys, "simulate", "--config", cfg, "--jobs", "10", "--policy", "max_min_fairness",
                          "--param", "heterogeneity_aware=false", "--no-placement", "--out", tmp_path / "o")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`--jobs`, `--policy`, `--param`, `--no-placement` would be ignored" in err
    assert f"`--config` {str(cfg)!r} describes the whole run" in err
    assert "got --jobs 10 --policy max_min_fairness --param heterogeneity_aware=false --no-placement" in err
    assert "only --missing, --out, --progress, --runs, --skip-bad-rows apply beside it" in err
    assert not (tmp_path / "o").exists()   # refused before anything ran or was written
    code, _, err = _cli(capsys, "sweep", "--config", cfg, "--seeds", "0,1", "--throughputs", TPUT)
    assert code == 2 and "`--seeds`, `--throughputs` would be ignored" in err and "describes the whole sweep" in err
    assert "--plot" in err and "--workers" in err and "--runs" not in err
    code, _, err = _cli(capsys, "simulate", "--config", cfg, "--runs")
    assert code == 2 and "`--runs` writes DIR/runs.csv" in err


def test_refused_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "simulate", *ON_TRACE, "--jobs", "4", "--seed", "2", "--out", tmp_path / "o")
    assert code == 2 and not (tmp_path / "o").exists()
    # every refused option of the command line in the one line
    assert "got --jobs 4" in err and "got --seed 2" in err and err.count("\n") == 1


def test_plot_refuses_window_hours_without_a_utilization_figure(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    sweep_csv = tmp_path / "sweep.csv"
    sweep_csv.write_text("policy,load,seed,avg_jct_hours\nfifo,1,0,1.0\n")
    code, out, err = _cli(capsys, "plot", sweep_csv, "--window-hours", "2", "--out", tmp_path / "f.png")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`--window-hours` smooths the utilization figure, and this plot draws none (it draws jct_vs_load)" in err
    assert "got --window-hours 2" in err and not (tmp_path / "f.png").exists()


def test_reproduce_refuses_throughputs_for_experiments_that_read_no_table(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "reproduce", "--quick", "sia_table3", "--throughputs", TPUT, "--out", tmp_path)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "`--throughputs` is Gavel's throughput table, which only the experiments" in err
    assert "sia_table3 read none" in err and f"got --throughputs {TPUT!r}" in err
    assert list(tmp_path.iterdir()) == []


def test_sweep_help_lists_seeds_and_loads_not_seed_and_rate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--seeds" in text and "--loads" in text
    assert "--seed " not in text and "--seed\n" not in text and "--rate" not in text and "--arrival-rate" not in text


def test_given_options_tell_an_option_from_its_default() -> None:
    given = _given_options(["simulate", "--jobs", "200", "--load", "3", "--no-placement", "--param", "a=1",
                            "--param", "b=2", "--window", "0", "5"])
    assert given == {"jobs": "--jobs 200", "rate": "--rate 3.0", "placement": "--no-placement",
                     "param": "--param a=1 --param b=2", "window": "--window 0.0 5.0"}
    assert _given_options(["simulate"]) == {}
    assert _given_options(["-v", "sweep", "--placement"]) == {"verbose": "--verbose", "placement": "--placement"}


# ----------------------------------------------------------------------------- what still runs
def test_the_seed_changes_nothing_on_a_gavel_trace() -> None:
    """The premise of refusing ``--seed`` / ``--seeds`` with a gavel trace: the simulation is
    deterministic, the seed only a label."""
    trace = hs.load_trace(TRACE, throughputs=TPUT)
    cluster = hs.Cluster({"v100": 2, "p100": 2, "k80": 2})
    a, b = (hs.simulate("fifo", trace, cluster, options=hs.SimOptions(seed=s)).summary for s in (0, 1))
    keys = ("avg_jct_s", "makespan_s", "n_rounds", "utilization", "preemptions")
    assert [a[k] for k in keys] == [b[k] for k in keys]


def test_generated_workload_takes_every_generator_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "simulate", "--policy", "fifo", "--jobs", "4", "--rate", "10", "--single-gpu",
                          "--long-job-prob", "0", "--seed", "1", "--cluster", "v100=2,k80=2", "--window", "0", "4",
                          "--window-unit", "jobs", "--rule", "deficit", "--no-progress", "--out", tmp_path / "o",
                          "--runs")
    assert code == 0, err
    assert "4 / 4" in out and (tmp_path / "o" / "runs.csv").is_file()
    code, out, err = _cli(capsys, "simulate", "--policy", "max_min_fairness", *TINY, "--mechanism", "ideal",
                          "--no-progress")
    assert code == 0, err
    code, out, err = _cli(capsys, "solve", *TINY, "--seed", "2", "--rate", "6", "--single-gpu")
    assert code == 0, err


def test_traces_run_with_the_options_that_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "simulate", "--policy", "fifo", *ON_TRACE, "--trace-format", "gavel",
                          "--out", tmp_path / "g", "--runs")
    assert code == 0, err
    assert (tmp_path / "g" / "runs.csv").is_file()
    assert _cli(capsys, "solve", *ON_TRACE[:-1])[0] == 0
    # a cluster log draws its job types with the seed: --seed applies, and one --seeds on a sweep
    code, out, err = _cli(capsys, "simulate", "--policy", "fifo", "--trace", PHILLY, *TINY[-2:], "--seed", "1",
                          "--no-progress")
    assert code == 0, err
    code, out, err = _cli(capsys, *SWEEP, "--trace", PHILLY, *TINY[-2:], "--seeds", "3", "--out", tmp_path / "sw")
    assert code == 0, err
    assert (tmp_path / "sw" / "sweep.csv").read_text().count("\n") == 2   # header + fifo, seed 3


def test_sweep_and_config_run_with_the_options_that_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, *SWEEP, *TINY, "--loads", "6", "--seeds", "0,1")
    assert code == 0, err
    assert len(out.splitlines()) == 3   # header + 2 seeds
    cfg = _config(tmp_path)
    code, out, err = _cli(capsys, "simulate", "--config", cfg, "--out", tmp_path / "o", "--runs", "--no-progress")
    assert code == 0, err
    assert (tmp_path / "o" / "runs.csv").is_file()
