"""Bad-input catalogue: every public entry point, each rule, one table.

Each case calls one entry point with one bad input and names the error type it must raise
and three regular expressions its message must match: the **argument** (as the user wrote
it: a keyword, ``counts['a']``, ``--jobs``), the **rule** broken and the offending **value**.
CLI cases run ``hetsched.cli.main`` in-process and must exit with status 2 and one line on
stderr.

Cases already asserted elsewhere are not repeated here: ``tests/test_validation.py``
(JobSet throughput values and shapes, ids, scale factors, weights, cluster counts and prices,
missing fields, ``time_limit``), ``tests/test_policy_params.py`` (``BAD``: every parameter of
the LP policies, DRF, Gandiva_fair, AlloX, Sia) and ``tests/test_raw_exceptions.py``
(undecodable trace bytes, failing sweep runs, ``--out``). ``CATALOGUE_SIZE`` below counts
this table; docs/reliability.md quotes it.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetsched as hs
from hetsched import policies as P
from hetsched.cli import main as cli_main
from hetsched.errors import (
    MissingFieldError,
    UnknownPolicyError,
    UnknownSolverError,
    ValidationError,
)
from hetsched.inputs.traces import readers as R

JOBS = hs.JobSet([[2.0, 1.0], [1.0, 1.0]], gpu_types=["v100", "k80"], ids=["a", "b"], steps_remaining=[100.0, 200.0])
CLUSTER = hs.Cluster({"v100": 2, "k80": 2})
SERVERS = hs.Cluster.from_servers({"v100": 8}, gpus_per_server=8)
ONE = {"gpu_types": ["g"]}


class CliExit(Exception):
    """A CLI run that exited with a non-zero status (message: ``exit <rc>: <stderr>``)."""


def cli(*argv: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli_main(list(argv))
    if rc != 0:
        raise CliExit(f"exit {rc}: {err.getvalue().strip()}")


def alloc() -> hs.Allocation:
    return hs.solve("max_min_fairness", JOBS, CLUSTER)


def write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


@dataclass(frozen=True)
class Case:
    entry: str                     # the public entry point
    name: str                      # short id of the rule
    call: Callable[[Path], Any]    # gets a fresh temporary directory
    error: type[BaseException]
    argument: str                  # regexes the message must match
    rule: str
    value: str


C = Case
CASES: list[Case] = [
    # ---------------------------------------------------------------- hs.solve
    C("solve", "aggregate-bool", lambda t: hs.solve("max_min_fairness", JOBS, CLUSTER, aggregate="yes"),
      ValidationError, r"`aggregate`", r"must be True or False", r"'yes'"),
    C("solve", "options-mapping", lambda t: hs.solve("max_min_fairness", JOBS, CLUSTER, options=[1]),
      ValidationError, r"`options`", r"must be a mapping", r"list"),
    C("solve", "solver-str", lambda t: hs.solve("max_min_fairness", JOBS, CLUSTER, solver=3),
      UnknownSolverError, r"`solver`", r"must be a string", r"3"),
    C("solve", "policy-known", lambda t: hs.solve("fairest", JOBS, CLUSTER),
      UnknownPolicyError, r"`policy`", r"not a known policy; choose one of \[.*'max_min_fairness'", r"'fairest'"),
    C("solve", "clarabel-option", lambda t: hs.solve("max_min_fairness", JOBS, CLUSTER, solver="clarabel",
                                                   options={"tol_nope": 1}),
      ValidationError, r"`options\['tol_nope'\]`", r"not a Clarabel setting", r"tol_nope"),
    C("solve", "fits-some-host", lambda t: hs.solve("max_min_fairness", hs.JobSet([[1.0]], cpus_per_gpu=[64.0], **ONE),
                                                  hs.Cluster({"g": 1}, cpus={"g": 8.0})),
      ValidationError, r"`cpus_per_gpu`", r"more than any GPU type it can run on has", r"= 64\.0 x 1 GPU"),
    C("solve", "partitioned-k-jobs", lambda t: hs.solve(hs.Partitioned(policy="max_min_fairness", k=5), JOBS, CLUSTER),
      ValidationError, r"`k`", r"at most the number of jobs \(2\)", r"got 5"),
    C("solve", "entity-weights-complete",
      lambda t: hs.solve(P.HierarchicalMaxMinFairness(entity_weights={"u": 1.0}),
                         hs.JobSet([[1.0]], entities=["z"], **ONE), hs.Cluster({"g": 1})),
      ValidationError, r"`entity_weights`", r"must name every entity that owns a job", r"\['z'\]"),
    C("solve", "entities-needed", lambda t: hs.solve("hierarchical_max_min_fairness", hs.JobSet([[1.0]], **ONE),
                                                   hs.Cluster({"g": 1})),
      MissingFieldError, r"`entities`", r"needs job field", r"hierarchical_max_min_fairness"),
    # ---------------------------------------------------------------- hs.JobSet
    C("JobSet", "gpu-type-names", lambda t: hs.JobSet([[1.0]], gpu_types=[3]),  # was turned into "3"
      ValidationError, r"`gpu_types`", r"non-empty strings", r"got 3"),
    C("JobSet", "ids-length", lambda t: hs.JobSet([[1.0]], ids=["x", "y"], **ONE),
      ValidationError, r"`ids`", r"length n_jobs = 1", r"\(2,\)"),
    C("JobSet", "throughputs-numeric", lambda t: hs.JobSet([["fast"]], **ONE),
      ValidationError, r"`throughputs`", r"must be numeric", r"'fast'"),
    C("JobSet", "throughputs-range", lambda t: hs.JobSet([[1e30]], **ONE),
      ValidationError, r"`throughputs`", r"0 \(cannot run\) or in \[1e-06, 1e\+09\]", r"1e\+30"),
    C("JobSet", "steps-max", lambda t: hs.JobSet([[1.0]], steps_remaining=[1e300], **ONE),
      ValidationError, r"`steps_remaining`", r"at most 1e\+15", r"1e\+300"),
    C("JobSet", "time-max", lambda t: hs.JobSet([[1.0]], isolated_time_elapsed=[1e20], **ONE),
      ValidationError, r"`isolated_time_elapsed`", r"at most 1e\+12", r"1e\+20"),
    C("JobSet", "weights-range", lambda t: hs.JobSet([[1.0]], weights=[1e9], **ONE),
      ValidationError, r"`weights`", r"in \[1e-06, 1e\+06\]", r"1000000000\.0"),
    C("JobSet", "entities-length", lambda t: hs.JobSet([[1.0]], entities=["u", "v"], **ONE),
      ValidationError, r"`entities`", r"shape \(n_jobs,\) = \(1,\)", r"\(2,\)"),
    C("JobSet", "cpus-nonneg", lambda t: hs.JobSet([[1.0]], cpus_per_gpu=[-1.0], **ONE),
      ValidationError, r"`cpus_per_gpu`", r"non-negative", r"-1\.0"),
    C("JobSet", "mem-finite", lambda t: hs.JobSet([[1.0]], mem_per_gpu=[math.nan], **ONE),
      ValidationError, r"`mem_per_gpu`", r"non-negative", r"nan"),
    C("JobSet", "gpu-types-sequence", lambda t: hs.JobSet([[1.0]], gpu_types="g"),
      ValidationError, r"`gpu_types`", r"sequence of names", r"'g'"),
    # ---------------------------------------------------------------- hs.Cluster
    C("Cluster", "counts-mapping", lambda t: hs.Cluster([1, 2]),
      ValidationError, r"`counts`", r"mapping of GPU type -> count", r"list"),
    C("Cluster", "type-name", lambda t: hs.Cluster({3: 1}),
      ValidationError, r"`counts` keys", r"non-empty strings", r"3"),
    C("Cluster", "cpus-number", lambda t: hs.Cluster({"a": 1}, cpus={"a": math.nan}),
      ValidationError, r"`cpus\['a'\]`", r"non-negative number \(or inf\)", r"nan"),
    C("Cluster", "memory-nonneg", lambda t: hs.Cluster({"a": 1}, memory={"a": -2.0}),
      ValidationError, r"`memory\['a'\]`", r"non-negative number", r"-2\.0"),
    C("Cluster.from_servers", "gpus-per-server", lambda t: hs.Cluster.from_servers({"a": 8}, gpus_per_server=2.5),
      ValidationError, r"`gpus_per_server`", r"positive integer", r"2\.5"),
    C("Cluster.from_servers", "servers-per-rack", lambda t: hs.Cluster.from_servers({"a": 8}, servers_per_rack=-1),
      ValidationError, r"`servers_per_rack`", r"positive integer or None", r"-1"),
    C("Cluster.from_servers", "server-size", lambda t: hs.Cluster.from_servers([("s0", "a", -2)]),
      ValidationError, r"`servers\[0\]\.num_gpus`", r"positive integer", r"-2"),
    C("Cluster.from_servers", "servers-shape", lambda t: hs.Cluster.from_servers(5),  # was a raw TypeError
      ValidationError, r"`servers`", r"Topology, a mapping GPU type -> count or an iterable of servers", r"int 5"),
    # ---------------------------------------------------------------- hs.plan_round
    C("plan_round", "cluster-type", lambda t: hs.plan_round(alloc(), None, {"v100": 2}, jobs=JOBS),
      ValidationError, r"`cluster`", r"must be a hetsched\.Cluster", r"dict"),
    C("plan_round", "history-type", lambda t: hs.plan_round(alloc(), "so far", CLUSTER, jobs=JOBS),
      ValidationError, r"`history`", r"ShareHistory or None", r"str"),
    C("plan_round", "X-nonneg", lambda t: hs.plan_round(np.array([[-1.0, 0.0]]), None, CLUSTER, scale_factors=[1],
                                                      gpu_types=["v100", "k80"]),
      ValidationError, r"`X`", r"must be non-negative", r"X\[0, 'v100'\] = -1"),
    C("plan_round", "X-finite", lambda t: hs.plan_round(np.array([[math.nan, 0.0]]), None, CLUSTER, scale_factors=[1],
                                                      gpu_types=["v100", "k80"]),
      ValidationError, r"`X`", r"must be finite", r"X\[0, 'v100'\] is nan"),
    C("plan_round", "X-rows", lambda t: hs.plan_round(np.array([[1.5, 0.0]]), None, CLUSTER, scale_factors=[1],
                                                    gpu_types=["v100", "k80"]),
      ValidationError, r"`X` rows", r"sum to at most 1", r"job 0 sums to 1\.5"),
    C("plan_round", "scale-factors", lambda t: hs.plan_round(np.array([[0.5, 0.0]]), None, CLUSTER, scale_factors=[0],
                                                           gpu_types=["v100", "k80"]),
      ValidationError, r"`scale_factors`", r"positive integers", r"job 0 has 0"),
    C("plan_round", "round-seconds", lambda t: hs.plan_round(alloc(), None, CLUSTER, jobs=JOBS, round_seconds=-5),
      ValidationError, r"`round_seconds`", r"positive finite number of seconds", r"-5"),
    C("plan_round", "rule", lambda t: hs.plan_round(alloc(), None, CLUSTER, jobs=JOBS, rule="lottery"),
      ValidationError, r"`rule`", r"one of \['gavel', 'deficit'\]", r"'lottery'"),
    C("plan_round", "stickiness", lambda t: hs.plan_round(alloc(), None, CLUSTER, jobs=JOBS, stickiness=-1.0),
      ValidationError, r"`stickiness`", r"finite number >= 0", r"-1\.0"),
    C("plan_round", "work-conserving", lambda t: hs.plan_round(alloc(), None, CLUSTER, jobs=JOBS, work_conserving="no"),
      ValidationError, r"`work_conserving`", r"True or False", r"'no'"),
    C("plan_round", "option-known", lambda t: hs.plan_round(alloc(), None, CLUSTER, jobs=JOBS, stickyness=1.0),
      ValidationError, r"`options` of plan_round", r"must be among \[.*'stickiness'", r"\['stickyness'\]"),
    # ---------------------------------------------------------------- hs.place / hs.place_plan
    C("place", "cluster-type", lambda t: hs.place({"v100": 8}, ["a"], ["v100"], [1]),
      ValidationError, r"`cluster`", r"Cluster or a Topology", r"dict"),
    C("place", "topology", lambda t: hs.place(CLUSTER, ["a"], ["v100"], [1]),
      ValidationError, r"`cluster`", r"has no server topology", r"Cluster\.from_servers"),
    C("place", "num-gpus", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1.5]),
      ValidationError, r"`num_gpus`", r"positive integers; job 'a' has", r"1\.5"),
    C("place", "gpu-type-known", lambda t: hs.place(SERVERS, ["a"], ["p100"], [1]),
      ValidationError, r"`gpu_types`", r"unknown GPU types", r"\['p100'\]"),
    C("place", "lengths", lambda t: hs.place(SERVERS, ["a", "b"], ["v100"], [1]),
      ValidationError, r"`gpu_types`", r"must have shape \(2,\) like `job_ids`", r"\(1,\)"),
    C("place", "ids-unique", lambda t: hs.place(SERVERS, ["a", "a"], ["v100"] * 2, [1, 1]),
      ValidationError, r"`job_ids`", r"must be unique", r"\['a'\]"),
    C("place", "waiting", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], waiting=[-1.0]),
      ValidationError, r"`waiting`", r"finite and non-negative; job 'a' is", r"-1\.0"),
    C("place", "solver", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], solver="gurobi"),
      ValidationError, r"`solver`", r"one of \['networkx', 'ortools'\]", r"'gurobi'"),
    C("place", "order", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], order="random"),
      ValidationError, r"`order`", r"one of \['best_fit', 'arbitrary'\]", r"'random'"),
    C("place", "costs", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], costs={"migration": 1}),
      ValidationError, r"`costs`", r"must be a PlacementCosts", r"dict"),
    C("place", "split-bool", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], split_large_jobs="yes"),
      ValidationError, r"`split_large_jobs`", r"must be True or False", r"'yes'"),
    C("place", "overcommit-bool", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], allow_overcommit=1),  # was accepted
      ValidationError, r"`allow_overcommit`", r"must be True or False", r"got 1"),
    C("place", "backfill-bool", lambda t: hs.place(SERVERS, ["a"], ["v100"], [1], backfill=None),  # was accepted
      ValidationError, r"`backfill`", r"must be True or False", r"None"),
    C("place_plan", "plan-fields", lambda t: hs.place_plan(SERVERS, {"gpu_types": ["v100"]}),
      ValidationError, r"`plan`", r"must have job_ids, gpu_types, assignment and scale_factors", r"missing 'job_ids'"),
    # ---------------------------------------------------------------- hs.simulate / SimOptions
    C("simulate", "workload-type", lambda t: hs.simulate("fifo", 5, CLUSTER),
      ValidationError, r"`workload`", r"must be a hetsched\.sim\.Trace, a JobSet", r"int"),
    C("simulate", "scheduler-type", lambda t: hs.simulate(3, hs.generate_workload(2, rate_per_hour=1.0), CLUSTER),
      ValidationError, r"`scheduler`", r"policy name, a hetsched\.policies object or a round scheduler", r"int"),
    C("simulate", "cluster-type", lambda t: hs.simulate("fifo", hs.generate_workload(2, rate_per_hour=1.0), {"v100": 1}),
      ValidationError, r"`cluster`", r"must be a hetsched\.Cluster", r"dict"),
    C("simulate", "options-type", lambda t: hs.simulate("fifo", hs.generate_workload(2, rate_per_hour=1.0), CLUSTER,
                                                       options={"round_seconds": 60}),
      ValidationError, r"`options`", r"SimOptions or None", r"dict"),
    C("simulate", "option-known", lambda t: hs.simulate("fifo", hs.generate_workload(2, rate_per_hour=1.0), CLUSTER,
                                                       round_secs=60),
      ValidationError, r"simulation option", r"unknown .*valid: \[.*'round_seconds'", r"\['round_secs'\]"),
    C("SimOptions", "round-seconds", lambda t: hs.SimOptions(round_seconds=math.nan),
      ValidationError, r"`round_seconds`", r"positive finite number of seconds", r"nan"),
    C("SimOptions", "mechanism", lambda t: hs.SimOptions(mechanism="fluid"),
      ValidationError, r"`mechanism`", r"one of \['rounds', 'ideal'\]", r"'fluid'"),
    C("SimOptions", "placement-bool", lambda t: hs.SimOptions(placement="yes"),
      ValidationError, r"`placement`", r"True or False", r"'yes'"),
    C("SimOptions", "reallocate", lambda t: hs.SimOptions(reallocate="sometimes"),
      ValidationError, r"`reallocate`", r"'on_change' or a positive number of seconds", r"'sometimes'"),
    C("SimOptions", "window-pair", lambda t: hs.SimOptions(window=(1,)),  # was checked only when a run started
      ValidationError, r"`window`", r"must be a pair \(start, end\)", r"\(1,\)"),
    C("SimOptions", "window-order", lambda t: hs.SimOptions(window=(5, 2)),
      ValidationError, r"`window`", r"0 <= start < end", r"\(5, 2\)"),
    C("SimOptions", "progress", lambda t: hs.SimOptions(progress="yes"),  # was accepted
      ValidationError, r"`progress`", r"None, True, False, 'auto' or a callable", r"'yes'"),
    C("SimOptions", "window-unit", lambda t: hs.SimOptions(window_unit="days"),
      ValidationError, r"`window_unit`", r"one of \['jobs', 'seconds'\]", r"'days'"),
    C("SimOptions", "seed", lambda t: hs.SimOptions(seed=1.5),
      ValidationError, r"`seed`", r"non-negative int", r"1\.5"),
    C("SimOptions", "max-time", lambda t: hs.SimOptions(max_time=-1),
      ValidationError, r"`max_time`", r"positive finite number of seconds", r"-1"),
    C("SimOptions", "solve-time-limit", lambda t: hs.SimOptions(solve_time_limit=-1.0),  # was accepted
      ValidationError, r"`solve_time_limit`", r"positive finite number of seconds", r"-1\.0"),
    C("SimOptions", "stickiness", lambda t: hs.SimOptions(stickiness=-1.0),  # was accepted (failed mid-run)
      ValidationError, r"`stickiness`", r"finite number >= 0", r"-1\.0"),
    C("SimOptions", "solver-options", lambda t: hs.SimOptions(solver_options=[("tol", 1)]),  # was accepted
      ValidationError, r"`solver_options`", r"mapping or None", r"list"),
    C("SimOptions", "gpus-per-server", lambda t: hs.SimOptions(gpus_per_server=0),
      ValidationError, r"`gpus_per_server`", r"positive integer", r"0"),
    C("SimOptions", "restart-seconds", lambda t: hs.SimOptions(restart_seconds=-1),
      ValidationError, r"`restart_seconds`", r"finite number of seconds >= 0", r"-1"),
    C("SimOptions", "arrivals", lambda t: hs.SimOptions(arrivals="queue"),
      ValidationError, r"`arrivals`", r"one of \['carve', 'wait'\]", r"'queue'"),
    C("SimOptions", "report-noise", lambda t: hs.SimOptions(report_noise=-0.5),
      ValidationError, r"`report_noise`", r"finite number >= 0", r"-0\.5"),
    C("SimOptions", "record-runs-bool", lambda t: hs.SimOptions(record_runs=1),
      ValidationError, r"`record_runs`", r"True or False", r"1"),
    C("SimOptions", "preset", lambda t: hs.SimOptions.preset("themis"),
      ValidationError, r"`preset`", r"one of \['gavel', 'hetsched'\]", r"'themis'"),
    C("generate_workload", "n-jobs", lambda t: hs.generate_workload(-1, rate_per_hour=1.0),
      ValidationError, r"`n_jobs`", r"non-negative integer", r"-1"),
    C("generate_workload", "rate", lambda t: hs.generate_workload(3, rate_per_hour=0.0),
      ValidationError, r"`rate_per_hour`", r"positive finite number", r"0\.0"),
    C("generate_workload", "long-job-prob", lambda t: hs.generate_workload(3, rate_per_hour=1.0, long_job_prob=2.0),
      ValidationError, r"`long_job_prob`", r"probability in \[0, 1\]", r"2\.0"),
    # ---------------------------------------------------------------- trace readers
    C("readers", "gavel-path", lambda t: R.read_gavel_trace(t / "none.trace", t / "none.json"),
      ValidationError, r"`path`", r"existing local file", r"none\.trace"),
    C("readers", "gavel-errors", lambda t: R.read_gavel_trace(write(t, "a.trace", ""), write(t, "a.json", "{}"),
                                                            errors="ignore"),
      ValidationError, r"`errors`", r"one of \['drop', 'skip', 'raise'\]", r"'ignore'"),
    C("readers", "gavel-throughputs-path", lambda t: R.load_gavel_throughputs(t / "none.json"),
      ValidationError, r"`path`", r"existing file", r"none\.json"),
    C("readers", "gavel-cluster-specs-path", lambda t: R.read_gavel_cluster_specs(t / "none.csv"),
      ValidationError, r"`path`", r"existing local file", r"none\.csv"),
    C("readers", "helios-header", lambda t: R.read_helios_trace(write(t, "h.csv", "a,b\n1,2\n")),
      ValidationError, r"h\.csv: line 1", r"header must name \['job_id', 'gpu_num'", r"got \['a', 'b'\]"),
    C("readers", "philly-json", lambda t: R.read_philly_trace(write(t, "p.json", "x\n")),
      ValidationError, r"p\.json", r"must hold valid JSON", r"line 1 column 1"),
    C("readers", "philly-statuses", lambda t: R.read_philly_trace(write(t, "p.json", "[]"), statuses=3),
      ValidationError, r"`statuses`", r"string, a non-empty sequence of strings or None", r"3"),
    C("readers", "philly-on-bad-rows", lambda t: R.read_philly_trace(write(t, "p.json", "[]"), on_bad_rows=None),
      ValidationError, r"`on_bad_rows`", r"one of \['raise', 'skip'\]", r"None"),
    C("readers", "pai-task-path", lambda t: R.read_pai_trace(write(t, "j.csv", "a\n"), t / "none.csv"),
      ValidationError, r"`task_path`", r"existing local file", r"none\.csv"),
    C("readers", "load-trace-option", lambda t: hs.load_trace(write(t, "p.json", "[]"), format="philly", bogus=1),
      ValidationError, r"`load_trace` options for format 'philly'", r"must be among \['sort', 'statuses', 'vc'\]",
      r"\['bogus'\]"),  # was a raw TypeError
    C("readers", "philly-sort-bool", lambda t: R.read_philly_trace(write(t, "p.json", "[]"), sort="yes"),
      ValidationError, r"`sort`", r"must be True or False", r"'yes'"),  # was accepted
    C("readers", "load-trace-format", lambda t: hs.load_trace(write(t, "x.csv", "a\n"), format="slurm"),
      ValidationError, r"`format`", r"one of \['gavel', 'philly', 'helios', 'pai'\]", r"'slurm'"),
    C("readers", "load-trace-throughputs", lambda t: hs.load_trace(write(t, "x.trace", ""), format="gavel"),
      ValidationError, r"`throughputs`", r"a Gavel trace needs", r"throughput JSON"),
    C("readers", "load-trace-seed", lambda t: hs.load_trace(write(t, "p.json", "[]"), format="philly", seed=-1),
      ValidationError, r"`seed`", r"non-negative int", r"-1"),
    # ---------------------------------------------------------------- hs.sweep
    C("sweep", "max-workers", lambda t: hs.sweep({"policy": ["fifo"]}, max_workers=0),  # was accepted
      ValidationError, r"`max_workers`", r"positive integer or None", r"got 0"),
    C("sweep", "progress", lambda t: hs.sweep({"policy": ["fifo"]}, progress=5),  # was accepted
      ValidationError, r"`progress`", r"None, True, False or a callable", r"got 5"),
    C("sweep", "grid-mapping", lambda t: hs.sweep([("policy", "fifo")]),
      ValidationError, r"`grid`", r"mapping of parameter -> value or list of values", r"list"),
    C("sweep", "grid-keys", lambda t: hs.sweep({"polcy": ["fifo"]}),
      ValidationError, r"`grid`", r"unknown keys .*known: \[", r"\['polcy'\]"),
    C("sweep", "grid-cluster", lambda t: hs.sweep({"policy": ["fifo"]}),
      ValidationError, r"`grid`", r"must give", r"'cluster'"),
    C("sweep", "executor", lambda t: hs.sweep({"policy": ["fifo"], "cluster": [CLUSTER], "load": [1.0], "n_jobs": [2]},
                                              executor="pool"),
      ValidationError, r"`executor`", r"concurrent\.futures\.Executor or None", r"str"),
    # ---------------------------------------------------------------- policy constructors (not in test_policy_params.BAD)
    C("policies", "water-filling-rise-tol", lambda t: P.MaxMinFairnessWaterFilling(rise_tol=math.nan),
      ValidationError, r"`rise_tol`", r"number in \(0, 1\)", r"nan"),
    C("policies", "water-filling-slack-cap", lambda t: P.MaxMinFairnessWaterFilling(slack_cap=2.0),
      ValidationError, r"`slack_cap`", r"number in \(0, 1\]", r"2\.0"),
    C("policies", "water-filling-order", lambda t: P.MaxMinFairnessWaterFilling(rise_tol=0.5, slack_cap=0.1),
      ValidationError, r"`rise_tol`", r"smaller than `slack_cap` \(0\.1\)", r"0\.5"),
    C("policies", "water-filling-max-lps", lambda t: P.MaxMinFairnessWaterFilling(max_lps=0),
      ValidationError, r"`max_lps`", r"positive integer", r"got 0"),
    C("policies", "water-filling-aware", lambda t: P.MaxMinFairnessWaterFilling(heterogeneity_aware=None),
      ValidationError, r"`heterogeneity_aware`", r"True or False", r"None"),
    C("policies", "hierarchical-intra", lambda t: P.HierarchicalMaxMinFairness(intra="lottery"),
      ValidationError, r"`intra`", r"'fairness' or 'fifo'", r"'lottery'"),
    C("policies", "hierarchical-weight", lambda t: P.HierarchicalMaxMinFairness(entity_weights={"u": 0.0}),
      ValidationError, r"`entity_weights\['u'\]`", r"positive number", r"0\.0"),
    C("policies", "hierarchical-weights-mapping", lambda t: P.HierarchicalMaxMinFairness(entity_weights=[1.0]),
      ValidationError, r"`entity_weights`", r"mapping entity -> positive weight or None", r"list"),
    C("policies", "hierarchical-aware", lambda t: P.HierarchicalMaxMinFairness(heterogeneity_aware="yes"),
      ValidationError, r"`heterogeneity_aware`", r"True or False", r"'yes'"),
    # ---------------------------------------------------------------- hs.Partitioned
    C("Partitioned", "k", lambda t: hs.Partitioned(policy="max_min_fairness", k=0),
      ValidationError, r"`k`", r"positive integer", r"got 0"),
    C("Partitioned", "k-bool", lambda t: hs.Partitioned(policy="max_min_fairness", k=True),
      ValidationError, r"`k`", r"positive integer", r"True"),
    C("Partitioned", "seed", lambda t: hs.Partitioned(policy="max_min_fairness", k=2, seed=-1),
      ValidationError, r"`seed`", r"non-negative integer", r"-1"),
    C("Partitioned", "aggregate", lambda t: hs.Partitioned(policy="max_min_fairness", k=2, aggregate="no"),
      ValidationError, r"`aggregate`", r"True or False", r"'no'"),
    C("Partitioned", "executor", lambda t: hs.Partitioned(policy="max_min_fairness", k=2, executor="pool"),
      ValidationError, r"`executor`", r"concurrent\.futures\.Executor or None", r"str"),
    C("Partitioned", "policy", lambda t: hs.Partitioned(policy=3, k=2),
      ValidationError, r"`policy`", r"policy name \(str\) or a hetsched\.policies object", r"int"),
    # ---------------------------------------------------------------- python -m hetsched (exit 2, one line)
    C("cli", "policy", lambda t: cli("solve", "--policy", "fairest"),
      CliExit, r"`policy`", r"not a known policy", r"'fairest'"),
    C("cli", "jobs", lambda t: cli("solve", "--jobs", "-3"),
      CliExit, r"`--jobs`", r"non-negative integer", r"-3"),
    C("cli", "jobs-int", lambda t: cli("solve", "--jobs", "many"),
      CliExit, r"--jobs", r"invalid int value", r"'many'"),
    C("cli", "cluster", lambda t: cli("solve", "--cluster", "v100=x"),
      CliExit, r"`--cluster`", r"TYPE=COUNT,\.\.\. with non-negative integer counts", r"'v100=x'"),
    C("cli", "time-limit", lambda t: cli("solve", "--time-limit", "-1"),
      CliExit, r"`time_limit`", r"positive finite number of seconds", r"-1"),
    C("cli", "param", lambda t: cli("solve", "--param", "second_stage=maybe"),
      CliExit, r"`second_stage`", r"True or False", r"'maybe'"),
    C("cli", "solver", lambda t: cli("solve", "--solver", "gurobi"),
      CliExit, r"`solver`", r"not an installed backend", r"'gurobi'"),
    C("cli", "rate", lambda t: cli("simulate", "--rate", "0"),
      CliExit, r"`rate_per_hour`", r"positive finite number", r"0\.0"),
    C("cli", "long-job-prob", lambda t: cli("solve", "--long-job-prob", "3"),
      CliExit, r"`long_job_prob`", r"probability in \[0, 1\]", r"3\.0"),
    C("cli", "round-seconds", lambda t: cli("simulate", "--round-seconds", "0"),
      CliExit, r"`round_seconds`", r"positive finite number of seconds", r"0\.0"),
    C("cli", "loads", lambda t: cli("sweep", "--loads", "abc"),
      CliExit, r"`--loads`", r"comma-separated list of floats", r"'abc'"),
    C("cli", "command", lambda t: cli("solv"),
      CliExit, r"argument command|invalid choice", r"invalid choice", r"'solv'"),
]

CATALOGUE_SIZE = len(CASES)
ENTRY_POINTS = sorted({c.entry for c in CASES})


@pytest.mark.parametrize("case", CASES, ids=[f"{c.entry}:{c.name}" for c in CASES])
def test_bad_input_is_refused_with_argument_rule_and_value(case: Case, tmp_path: Path) -> None:
    with pytest.raises(case.error) as info:
        case.call(tmp_path)
    message = str(info.value)
    for part, pattern in (("argument", case.argument), ("rule", case.rule), ("value", case.value)):
        assert re.search(pattern, message), f"message does not name the {part} ({pattern!r}): {message}"
    if case.error is CliExit:
        assert message.startswith("exit 2: ") and "Traceback" not in message, message
    else:
        assert "Traceback" not in message


def test_catalogue_covers_every_entry_point() -> None:
    assert ENTRY_POINTS == sorted([
        "Cluster", "Cluster.from_servers", "JobSet", "Partitioned", "SimOptions", "cli", "generate_workload",
        "place", "place_plan", "plan_round", "policies", "readers", "simulate", "solve", "sweep",
    ])
    assert len({(c.entry, c.name) for c in CASES}) == CATALOGUE_SIZE  # ids are unique
