"""Sia's (SOSP'23) measured per-model profiles: the simulated truth of adaptive jobs.

The Sia artifact (``siasosp23/artifacts``, folder ``sia-simulator/``, built on Pollux's
OSDI'21 artifact) publishes, per model and per machine, the measured time of one training
step and of its gradient synchronisation for per-GPU ("local" / "atomic") batch sizes and
placements, and, per model, training runs at several total batch sizes with the gradient
statistics that give Pollux's statistical efficiency. This module reads those files from a
local copy (nothing is downloaded, nothing is shipped) and answers what a simulator needs:

* :class:`MachineProfile` — one model on one machine (= one GPU type): step and sync time
  for (nodes, replicas, per-GPU batch), interpolated the way the artifact's simulator reads
  the tables (see :meth:`MachineProfile.placement_times`);
* :class:`ModelProfile` — one model: its machines, its validation runs, the epoch
  boundaries, the gradient statistics and the *true* progress rate of a configuration;
* :func:`load_model_profile`, :func:`load_sia_profiles` — the readers;
  :func:`sia_data_path` — where the data is looked for.

Layout of the data folder (``$HETSCHED_SIA_DATA`` or ``../shared/data/sia`` beside a source
checkout)::

    profiles/MODEL/placements-SUFFIX.csv   placement, local_bsz, step_time, sync_time
    profiles/MODEL/scalability-SUFFIX.csv  local_bsz, step_time, sync_time, num_nodes, num_replicas
    profiles/MODEL/validation-BATCH.csv    progress, iteration, metric, grad_sqr, grad_var

(the artifact's own ``traces/`` folder is accepted in place of ``profiles/``). The suffix
names the machine (:data:`SIA_MACHINE_SUFFIXES`); no suffix is the same as ``aws``.

Units. Times are seconds. ``progress`` is Pollux's statistically-adjusted progress: it
counts iterations at the model's initial (smallest validated) batch size, so one iteration
at batch ``M`` advances it by the statistical-efficiency *gain* (not by ``M``); a progress
rate is progress per second.

Decisions (where the artifact leaves a choice):

* **GPUs per node** come from the machine, by suffix (:data:`SIA_GPUS_PER_NODE`: 4 for
  ``aws``, ``quad`` and no suffix, 8 for the others), as the data's README lists them; for
  a suffix not in that table, the largest single-node placement in the data. A file whose
  placements put more replicas on a node than that is refused.
* **Placement of (nodes, replicas)** (:meth:`MachineProfile.placement_of`): callers give
  counts, not per-node layouts, so the layout is the compact one — full nodes first, then
  the remainder (6 replicas on 4-GPU nodes: ``(4, 2)``) — when the node count is the
  smallest that fits, and the even split (``divmod``) when the job is spread over more
  nodes. A layout is normalised by dropping zero counts and taking the lexicographically
  smallest rotation (``(4, 2)`` -> ``"24"``), in queries and in the tables alike.
* **gpt_pmp** has profiles only for ``rtx`` and ``dgx-ext`` (no T4 file) and is in no
  workload; its tables are synthetic and mostly have ``sync_time > step_time``, so with
  gradient accumulation the formula of :meth:`ModelProfile.progress_rate` can give a
  non-positive iteration time, which raises. It loads with ``machines`` naming only rtx
  and a100; :func:`load_sia_profiles` with the paper's machines leaves it out.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError, show
from ..validation import check_mapping, check_names, check_nonempty_str
from .data_paths import locate_data

__all__ = [
    "SIA_CALIBRATION",
    "SIA_DATA_ENV",
    "SIA_DEFAULT_CALIBRATION",
    "SIA_DEFAULT_RESTART_SECONDS",
    "SIA_GPUS_PER_NODE",
    "SIA_MACHINES",
    "SIA_MACHINE_SUFFIXES",
    "SIA_MAX_EPOCHS",
    "SIA_RESTART_SECONDS",
    "MachineProfile",
    "ModelProfile",
    "load_model_profile",
    "load_sia_profiles",
    "sia_data_path",
    "sia_model_names",
]

#: Machine suffix per hetsched GPU type for the paper's cluster (Sia §4.3): 6x4 T4 (AWS),
#: 3x8 RTX 2080 Ti, 2x8 A100 (the DGX profile with extended batch sizes).
SIA_MACHINES: Mapping[str, str] = MappingProxyType({"t4": "aws", "rtx": "rtx", "a100": "dgx-ext"})
#: Every machine of the artifact, by the GPU type name hetsched gives it.
SIA_MACHINE_SUFFIXES: Mapping[str, str] = MappingProxyType({
    "t4": "aws", "rtx": "rtx", "a100": "dgx-ext", "v100": "azure", "quadro": "quad", "a100-dgx": "dgx",
})
#: GPUs per node of each machine suffix ("" = no suffix, the same machine as ``aws``).
SIA_GPUS_PER_NODE: Mapping[str, int] = MappingProxyType({
    "aws": 4, "quad": 4, "": 4, "rtx": 8, "dgx-ext": 8, "dgx": 8, "azure": 8,
})
#: Epochs after which a job of the model ends (the artifact's ``applications.py``).
SIA_MAX_EPOCHS: Mapping[str, int] = MappingProxyType({
    "bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50, "gpt_pmp": 2,
})
#: Seconds a (re)allocation holds the GPUs without progress (checkpoint-restore), per model.
SIA_RESTART_SECONDS: Mapping[str, float] = MappingProxyType({
    "cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0, "imagenet": 250.0, "ncf": 15.0,
})
#: Restart seconds of a model not in :data:`SIA_RESTART_SECONDS`.
SIA_DEFAULT_RESTART_SECONDS = 30.0
#: Progress-rate calibration factor of Sia's simulator, per model.
SIA_CALIBRATION: Mapping[str, float] = MappingProxyType({"cifar10": 1 / 1.8})
#: Calibration factor of a model not in :data:`SIA_CALIBRATION`.
SIA_DEFAULT_CALIBRATION = 1 / 1.2
#: Environment variable naming the data folder (the one holding ``profiles/``).
SIA_DATA_ENV = "HETSCHED_SIA_DATA"

#: The 3-D interpolation caps the node count here, as the artifact's simulator does.
_MAX_INTERP_NODES = 16
_CHECKOUT_RELATIVE = Path("..") / "shared" / "data" / "sia"
_PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY_COLUMNS = ("local_bsz", "step_time", "sync_time", "num_nodes", "num_replicas")
_VALIDATION_COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
_VALIDATION_NAME = re.compile(r"^validation-(.*)\.csv$")


# ------------------------------------------------------------------------------ locating the data
def sia_data_path(path: str | Path | None = None) -> Path:
    """Locate the folder of Sia's published profiles (the one holding ``profiles/``).

    Looked for, in order: ``path`` when given (then nothing else); the environment variable
    ``HETSCHED_SIA_DATA``; ``../shared/data/sia`` beside the root of a source checkout of
    hetsched (the directory holding ``pyproject.toml``). A candidate counts when it is a
    directory holding ``profiles/`` (or the artifact's own ``traces/``).

    Raises
    ------
    DataNotFoundError
        No candidate holds the profiles; the message lists every place tried.
    """
    if path is not None and not isinstance(path, (str, Path)):
        raise ValidationError(f"`path` must be a local folder path; got {type(path).__name__}.")

    def accept(cand: Path) -> str | None:
        if cand.is_dir() and ((cand / "profiles").is_dir() or (cand / "traces").is_dir()):
            return None
        return "no profiles/ folder in it" if cand.is_dir() else "not a folder"

    return locate_data(path, env=SIA_DATA_ENV, checkout_relative=_CHECKOUT_RELATIVE, accept=accept,
                       what="Sia's published job profiles (the folder holding profiles/MODEL/placements-*.csv, from "
                            "github.com/siasosp23/artifacts, sia-simulator/traces)")


def _profiles_dir(root: Path) -> Path:
    return root / "profiles" if (root / "profiles").is_dir() else root / "traces"


def _model_dirs(profiles: Path) -> list[str]:
    return sorted(p.name for p in profiles.iterdir() if p.is_dir() and not p.name.startswith("."))


def _file_name(kind: str, suffix: str) -> str:
    return f"{kind}-{suffix}.csv" if suffix else f"{kind}.csv"


# ------------------------------------------------------------------------------ CSV reading
def _read_csv(path: Path, columns: tuple[str, ...]) -> tuple[list[int], dict[str, list[str]]]:
    """Line numbers and the named columns (as text) of a CSV file with a header line.

    Blank lines are skipped (their line numbers are kept for the others); a record with a
    number of cells other than the header's, a missing column, an unreadable file: errors
    naming the file (and line / column)."""
    if not path.is_file():
        raise ValidationError(f"{path}: the file does not exist.")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: is not valid UTF-8 (byte offset {exc.start}).") from None
    except OSError as exc:
        raise ValidationError(f"{path}: cannot be read ({exc}).") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    lines: list[int] = []
    rows: list[list[str]] = []
    try:
        for rec in reader:
            if not rec or all(not c.strip() for c in rec):
                continue
            if header is None:
                header = [c.strip() for c in rec]
                continue
            if len(rec) != len(header):
                raise ValidationError(
                    f"{path}: line {reader.line_num}: has {len(rec)} cells but the header has {len(header)} columns.")
            lines.append(reader.line_num)
            rows.append(rec)
    except csv.Error as exc:
        raise ValidationError(f"{path}: line {reader.line_num}: not readable as CSV ({exc}).") from None
    if header is None:
        raise ValidationError(f"{path}: the file is empty (no header line).")
    missing = [c for c in columns if c not in header]
    if missing:
        raise ValidationError(f"{path}: the header must name the column(s) {missing}; got {header}.")
    pos = {c: header.index(c) for c in columns}
    return lines, {c: [r[pos[c]].strip() for r in rows] for c in columns}


def _numbers(path: Path, lines: list[int], cells: list[str], column: str, *, rule: str,
             positive: bool = False, nonneg: bool = False, whole: bool = False) -> np.ndarray:
    """A text column as floats; the first cell breaking the rule is an error naming file,
    line, column and value."""
    vals = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals)
        if positive:
            ok &= vals > 0
        if nonneg:
            ok &= vals >= 0
        if whole:
            ok &= np.floor(vals) == vals
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        raise ValidationError(f"{path}: line {lines[i]}: column `{column}` must be {rule}; got {cells[i]!r}.")
    return vals


def _canonical(counts: Iterable[int]) -> str | None:
    """The placement key of per-node replica counts: zeros dropped, the lexicographically
    smallest rotation, one digit per node; None when a node holds more than 9 (no key)."""
    c = [int(x) for x in counts if int(x) != 0]
    if not c or any(x > 9 for x in c):
        return None
    best = min(tuple(c[i:] + c[:i]) for i in range(len(c)))
    return "".join(map(str, best))


def _read_placements(path: Path) -> pd.DataFrame:
    lines, cols = _read_csv(path, _PLACEMENT_COLUMNS)
    if not lines:
        raise ValidationError(f"{path}: has a header but no rows.")
    keys = []
    for ln, cell in zip(lines, cols["placement"]):
        digits = cell[:-2] if cell.endswith(".0") else cell  # a placement written as a float
        key = _canonical(map(int, digits)) if digits.isdigit() and digits.isascii() else None
        if key is None:
            raise ValidationError(
                f"{path}: line {ln}: column `placement` must be a string of digits (replicas per node, "
                f"at least one non-zero); got {cell!r}.")
        keys.append(key)
    bsz = _numbers(path, lines, cols["local_bsz"], "local_bsz", rule="a positive integer", positive=True, whole=True)
    step = _numbers(path, lines, cols["step_time"], "step_time", rule="a positive finite number of seconds",
                    positive=True)
    sync = _numbers(path, lines, cols["sync_time"], "sync_time", rule="a positive finite number of seconds",
                    positive=True)
    df = pd.DataFrame({
        "placement": pd.Series(keys, dtype=object), "local_bsz": bsz.astype(np.int64), "step_time": step,
        "sync_time": sync, "num_nodes": np.array([len(k) for k in keys], dtype=np.int64),
        "num_replicas": np.array([sum(map(int, k)) for k in keys], dtype=np.int64),
    })
    dup = df.duplicated(["placement", "local_bsz"], keep=False).to_numpy()
    if dup.any():
        first = np.flatnonzero(dup)
        i = int(first[0])
        same = [lines[j] for j in first if keys[j] == keys[i] and bsz[j] == bsz[i]]
        raise ValidationError(
            f"{path}: lines {same}: placement {keys[i]!r} at local_bsz {int(bsz[i])} is measured more than once.")
    df.attrs["lines"] = lines
    return df


def _read_scalability(path: Path) -> pd.DataFrame:
    lines, cols = _read_csv(path, _SCALABILITY_COLUMNS)
    out: dict[str, Any] = {}
    for c in ("num_nodes", "num_replicas", "local_bsz"):
        out[c] = _numbers(path, lines, cols[c], c, rule="a positive integer", positive=True,
                          whole=True).astype(np.int64)
    for c in ("step_time", "sync_time"):
        out[c] = _numbers(path, lines, cols[c], c, rule="a positive finite number of seconds", positive=True)
    bad = np.flatnonzero(out["num_replicas"] < out["num_nodes"])
    if bad.size:
        i = int(bad[0])
        raise ValidationError(
            f"{path}: line {lines[i]}: column `num_replicas` must be at least `num_nodes` "
            f"({out['num_nodes'][i]}); got {cols['num_replicas'][i]!r}.")
    df = pd.DataFrame(out, columns=list(_SCALABILITY_COLUMNS))
    df.attrs["lines"] = lines
    return df


def _read_validation(path: Path) -> pd.DataFrame:
    lines, cols = _read_csv(path, _VALIDATION_COLUMNS)
    if not lines:
        raise ValidationError(f"{path}: has a header but no rows.")
    prog = _numbers(path, lines, cols["progress"], "progress", rule="a positive finite number", positive=True)
    step = np.flatnonzero(np.diff(prog) <= 0)
    if step.size:
        i = int(step[0]) + 1
        raise ValidationError(
            f"{path}: line {lines[i]}: column `progress` must increase from row to row; got {cols['progress'][i]!r} "
            f"after {cols['progress'][i - 1]!r}.")
    out = {
        "progress": prog,
        "iteration": _numbers(path, lines, cols["iteration"], "iteration", rule="a finite number >= 0", nonneg=True),
        "metric": _numbers(path, lines, cols["metric"], "metric", rule="a finite number"),
        "grad_sqr": _numbers(path, lines, cols["grad_sqr"], "grad_sqr", rule="a finite number >= 0", nonneg=True),
        "grad_var": _numbers(path, lines, cols["grad_var"], "grad_var", rule="a finite number >= 0", nonneg=True),
    }
    both0 = np.flatnonzero((out["grad_sqr"] == 0) & (out["grad_var"] == 0))
    if both0.size:
        raise ValidationError(f"{path}: line {lines[int(both0[0])]}: `grad_sqr` and `grad_var` are both 0 "
                              "(the statistical efficiency is undefined).")
    return pd.DataFrame(out, columns=list(_VALIDATION_COLUMNS))


# ------------------------------------------------------------------------------ small checks
def _whole_array(value: Any, name: str, *, low: int) -> np.ndarray:
    """``value`` as an int64 array of whole numbers >= low (scalars: 0-d)."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(f"`{name}` must be an integer or an array of integers; got {value!r}.") from None
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (np.floor(arr) != arr) | (arr < low)
    if bad.any():
        v = arr[bad].flat[0]
        rule = "positive integers" if low == 1 else ("non-negative integers" if low == 0 else f"integers >= {low}")
        raise ValidationError(f"`{name}` must hold {rule}; got {show(v)}.")
    return arr.astype(np.int64)


def _positive_array(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValidationError(f"`{name}` must be a positive number or an array of them; got {value!r}.") from None
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        raise ValidationError(f"`{name}` must hold positive finite numbers; got {show(arr[bad].flat[0])}.")
    return arr


def _scalar_out(arr: np.ndarray, scalar: bool) -> Any:
    return float(arr) if scalar else arr


# ------------------------------------------------------------------------------ one machine
@dataclass(frozen=True, eq=False)
class MachineProfile:
    """One model measured on one machine (one GPU type).

    Attributes
    ----------
    model, machine : str
        The model (``"cifar10"``) and the machine suffix (``"aws"``; ``""`` for no suffix).
    gpus_per_node : int
        GPUs of one node of that machine (:data:`SIA_GPUS_PER_NODE`).
    placements : DataFrame
        ``placement`` (normalised key, str), ``local_bsz``, ``step_time``, ``sync_time``,
        ``num_nodes``, ``num_replicas``: the measured placements.
    scalability : DataFrame
        ``num_nodes``, ``num_replicas``, ``local_bsz``, ``step_time``, ``sync_time``: the
        measurements at larger spreads.
    min_local_bsz, max_local_bsz : int
        The per-GPU batch range measured (over both tables).
    """

    model: str
    machine: str
    gpus_per_node: int
    placements: pd.DataFrame = field(repr=False)
    scalability: pd.DataFrame = field(repr=False)
    min_local_bsz: int
    max_local_bsz: int
    _curves: dict = field(init=False, repr=False)
    _cache: dict = field(init=False, repr=False)
    _lazy: dict = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_nonempty_str(self.model, "model")
        if not isinstance(self.machine, str):
            raise ValidationError(f"`machine` must be a string; got {self.machine!r}.")
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, (int, np.integer)) \
                or self.gpus_per_node < 1:
            raise ValidationError(f"`gpus_per_node` must be a positive integer; got {self.gpus_per_node!r}.")
        for name, frame, cols in (("placements", self.placements, _PLACEMENT_COLUMNS + ("num_nodes", "num_replicas")),
                                  ("scalability", self.scalability, _SCALABILITY_COLUMNS)):
            if not isinstance(frame, pd.DataFrame):
                raise ValidationError(f"`{name}` must be a DataFrame; got {type(frame).__name__}.")
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise ValidationError(f"`{name}` of {self.model!r} on {self.machine!r} lacks the column(s) {missing}.")
        if len(self.placements) == 0:
            raise ValidationError(f"`placements` of {self.model!r} on {self.machine!r} has no rows.")
        curves: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for key, rows in self.placements.groupby("placement", sort=False):
            rows = rows.sort_values("local_bsz", kind="stable")
            b = rows["local_bsz"].to_numpy(dtype=float)
            if np.any(np.diff(b) <= 0):
                raise ValidationError(f"`placements` of {self.model!r} on {self.machine!r}: placement {key!r} "
                                      "measures a local_bsz more than once.")
            curves[str(key)] = (b, rows["step_time"].to_numpy(dtype=float), rows["sync_time"].to_numpy(dtype=float))
        object.__setattr__(self, "_curves", curves)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_lazy", {})

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the lazily built interpolator (rebuilt on first use)."""
        state = dict(self.__dict__)
        state["_lazy"] = {}
        return state

    # -------------------------------------------------------------- placement
    def placement_of(self, nodes: int, replicas: int) -> tuple[int, ...]:
        """The per-node replica counts hetsched assumes for ``replicas`` GPUs on ``nodes``
        nodes: full nodes first, then the remainder, when ``nodes`` is the fewest that fit;
        the most even split when the job is spread over more nodes."""
        n, k, r = int(nodes), int(replicas), int(self.gpus_per_node)
        if n < 1 or k < n or k > n * r:
            raise ValidationError(
                f"model {self.model!r} on machine {self.machine!r}: {k} replicas cannot be placed on {n} node(s) of "
                f"{r} GPUs (each node holds at least 1 replica and at most {r}).")
        if n == -(-k // r):
            return (r,) * (k // r) + ((k % r,) if k % r else ())
        q, rem = divmod(k, n)
        return (q + 1,) * rem + (q,) * (n - rem)

    def _where(self, key: Any, bsz: float) -> str:
        return f"model {self.model!r} on machine {self.machine!r}, placement {key!r}, local batch size {bsz:g}"

    def placement_times(self, placement: str | Iterable[int], atomic_bsz: float) -> tuple[float, float]:
        """(step_time, sync_time) in seconds of one placement at one per-GPU batch size.

        ``placement`` is per-node replica counts (a tuple, or a string of digits). Its key
        (zeros dropped, smallest rotation) measured in ``placements``: linear in
        ``local_bsz`` between that placement's rows (outside its measured range: error).
        Otherwise linear in 3-D (``num_nodes`` capped at 16, ``num_replicas``,
        ``local_bsz``) over the placements (averaged per point) and the scalability rows;
        outside their convex hull: error.
        """
        try:
            counts = [int(c) for c in placement]
        except (TypeError, ValueError):
            counts = []
        if not counts or any(c < 0 for c in counts) or sum(counts) == 0:
            raise ValidationError(f"`placement` must be non-negative replica counts, not all 0; got {placement!r}.")
        b = float(atomic_bsz)
        if not math.isfinite(b) or b <= 0:
            raise ValidationError(f"`atomic_bsz` must be a positive finite number; got {show(atomic_bsz)}.")
        key = _canonical(counts)
        curve = self._curves.get(key) if key is not None else None
        if curve is not None:
            xs, step, sync = curve
            if b < xs[0] or b > xs[-1]:
                raise ValidationError(
                    f"{self._where(key, b)}: outside the profiled local batch sizes [{xs[0]:g}, {xs[-1]:g}] of that "
                    "placement.")
            return float(np.interp(b, xs, step)), float(np.interp(b, xs, sync))
        n_nodes = sum(1 for c in counts if c)
        pt = np.array([[min(n_nodes, _MAX_INTERP_NODES), sum(counts), b]], dtype=float)
        val = self._interpolator()(pt)[0]
        if not np.all(np.isfinite(val)):
            raise ValidationError(
                f"{self._where(key or tuple(counts), b)}: the placement is not profiled and ({n_nodes} nodes, "
                f"{sum(counts)} replicas, local batch {b:g}) lies outside the measured (num_nodes, num_replicas, "
                "local_bsz) points, so it cannot be interpolated.")
        return float(val[0]), float(val[1])

    def _points(self) -> tuple[np.ndarray, np.ndarray]:
        """The 3-D points (num_nodes, num_replicas, local_bsz) and their (step, sync)."""
        xs = ["num_nodes", "num_replicas", "local_bsz"]
        ys = ["step_time", "sync_time"]
        avg = self.placements.groupby(xs, as_index=False)[ys].mean()
        both = pd.concat([avg[xs + ys], self.scalability[xs + ys]], ignore_index=True)
        return both[xs].to_numpy(dtype=float), both[ys].to_numpy(dtype=float)

    def _interpolator(self) -> Any:
        if "interp" not in self._lazy:
            from scipy.interpolate import LinearNDInterpolator
            from scipy.spatial import QhullError

            pts, vals = self._points()
            try:
                self._lazy["interp"] = LinearNDInterpolator(pts, vals)
            except (QhullError, ValueError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ValidationError(
                    f"model {self.model!r} on machine {self.machine!r}: the measured (num_nodes, num_replicas, "
                    f"local_bsz) points span no volume, so unprofiled placements cannot be interpolated ({first}).") \
                    from None
        return self._lazy["interp"]

    def _times_one(self, nodes: int, replicas: int, bsz: float) -> tuple[float, float]:
        key = (nodes, replicas, bsz)
        hit = self._cache.get(key)
        if hit is None:
            hit = self.placement_times(self.placement_of(nodes, replicas), bsz)
            self._cache[key] = hit
        return hit

    def times(self, nodes: Any, replicas: Any, atomic_bsz: Any) -> tuple[np.ndarray, np.ndarray]:
        """(step_time, sync_time) in seconds for ``replicas`` GPUs on ``nodes`` nodes at
        per-GPU batch ``atomic_bsz`` (arrays broadcast together; the layout is
        :meth:`placement_of`, the interpolation :meth:`placement_times`). Cached per
        distinct (nodes, replicas, atomic_bsz)."""
        n = _whole_array(nodes, "nodes", low=1)
        k = _whole_array(replicas, "replicas", low=1)
        b = _positive_array(atomic_bsz, "atomic_bsz")
        n, k, b = np.broadcast_arrays(n, k, b)
        step = np.empty(n.shape)
        sync = np.empty(n.shape)
        if n.size == 1:
            step[...], sync[...] = self._times_one(int(n.flat[0]), int(k.flat[0]), float(b.flat[0]))
            return step, sync
        triples = np.stack([n.ravel().astype(float), k.ravel().astype(float), b.ravel()], axis=1)
        uniq, inv = np.unique(triples, axis=0, return_inverse=True)
        out = np.array([self._times_one(int(u[0]), int(u[1]), float(u[2])) for u in uniq]).reshape(-1, 2)
        inv = np.asarray(inv).ravel()
        step[...] = out[inv, 0].reshape(n.shape)
        sync[...] = out[inv, 1].reshape(n.shape)
        return step, sync

    def max_atomic_bsz(self, nodes: int, replicas: int) -> int:
        """The largest per-GPU batch size :meth:`times` answers for (nodes, replicas): the
        largest profiled ``local_bsz`` of the placement when it is measured, else the largest
        whole batch inside the 3-D interpolation's hull (error when there is none)."""
        n = int(_whole_array(nodes, "nodes", low=1))
        k = int(_whole_array(replicas, "replicas", low=1))
        ck = ("max", n, k)
        if ck in self._cache:
            return self._cache[ck]
        counts = self.placement_of(n, k)
        key = _canonical(counts)
        if key is not None and key in self._curves:
            best = int(self._curves[key][0][-1])
        else:
            interp = self._interpolator()
            nn = min(len(counts), _MAX_INTERP_NODES)

            def ok(bs: np.ndarray) -> np.ndarray:
                pts = np.column_stack([np.full(bs.shape, nn, float), np.full(bs.shape, k, float), bs])
                return np.all(np.isfinite(interp(pts)), axis=1)

            grid = np.unique(np.concatenate([self.placements["local_bsz"].to_numpy(float),
                                             self.scalability["local_bsz"].to_numpy(float)]))
            good = np.flatnonzero(ok(grid))
            if good.size == 0:
                raise ValidationError(
                    f"model {self.model!r} on machine {self.machine!r}: no profiled local batch size can be "
                    f"interpolated for {n} nodes and {k} replicas (placement {counts}).")
            lo = int(grid[good[-1]])
            hi = int(grid[good[-1] + 1]) if good[-1] + 1 < grid.size else lo  # first grid value above: outside
            while hi - lo > 1:  # the hull is convex: the good batch sizes are an interval
                mid = (lo + hi) // 2
                if ok(np.array([float(mid)]))[0]:
                    lo = mid
                else:
                    hi = mid
            best = lo
        self._cache[ck] = best
        return best

    # -------------------------------------------------------------- samples
    def single_gpu_samples(self) -> pd.DataFrame:
        """The rows of placement ``"1"`` (one GPU): what a one-GPU profiling run measures."""
        return self.placements[self.placements["placement"] == "1"].reset_index(drop=True)

    def samples(self, max_nodes: int | None = None, max_replicas: int | None = None) -> pd.DataFrame:
        """Every measured (num_nodes, num_replicas, local_bsz, step_time, sync_time): the
        placement rows then the scalability rows, optionally only those within
        ``max_nodes`` / ``max_replicas``."""
        cols = ["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"]
        df = pd.concat([self.placements[cols], self.scalability[cols]], ignore_index=True)
        if max_nodes is not None:
            df = df[df["num_nodes"] <= int(_whole_array(max_nodes, "max_nodes", low=1))]
        if max_replicas is not None:
            df = df[df["num_replicas"] <= int(_whole_array(max_replicas, "max_replicas", low=1))]
        return df.reset_index(drop=True)


# ------------------------------------------------------------------------------ one model
@dataclass(frozen=True, eq=False)
class ModelProfile:
    """One model: its machines, its validation runs and the constants of Sia's simulator.

    Attributes
    ----------
    model : str
    machines : Mapping[str, MachineProfile]
        Keyed by hetsched GPU type (``"t4"``, ``"rtx"``, ``"a100"``).
    validation : Mapping[int, DataFrame]
        Total batch size -> its run: ``progress``, ``iteration``, ``metric``, ``grad_sqr``,
        ``grad_var`` (one row per epoch).
    init_batch_size, max_batch_size : int
        The smallest and largest validated batch size.
    max_epochs : int
        The job ends at the start of this epoch (:attr:`completion_progress`).
    restart_seconds : float
        Time a (re)allocation holds the GPUs without progress.
    calibration : float
        Factor of the progress rate and throughput (Sia's simulator calibration).
    """

    model: str
    machines: Mapping[str, MachineProfile] = field(repr=False)
    validation: Mapping[int, pd.DataFrame] = field(repr=False)
    init_batch_size: int
    max_batch_size: int
    max_epochs: int
    restart_seconds: float
    calibration: float
    _batches: np.ndarray = field(init=False, repr=False)
    _sqr: np.ndarray = field(init=False, repr=False)
    _var: np.ndarray = field(init=False, repr=False)
    _starts: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_nonempty_str(self.model, "model")
        check_mapping(self.machines, "machines")
        check_mapping(self.validation, "validation")
        if not self.validation:
            raise ValidationError(f"`validation` of model {self.model!r} must hold at least one run; got none.")
        for t, m in self.machines.items():
            if not isinstance(m, MachineProfile):
                raise ValidationError(f"`machines[{t!r}]` must be a MachineProfile; got {type(m).__name__}.")
        e = self.max_epochs
        if isinstance(e, bool) or not isinstance(e, (int, np.integer)) or e < 1:
            raise ValidationError(f"`max_epochs` must be a positive integer; got {e!r}.")
        for name in ("restart_seconds", "calibration"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v) \
                    or v < 0 or (name == "calibration" and v == 0):
                rule = "a positive finite number" if name == "calibration" else "a finite number of seconds >= 0"
                raise ValidationError(f"`{name}` must be {rule}; got {v!r}.")
        batches = sorted(int(b) for b in self.validation)
        if batches[0] < 1:
            raise ValidationError(f"`validation` batch sizes must be positive; got {batches[0]}.")
        short = [(b, len(self.validation[b])) for b in batches if len(self.validation[b]) < e]
        if short:
            raise ValidationError(
                f"model {self.model!r}: every validation run must cover max_epochs={e} epochs (one row each); "
                f"the run at batch size {short[0][0]} has {short[0][1]} rows.")
        for b in batches:
            missing = [c for c in ("progress", "grad_sqr", "grad_var") if c not in self.validation[b].columns]
            if missing:
                raise ValidationError(f"model {self.model!r}: the validation run at batch size {b} lacks {missing}.")
        sqr = np.array([self.validation[b]["grad_sqr"].to_numpy(float)[:e] for b in batches])
        var = np.array([self.validation[b]["grad_var"].to_numpy(float)[:e] for b in batches])
        prog = np.array([self.validation[b]["progress"].to_numpy(float)[:e] for b in batches])
        starts = np.concatenate([[0.0], prog.min(axis=0)])
        if np.any(np.diff(starts) <= 0) or not np.all(np.isfinite(starts)):
            raise ValidationError(f"model {self.model!r}: the validation runs' progress must be positive and increase "
                                  "from epoch to epoch.")
        object.__setattr__(self, "machines", MappingProxyType(dict(self.machines)))
        object.__setattr__(self, "validation", MappingProxyType({int(b): self.validation[b] for b in batches}))
        object.__setattr__(self, "_batches", np.array(batches, dtype=float))
        object.__setattr__(self, "_sqr", sqr)
        object.__setattr__(self, "_var", var)
        object.__setattr__(self, "_starts", starts)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["machines"] = dict(self.machines)
        state["validation"] = dict(self.validation)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__["machines"] = MappingProxyType(state["machines"])
        self.__dict__["validation"] = MappingProxyType(state["validation"])

    # -------------------------------------------------------------- epochs
    def epoch_progress(self, epoch: Any) -> Any:
        """Progress at the *start* of ``epoch``: 0 for epoch 0, else the least progress any
        validation run had reached at the end of epoch ``epoch - 1`` (``0 <= epoch <=
        max_epochs``; a float for a scalar, else an array)."""
        e = _whole_array(epoch, "epoch", low=0)
        if np.any(e > self.max_epochs):
            raise ValidationError(f"`epoch` must be in [0, {self.max_epochs}] (max_epochs of {self.model!r}); "
                                  f"got {show(e[e > self.max_epochs].flat[0])}.")
        return _scalar_out(self._starts[e], np.ndim(epoch) == 0)

    @property
    def completion_progress(self) -> float:
        """Progress at which the job ends: the start of epoch ``max_epochs``."""
        return float(self._starts[self.max_epochs])

    def epoch_of(self, progress: Any) -> np.ndarray:
        """The epoch ``progress`` lies in (the number of epoch starts <= progress, minus 1),
        capped to ``max_epochs - 1``: an int array (0-d for a scalar)."""
        p = np.asarray(progress, dtype=float)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(p) | (p < 0)
        if bad.any():
            raise ValidationError(f"`progress` must hold finite numbers >= 0; got {show(p[bad].flat[0])}.")
        e = np.searchsorted(self._starts[: self.max_epochs], p, side="right") - 1
        return np.minimum(e, self.max_epochs - 1).astype(np.int64)

    # -------------------------------------------------------------- statistics
    def grad_stats(self, batch_size: Any, epoch: Any) -> tuple[np.ndarray, np.ndarray]:
        """(grad_sqr, grad_var) at ``epoch`` (the validation rows' index), linear in the
        total batch size between the two validated batch sizes around it (clipped to the
        validated range). Arrays broadcast together."""
        b = _positive_array(batch_size, "batch_size")
        e = _whole_array(epoch, "epoch", low=0)
        if np.any(e >= self.max_epochs):
            raise ValidationError(f"`epoch` must be in [0, {self.max_epochs - 1}] for {self.model!r} "
                                  f"(max_epochs {self.max_epochs}); got {show(e[e >= self.max_epochs].flat[0])}.")
        b, e = np.broadcast_arrays(b, e)
        B = self._batches
        bc = np.clip(b, B[0], B[-1])
        if B.size == 1:
            return self._sqr[0, e].astype(float), self._var[0, e].astype(float)
        i = np.clip(np.searchsorted(B, bc, side="right") - 1, 0, B.size - 2)
        w = (bc - B[i]) / (B[i + 1] - B[i])
        sqr = (1 - w) * self._sqr[i, e] + w * self._sqr[i + 1, e]
        var = (1 - w) * self._var[i, e] + w * self._var[i + 1, e]
        return sqr, var

    def _machine(self, gpu_type: str) -> MachineProfile:
        m = self.machines.get(gpu_type) if isinstance(gpu_type, str) else None
        if m is None:
            raise ValidationError(f"`gpu_type` must be one of {sorted(self.machines)} (the machines loaded for "
                                  f"{self.model!r}); got {gpu_type!r}.")
        return m

    def _iteration(self, gpu_type: str, nodes: Any, replicas: Any, atomic_bsz: Any,
                   accum_steps: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Total batch, iteration time and the broadcast replicas of a configuration."""
        m = self._machine(gpu_type)
        acc = _whole_array(accum_steps, "accum_steps", low=0)
        k = _whole_array(replicas, "replicas", low=1)
        b = _positive_array(atomic_bsz, "atomic_bsz")
        step, sync = m.times(nodes, k, b)
        k, b, acc, step, sync = np.broadcast_arrays(k, b, acc, step, sync)
        total = k * b * (acc + 1)
        t_iter = step + acc * (step - sync)
        bad = ~(t_iter > 0)
        if bad.any():
            raise ValidationError(
                f"model {self.model!r} on {gpu_type!r}: the iteration time step + accum_steps * (step - sync) is not "
                f"positive ({show(t_iter[bad].flat[0])} s) because the profile's sync_time exceeds its step_time; "
                "use accum_steps=0 for this model.")
        return total, t_iter, k

    def progress_rate(self, gpu_type: str, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any,
                      epoch: Any) -> np.ndarray:
        """The true progress rate (progress per second) of a configuration.

        With ``M = replicas * atomic_bsz * (accum_steps + 1)``, ``scale = M /
        init_batch_size`` and (sqr, var) = :meth:`grad_stats` (M, epoch): gain = (var +
        sqr) / (var / scale + sqr); with (step, sync) = the machine's :meth:`~MachineProfile.times`,
        the iteration takes ``step + accum_steps * (step - sync)`` seconds (the accumulation
        steps skip the synchronisation); rate = gain / iteration time * calibration.
        """
        total, t_iter, _ = self._iteration(gpu_type, nodes, replicas, atomic_bsz, accum_steps)
        sqr, var = self.grad_stats(total, epoch)
        scale = total / self.init_batch_size
        gain = (var + sqr) / (var / scale + sqr)
        return gain / t_iter * self.calibration

    def throughput(self, gpu_type: str, nodes: Any, replicas: Any, atomic_bsz: Any, accum_steps: Any) -> np.ndarray:
        """Examples per second of a configuration times the calibration factor (what a
        throughput-only scheduler such as Gavel sees): ``M / iteration time * calibration``."""
        total, t_iter, _ = self._iteration(gpu_type, nodes, replicas, atomic_bsz, accum_steps)
        return total / t_iter * self.calibration


# ------------------------------------------------------------------------------ loaders
def _check_machines(machines: Any) -> dict[str, str]:
    if machines is None:
        return dict(SIA_MACHINES)
    check_mapping(machines, "machines", rule="a mapping GPU type -> machine suffix")
    if not machines:
        raise ValidationError("`machines` must name at least one GPU type; got an empty mapping.")
    out = {}
    for t, s in machines.items():
        if not isinstance(t, str) or not t:
            raise ValidationError(f"`machines` keys must be non-empty GPU type names; got {t!r}.")
        if not isinstance(s, str):
            raise ValidationError(f"`machines[{t!r}]` must be a machine suffix string (e.g. 'aws'); got {s!r}.")
        out[t] = s
    return out


def _suffixes_in(folder: Path) -> list[str]:
    out = []
    for p in folder.glob("placements*.csv"):
        stem = p.stem
        out.append(stem[len("placements-"):] if stem.startswith("placements-") else "")
    return sorted(s for s in out if (folder / _file_name("scalability", s)).is_file())


def _gpus_per_node(suffix: str, placements: pd.DataFrame, path: Path) -> int:
    if suffix in SIA_GPUS_PER_NODE:
        r = int(SIA_GPUS_PER_NODE[suffix])
    else:
        single = placements.loc[placements["num_nodes"] == 1, "num_replicas"]
        r = int(single.max()) if len(single) else int(max(max(map(int, k)) for k in placements["placement"]))
    widest = max(max(map(int, k)) for k in placements["placement"])
    if widest > r:
        key = next(k for k in placements["placement"] if max(map(int, k)) == widest)
        line = placements.attrs["lines"][int(np.flatnonzero(placements["placement"].to_numpy() == key)[0])]
        raise ValidationError(f"{path}: line {line}: placement {key!r} puts {widest} replicas on a node, but machine "
                              f"{suffix!r} has {r} GPUs per node.")
    return r


def _load_machine(model: str, folder: Path, gpu_type: str, suffix: str) -> MachineProfile:
    need = [folder / _file_name("placements", suffix), folder / _file_name("scalability", suffix)]
    absent = [p for p in need if not p.is_file()]
    if absent:
        have = _suffixes_in(folder)
        raise ValidationError(
            f"model {model!r} has no profile for GPU type {gpu_type!r} (machine suffix {suffix!r}): {absent[0]} does "
            f"not exist; machine suffixes with profiles for {model!r}: {have}.")
    placements = _read_placements(need[0])
    scalability = _read_scalability(need[1])
    r = _gpus_per_node(suffix, placements, need[0])
    bsz = np.concatenate([placements["local_bsz"].to_numpy(), scalability["local_bsz"].to_numpy()])
    placements.attrs.clear()
    scalability.attrs.clear()
    placements.attrs["source"] = str(need[0])
    scalability.attrs["source"] = str(need[1])
    return MachineProfile(model=model, machine=suffix, gpus_per_node=r, placements=placements,
                          scalability=scalability, min_local_bsz=int(bsz.min()), max_local_bsz=int(bsz.max()))


def _load_validation(model: str, folder: Path) -> dict[int, pd.DataFrame]:
    runs: dict[int, pd.DataFrame] = {}
    for p in sorted(folder.glob("validation-*.csv")):
        m = _VALIDATION_NAME.match(p.name)
        text = m.group(1) if m else ""
        if not (text.isdigit() and text.isascii() and int(text) > 0):
            raise ValidationError(f"{p}: a validation file must be named validation-BATCH.csv with BATCH a positive "
                                  f"integer (the total batch size); got {p.name!r}.")
        runs[int(text)] = _read_validation(p)
    if not runs:
        raise ValidationError(f"model {model!r}: {folder} holds no validation-BATCH.csv file (the training runs that "
                              "give the epochs and the gradient statistics).")
    return runs


def _model_folder(profiles: Path, model: Any) -> Path:
    check_nonempty_str(model, "model")
    folder = profiles / model
    if not folder.is_dir():
        raise ValidationError(f"`model` must be one of {_model_dirs(profiles)} (the model folders in {profiles}); "
                              f"got {model!r}.")
    return folder


def load_model_profile(model: str, *, path: str | Path | None = None,
                       machines: Mapping[str, str] | None = None) -> ModelProfile:
    """Read one model's profiles: its machines, its validation runs, its constants.

    Parameters
    ----------
    model : str
        A folder of ``profiles/`` (``"cifar10"``).
    path : str or Path, optional
        The data folder (holding ``profiles/``); default :func:`sia_data_path`'s search.
    machines : Mapping[str, str], optional
        hetsched GPU type -> machine suffix (default :data:`SIA_MACHINES`: t4, rtx, a100).
        A GPU type whose ``placements-SUFFIX.csv`` / ``scalability-SUFFIX.csv`` is missing
        is an error listing the suffixes the model has.

    The constants: ``max_epochs`` from :data:`SIA_MAX_EPOCHS` (a model not there: the
    shortest validation run's row count), ``restart_seconds`` from
    :data:`SIA_RESTART_SECONDS` (else 30), ``calibration`` from :data:`SIA_CALIBRATION`
    (else 1/1.2), ``init_batch_size`` / ``max_batch_size`` the smallest / largest validated
    batch size.
    """
    profiles = _profiles_dir(sia_data_path(path))
    folder = _model_folder(profiles, model)
    ms = _check_machines(machines)
    loaded = {t: _load_machine(model, folder, t, s) for t, s in ms.items()}
    runs = _load_validation(model, folder)
    batches = sorted(runs)
    max_epochs = int(SIA_MAX_EPOCHS.get(model, min(len(v) for v in runs.values())))
    short = [b for b in batches if len(runs[b]) < max_epochs]
    if short:
        raise ValidationError(
            f"{folder / f'validation-{short[0]}.csv'}: has {len(runs[short[0]])} rows, but model {model!r} trains for "
            f"{max_epochs} epochs (one row per epoch is needed).")
    return ModelProfile(
        model=model, machines=loaded, validation=runs, init_batch_size=batches[0], max_batch_size=batches[-1],
        max_epochs=max_epochs, restart_seconds=float(SIA_RESTART_SECONDS.get(model, SIA_DEFAULT_RESTART_SECONDS)),
        calibration=float(SIA_CALIBRATION.get(model, SIA_DEFAULT_CALIBRATION)),
    )


def sia_model_names(path: str | Path | None = None, *, machines: Mapping[str, str] | None = None) -> list[str]:
    """The model folders that have profiles for every machine of ``machines`` (default
    :data:`SIA_MACHINES`; with it, gpt_pmp — no T4 profile — is not listed)."""
    profiles = _profiles_dir(sia_data_path(path))
    ms = _check_machines(machines)
    out = []
    for name in _model_dirs(profiles):
        folder = profiles / name
        if all((folder / _file_name("placements", s)).is_file() and (folder / _file_name("scalability", s)).is_file()
               for s in ms.values()):
            out.append(name)
    return out


def load_sia_profiles(path: str | Path | None = None, *, models: Iterable[str] | None = None,
                      machines: Mapping[str, str] | None = None) -> dict[str, ModelProfile]:
    """Read several models' profiles (:func:`load_model_profile`), keyed by model.

    ``models`` default: every model folder with profiles for all of ``machines``
    (:func:`sia_model_names`; with the paper's machines that leaves out gpt_pmp, which has
    no T4 profile). A model named in ``models`` without a folder, or without a profile for
    one of ``machines``, is an error.
    """
    root = sia_data_path(path)
    if models is None:
        names = sia_model_names(root, machines=machines)
    else:
        names = list(check_names(models, "models", what="model names"))
        profiles = _profiles_dir(root)
        for name in names:
            _model_folder(profiles, name)
    return {name: load_model_profile(name, path=root, machines=machines) for name in names}
