"""Where a result came from: command line, settings, seed, package versions, git commit.

Every output directory the command line writes (``simulate --out``, ``sweep --out``) holds a
``provenance.json`` made by :func:`provenance`; :meth:`SimulationResult.to_dir` writes one
too. The git commit is that of the hetsched source tree (``git rev-parse HEAD`` run in the
package's directory), recorded only when the package files are tracked by that repository
(an installed wheel inside some other repository records None), with ``git_dirty`` telling
whether tracked files had uncommitted changes. Collecting it never fails: a missing
``git``, a timeout or a non-repository give None.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..rounds.options import (
    progress_wanted,  # the round loop's rule too; re-exported here
)
from .metrics import package_versions

__all__ = ["PROVENANCE_FILE", "git_commit", "json_clean", "progress_wanted", "provenance", "write_provenance"]

log = logging.getLogger(__name__)

#: File name of the provenance record in an output directory.
PROVENANCE_FILE = "provenance.json"

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError) as exc:  # no git, timeout, ...
        log.debug("git %s failed: %s", " ".join(args), exc)
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _versions() -> dict[str, str]:
    """:func:`~hetsched.sim.package_versions` plus the packages the command line draws with."""
    import importlib.metadata

    out = package_versions()
    for name in ("matplotlib", "tqdm"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_commit(path: str | Path | None = None) -> dict[str, Any]:
    """The git commit of the source tree at ``path`` (default: the hetsched package).

    Returns
    -------
    dict
        ``{"git_commit": sha or None, "git_dirty": bool or None}``; None when git is
        missing, ``path`` is not in a repository, or the package's own files are not tracked
        by it.
    """
    cwd = Path(path) if path is not None else _PACKAGE_DIR
    none: dict[str, Any] = {"git_commit": None, "git_dirty": None}
    if not cwd.is_dir():
        return none
    sha = _git(["rev-parse", "HEAD"], cwd)
    if not sha or _git(["ls-files", "--error-unmatch", "__init__.py"], cwd) is None:
        return none
    status = _git(["status", "--porcelain", "--untracked-files=no", "--", "."], cwd)
    return {"git_commit": sha, "git_dirty": None if status is None else bool(status)}


def json_clean(value: Any) -> Any:
    """``value`` as JSON can hold it: mappings and sequences recursively, numpy scalars as
    Python numbers, non-finite floats as None, anything else as its ``repr``."""
    if isinstance(value, Mapping):
        return {str(k): json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, str) or value is None:
        return value
    return repr(value)


def provenance(*, argv: Sequence[str] | None = None, config: Any = None, seed: Any = None,
               extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-serializable record of how a result was made.

    Parameters
    ----------
    argv : sequence of str, optional
        The command line (default: ``sys.argv``).
    config : any, optional
        The settings of the run (a config dict, a sweep grid...); made JSON-safe with
        :func:`json_clean`.
    seed : any, optional
        The seed (or seeds).
    extra : Mapping, optional
        More entries (e.g. the text of a TOML experiment).

    Returns
    -------
    dict
        ``command`` (list), ``command_line`` (shell-quoted), ``cwd``, ``created_utc``,
        ``seed``, ``config``, ``versions`` (Python, platform, hetsched and the numeric
        packages), ``git_commit``, ``git_dirty``, and ``extra``'s entries.
    """
    args = [str(a) for a in (sys.argv if argv is None else argv)]
    record: dict[str, Any] = {
        "command": args,
        "command_line": shlex.join(args),
        "cwd": os.getcwd(),
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "seed": json_clean(seed),
        "config": json_clean(config),
        "versions": _versions(),
        **git_commit(),
    }
    if extra:
        record.update(json_clean(dict(extra)))
    return record


def write_provenance(directory: str | Path, record: Mapping[str, Any]) -> Path:
    """Write ``record`` as ``directory/provenance.json``; return the path."""
    import json

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / PROVENANCE_FILE
    path.write_text(json.dumps(json_clean(record), indent=2) + "\n")
    return path
