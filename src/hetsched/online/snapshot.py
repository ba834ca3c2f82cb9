"""What the store keeps of the round step between calls: the round scheduler's state, the rows
it returned, the placer's memory and per-job times, as a data-only JSON tree and its arrays
(:mod:`.codec`), and back."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..inputs.topology import Topology
from ..placement.result import Placement
from .codec import decode, encode

__all__ = ["placement_data", "placement_from_data", "read_round", "round_tree"]


def round_tree(*, state: Any, rows: Any, placer: dict[str, Any] | None, iso_rate: np.ndarray,
               last_end: np.ndarray, row_base: np.ndarray | None) -> tuple[str, dict[str, np.ndarray]]:
    """The round state as a compact JSON tree and its arrays by path.

    Raises
    ------
    StateEncodingError
        A value of the state has no data-only encoding (:func:`~hetsched.online.register_state_type`).
    """
    tree, arrays = encode({"state": state, "rows": rows, "placer": placer, "iso_rate": iso_rate,
                           "last_end": last_end, "row_base": row_base})
    return json.dumps(tree, separators=(",", ":")), arrays


def read_round(tree: str, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The dict :func:`round_tree` encoded (keys ``state``, ``rows``, ``placer``,
    ``iso_rate``, ``last_end``, ``row_base``)."""
    return decode(json.loads(tree), arrays)


def placement_data(prev: Any) -> dict[str, Any] | None:
    """The placer's memory of the last placement as plain arrays (see :func:`placement_from_data`)."""
    if prev is None:
        return None
    if isinstance(prev, Placement):
        return {"kind": "placement", "job_ids": np.asarray(prev.job_ids), "gpu_type": prev.gpu_type,
                "num_gpus": prev.num_gpus, "gpu_offset": prev.gpu_offset, "gpus": prev.gpus,
                "reason": np.asarray(prev.reason), "migrated": prev.migrated, "flow_cost": int(prev.flow_cost),
                "solver": str(prev.solver)}
    keys = list(prev)
    lists = [np.asarray(prev[k], dtype=np.int64) for k in keys]
    off = np.zeros(len(keys) + 1, np.int64)
    np.cumsum([x.size for x in lists], out=off[1:])
    return {"kind": "mapping", "job_ids": np.asarray(keys, dtype=np.int64), "gpu_offset": off,
            "gpus": np.concatenate(lists) if lists else np.zeros(0, np.int64)}


def placement_from_data(data: dict[str, Any] | None, topology: Topology) -> Any:
    """What the placer remembered (a Placement on ``topology``, or job -> GPU ids)."""
    if data is None:
        return None
    off, gpus = data["gpu_offset"], data["gpus"]
    if data["kind"] == "mapping":
        return {int(j): gpus[off[i]:off[i + 1]] for i, j in enumerate(data["job_ids"].tolist())}
    if data["kind"] != "placement":
        raise ValueError(f"unknown placement kind {data['kind']!r}")
    return Placement(topology=topology, job_ids=data["job_ids"], gpu_type=data["gpu_type"],
                     num_gpus=data["num_gpus"], gpu_offset=off, gpus=gpus, reason=data["reason"],
                     migrated=data["migrated"], flow_cost=data["flow_cost"], solver=data["solver"])
