"""The SQLite store of an :class:`~hetsched.online.OnlineScheduler` (stdlib ``sqlite3``): the
persistence room, and the only module of :mod:`hetsched.online` that speaks SQL.

One file holds everything the scheduler needs to continue after a crash. :class:`Store`
reads and writes it through named methods (``save_config``, ``save_job``, ``finish_job``,
``append_report``, ``save_round``; ``load_jobs``, ``load_measured``, ``load_side_rates``,
``load_snapshot``, ``reported_seconds``), each write one transaction (``BEGIN IMMEDIATE``
... ``COMMIT``; nothing is written when it raises), so every public call of the scheduler
is one transaction. WAL journal mode; ``synchronous`` FULL by default (a commit survives
a power loss; NORMAL survives a process crash and is faster).

Tables (schema version :data:`SCHEMA_VERSION`):

``meta``
    ``schema_version``, ``config`` (JSON: GPU types, capacities, servers, round length, the
    scheduler's label), ``changed`` (the active set changed since the last plan),
    ``created_by``.
``jobs``
    One row per submitted job: its number (submit order), id, job type, gang size, weight,
    total steps, arrival, deadline, entity, submitted throughputs (JSON), status
    (0 active, 1 completed, 2 cancelled), steps done, isolated-equivalent time, finish time.
``measured``
    The moving average of measured throughput per (job, type), and how many reports made it.
``reports``
    Every report (round, job, type, steps, seconds), in order.
``rounds``
    One row per planned round: start, active jobs, rows, whether it solved, timings.
``leases``
    The rows of the last plan: job, type, GPUs, partner, GPU ids (global ids separated by
    spaces; NULL without a topology).
``snapshot``
    The round state after the last plan (the round scheduler's state, the rows it returned,
    the placement, per-job times) as a JSON tree (:mod:`hetsched.online.codec`; data only,
    never a pickle) whose arrays live in the next two tables.
``side_rates``
    Rates of rows that are not one job alone on its gang (:mod:`hetsched.online.sides`):
    per (job, other, type), ``other`` the partner's number for a pair or -1 for the job
    spread over servers, the rate given at submit and the moving average of reports.
``adaptive_jobs``
    Adaptive jobs (Pollux, the adaptive Sia, Optimus): per job its model, the GPUs and the
    batch size it was submitted with.
``adaptive_reports``
    What the workers of adaptive jobs measured (JSON: the keys of
    :data:`hetsched.inputs.adaptive.REPORT_KEYS`, and validation points), per report, in
    order, with the round it belongs to.
``arrays``, ``array_deltas``
    Each array of the tree by its path: a full compact copy, then the changes of
    each later round as deltas, in order (``seq``); an array is rewritten in full (and its
    deltas dropped) when a delta would not be small, or after :data:`MAX_DELTAS` deltas.
    Reading the store applies them in order and gets every array back bit for bit.

Schema version 1 (hetsched before the data-only snapshot) kept the snapshot as a pickle;
such a store is refused with :class:`StoreVersionError` (it is not converted: converting
it would mean unpickling it). Schema version 2 lacked ``side_rates`` (pair and spread
rates); it is refused too, with a message that says so (its jobs can be finished with the
hetsched version that wrote it). Schema version 3 lacked the two adaptive tables; opening
it adds them (empty) and marks it version 4, which changes nothing else.

Opening a store takes an exclusive lock on ``<path>.lock`` (``fcntl.flock``), so a second
opener (another process, or a second scheduler in the same process) gets
:class:`StoreLockedError` rather than two writers interleaving. A file that is not a
SQLite database, fails SQLite's ``quick_check`` or lacks the hetsched tables raises
:class:`StoreCorruptError`; a store written with another schema version (older or newer)
raises :class:`StoreVersionError`. Nothing is ever reset silently.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import HetschedError, ValidationError
from ..validation import fail
from .codec import apply_delta, pack_delta, pack_full, unpack_full

__all__ = ["MAX_DELTAS", "SCHEMA_VERSION", "ArrayTable", "Store", "StoreCorruptError", "StoreError", "StoreLockedError", "StoreVersionError"]

log = logging.getLogger(__name__)

#: Version of the tables below; a store with another one is refused.
SCHEMA_VERSION = 4
#: Deltas kept per array before it is rewritten in full (bounds the work of reopening).
MAX_DELTAS = 64

#: Tables added by schema version 4 (a version-3 store gains them when opened).
_ADAPTIVE_SCHEMA = (
    "CREATE TABLE adaptive_jobs (num INTEGER PRIMARY KEY, model TEXT NOT NULL, replicas INTEGER NOT NULL, "
    "batch_size INTEGER NOT NULL)",
    "CREATE TABLE adaptive_reports (seq INTEGER PRIMARY KEY, round INTEGER NOT NULL, num INTEGER NOT NULL, "
    "data TEXT NOT NULL)",
)
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE jobs (
    num INTEGER PRIMARY KEY, job_id TEXT NOT NULL, id_kind TEXT NOT NULL, job_type TEXT,
    scale_factor INTEGER NOT NULL, weight REAL NOT NULL, total_steps REAL, arrival REAL NOT NULL,
    deadline REAL, entity TEXT, profile TEXT, status INTEGER NOT NULL, steps_done REAL NOT NULL,
    iso_time REAL NOT NULL, finish REAL, UNIQUE (id_kind, job_id));
CREATE TABLE measured (num INTEGER NOT NULL, type INTEGER NOT NULL, ema REAL NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (num, type)) WITHOUT ROWID;
CREATE TABLE reports (seq INTEGER PRIMARY KEY, round INTEGER NOT NULL, num INTEGER NOT NULL, type INTEGER NOT NULL,
    steps REAL NOT NULL, seconds REAL NOT NULL);
CREATE INDEX reports_round ON reports (round);
CREATE TABLE rounds (round INTEGER PRIMARY KEY, now REAL NOT NULL, n_active INTEGER NOT NULL,
    n_rows INTEGER NOT NULL, solved INTEGER NOT NULL, solve_status TEXT, solve_s REAL, plan_s REAL);
CREATE TABLE leases (num INTEGER PRIMARY KEY, round INTEGER NOT NULL, type INTEGER NOT NULL, gpus INTEGER NOT NULL,
    partner INTEGER NOT NULL, gpu_ids TEXT);
CREATE TABLE snapshot (id INTEGER PRIMARY KEY CHECK (id = 1), round INTEGER NOT NULL, now REAL NOT NULL,
    tree TEXT NOT NULL);
CREATE TABLE arrays (path TEXT PRIMARY KEY, dtype TEXT NOT NULL, blob BLOB NOT NULL);
CREATE TABLE array_deltas (seq INTEGER PRIMARY KEY, path TEXT NOT NULL, blob BLOB NOT NULL);
CREATE INDEX array_deltas_path ON array_deltas (path);
CREATE TABLE side_rates (num INTEGER NOT NULL, other INTEGER NOT NULL, type INTEGER NOT NULL, given REAL, ema REAL,
    n INTEGER NOT NULL, PRIMARY KEY (num, other, type)) WITHOUT ROWID;
""" + "".join(f"{t};\n" for t in _ADAPTIVE_SCHEMA)
_TABLES = {"meta", "jobs", "measured", "reports", "rounds", "leases", "snapshot", "arrays", "array_deltas",
           "side_rates", "adaptive_jobs", "adaptive_reports"}
_SYNC = ("OFF", "NORMAL", "FULL", "EXTRA")
_MARK_CHANGED = "UPDATE meta SET value = '1' WHERE key = 'changed'"


class StoreError(HetschedError, RuntimeError):
    """The online store cannot be used as it is (the message names the file and why)."""


class StoreLockedError(StoreError):
    """Another process (or another scheduler in this one) has the store open."""


class StoreCorruptError(StoreError):
    """The file is not a readable hetsched store."""


class StoreVersionError(StoreError):
    """The store was written by a newer schema version than this hetsched knows."""


class ArrayTable:
    """The arrays of the round state in the ``arrays`` and ``array_deltas`` tables, written
    incrementally (see the module docstring).

    Keeps a copy of each array as last written, to compute the next delta.
    """

    def __init__(self) -> None:
        self.last: dict[str, np.ndarray] = {}
        self._deltas: dict[str, int] = {}
        self._delta_bytes: dict[str, int] = {}
        self._full_bytes: dict[str, int] = {}
        self.written = 0   # bytes of array data written by the last write()

    def load(self, conn: sqlite3.Connection) -> dict[str, np.ndarray]:
        """Every stored array (full copy plus its deltas in order)."""
        out: dict[str, np.ndarray] = {}
        for path, dtype, blob in conn.execute("SELECT path, dtype, blob FROM arrays"):
            out[path] = unpack_full(blob, dtype)
            self._full_bytes[path] = len(blob)
        for path, blob in conn.execute("SELECT path, blob FROM array_deltas ORDER BY seq"):
            out[path] = apply_delta(out[path], blob)
            self._deltas[path] = self._deltas.get(path, 0) + 1
            self._delta_bytes[path] = self._delta_bytes.get(path, 0) + len(blob)
        self.last = {p: a.copy() for p, a in out.items()}   # the caller's arrays may change in place
        return out

    def write(self, cur: sqlite3.Cursor, arrays: dict[str, np.ndarray]) -> None:
        """Store ``arrays`` (path -> array) as the current ones, writing only what changed."""
        self.written = 0
        gone = [p for p in self.last if p not in arrays]
        if gone:
            cur.executemany("DELETE FROM arrays WHERE path = ?", [(p,) for p in gone])
            cur.executemany("DELETE FROM array_deltas WHERE path = ?", [(p,) for p in gone])
            for p in gone:
                del self.last[p]
        for path, new in arrays.items():
            old = self.last.get(path)
            n = self._deltas.get(path, 0)
            delta = None if old is None else pack_delta(old, new)
            if delta == b"":
                continue   # unchanged
            if n >= MAX_DELTAS:
                delta = None
            if delta is not None and self._delta_bytes.get(path, 0) + len(delta) <= self._full_bytes.get(path, 0):
                cur.execute("INSERT INTO array_deltas (path, blob) VALUES (?, ?)", (path, delta))
                self._deltas[path] = n + 1
                self._delta_bytes[path] = self._delta_bytes.get(path, 0) + len(delta)
                self.written += len(delta)
            else:
                blob = pack_full(new)
                cur.execute("INSERT OR REPLACE INTO arrays VALUES (?, ?, ?)", (path, new.dtype.str, blob))
                if n:
                    cur.execute("DELETE FROM array_deltas WHERE path = ?", (path,))
                self._deltas[path] = 0
                self._delta_bytes[path] = 0
                self._full_bytes[path] = len(blob)
                self.written += len(blob)
            self.last[path] = new.copy()


class Store:
    """An open store (see the module docstring).

    Parameters
    ----------
    path : str, os.PathLike or None
        The database file (created when absent). None: an in-memory database (no
        persistence, no lock; the simulated driver uses it).
    synchronous : {"FULL", "NORMAL", "OFF", "EXTRA"}, default "FULL"
        SQLite's ``PRAGMA synchronous`` in WAL mode.
    """

    def __init__(self, path: str | os.PathLike | None, *, synchronous: str = "FULL") -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise fail("store", "a file path or None", path, shown=type(path).__name__)
        if not isinstance(synchronous, str) or synchronous.upper() not in _SYNC:
            raise fail("synchronous", f"one of {list(_SYNC)}", synchronous)
        self.path = None if path is None else Path(path)
        self.arrays = ArrayTable()
        self.stored = 0   # bytes of round state the last save_round wrote
        self._lock_fd: int | None = None
        self._batched = False        # inside batch(): each transaction() is a savepoint
        self.conn: sqlite3.Connection | None = None
        if self.path is not None:
            if self.path.is_dir():
                raise ValidationError(f"`store` must be a file path; {str(self.path)!r} is a directory.")
            self._lock()
        try:
            self._connect(synchronous.upper())
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ opening
    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:   # pragma: no cover - not POSIX
            log.warning("fcntl is unavailable: the store %s is not protected against a second opener", self.path)
            return
        lock_path = f"{self.path}.lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"store {str(self.path)!r} is already open (lock {lock_path!r} held by pid {holder}); close the other "
                "OnlineScheduler first (two writers would corrupt its state).") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _connect(self, synchronous: str) -> None:
        where = ":memory:" if self.path is None else str(self.path)
        try:
            self.conn = sqlite3.connect(where, isolation_level=None, check_same_thread=False)
            conn = self.conn
            if self.path is not None:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreCorruptError(f"store {where!r}: could not switch to WAL journal mode (got {mode!r}).")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise StoreCorruptError(f"store {where!r} failed SQLite's quick_check ({check}); it is not reset — "
                                        "restore it from a backup or open a new path.")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise StoreCorruptError(f"store {where!r} is not a readable SQLite database ({exc}); it is not reset — "
                                    "restore it from a backup or open a new path.") from None
        if not tables:
            self._create()
            return
        if "meta" not in tables:
            raise StoreCorruptError(f"store {where!r} is a SQLite database without hetsched's tables (has "
                                    f"{sorted(tables)}); refusing to write into it.")
        version = self.get_meta("schema_version")
        try:
            v = int(version) if version is not None else None
        except ValueError:
            v = None
        if v is None:
            raise StoreCorruptError(f"store {where!r} has no valid schema_version in its meta table (got {version!r}).")
        if v > SCHEMA_VERSION:
            raise StoreVersionError(f"store {where!r} was written with schema version {v}; this hetsched reads "
                                    f"version {SCHEMA_VERSION} only. Upgrade hetsched to open it.")
        if v == 2:
            raise StoreVersionError(
                f"store {where!r} was written with schema version 2 (no pair or spread rates); this hetsched reads "
                f"version {SCHEMA_VERSION} only. Finish its jobs with the hetsched version that wrote it, or start a "
                "new store.")
        if v == 3:
            self._upgrade_from_3(tables)
            v = SCHEMA_VERSION
            tables = tables | {"adaptive_jobs", "adaptive_reports"}
        if v < SCHEMA_VERSION:
            raise StoreVersionError(
                f"store {where!r} was written with schema version {v} (its round state is a pickle); this hetsched "
                f"reads version {SCHEMA_VERSION} only and does not convert it, since reading a pickle can run code. "
                "Finish its jobs with the hetsched version that wrote it, or start a new store.")
        missing = _TABLES - tables
        if missing:
            raise StoreCorruptError(f"store {where!r} lacks table(s) {sorted(missing)} of schema version {v}.")

    def _create(self) -> None:
        assert self.conn is not None
        with self.transaction() as cur:
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    cur.execute(stmt)
            cur.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            cur.execute("INSERT INTO meta VALUES ('changed', '0')")
            cur.execute("INSERT INTO meta VALUES ('created_by', ?)", (f"hetsched {_package_version()}",))

    def _upgrade_from_3(self, tables: set[str]) -> None:
        """Version 3 -> 4: add the (empty) adaptive tables; nothing else changes."""
        with self.transaction() as cur:
            for stmt in _ADAPTIVE_SCHEMA:
                name = stmt.split()[2]
                if name not in tables:
                    cur.execute(stmt)
            cur.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        log.info("store %s: upgraded from schema version 3 to %d (adaptive tables added)", self.where,
                 SCHEMA_VERSION)

    # ------------------------------------------------------------------ use
    @property
    def is_new(self) -> bool:
        """No configuration written yet (a fresh store)."""
        return self.get_meta("config") is None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        """One transaction: committed when the block ends, rolled back when it raises. Inside
        :meth:`batch` a savepoint instead: released when the block ends, rolled back alone
        when it raises."""
        if self.conn is None:
            raise StoreError("the store is closed.")
        cur = self.conn.cursor()
        if self._batched:
            cur.execute("SAVEPOINT call")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK TO call")
                cur.execute("RELEASE call")
                raise
            cur.execute("RELEASE call")
            return
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Every write of the block in one transaction (one commit), each write still all or
        nothing on its own; the block raising rolls all of them back."""
        with self.transaction():
            self._batched = True
            try:
                yield
            finally:
                self._batched = False

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table (None when absent)."""
        assert self.conn is not None
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def config(self) -> dict[str, Any] | None:
        """The stored configuration (None for a fresh store)."""
        raw = self.get_meta("config")
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise StoreCorruptError(f"store {self.where!r}: its configuration is not valid JSON ({exc}).") from None

    # ------------------------------------------------------------------ reading back
    def load_jobs(self) -> list[tuple]:
        """Every ``jobs`` row, in submit order (what :meth:`JobTable.load
        <hetsched.online.table.JobTable.load>` reads)."""
        return self._rows("SELECT * FROM jobs ORDER BY num")

    def load_measured(self) -> list[tuple]:
        """``(num, type, ema, n)``: each job's moving average of its own rate per type."""
        return self._rows("SELECT num, type, ema, n FROM measured")

    def load_side_rates(self) -> list[tuple]:
        """``(num, other, type, given, ema, n)`` of every pair and spread rate, ordered."""
        return self._rows("SELECT num, other, type, given, ema, n FROM side_rates ORDER BY num, other, type")

    def load_snapshot(self) -> tuple[int, float, str, dict[str, np.ndarray]] | None:
        """``(plans made, time of the last plan, state tree, arrays)`` of the last round, or
        None before the first plan (or for a store that never keeps one, in memory)."""
        snap = self._rows("SELECT round, now, tree FROM snapshot WHERE id = 1")
        if not snap:
            return None
        assert self.conn is not None
        return int(snap[0][0]), float(snap[0][1]), str(snap[0][2]), self.arrays.load(self.conn)

    def load_adaptive_jobs(self) -> list[tuple[int, str, int, int]]:
        """``(num, model, replicas, batch size)`` of every adaptive job, in submit order."""
        return self._rows("SELECT num, model, replicas, batch_size FROM adaptive_jobs ORDER BY num")

    def load_adaptive_reports(self) -> list[tuple[int, int, str]]:
        """``(round, num, JSON)`` of every adaptive job's measurement, in report order."""
        return self._rows("SELECT round, num, data FROM adaptive_reports ORDER BY seq")

    def reported_seconds(self, round_index: int) -> list[tuple[int, float]]:
        """``(num, seconds)``: per job, the seconds reported during round ``round_index``."""
        return self._rows("SELECT num, SUM(seconds) FROM reports WHERE round = ? GROUP BY num ORDER BY num",
                          (round_index,))

    @property
    def changed(self) -> bool:
        """Whether the active set changed since the last plan (a submit, complete or cancel)."""
        return self.get_meta("changed") == "1"

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        if self.conn is None:
            raise StoreError("the store is closed.")
        return self.conn.execute(sql, args).fetchall()

    # ------------------------------------------------------------------ writing (one transaction each)
    def save_config(self, config: dict[str, Any]) -> None:
        """Write the configuration of a fresh store (see :meth:`config`)."""
        with self.transaction() as cur:
            cur.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(config, sort_keys=True),))

    def save_cluster(self, config: dict[str, Any], snapshot: tuple[str, dict[str, np.ndarray]] | None) -> None:
        """A resized cluster (:meth:`OnlineScheduler.resize <hetsched.online.OnlineScheduler.resize>`):
        the new configuration, the last round's state tree and arrays rewritten (``snapshot``;
        its placement dropped) and the active set marked changed, so the next plan re-solves."""
        with self.transaction() as cur:
            cur.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps(config, sort_keys=True),))
            if snapshot is not None:
                cur.execute("UPDATE snapshot SET tree = ? WHERE id = 1", (snapshot[0],))
                self.arrays.write(cur, snapshot[1])
            cur.execute(_MARK_CHANGED)

    def save_job(self, row: Sequence[Any], side_rows: Sequence[tuple],
                 adaptive: tuple[str, int, int] | None = None) -> None:
        """A submitted job: its ``jobs`` row, the ``side_rates`` rows it gave, for an adaptive
        job ``(model, replicas, batch size)``, and the mark that the active set changed."""
        with self.transaction() as cur:
            cur.execute("INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", tuple(row))
            cur.executemany("INSERT INTO side_rates VALUES (?,?,?,?,?,?)", side_rows)
            if adaptive is not None:
                cur.execute("INSERT INTO adaptive_jobs VALUES (?,?,?,?)", (row[0], *adaptive))
            cur.execute(_MARK_CHANGED)

    def finish_job(self, num: int, status: int, finish: float | None) -> None:
        """Job ``num`` completed or cancelled (``status``) at ``finish`` (None: not given)."""
        with self.transaction() as cur:
            cur.execute("UPDATE jobs SET status = ?, finish = ? WHERE num = ?", (status, finish, num))
            cur.execute(_MARK_CHANGED)

    def append_report(self, round_index: int, num: int, gpu_type: int, steps: float, seconds: float, *,
                      steps_done: float, iso_time: float, measured: tuple[float, int] | None = None,
                      side: tuple[int, float | None, float, int] | None = None,
                      adaptive: str | None = None) -> None:
        """A report of job ``num`` on type number ``gpu_type`` during round ``round_index``,
        the job's new ``steps_done`` and ``iso_time``, and what it taught: ``measured``
        ``(ema, n)`` of the job's own rate on that type, or ``side`` ``(other, given, ema,
        n)`` of a pair or spread rate; ``adaptive``: an adaptive job's measurement (JSON)."""
        with self.transaction() as cur:
            cur.execute("INSERT INTO reports (round, num, type, steps, seconds) VALUES (?,?,?,?,?)",
                        (round_index, num, gpu_type, steps, seconds))
            if adaptive is not None:
                cur.execute("INSERT INTO adaptive_reports (round, num, data) VALUES (?,?,?)",
                            (round_index, num, adaptive))
            if measured is not None:
                cur.execute("INSERT OR REPLACE INTO measured VALUES (?,?,?,?)", (num, gpu_type, *measured))
            if side is not None:
                other, given, ema, n = side
                cur.execute("INSERT OR REPLACE INTO side_rates VALUES (?,?,?,?,?,?)",
                            (num, other, gpu_type, given, ema, n))
            cur.execute("UPDATE jobs SET steps_done = ?, iso_time = ? WHERE num = ?", (steps_done, iso_time, num))

    def save_round(self, round_index: int, now: float, *, tree: str | None, arrays: dict[str, np.ndarray],
                   leases: Sequence[tuple[int, int, int, int, str | None]], n_active: int, solved: bool,
                   solve_status: str, solve_s: float | None, plan_s: float) -> float:
        """A planned round: the state tree and its arrays (as deltas; skipped when ``tree`` is
        None), the leases ``(num, type, gpus, partner, gpu ids)`` replacing the last ones, the
        ``rounds`` row, and the active set marked unchanged. Sets :attr:`stored` to the bytes
        of round state written; returns the seconds of the SQLite commit alone."""
        rows = [(j, round_index, k, g, p, ids) for j, k, g, p, ids in leases]
        with self.transaction() as cur:
            self.stored = 0
            if tree is not None:
                cur.execute("INSERT OR REPLACE INTO snapshot VALUES (1, ?, ?, ?)", (round_index + 1, now, tree))
                self.arrays.write(cur, arrays)
                self.stored = len(tree) + self.arrays.written
            cur.execute("DELETE FROM leases")
            cur.executemany("INSERT INTO leases VALUES (?,?,?,?,?,?)", rows)
            cur.execute("INSERT INTO rounds VALUES (?,?,?,?,?,?,?,?)",
                        (round_index, now, n_active, len(rows), int(solved), solve_status, solve_s, plan_s))
            cur.execute("UPDATE meta SET value = '0' WHERE key = 'changed'")
            c0 = time.perf_counter()
        return time.perf_counter() - c0

    @property
    def is_open(self) -> bool:
        """Whether the store can be used (not closed)."""
        return self.conn is not None

    @property
    def where(self) -> str:
        """The file (or ':memory:')."""
        return ":memory:" if self.path is None else str(self.path)

    def close(self) -> None:
        """Close the connection and release the lock (idempotent)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)   # closing the descriptor releases the flock
            self._lock_fd = None

    def __repr__(self) -> str:
        return f"Store({self.where!r}, open={self.conn is not None})"


def _package_version() -> str:
    """The installed hetsched version (from the package metadata: importing the package
    itself from here would close an import circle)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hetsched")
    except PackageNotFoundError:
        return "unknown"
