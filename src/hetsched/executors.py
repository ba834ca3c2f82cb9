"""Where parallel work runs: the default process pool, its main-module guard, and Ray.

:func:`hetsched.sweep` and :class:`hetsched.api.Partitioned` accept any
:class:`concurrent.futures.Executor`. Without one they start a process pool here
(:func:`process_pool`). Dask's ``Client.get_executor()`` already is an Executor; Ray has
none, so :class:`RayExecutor` adapts Ray tasks to the interface (``ObjectRef.future()``).

The main-module rule
--------------------
With the *spawn* start method (the default on macOS and Windows, and what ``Partitioned``
always uses) and with *forkserver* (Linux's default from Python 3.14), every worker process
imports the user's main script again, as ``__mp_main__``. Code at the top level of the
script then runs once more in each worker, and a pool started there would start workers of
its own. Parallel work started from a script therefore belongs under
``if __name__ == "__main__":``. :func:`check_main_guard` recognises the re-import (the
worker is still in multiprocessing's bootstrapping phase) and raises
:class:`~hetsched.errors.MainModuleGuardError` naming the rule, so the worker stops at once;
the parent sees a broken pool, and :func:`broken_pool_hint` names the likely cause.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .errors import MainModuleGuardError, ValidationError
from .validation import check_positive

__all__ = ["RayExecutor", "broken_pool_hint", "check_main_guard", "default_workers", "process_pool"]

log = logging.getLogger(__name__)

#: Where the rule is explained for users.
GUARD_DOC = "docs/scaling.md, 'Process pools and the main-module guard'"


def default_workers() -> int:
    """CPUs this process may use (``os.sched_getaffinity`` where available)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def importing_main_in_worker() -> bool:
    """True while this process is a multiprocessing worker still importing the main script.

    multiprocessing marks that phase with ``current_process()._inheriting`` (the flag its
    own ``spawn._check_not_importing_main`` reads); it is set only in a child process, from
    the start of its bootstrap until the parent's process object has been received
    (``multiprocessing.parent_process()`` is still None then, so it cannot serve).
    """
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def check_main_guard(what: str) -> None:
    """Raise :class:`MainModuleGuardError` when called while a worker re-imports the main script.

    Parameters
    ----------
    what : str
        What was about to start a process pool (named in the message).

    Raises
    ------
    MainModuleGuardError
        The caller runs at the top level of a script that a spawned worker is importing.
    """
    if importing_main_in_worker():
        raise MainModuleGuardError(
            f"{what} was called while a worker process was importing the main script: the script starts "
            "parallel work at its top level, so every worker runs it again. Put that code under "
            "`if __name__ == \"__main__\":` (required with the spawn and forkserver start methods; see "
            f"{GUARD_DOC}), or pass an executor / max_workers=1."
        )


def process_pool(max_workers: int, *, what: str, start_method: str | None = None) -> cf.ProcessPoolExecutor:
    """A :class:`~concurrent.futures.ProcessPoolExecutor` after :func:`check_main_guard`.

    Parameters
    ----------
    max_workers : int
        Worker processes (at least 1).
    what : str
        The caller, named in a :class:`MainModuleGuardError`.
    start_method : {"spawn", "fork", "forkserver"}, optional
        Default: multiprocessing's current default start method.
    """
    check_main_guard(what)
    ctx = multiprocessing.get_context(start_method) if start_method is not None else None
    return cf.ProcessPoolExecutor(max_workers=max_workers, mp_context=ctx)


def broken_pool_hint(exc: BaseException) -> str:
    """A sentence naming the usual cause of a :class:`BrokenProcessPool`, else ``""``."""
    if not isinstance(exc, BrokenProcessPool):
        return ""
    return (" A worker process died. If this ran from a script with the spawn or forkserver start method, "
            "the usual cause is parallel work at the script's top level: put it under "
            f"`if __name__ == \"__main__\":` ({GUARD_DOC}); the worker's own error is on stderr.")


class RayExecutor(cf.Executor):
    """A :class:`concurrent.futures.Executor` that runs each call as a Ray task.

    Parameters
    ----------
    address : str, optional
        Ray cluster to connect to when Ray is not yet initialised in this process
        (``"auto"``, ``"ray://head:10001"``, ...); ``None`` starts a local Ray. When Ray is
        already initialised (``ray.init`` called by you), that connection is used and
        ``address`` must be None.
    task_cpus : float, default 1
        CPUs Ray reserves for each task (``ray.remote(num_cpus=...)``); finite, > 0.
    **init_kwargs
        Passed to ``ray.init`` when this executor starts Ray (e.g. ``num_cpus=2``: a local
        Ray with 2 CPUs); then :meth:`shutdown` also shuts Ray down.

    Notes
    -----
    Needs Ray (``pip install "hetsched[ray]"``). A failed task's exception is re-raised
    by ``Future.result()`` as an instance of the original exception class (Ray's
    ``RayTaskError.as_instanceof_cause``).

    Examples
    --------
    >>> from hetsched.executors import RayExecutor
    >>> RayExecutor(task_cpus=0)
    Traceback (most recent call last):
    hetsched.errors.ValidationError: `task_cpus` must be a positive finite number; got 0.

    Typical use (needs Ray)::

        with RayExecutor(num_cpus=2) as ex:        # a local Ray; or RayExecutor("ray://head:10001")
            df = hetsched.sweep(grid, ex)
    """

    def __init__(self, address: str | None = None, *, task_cpus: float = 1, **init_kwargs: Any) -> None:
        check_positive(task_cpus, "task_cpus")
        if address is not None and not isinstance(address, str):
            raise ValidationError(f"`address` must be a string or None; got {type(address).__name__}.")
        try:
            import ray
        except ImportError:
            raise ImportError('RayExecutor needs Ray: pip install "hetsched[ray]"') from None
        self._ray = ray
        self._owns = False
        if ray.is_initialized():
            if address is not None or init_kwargs:
                raise ValidationError(
                    "`address` and ray.init keywords must be omitted when Ray is already initialised in this "
                    f"process; got address={address!r}, {sorted(init_kwargs)}."
                )
        else:
            ray.init(address=address, **init_kwargs)
            self._owns = True
            log.info("RayExecutor: started Ray (address=%r)", address)
        self._task_cpus = float(task_cpus)
        self._call: Any = None
        self._pending: list[Any] = []
        self._closed = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        """Run ``fn(*args, **kwargs)`` as a Ray task; returns its :class:`~concurrent.futures.Future`."""
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        if self._call is None:  # one remote function; the callable travels as its first argument
            self._call = self._ray.remote(num_cpus=self._task_cpus)(_call)
        ref = self._call.remote(fn, *args, **kwargs)
        if self._pending:  # forget finished tasks
            _, self._pending = self._ray.wait(self._pending, num_returns=len(self._pending), timeout=0)
        self._pending.append(ref)
        return ref.future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting work; wait for (or cancel) pending tasks; shut Ray down if this executor started it."""
        self._closed = True
        if self._pending and cancel_futures:
            for ref in self._pending:
                self._ray.cancel(ref)
        elif self._pending and wait:
            self._ray.wait(self._pending, num_returns=len(self._pending))
        self._pending = []
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False


def _call(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Body of every Ray task of :class:`RayExecutor`: ``fn(*args, **kwargs)``."""
    return fn(*args, **kwargs)
