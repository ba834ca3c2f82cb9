"""TOML experiment files (stdlib ``tomllib``): one simulation or a sweep, declared as data.

Example (``fig8.toml``)::

    name = "fig8"

    [cluster]                  # GPU counts; optional gpus_per_server / servers_per_rack
    v100 = 36
    p100 = 36
    k80 = 36

    [workload]                 # kind: generated | gavel | philly | helios | pai
    kind = "generated"
    n_jobs = 1500
    load = [1.0, 2.0, 3.0]     # jobs/hour; a list is a sweep axis
    # throughputs = "../shared/data/gavel/simulation_throughputs.json"
    # missing = "zero"         # a row some GPU type of `throughputs` lacks: "raise" (default) or "zero"

    [simulation]               # any field of hetsched.SimOptions, or preset
    round_seconds = 360
    window = [500, 1000]
    seed = [0, 1]

    [policies]                 # label = name, or a table with name and parameters
    aware = "max_min_fairness"
    agnostic = { name = "max_min_fairness", heterogeneity_aware = false }

Relative paths are resolved against the file's directory.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ..formulations.base import Policy, make_policy
from ..inputs.cluster import Cluster
from ..inputs.throughputs import load_gavel_throughputs
from ..inputs.trace import generate_workload
from ..inputs.traces.readers import load_trace
from .options import make_options
from .simulator import simulate
from .sweep import expand_grid, sweep

__all__ = ["ExperimentConfig", "load_config", "run_config"]

_WORKLOAD_KINDS = ("generated", "gavel", "philly", "helios", "pai")


@dataclass(frozen=True)
class ExperimentConfig:
    """An experiment read from TOML.

    Attributes
    ----------
    name : str
    cluster : Cluster
    policies : dict
        Label -> Policy.
    workload : dict
        The ``[workload]`` table (paths resolved).
    simulation : dict
        The ``[simulation]`` table.
    source : str
        The file it came from.
    """

    name: str
    cluster: Cluster
    policies: dict[str, Policy]
    workload: dict[str, Any]
    simulation: dict[str, Any]
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    def grid(self) -> dict[str, Any]:
        """The sweep grid (see :func:`hetsched.sim.sweep`) this experiment describes."""
        g: dict[str, Any] = {"policy": dict(self.policies), "cluster": self.cluster}
        sim = dict(self.simulation)
        for k, v in sim.items():
            g[k] = tuple(v) if k == "window" and isinstance(v, list) else v
        w = dict(self.workload)
        kind = w.pop("kind", "generated")
        missing = w.pop("missing", None)
        if missing is not None:
            if "throughputs" not in w:
                raise ValidationError(f"{self.source}: [workload] `missing` ({missing!r}) applies to its "
                                      "`throughputs` table, which is not given.")
            # read here, so that the rule applies to a generated workload and to a trace alike
            w["throughputs"] = load_gavel_throughputs(w["throughputs"], missing=missing)
        if kind == "generated":
            if "load" not in w and "rate_per_hour" in w:
                w["load"] = w.pop("rate_per_hour")
            if "throughputs" in w:
                table = w.pop("throughputs")
                w["catalogue"] = table if missing is not None else load_gavel_throughputs(table)
            if isinstance(w.get("scale_factor_probs"), Mapping):
                w["scale_factor_probs"] = {int(k): float(v) for k, v in w["scale_factor_probs"].items()}
            g.update(w)
        else:
            path = w.pop("path", None)
            if path is None:
                raise ValidationError(f"{self.source}: [workload] of kind {kind!r} needs `path`.")
            seed = sim.get("seed", 0)
            seed0 = seed[0] if isinstance(seed, list) else seed
            g["workload"] = load_trace(path, kind, seed=int(seed0), cluster=self.cluster, **w)
        return g

    @property
    def n_runs(self) -> int:
        """Number of runs the grid expands to."""
        return len(expand_grid(self.grid()))


def _resolve(base: Path, value: Any) -> Any:
    if isinstance(value, str) and value:
        p = Path(value)
        return str(p if p.is_absolute() else (base / p))
    return value


def _policy(label: str, spec: Any, source: str) -> Policy:
    if isinstance(spec, str):
        return make_policy(spec)
    if isinstance(spec, Mapping):
        spec = dict(spec)
        name = spec.pop("name", None)
        if not isinstance(name, str):
            raise ValidationError(f"{source}: [policies] {label!r} needs `name` (a registered policy); got {name!r}.")
        try:
            return make_policy(name, **spec)
        except ValidationError as exc:
            raise type(exc)(f"{source}: [policies] {label!r}: {exc}") from None
    raise ValidationError(f"{source}: [policies] {label!r} must be a policy name or a table with `name`; got {spec!r}.")


def load_config(path: str | Path) -> ExperimentConfig:
    """Read a TOML experiment file.

    Raises
    ------
    ValidationError
        Missing file, invalid TOML, missing ``[cluster]``, no policy, an unknown workload
        kind or policy parameter (the message names the file and the table).
    """
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"`path` must be an existing TOML file; got {str(p)!r}.")
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"{p}: invalid TOML: {exc}.") from None
    base = p.parent
    src = str(p)
    known = {"name", "cluster", "workload", "simulation", "policies", "policy"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValidationError(f"{src}: unknown top-level keys/tables {unknown}; known: {sorted(known)}.")
    if "cluster" not in raw or not isinstance(raw["cluster"], Mapping):
        raise ValidationError(f"{src}: needs a [cluster] table of GPU type = count.")
    cl = dict(raw["cluster"])
    gps = cl.pop("gpus_per_server", None)
    spr = cl.pop("servers_per_rack", None)
    cluster = Cluster(cl) if gps is None else Cluster.from_servers(cl, gpus_per_server=gps, servers_per_rack=spr)
    policies: dict[str, Policy] = {}
    if "policies" in raw:
        if not isinstance(raw["policies"], Mapping) or not raw["policies"]:
            raise ValidationError(f"{src}: [policies] must map labels to policies.")
        for label, spec in raw["policies"].items():
            policies[str(label)] = _policy(str(label), spec, src)
    if "policy" in raw:
        names = raw["policy"] if isinstance(raw["policy"], list) else [raw["policy"]]
        for nm in names:
            pol = make_policy(nm)
            policies[str(nm)] = pol
    if not policies:
        raise ValidationError(f"{src}: name at least one policy (`policy = \"max_min_fairness\"` or a [policies] table).")
    workload = dict(raw.get("workload", {}))
    kind = workload.get("kind", "generated")
    if kind not in _WORKLOAD_KINDS:
        raise ValidationError(f"{src}: [workload] kind must be one of {list(_WORKLOAD_KINDS)}; got {kind!r}.")
    for key in ("path", "task_path", "throughputs"):
        if key in workload:
            workload[key] = _resolve(base, workload[key])
    simulation = dict(raw.get("simulation", {}))
    return ExperimentConfig(name=str(raw.get("name", p.stem)), cluster=cluster, policies=policies,
                            workload=workload, simulation=simulation, source=src, raw=raw)


def run_config(config: ExperimentConfig | str | Path, executor: Any = None, *, max_workers: int | None = None,
               progress: Any = None):
    """Run an experiment: a :class:`SimulationResult` for one run, a sweep DataFrame for several.

    Parameters
    ----------
    config : ExperimentConfig or path
    executor, max_workers, progress
        As for :func:`hetsched.sim.sweep` (``progress`` also goes to a single simulation).
    """
    cfg = config if isinstance(config, ExperimentConfig) else load_config(config)
    grid = cfg.grid()
    runs = expand_grid(grid)
    if len(runs) == 1:
        params = dict(runs[0]["params"])
        seed = int(params.pop("seed", 0))
        policy = params.pop("policy")
        cluster = params.pop("cluster")
        if "workload" in params:
            workload = params.pop("workload")
            params.pop("load", None)
            params.pop("n_jobs", None)
        else:
            gen_kw = {k: params.pop(k) for k in ("scale_factor_probs", "long_job_prob", "catalogue", "gpu_types",
                                                 "slo_factors", "reference_gpu_type") if k in params}
            workload = generate_workload(int(params.pop("n_jobs")), rate_per_hour=float(params.pop("load")),
                                         seed=seed, cluster=cluster, **gen_kw)
        opts = make_options(preset=params.pop("preset", None), seed=seed, progress=progress, **params)
        return simulate(policy, workload, cluster, options=opts)
    return sweep(grid, executor, max_workers=max_workers, progress=progress)
