"""Sia's (SOSP'23) and Pollux's (OSDI'21) workloads: one CSV row per adaptive job, read by
:func:`read_sia_workload` into an :class:`AdaptiveJobTable`.

The format (the artifact's ``workloads/{philly,newtrace}/workload-N.csv``) has the columns
``name, time, application, num_replicas, batch_size``: the job's name, its submission time
in seconds from the start, its model (a folder of the profiles, see
:mod:`hetsched.inputs.profiles`), and the GPU count and total batch size it was submitted
with (what a non-adaptive scheduler runs; an adaptive one re-optimises them). Other
columns are ignored. No row is ever dropped: a bad row is an error naming the file, the
line, the column and the value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import ValidationError
from .cells import csv_records, path_arg

__all__ = ["SIA_WORKLOAD_COLUMNS", "AdaptiveJobTable", "read_sia_workload"]

#: The columns a Sia / Pollux workload file must have.
SIA_WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
#: The columns of :attr:`AdaptiveJobTable.frame`.
_FRAME_COLUMNS = ("name", "arrival", "model", "num_replicas", "batch_size")


@dataclass(frozen=True, eq=False)
class AdaptiveJobTable:
    """The rows of a Sia / Pollux workload.

    Attributes
    ----------
    frame : DataFrame
        ``name`` (str), ``arrival`` (float seconds), ``model`` (str), ``num_replicas``
        (int), ``batch_size`` (int); sorted by arrival, ties in file order.
    source : str
        Where the rows came from (the file path).
    """

    frame: pd.DataFrame
    source: str

    def __post_init__(self) -> None:
        if not isinstance(self.frame, pd.DataFrame):
            raise ValidationError(f"`frame` must be a DataFrame; got {type(self.frame).__name__}.")
        missing = [c for c in _FRAME_COLUMNS if c not in self.frame.columns]
        if missing:
            raise ValidationError(f"`frame` must have the columns {list(_FRAME_COLUMNS)}; it lacks {missing}.")
        if not isinstance(self.source, str):
            raise ValidationError(f"`source` must be a string; got {type(self.source).__name__}.")

    @property
    def n_jobs(self) -> int:
        """Number of jobs (rows)."""
        return len(self.frame)

    @property
    def models(self) -> tuple[str, ...]:
        """The distinct models of the jobs, sorted."""
        return tuple(sorted(set(self.frame["model"])))


def _decode(p: Path) -> str:
    data = p.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        byte = data[exc.start:exc.start + 1].hex()
        raise ValidationError(f"{p}: line {line}: is not valid UTF-8: byte 0x{byte} at byte offset {exc.start} "
                              "of the file.") from None


def _numeric(p: Path, lines: list[int], cells: list[str], column: str, *, rule: str, integer: bool,
             low: float, names: list[str]) -> np.ndarray:
    vals = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals) & (vals >= low)
        if integer:
            ok &= np.floor(vals) == vals
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        raise ValidationError(f"{p}: line {lines[i]}: job {names[i]!r}: column `{column}` must be {rule}; "
                              f"got {cells[i]!r}.")
    return vals


def _model_set(models: Any) -> set[str] | None:
    if models is None:
        return None
    if isinstance(models, str) or not isinstance(models, Iterable):
        raise ValidationError(f"`models` must be a collection of model names (e.g. a set); got {models!r}.")
    out = set()
    for m in models:
        if not isinstance(m, str) or not m:
            raise ValidationError(f"`models` must hold non-empty model names; got {m!r}.")
        out.add(m)
    return out


def read_sia_workload(path: str | Path, *, models: Iterable[str] | None = None) -> AdaptiveJobTable:
    """Read a Sia / Pollux workload CSV (``name, time, application, num_replicas,
    batch_size``) into an :class:`AdaptiveJobTable`.

    Parameters
    ----------
    path : str or Path
        A local CSV file.
    models : collection of str, optional
        The models that have profiles (e.g. the keys of
        :func:`~hetsched.inputs.profiles.load_sia_profiles`); a job of another model is an
        error naming the job, its model and the available ones.

    Raises
    ------
    ValidationError
        The file is missing, empty or not UTF-8; the header lacks a column; a row has a
        different number of cells than the header; a name is empty or repeated; ``time``
        is not a finite number >= 0; ``num_replicas`` or ``batch_size`` is not a positive
        integer; a model is empty or (with ``models``) has no profile. Every message names
        the file and the line (and the column and value).
    """
    p = path_arg(path)
    wanted = _model_set(models)
    text = _decode(p)
    lines, rows = csv_records(text)
    if not rows:
        raise ValidationError(f"{p}: the file is empty; a Sia workload needs the header "
                              f"{','.join(SIA_WORKLOAD_COLUMNS)} and one row per job.")
    header = [c.strip() for c in rows[0]]
    missing = [c for c in SIA_WORKLOAD_COLUMNS if c not in header]
    if missing:
        raise ValidationError(f"{p}: line {lines[0]}: the header must name the column(s) {missing}; got {header}.")
    lines, rows = lines[1:], rows[1:]
    if not rows:
        raise ValidationError(f"{p}: has a header but no jobs (0 rows).")
    for ln, r in zip(lines, rows):
        if len(r) != len(header):
            raise ValidationError(f"{p}: line {ln}: has {len(r)} cells but the header has {len(header)} columns.")
    pos = {c: header.index(c) for c in SIA_WORKLOAD_COLUMNS}
    cells = {c: [r[pos[c]].strip() for r in rows] for c in SIA_WORKLOAD_COLUMNS}
    names = cells["name"]
    for ln, n in zip(lines, names):
        if not n:
            raise ValidationError(f"{p}: line {ln}: column `name` must be a non-empty job name; got ''.")
    seen: dict[str, int] = {}
    for ln, n in zip(lines, names):
        if n in seen:
            raise ValidationError(f"{p}: line {ln}: job name {n!r} is a duplicate (first on line {seen[n]}); "
                                  "job names must be unique.")
        seen[n] = ln
    arrival = _numeric(p, lines, cells["time"], "time", rule="a finite number of seconds >= 0", integer=False,
                       low=0.0, names=names)
    replicas = _numeric(p, lines, cells["num_replicas"], "num_replicas", rule="a positive integer", integer=True,
                        low=1.0, names=names)
    batch = _numeric(p, lines, cells["batch_size"], "batch_size", rule="a positive integer", integer=True,
                     low=1.0, names=names)
    model = cells["application"]
    for ln, n, m in zip(lines, names, model):
        if not m:
            raise ValidationError(f"{p}: line {ln}: job {n!r}: column `application` must name a model; got ''.")
        if wanted is not None and m not in wanted:
            raise ValidationError(f"{p}: line {ln}: job {n!r} uses model {m!r}, which has no profile; available "
                                  f"models: {sorted(wanted)}.")
    frame = pd.DataFrame({
        "name": pd.Series(names, dtype=object), "arrival": arrival, "model": pd.Series(model, dtype=object),
        "num_replicas": replicas.astype(np.int64), "batch_size": batch.astype(np.int64),
    }, columns=list(_FRAME_COLUMNS))
    frame = frame.sort_values("arrival", kind="stable").reset_index(drop=True)
    return AdaptiveJobTable(frame=frame, source=str(p))
