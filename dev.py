#!/usr/bin/env python3
"""One entry point for set-up and the everyday commands; needs only python3.

    python3 dev.py demo     # create/reuse .venv, install hetsched, solve policies on built-in data
    python3 dev.py test     # create/reuse .venv, install hetsched[test], run the test suite
                            # ([test] includes the [ray] and [dask] extras: no engine test is skipped)
    python3 dev.py bench    # run benchmarks/solver_scaling.py --quick

The virtual environment lives in ``.venv`` next to this file and is reinstalled only when
``pyproject.toml`` changes.
"""

from __future__ import annotations

import hashlib
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


def _ensure_env(extras: str) -> None:
    if not PY.exists():
        print(f"[dev] creating virtual environment in {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
        subprocess.run([str(PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    print(f"[dev] installing hetsched[{extras}] into {VENV}", flush=True)
    subprocess.run(
        [str(PY), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{extras}]"],
        check=True,
    )
    STAMP.write_text(digest)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test", "bench"}:
        print(__doc__)
        return 2
    cmd, rest = argv[0], argv[1:]
    _ensure_env("test")
    if cmd == "demo":
        return subprocess.call([str(PY), "-m", "hetsched", "demo", *rest], cwd=ROOT)
    if cmd == "bench":
        return subprocess.call([str(PY), str(ROOT / "benchmarks" / "solver_scaling.py"), "--quick", *rest], cwd=ROOT)
    code = subprocess.call([str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", *rest], cwd=ROOT)
    if code == 5:
        print("[dev] pytest collected no tests: treating as failure", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
