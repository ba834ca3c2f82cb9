#!/usr/bin/env python3
"""One entry point for set-up and the everyday commands; needs only python3.

    python3 dev.py demo     # create/reuse .venv, install hetsched (no extra), simulate a short workload
    python3 dev.py test     # create/reuse .venv, install hetsched[test], run the test suite
                            # ([test] includes the [ray] and [dask] extras: no engine test is skipped)
    python3 dev.py run -- ARGS...
                            # create/reuse .venv, install hetsched[plot], run `python -m hetsched ARGS...`
                            # in it (no activation needed), e.g. python3 dev.py run -- simulate --jobs 20
    python3 dev.py bench    # create/reuse .venv, install hetsched, run benchmarks/solver_scaling.py --quick

The virtual environment lives in ``.venv`` next to this file. Each command installs only
the extras it uses; an install is repeated only when ``pyproject.toml`` changes or a command
needs an extra that is not there yet (a ``test`` install covers every other command).

Environment: ``HETSCHED_DEV_PYTHON=/path/to/python`` runs the commands with that interpreter
as it is (no virtual environment is created, nothing is installed). The test suite sets it
to run the README's shell blocks as written with the interpreter that runs the tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".hetsched-install-stamp"

#: The extras of hetsched each command installs (pyproject.toml, [project.optional-dependencies]).
COMMAND_EXTRAS: dict[str, tuple[str, ...]] = {"demo": (), "bench": (), "run": ("plot",), "test": ("test",)}
#: What installing an extra provides (``test`` pulls in matplotlib, Ray and Dask).
PROVIDES: dict[str, frozenset[str]] = {
    "test": frozenset({"test", "plot", "ray", "dask"}),
    "plot": frozenset({"plot"}),
    "ray": frozenset({"ray"}),
    "dask": frozenset({"dask"}),
}


def _provided(extras: set[str] | tuple[str, ...] | list[str]) -> frozenset[str]:
    out: set[str] = set()
    for e in extras:
        out |= PROVIDES.get(e, frozenset({e}))
    return frozenset(out)


def _read_stamp(digest: str) -> set[str] | None:
    """The extras the stamp says are installed for this ``pyproject.toml``; None when there is
    no stamp, it is from an older ``dev.py`` or ``pyproject.toml`` changed since."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("pyproject") != digest:
        return None
    return set(stamp.get("extras", []))


def _previous_extras() -> set[str]:
    """Extras an older install recorded, whatever ``pyproject.toml`` it was for (kept on reinstall)."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return set()
    return set(stamp.get("extras", [])) if isinstance(stamp, dict) else set()


def _ensure_env(extras: tuple[str, ...]) -> Path:
    """The interpreter to run with: ``.venv``'s, created and given ``hetsched[extras]`` when missing."""
    override = os.environ.get("HETSCHED_DEV_PYTHON")
    if override:
        return Path(override)
    if not PY.exists():
        print(f"[dev] creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
        subprocess.run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    installed = _read_stamp(digest)
    if installed is not None and _provided(extras) <= _provided(installed):
        return PY
    # reinstall what an earlier command installed too, so that commands do not undo each other
    want = sorted(set(extras) | _previous_extras())
    spec = f"{ROOT}[{','.join(want)}]" if want else str(ROOT)
    print(f"[dev] installing hetsched{'[' + ','.join(want) + ']' if want else ''} into {VENV}", flush=True)
    subprocess.run([str(PY), "-m", "pip", "install", "-q", "-e", spec], check=True)
    STAMP.write_text(json.dumps({"pyproject": digest, "extras": want}))
    return PY


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMAND_EXTRAS:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    py = _ensure_env(COMMAND_EXTRAS[cmd])
    if cmd == "demo":
        return subprocess.call([str(py), "-m", "hetsched", "demo", *rest], cwd=ROOT)
    if cmd == "run":  # in the caller's directory, so that relative paths mean what they say
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return subprocess.call([str(py), "-m", "hetsched", *rest])
    if cmd == "bench":
        return subprocess.call([str(py), str(ROOT / "benchmarks" / "solver_scaling.py"), "--quick", *rest], cwd=ROOT)
    code = subprocess.call([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", *rest], cwd=ROOT)
    if code == 5:
        print("[dev] pytest collected no tests: treating as failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
