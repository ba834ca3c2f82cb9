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


import pytest  # noqa: E402  (after the BLAS settings above)


@pytest.fixture(scope="module")
def sia_root():
    """Sia's artifact data folder (``../shared/data/sia`` or ``$HETSCHED_SIA_DATA``); the test
    is skipped where it is not on this machine."""
    from hetsched.errors import DataNotFoundError
    from hetsched.inputs.profiles import sia_data_path

    try:
        return sia_data_path()
    except DataNotFoundError:
        pytest.skip("Sia's published profiles are not present (../shared/data/sia or $HETSCHED_SIA_DATA)")
