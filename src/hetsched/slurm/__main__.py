"""``python -m hetsched.slurm STEPS`` (or ``--lease``): the shell form of
:func:`hetsched.slurm.report` (see :mod:`hetsched.slurm.progress`). A module of its own that
the package does not import, so that ``-m`` runs it cleanly and no submodule shadows the
package's ``report`` function."""

from __future__ import annotations

import sys

from .progress import main

if __name__ == "__main__":
    sys.exit(main())
