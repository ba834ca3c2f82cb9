"""Test-session settings.

The problems in these tests are small: multi-threaded BLAS only contends for the two cores
CI has (measured: a 5-round Pollux run on real profiles took 88 s with OpenBLAS's default
threads on a loaded 2-core machine, 0.6 s with one thread), so the tests run with one BLAS
thread unless the caller set otherwise. This must happen before numpy is first imported.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
