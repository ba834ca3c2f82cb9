"""Device memory of each GPU type (GB), for schedulers that pack jobs by GPU memory (AntMan).

The defaults are the vendor's datasheet figures for one device as a job sees it:

=============  =====  ===========================================================
type           GB     source
=============  =====  ===========================================================
``k80``        12     NVIDIA Tesla K80 datasheet: 24 GB per board, two GK210 GPUs
``p100``       16     NVIDIA Tesla P100 datasheet (the 16 GB HBM2 SXM2/PCIe part)
``v100``       16     NVIDIA V100 datasheet (16 GB part; ``v100-32gb``: 32)
``t4``         16     NVIDIA T4 datasheet
``rtx``        11     GeForce RTX 2080 Ti specifications (Sia's "rtx" machines)
``a100``       40     NVIDIA A100 datasheet (40 GB part; ``a100-80gb``: 80)
``h100``       80     NVIDIA H100 datasheet (SXM5)
=============  =====  ===========================================================

A type not in the table needs its memory given explicitly (:func:`gpu_memory_of`).

>>> from hetsched.inputs.gpu_memory import gpu_memory_of
>>> gpu_memory_of(["v100", "k80"]).tolist()
[16.0, 12.0]
>>> gpu_memory_of(["v100"], {"v100": 32}).tolist()
[32.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import ValidationError

__all__ = ["GPU_MEMORY_GB", "gpu_memory_of"]

#: Datasheet memory per GPU (GB) by lower-case type name (see the module docstring).
GPU_MEMORY_GB: dict[str, float] = {
    "k80": 12.0, "p100": 16.0, "v100": 16.0, "v100-32gb": 32.0, "t4": 16.0, "rtx": 11.0, "rtx2080ti": 11.0,
    "a100": 40.0, "a100-80gb": 80.0, "h100": 80.0,
}


def gpu_memory_of(gpu_types: Sequence[str], given: Mapping[str, float] | None = None) -> np.ndarray:
    """GB per GPU of each of ``gpu_types``: ``given`` first, then :data:`GPU_MEMORY_GB`.

    Raises
    ------
    ValidationError
        ``given`` holds a non-positive or non-finite value, or a type is in neither.
    """
    given = {} if given is None else given
    if not isinstance(given, Mapping):
        raise ValidationError(f"`gpu_memory_gb` must be a mapping GPU type -> GB; got {type(given).__name__}.")
    out = np.empty(len(gpu_types))
    for i, t in enumerate(gpu_types):
        if t in given:
            v = given[t]
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not np.isfinite(v) or v <= 0:
                raise ValidationError(f"`gpu_memory_gb[{t!r}]` must be a positive finite number of GB; got {v!r}.")
            out[i] = float(v)
        elif t.lower() in GPU_MEMORY_GB:
            out[i] = GPU_MEMORY_GB[t.lower()]
        else:
            raise ValidationError(f"GPU type {t!r} has no default memory; give it in `gpu_memory_gb` (known: "
                                  f"{sorted(GPU_MEMORY_GB)}).")
    return out
