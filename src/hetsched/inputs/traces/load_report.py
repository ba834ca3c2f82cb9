"""What a trace reader kept, dropped and rejected: the load report and the row checks behind it.

Real cluster logs hold rows that no simulator can replay as they stand: jobs cancelled
before they started, jobs still running when the log was cut (Philly's ``end_time:
"None"``, PAI's empty ``end_time``), zero-length cancelled jobs (Helios), jobs whose
``(job type, scale factor)`` has no throughput-table row (Gavel's Philly-derived traces).
The readers sort every row they do not keep into one of three kinds:

* **dropped** (:data:`EXPECTED_REASONS`): rows that real traces are known to contain.
* **malformed**: rows that break the format's rules (a non-numeric or missing field, a
  wrong number of columns, bytes that are not UTF-8, a duplicate id, arrivals out of order,
  a job larger than the cluster...).
* **filtered** (:data:`FILTER_REASONS`): rows left out on purpose (a status or virtual
  cluster the caller did not ask for, CPU-only jobs). Counted, never an error.

Dropped and malformed rows are *bad rows*. What happens to them is the caller's choice,
``on_bad_rows`` (issue 30: no row leaves a trace without the caller saying so):

* ``"raise"`` (the default): the reader reads the whole file, then raises one
  :class:`~hetsched.errors.ValidationError` that counts the bad rows by reason and names
  the first few (line or entry, rule and value) in file order;
* ``"skip"``: they are dropped with a WARNING log line and counted by reason in the report.

The older ``errors=`` keyword still works and warns (``DeprecationWarning``): ``"drop"`` and
``"skip"`` mean ``on_bad_rows="skip"``, ``"raise"`` means ``"raise"``.

A trace with no row kept is always an error (:meth:`LoadReport.require_jobs`).

The report is a plain dict (JSON-serializable), in ``meta["load_report"]`` of the returned
trace or ``attrs["meta"]["load_report"]`` of a job table, and from there in a simulation's
``config["workload_meta"]`` (``summary.json`` and ``provenance.json`` of ``--out``)::

    {"source": "...", "on_bad_rows": "skip", "rows": 120, "kept": 100,
     "dropped": {"unfinished": 12, "never_started": 3},
     "malformed": {},
     "filtered": {"cpu_only": 5},
     "examples": {"unfinished": ["entry 7: job 'a': `attempts[-1].end_time` is missing (got 'None')"]}}

``rows == kept + sum(dropped) + sum(malformed) + sum(filtered)``.

Beside the report, a trace's ``meta`` holds :func:`skipped_meta`: ``skipped``, the messages of
the first :data:`N_LISTED` bad rows (in the order they were found), ``skipped_counts`` (bad
rows by reason) and ``skipped_left_out`` (bad rows not listed), so that a trace with a million
bad rows does not carry a million messages into every result's provenance. Messages are
built only for the rows that can be listed or named.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...validation import check_choice

__all__ = ["DEPRECATED_ERRORS", "ERRORS", "EXPECTED_REASONS", "FILTER_REASONS", "N_LISTED", "ON_BAD_ROWS",
           "LoadReport", "RowChecks", "resolve_on_bad_rows", "skipped_meta"]

log = logging.getLogger(__name__)

#: The ``on_bad_rows`` values every reader accepts.
ON_BAD_ROWS = ("raise", "skip")

#: The deprecated ``errors`` values and the ``on_bad_rows`` each now means.
DEPRECATED_ERRORS: dict[str, str] = {"drop": "skip", "skip": "skip", "raise": "raise"}

#: The ``errors`` values the readers still accept (deprecated; see :data:`DEPRECATED_ERRORS`).
ERRORS = tuple(DEPRECATED_ERRORS)

#: Rows that real traces contain (reason -> what it means).
EXPECTED_REASONS: dict[str, str] = {
    "never_started": "the job never ran: no attempt, or no start time (cancelled or failed while queued)",
    "unfinished": "no end time or duration: still running when the log was collected, or its end was not recorded",
    "zero_duration": "ended when it started (e.g. Helios jobs cancelled at once)",
    "no_gpus": "the last attempt held no GPU",
    "no_throughput_row": "(job type, scale factor) has no row in the throughput table (Gavel's msr traces)",
}

#: Rows left out on purpose, never an error (reason -> what it means).
FILTER_REASONS: dict[str, str] = {
    "status": "a status / state not in `statuses` / `states`",
    "vc": "a virtual cluster not in `vc`",
    "cpu_only": "a job that asked for no GPU",
    "cpu_task": "a PAI task without GPUs (plan_gpu empty or 0)",
    "job_not_kept": "a PAI task of a job that was not kept",
}

#: Examples kept per reason.
N_EXAMPLES = 3

#: Bad rows named in the error of ``on_bad_rows="raise"``.
N_NAMED = 3

#: Messages of bad rows listed in ``meta["skipped"]`` (the rest are counted, see :func:`skipped_meta`).
N_LISTED = 20

#: How to opt in, as the error says it.
SKIP_HINT = ('pass on_bad_rows="skip" (command line: --skip-bad-rows) to drop them; their counts are then '
             'recorded in meta["load_report"] and in the provenance of a simulation')


def _kind(reason: str) -> str:
    if reason in EXPECTED_REASONS:
        return "dropped"
    if reason in FILTER_REASONS:
        return "filtered"
    return "malformed"


def resolve_on_bad_rows(on_bad_rows: Any, errors: Any = None, *, stacklevel: int = 3) -> str:
    """The ``on_bad_rows`` a reader runs with, from its ``on_bad_rows`` and deprecated
    ``errors`` arguments.

    Parameters
    ----------
    on_bad_rows : {"raise", "skip"}
    errors : {"drop", "skip", "raise"}, optional
        Deprecated: when given, warns (``DeprecationWarning``) and maps through
        :data:`DEPRECATED_ERRORS`.
    stacklevel : int, default 3
        Where the warning points (3: the caller of the reader that calls this).

    Returns
    -------
    str
        "raise" or "skip".

    Raises
    ------
    ValidationError
        A value outside the choices, or ``errors`` that contradicts an explicit
        ``on_bad_rows="skip"``.
    """
    wanted = check_choice(on_bad_rows, "on_bad_rows", ON_BAD_ROWS)
    if errors is None:
        return wanted
    mapped = DEPRECATED_ERRORS[check_choice(errors, "errors", ERRORS)]
    warnings.warn(f"`errors={errors!r}` is deprecated; pass `on_bad_rows={mapped!r}` (\"raise\": bad rows are an "
                  f"error, the default; \"skip\": drop and count them).", DeprecationWarning, stacklevel=stacklevel)
    if wanted != "raise" and wanted != mapped:
        raise ValidationError(f"`errors={errors!r}` (deprecated, meaning on_bad_rows={mapped!r}) contradicts "
                              f"`on_bad_rows={wanted!r}`; pass `on_bad_rows` only.")
    return mapped


_NUMBER = re.compile(r"(\d+)\s*$")


def _order_key(where: str, fallback: int) -> int:
    """File position of a row named ``where`` ("line 12", "entry 3"): its number, else ``fallback``."""
    m = _NUMBER.search(where)
    return int(m.group(1)) if m else fallback


class LoadReport:
    """Counts, examples and messages of the rows one reader did not keep.

    Parameters
    ----------
    source : str
        The file (named in every message).
    on_bad_rows : {"raise", "skip"}, default "raise"
        "raise": :meth:`check` raises when any row was dropped or malformed; "skip": it
        logs them.
    """

    def __init__(self, source: str, on_bad_rows: str = "raise") -> None:
        self.source = source
        #: The file the rows come from (``source`` may grow a label, e.g. PAI's two tables).
        self.path = source
        self.on_bad_rows = check_choice(on_bad_rows, "on_bad_rows", ON_BAD_ROWS)
        self.rows = 0
        self.kept = 0
        self.counts: dict[str, dict[str, int]] = {"dropped": {}, "malformed": {}, "filtered": {}}
        self.examples: dict[str, list[str]] = {}
        #: Full messages of the first :data:`N_LISTED` dropped or malformed rows, in the order
        #: they were found (every one is counted in :attr:`counts`).
        self.skipped: list[str] = []
        #: ``(file position, reason, message without the source)`` of the bad rows whose message
        #: was built (the first :data:`N_LISTED` of each check: the error names the first in file order).
        self.bad: list[tuple[int, str, str]] = []

    def raises(self, reason: str) -> bool:
        """Whether a row failing for ``reason`` is an error under this report's
        ``on_bad_rows`` (never a filter). Readers defer the error to :meth:`check`, which
        counts every bad row; Philly's reader raises at once on bytes that are not UTF-8,
        naming their line and offset (its entries lose their line numbers once parsed)."""
        return _kind(reason) != "filtered" and self.on_bad_rows == "raise"

    @property
    def n_bad(self) -> int:
        """Rows dropped or malformed."""
        return sum(self.counts["dropped"].values()) + sum(self.counts["malformed"].values())

    def record(self, reason: str, texts: Sequence[str], count: int | None = None, *, listed: bool = False) -> None:
        """Count ``count`` (default ``len(texts)``) rows dropped for ``reason``; ``texts``
        are their full messages (none for filtered rows), added to :attr:`skipped` unless
        ``listed`` (the caller added them already)."""
        n = len(texts) if count is None else int(count)
        if n == 0:
            return
        bucket = self.counts[_kind(reason)]
        bucket[reason] = bucket.get(reason, 0) + n
        if texts:
            ex = self.examples.setdefault(reason, [])
            ex.extend(texts[: max(N_EXAMPLES - len(ex), 0)])
            if not listed:
                self.list_skipped(texts)

    def list_skipped(self, texts: Sequence[str]) -> None:
        """Add the messages ``texts`` to :attr:`skipped` while it holds fewer than :data:`N_LISTED`."""
        self.skipped.extend(texts[: max(N_LISTED - len(self.skipped), 0)])

    def fail(self, reason: str, text: str, *, position: int | None = None) -> None:
        """One bad row outside any table (a line that is not UTF-8): record it (``text``
        names the file and the row; ``position``: its line number, for the order of the
        rows :meth:`check` names)."""
        self.rows += 1
        self.record(reason, [text])
        short = text[len(self.path) + 2:] if text.startswith(self.path + ": ") else text
        self.bad.append((_order_key(short, 0) if position is None else int(position), reason, short))

    def to_dict(self) -> dict[str, Any]:
        """The report as a plain dict (see the module docstring)."""
        return {"source": self.source, "on_bad_rows": self.on_bad_rows, "rows": int(self.rows),
                "kept": int(self.kept), "dropped": dict(self.counts["dropped"]),
                "malformed": dict(self.counts["malformed"]), "filtered": dict(self.counts["filtered"]),
                "examples": {k: list(v) for k, v in self.examples.items()}}

    def check(self, *others: LoadReport) -> None:
        """End of a read: raise on the bad rows of this report (and ``others``, e.g. PAI's
        task table) under ``on_bad_rows="raise"``, then :meth:`require_jobs`.

        The error counts the bad rows by reason, names the first :data:`N_NAMED` of each
        file in file order, and says how to opt in to skipping them.
        """
        if self.on_bad_rows == "raise":
            parts = [r._bad_rows_text() for r in (self, *others) if r.n_bad]
            if parts:
                lost = " ".join(parts)
                left = (f" No row would be left to replay: {self.rows} row(s) read, 0 kept." if self.kept == 0
                        else "")
                raise ValidationError(f"{lost}{left} Fix the file, or {SKIP_HINT}.")
        self.require_jobs()

    def _bad_rows_text(self) -> str:
        """"<source>: N of M rows cannot be used (reason: n, ...): <first rows>." """
        bad = sorted(self.bad, key=lambda b: b[0])
        by_reason = {**self.counts["dropped"], **self.counts["malformed"]}
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0])))
        named = "; ".join(text for _, _, text in bad[:N_NAMED])
        more = f"; and {self.n_bad - N_NAMED} more" if self.n_bad > N_NAMED else ""
        return (f"{self.path}: {self.n_bad} of {self.rows} row(s) cannot be used ({reasons}): "
                f"{named}{more}.")

    def require_jobs(self) -> None:
        """Raise when no row was kept: a trace of 0 jobs is never what a caller wants (issue
        30). The message counts the rows and says why each kind was not kept."""
        if self.kept > 0:
            return
        why = {**self.counts["dropped"], **self.counts["malformed"], **self.counts["filtered"]}
        first = next(iter(self.examples.values()), [""])[0] if self.examples else ""
        raise ValidationError(
            f"{self.source}: no job to replay: {self.rows} row(s) read, 0 kept"
            + (f"; not kept: {why}" if why else " (the file holds no job rows)")
            + (f"; e.g. {first}" if first else "") + ".")

    def log_summary(self) -> None:
        """One log line: WARNING when rows were dropped or malformed, else INFO."""
        lost = {**self.counts["dropped"], **self.counts["malformed"]}
        if lost:
            first = self.skipped[0] if self.skipped else ""
            log.warning("%s: %d rows read, %d kept; skipped (on_bad_rows='skip') %s; e.g. %s", self.source,
                        self.rows, self.kept, lost, first)
        else:
            log.info("%s: %d rows read, %d kept", self.source, self.rows, self.kept)


class RowChecks:
    """The first failing check of every row of one table, resolved stage by stage.

    Rows are positions ``0..n-1`` in file order. :meth:`fail` marks the rows of a boolean
    mask that are still alive with a reason (a row keeps the first reason it fails);
    :meth:`resolve` ends a stage: every marked row is counted on the report and left out of
    the later stages. Checks whose outcome depends on earlier rows (order, duplicates) run
    in a later stage, after the rows they depend on are settled -- the same outcome as a
    reader that walks the file row by row. Whether the bad rows are an error is decided
    once the whole file is read (:meth:`LoadReport.check`), so the error can count them all.

    Parameters
    ----------
    report : LoadReport
    where : sequence of str
        Label of each row ("line 12", "entry 3").
    source : str, optional
        File named in the messages (default: the report's).
    """

    def __init__(self, report: LoadReport, where: Sequence[str], *, source: str | None = None) -> None:
        self.report = report
        self.where = where
        self.source = report.source if source is None else source
        self.n = len(where)
        self.alive = np.ones(self.n, dtype=bool)
        self._pending: list[tuple[np.ndarray, str, Callable[[int], str] | None]] = []
        self._failed: dict[str, list[np.ndarray]] = {"dropped": [], "malformed": [], "filtered": []}
        report.rows += self.n

    def failed_rows(self, kind: str) -> np.ndarray:
        """Rows resolved as ``kind`` ("dropped", "malformed", "filtered"), sorted."""
        parts = self._failed[kind]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def text(self, i: int, message: str) -> str:
        """The full message of row ``i``."""
        return f"{self.source}: {self.where[i]}: {message}"

    def fail(self, bad: np.ndarray, reason: str, message: Callable[[int], str] | None) -> None:
        """Mark the alive rows of ``bad`` as failing for ``reason`` (message(i): the rule and
        value; None for filtered rows)."""
        idx = np.flatnonzero(np.asarray(bad, dtype=bool) & self.alive)
        if idx.size:
            self.alive[idx] = False
            self._pending.append((idx, reason, message))

    def resolve(self) -> None:
        """End a stage: count every row marked since the last stage on the report (messages
        in file order within the stage)."""
        pending, self._pending = self._pending, []
        found: list[tuple[int, str, str]] = []
        counts: dict[str, int] = {}
        for idx, reason, message in pending:
            self._failed[_kind(reason)].append(idx)
            if message is None:
                self.report.record(reason, [], count=idx.size)
            else:
                # messages only for the rows that can be listed, named or kept as examples: the
                # first N_LISTED of each check (idx is in file order), every row counted
                found.extend((int(i), reason, message(int(i))) for i in idx[:N_LISTED])
                counts[reason] = counts.get(reason, 0) + int(idx.size)
        found.sort(key=lambda r: r[0])
        by_reason: dict[str, list[str]] = {}
        for i, reason, msg in found:
            text = self.text(i, msg)
            by_reason.setdefault(reason, []).append(text)
            self.report.list_skipped([text])  # in file order within the stage
            self.report.bad.append((_order_key(self.where[i], i), reason, f"{self.where[i]}: {msg}"))
        for reason, n in counts.items():
            self.report.record(reason, by_reason.get(reason, []), count=n, listed=True)


def skipped_meta(*reports: LoadReport) -> dict[str, Any]:
    """What a trace's ``meta`` says of the bad rows its reader(s) dropped.

    Parameters
    ----------
    *reports : LoadReport
        The reports of the files read (PAI: the job table's, then the task table's).

    Returns
    -------
    dict
        ``skipped``: the messages of the first :data:`N_LISTED` bad rows (file by file, in
        the order they were found); ``skipped_counts``: bad rows by reason, all of them;
        ``skipped_left_out``: how many bad rows ``skipped`` does not list.

    Examples
    --------
    >>> rep = LoadReport("t.csv", on_bad_rows="skip")
    >>> rep.record("unfinished", [f"t.csv: line {i}: no end" for i in range(2, 32)])
    >>> meta = skipped_meta(rep)
    >>> len(meta["skipped"]), meta["skipped_counts"], meta["skipped_left_out"]
    (20, {'unfinished': 30}, 10)
    """
    listed = [t for r in reports for t in r.skipped][:N_LISTED]
    counts: dict[str, int] = {}
    for r in reports:
        for kind in ("dropped", "malformed"):
            for reason, n in r.counts[kind].items():
                counts[reason] = counts.get(reason, 0) + int(n)
    return {"skipped": listed, "skipped_counts": counts, "skipped_left_out": sum(counts.values()) - len(listed)}
