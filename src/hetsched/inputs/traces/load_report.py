"""What a trace reader kept, dropped and rejected: the load report and the row checks behind it.

Real cluster logs hold rows that no simulator can replay as they stand: jobs cancelled
before they started, jobs still running when the log was cut (Philly's ``end_time:
"None"``, PAI's empty ``end_time``), zero-length cancelled jobs (Helios), jobs whose
``(job type, scale factor)`` has no throughput-table row (Gavel's Philly-derived traces).
The readers sort every row they do not keep into one of three kinds:

* **dropped** (:data:`EXPECTED_REASONS`): rows that real traces are known to contain.
  Dropped by default and counted by reason; ``errors="raise"`` rejects them.
* **malformed**: rows that break the format's rules (a non-numeric or missing field, a
  wrong number of columns, bytes that are not UTF-8, a duplicate id, arrivals out of order,
  a job larger than the cluster...). A ``ValidationError`` naming the row by default;
  ``errors="skip"`` drops and counts them too.
* **filtered** (:data:`FILTER_REASONS`): rows left out on purpose (a status or virtual
  cluster the caller did not ask for, CPU-only jobs). Counted, never an error.

The report is a plain dict (JSON-serializable), in ``meta["load_report"]`` of the returned
trace or ``attrs["meta"]["load_report"]`` of a job table::

    {"source": "...", "errors": "drop", "rows": 120, "kept": 100,
     "dropped": {"unfinished": 12, "never_started": 3},
     "malformed": {},
     "filtered": {"cpu_only": 5},
     "examples": {"unfinished": ["entry 7: job 'a': `attempts[-1].end_time` is missing (got 'None')"]}}

``rows == kept + sum(dropped) + sum(malformed) + sum(filtered)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...validation import check_choice

__all__ = ["ERRORS", "EXPECTED_REASONS", "FILTER_REASONS", "LoadReport", "RowChecks"]

log = logging.getLogger(__name__)

#: The ``errors`` values every reader accepts.
ERRORS = ("drop", "skip", "raise")

#: Rows that real traces contain, dropped by default (reason -> what it means).
EXPECTED_REASONS: dict[str, str] = {
    "never_started": "the job never ran: no attempt, or no start time (cancelled or failed while queued)",
    "unfinished": "no end time: still running when the log was collected, or its end was not recorded",
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


def _kind(reason: str) -> str:
    if reason in EXPECTED_REASONS:
        return "dropped"
    if reason in FILTER_REASONS:
        return "filtered"
    return "malformed"


def check_errors(errors: Any) -> str:
    """``errors`` validated: one of :data:`ERRORS`."""
    return check_choice(errors, "errors", ERRORS)


class LoadReport:
    """Counts, examples and messages of the rows one reader did not keep.

    Parameters
    ----------
    source : str
        The file (named in every message).
    errors : {"drop", "skip", "raise"}
        What raises: "raise" every dropped or malformed row, "drop" malformed rows only,
        "skip" nothing.
    """

    def __init__(self, source: str, errors: str) -> None:
        self.source = source
        self.errors = check_errors(errors)
        self.rows = 0
        self.kept = 0
        self.counts: dict[str, dict[str, int]] = {"dropped": {}, "malformed": {}, "filtered": {}}
        self.examples: dict[str, list[str]] = {}
        #: Full messages of every dropped or malformed row, in the order they were found.
        self.skipped: list[str] = []

    def raises(self, reason: str) -> bool:
        """Whether a row failing for ``reason`` raises under this report's ``errors``."""
        kind = _kind(reason)
        if kind == "filtered":
            return False
        return self.errors == "raise" or (self.errors == "drop" and kind == "malformed")

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
                self.skipped.extend(texts)

    def fail(self, reason: str, text: str) -> None:
        """One row outside any table (a line that is not UTF-8): raise or record it."""
        self.rows += 1
        if self.raises(reason):
            raise ValidationError(text)
        self.record(reason, [text])

    def to_dict(self) -> dict[str, Any]:
        """The report as a plain dict (see the module docstring)."""
        return {"source": self.source, "errors": self.errors, "rows": int(self.rows), "kept": int(self.kept),
                "dropped": dict(self.counts["dropped"]), "malformed": dict(self.counts["malformed"]),
                "filtered": dict(self.counts["filtered"]),
                "examples": {k: list(v) for k, v in self.examples.items()}}

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
            log.warning("%s: %d rows read, %d kept; dropped %s; e.g. %s", self.source, self.rows, self.kept,
                        lost, first)
        else:
            log.info("%s: %d rows read, %d kept", self.source, self.rows, self.kept)


class RowChecks:
    """The first failing check of every row of one table, resolved stage by stage.

    Rows are positions ``0..n-1`` in file order. :meth:`fail` marks the rows of a boolean
    mask that are still alive with a reason (a row keeps the first reason it fails);
    :meth:`resolve` ends a stage: if a marked row's reason raises under the report's
    ``errors``, the earliest such row (in file order) raises a ``ValidationError`` with its
    message; otherwise every marked row is counted and dropped. Checks whose outcome depends
    on earlier rows (order, duplicates) run in a later stage, after the rows they depend on
    are settled -- the same outcome as a reader that walks the file row by row.

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
        """End a stage: raise on the earliest row whose reason raises, else record them all."""
        pending, self._pending = self._pending, []
        first: tuple[int, str, Callable[[int], str] | None] | None = None
        for idx, reason, message in pending:
            if self.report.raises(reason) and (first is None or idx[0] < first[0]):
                first = (int(idx[0]), reason, message)
        if first is not None:
            i, _, message = first
            raise ValidationError(self.text(i, message(i) if message else "is a bad row"))
        found: list[tuple[int, str, str]] = []
        for idx, reason, message in pending:
            self._failed[_kind(reason)].append(idx)
            if message is None:
                self.report.record(reason, [], count=idx.size)
            else:
                found.extend((int(i), reason, self.text(int(i), message(int(i)))) for i in idx)
        found.sort(key=lambda r: r[0])
        by_reason: dict[str, list[str]] = {}
        for _, reason, text in found:
            by_reason.setdefault(reason, []).append(text)
        self.report.skipped.extend(text for _, _, text in found)  # in file order within the stage
        for reason, texts in by_reason.items():
            self.report.record(reason, texts, listed=True)
