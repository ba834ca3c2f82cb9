"""Data-only encoding of an :class:`~hetsched.online.OnlineScheduler`'s round state (no pickle).

:func:`encode` turns the state (the wrapped scheduler's state, the last plan's rows, the
last placement, per-job arrays) into a JSON *tree* and a dict of numpy arrays keyed by
their path in the tree; :func:`decode` rebuilds it. Only these values are accepted:
``None``, bool, int, float, str, numpy scalars and arrays (numbers, booleans, strings;
object arrays of str or int), lists, tuples, sets, dicts, pandas DataFrames of such columns, and
dataclasses registered with :func:`register_state_type` (hetsched's own scheduler states,
share histories, round plans and rows are). Decoding reads JSON and raw array bytes (``numpy.frombuffer``)
and calls only the constructors of registered dataclasses, so
opening a store never runs code taken from it.

Fields that are caches are not stored and come back at their defaults: fields whose name
starts with ``_`` (a :class:`~hetsched.mechanism.RoundPlan`'s aligned history), a
:class:`~hetsched.mechanism.ShareHistory`'s ``version`` and a
:class:`~hetsched.sim.PolicyState`'s ``policy`` (re-bound from the job table at the next
plan), an adaptive scheduler's configuration sets (rebuilt from the cluster) and its
beliefs' ``progress`` (re-linked to the online jobs when the store is opened).

Arrays are stored compactly and incrementally (:func:`pack_full`, :func:`pack_delta`):

* **raw**: each array is a few header bytes (element code, shape) and its little-endian data
  (read back with ``numpy.frombuffer``: numbers, booleans and fixed-width strings only);
* **compact**: integers in the smallest integer type that holds them; floats as small
  integers or float32 when that round-trips bit for bit; the original dtype is restored;
* **delta**: an array with the same trailing shape as its last stored version and at least
  as many rows is stored as ``old + c`` (one scalar ``c``: 0, or the common increment, as
  for elapsed times) with the elements that differ from that listed, plus the rows
  appended. Applying it redoes the same arithmetic, so the result is bit for bit the array
  that was encoded (the encoder checks it element by element).
"""

from __future__ import annotations

import dataclasses
import io
import math
import struct
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["apply_delta", "decode", "encode", "pack_delta", "pack_full", "register_state_type",
           "same_bits", "unpack_full"]

#: Registered dataclasses: name -> (class, fields not stored).
_TYPES: dict[str, tuple[type, frozenset[str]]] = {}
_NAMES: dict[type, str] = {}
_BUILTINS_DONE = False
_ARRAY_KINDS = "biufU"


class StateEncodingError(TypeError):
    """A value of the state has no data-only encoding (the message names its path and type)."""


def register_state_type(cls: type, *, skip: tuple[str, ...] = ()) -> type:
    """Allow instances of the dataclass ``cls`` in a stored scheduler state.

    A custom round scheduler whose state is (or holds) its own dataclass registers it so
    that :class:`~hetsched.online.OnlineScheduler` can store it without pickle. Fields in
    ``skip`` (and those starting with ``_``) are not stored and take their defaults when the
    state is read back. Returns ``cls`` (usable as a decorator).

    Raises
    ------
    ValidationError
        ``cls`` is not a dataclass, or a skipped field has no default.
    """
    from ..errors import ValidationError

    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValidationError(f"`cls` must be a dataclass type; got {cls!r}.")
    names = {f.name: f for f in dataclasses.fields(cls)}
    for s in skip:
        f = names.get(s)
        if f is None or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
            raise ValidationError(f"`skip` must name fields of {cls.__name__} that have defaults; got {s!r}.")
    name = f"{cls.__module__}.{cls.__qualname__}"
    _TYPES[name] = (cls, frozenset(skip))
    _NAMES[cls] = name
    return cls


def _builtins() -> None:
    global _BUILTINS_DONE
    if _BUILTINS_DONE:
        return
    from ..adaptive.goodput import GradParams, PerfParams
    from ..hived.common import HiveDState
    from ..hived.policy import TenantPolicyState
    from ..mechanism.history import ShareHistory
    from ..mechanism.plan import RoundPlan
    from ..rounds.policy_scheduler import PolicyState
    from ..rounds.protocol import RoundRows
    from ..schedulers.adaptive_base import AdaptiveState
    from ..schedulers.antman import AntManState
    from ..schedulers.convergence import ConvergenceFit
    from ..schedulers.gandiva import GandivaState
    from ..schedulers.goodput_beliefs import GoodputBeliefs
    from ..schedulers.muri import MuriState
    from ..schedulers.optimus import OptimusState
    from ..schedulers.synergy import SynergyState
    from ..schedulers.themis import ThemisState
    from ..schedulers.tiresias import TiresiasPlan, TiresiasState

    register_state_type(ShareHistory, skip=("version",))
    register_state_type(PolicyState, skip=("policy",))
    # the adaptive states' configuration sets are rebuilt from the cluster; their beliefs'
    # link to the jobs is re-made by the online step (hetsched.schedulers.adaptive_base.relink)
    register_state_type(AdaptiveState, skip=("configs",))
    register_state_type(OptimusState, skip=("configs", "configs_of"))
    register_state_type(GoodputBeliefs, skip=("progress",))
    register_state_type(SynergyState)
    register_state_type(AntManState)
    register_state_type(ThemisState)
    register_state_type(HiveDState)
    register_state_type(TenantPolicyState)
    for cls in (RoundPlan, TiresiasPlan, TiresiasState, RoundRows, GradParams, PerfParams, ConvergenceFit,
                MuriState, GandivaState):
        register_state_type(cls)
    _BUILTINS_DONE = True


# ---------------------------------------------------------------------- tree
def encode(obj: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """``(tree, arrays)``: a JSON-serializable tree and the arrays it refers to by path.

    Raises
    ------
    StateEncodingError
        A value with no data-only encoding (e.g. an unregistered class).
    """
    _builtins()
    arrays: dict[str, np.ndarray] = {}
    return _enc(obj, "s", arrays), arrays


def _enc(obj: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in "biufU" or obj.dtype.itemsize > 8:
            raise StateEncodingError(f"state value at {path} has dtype {obj.dtype}, which is not stored")
        return {"$s": [obj.dtype.str, obj.item()]}
    if isinstance(obj, (int, float)):
        return obj
    if isinstance(obj, np.ndarray):
        return _enc_array(obj, path, arrays)
    if isinstance(obj, list):
        return [_enc(v, f"{path}.{i}", arrays) for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return {"$t": [_enc(v, f"{path}.{i}", arrays) for i, v in enumerate(obj)]}
    if isinstance(obj, (set, frozenset)):
        try:
            items = sorted(obj)
        except TypeError:
            items = list(obj)
        return {"$set": [_enc(v, f"{path}.{i}", arrays) for i, v in enumerate(items)]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {"$d": {k: _enc(v, f"{path}.{k}", arrays) for k, v in obj.items()}}
        return {"$m": [[_enc(k, f"{path}.k{i}", arrays), _enc(v, f"{path}.v{i}", arrays)]
                       for i, (k, v) in enumerate(obj.items())]}
    if isinstance(obj, pd.DataFrame):
        return {"$df": {"index": _enc(obj.index.to_numpy(), f"{path}.index", arrays),
                        "index_name": _enc(obj.index.name, f"{path}.iname", arrays),
                        "columns": _enc(list(obj.columns), f"{path}.columns", arrays),
                        "data": [_enc(obj.iloc[:, i].to_numpy(), f"{path}.c{i}", arrays) for i in range(obj.shape[1])],
                        "attrs": _enc(dict(obj.attrs), f"{path}.attrs", arrays)}}
    name = _NAMES.get(type(obj))
    if name is None:
        raise StateEncodingError(
            f"state value at {path} is a {type(obj).__module__}.{type(obj).__qualname__}, which has no data-only "
            "encoding; register its dataclass with hetsched.online.register_state_type, or use store=None")
    skip = _TYPES[name][1]
    fields = {f.name: _enc(getattr(obj, f.name), f"{path}.{f.name}", arrays) for f in dataclasses.fields(obj)
              if f.init and f.name not in skip and not f.name.startswith("_")}
    return {"$c": name, "f": fields}


def _enc_array(a: np.ndarray, path: str, arrays: dict[str, np.ndarray]) -> Any:
    if path in arrays:
        raise StateEncodingError(f"two state arrays map to the path {path}; rename a dict key")
    if a.dtype.kind == "U" or a.dtype.newbyteorder("<") in _CODE_OF or a.dtype in _CODE_OF:
        arrays[path] = a
        return {"$a": path}
    if a.dtype.kind != "O":
        raise StateEncodingError(f"state array at {path} has dtype {a.dtype}, which is not stored")
    flat = a.reshape(-1).tolist()
    if all(isinstance(v, str) for v in flat):
        arrays[path] = a.astype(str) if a.size else np.zeros(a.shape, dtype="<U1")
        return {"$a": path, "o": 1}
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in flat):
        arrays[path] = a.astype(np.int64)
        return {"$a": path, "o": 1}
    return {"$ao": [_enc(v, f"{path}.{i}", arrays) for i, v in enumerate(flat)], "shape": list(a.shape)}


def decode(tree: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The object :func:`encode` encoded (raises ValueError on anything it did not write)."""
    _builtins()
    return _dec(tree, arrays)


def _dec(node: Any, arrays: dict[str, np.ndarray]) -> Any:
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_dec(v, arrays) for v in node]
    if not isinstance(node, dict) or len(node) == 0:
        raise ValueError(f"unexpected node {node!r:.80}")
    if "$a" in node:
        a = arrays[node["$a"]]
        if node.get("o"):
            out = np.empty(a.shape, dtype=object)
            out[...] = a.tolist() if a.ndim else a.item()
            return out
        return a
    if "$s" in node:
        dt, v = node["$s"]
        dtype = np.dtype(dt)
        if dtype.kind not in "biufU":
            raise ValueError(f"scalar dtype {dt!r} is not stored")
        return dtype.type(v)
    if "$t" in node:
        return tuple(_dec(v, arrays) for v in node["$t"])
    if "$set" in node:
        return {_dec(v, arrays) for v in node["$set"]}
    if "$d" in node:
        return {k: _dec(v, arrays) for k, v in node["$d"].items()}
    if "$m" in node:
        return {_dec(k, arrays): _dec(v, arrays) for k, v in node["$m"]}
    if "$ao" in node:
        out = np.empty(len(node["$ao"]), dtype=object)
        out[:] = [_dec(v, arrays) for v in node["$ao"]]
        return out.reshape(node["shape"])
    if "$df" in node:
        d = node["$df"]
        cols = _dec(d["columns"], arrays)
        frame = pd.DataFrame({i: _dec(c, arrays) for i, c in enumerate(d["data"])},
                             index=pd.Index(_dec(d["index"], arrays), name=_dec(d["index_name"], arrays)))
        frame.columns = pd.Index(cols) if cols else frame.columns
        frame.attrs.update(_dec(d["attrs"], arrays))
        return frame
    if "$c" in node:
        entry = _TYPES.get(node["$c"])
        if entry is None:
            raise ValueError(f"class {node['$c']!r} is not a registered state type")
        return entry[0](**{k: _dec(v, arrays) for k, v in node["f"].items()})
    raise ValueError(f"unexpected node {node!r:.80}")


# ---------------------------------------------------------------------- arrays
def _bits(a: np.ndarray) -> np.ndarray:
    """``a`` viewed so that ``==`` compares bit patterns (floats: NaN == NaN, -0.0 != 0.0)."""
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}")
    return a


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` and ``b`` have the same dtype, shape and bits."""
    return a.dtype == b.dtype and a.shape == b.shape and bool((_bits(a) == _bits(b)).all())


def _compact(a: np.ndarray) -> np.ndarray:
    """``a`` in the smallest dtype that gives it back bit for bit with ``astype(a.dtype)``."""
    if a.size == 0 or a.dtype.kind not in "iuf":
        return a
    if a.dtype.kind in "iu":
        lo, hi = int(a.min()), int(a.max())
        for t in (np.int8, np.int16, np.int32):
            info = np.iinfo(t)
            if info.min <= lo and hi <= info.max:
                return a.astype(t) if np.dtype(t).itemsize < a.dtype.itemsize else a
        return a
    if a.dtype.itemsize <= 4:
        return a
    with np.errstate(invalid="ignore", over="ignore"):
        finite = bool(np.isfinite(a).all())
        if finite and np.abs(a).max() < 2**31:
            for t in (np.int8, np.int16, np.int32):
                c = a.astype(t)
                if (_bits(c.astype(a.dtype)) == _bits(a)).all():
                    return c
        c = a.astype(np.float32)
        if (_bits(c.astype(a.dtype)) == _bits(a)).all():
            return c
    return a


#: Element types a stored array may have (a one-byte code each; strings: code 255 + width).
_CODES = tuple(np.dtype(t) for t in ("|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f4", "<f8"))
_CODE_OF = {dt: i for i, dt in enumerate(_CODES)}
_HEAD = struct.Struct("<BBI")   # code, ndim, string width


def _write(buf: io.BytesIO, a: np.ndarray) -> None:
    """Append ``a`` as: code, ndim, width, shape (int64 each), raw little-endian data."""
    dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    if dt.kind == "U":
        code, width = 255, dt.itemsize // 4
    else:
        code, width = _CODE_OF[dt], 0
    buf.write(_HEAD.pack(code, a.ndim, width))
    buf.write(np.asarray(a.shape, dtype="<i8").tobytes())
    buf.write(np.ascontiguousarray(a, dtype=dt).tobytes())


def _read(buf: io.BytesIO, dtype: np.dtype) -> np.ndarray:
    """The next array :func:`_write` wrote, converted to ``dtype`` (plain numbers and bytes only)."""
    head = buf.read(_HEAD.size)
    if len(head) != _HEAD.size:
        raise ValueError("truncated array data")
    code, ndim, width = _HEAD.unpack(head)
    if code == 255:
        dt = np.dtype(f"<U{width}")
    elif code < len(_CODES):
        dt = _CODES[code]
    else:
        raise ValueError(f"unknown array element code {code}")
    shape = tuple(int(v) for v in np.frombuffer(buf.read(8 * ndim), dtype="<i8"))
    if any(v < 0 for v in shape):
        raise ValueError(f"negative array shape {shape}")
    size = dt.itemsize * math.prod(shape)
    raw = buf.read(size)
    if len(raw) != size:
        raise ValueError("truncated array data")
    a = np.frombuffer(raw, dtype=dt).reshape(shape)
    return a.astype(dtype)   # always a writable copy, in the native byte order


def _dtype(text: str) -> np.dtype:
    dt = np.dtype(text)
    if dt.kind not in _ARRAY_KINDS:
        raise ValueError(f"array dtype {text!r} is not stored")
    return dt


def pack_full(a: np.ndarray) -> bytes:
    """``a`` as bytes, compacted (:func:`unpack_full` with ``a.dtype.str`` reads it)."""
    buf = io.BytesIO()
    _write(buf, _compact(a))
    return buf.getvalue()


def unpack_full(blob: bytes, dtype: str) -> np.ndarray:
    """The array :func:`pack_full` wrote, in ``dtype``."""
    return _read(io.BytesIO(blob), _dtype(dtype))


def pack_delta(old: np.ndarray, new: np.ndarray) -> bytes | None:
    """``new`` as a change of ``old`` (see the module docstring): ``b""`` when the two are the
    same bit for bit; None when ``new`` is not a change of ``old`` (another dtype or trailing
    shape, fewer rows) or the delta would be no smaller than half of the full array."""
    if new.dtype != old.dtype or new.ndim != old.ndim or new.ndim == 0 or new.shape[1:] != old.shape[1:] \
            or new.shape[0] < old.shape[0]:
        return None
    n_old = old.shape[0]
    common = new[:n_old].reshape(-1)
    flat = old.reshape(-1)
    best_c, best_bad = None, _bits(flat) != _bits(common)
    n_bad = int(np.count_nonzero(best_bad))
    if n_bad == 0 and new.shape[0] == n_old:
        return b""
    if new.dtype.kind in "iuf" and n_bad > flat.size // 16:
        # not mostly unchanged: try old + c, c the increment at a few positions (elapsed times, counters)
        seen = {0}
        with np.errstate(invalid="ignore", over="ignore"):
            for i in (0, flat.size // 2, flat.size - 1):
                c = common[i] - flat[i]
                key = _bits(np.asarray(c)).item()
                if key in seen or (new.dtype.kind == "f" and not math.isfinite(float(c))):
                    continue
                seen.add(key)
                bad = _bits(flat + c) != _bits(common)
                nb = int(np.count_nonzero(bad))
                if nb < n_bad:
                    best_c, best_bad, n_bad = c, bad, nb
    idx = np.flatnonzero(best_bad)
    if 2 * (idx.size * (4 + new.itemsize) + (new.shape[0] - n_old) * new[:1].nbytes) > max(new.nbytes, 1) \
            and new.nbytes > 512:
        return None
    buf = io.BytesIO()
    _write(buf, np.zeros(0, new.dtype) if best_c is None else np.asarray([best_c], new.dtype))
    _write(buf, _compact(idx))
    _write(buf, _compact(common[idx]))
    _write(buf, _compact(new[n_old:]))
    return buf.getvalue()


def apply_delta(old: np.ndarray, blob: bytes) -> np.ndarray:
    """The array :func:`pack_delta` ``(old, new)`` encoded: ``new``, bit for bit."""
    buf = io.BytesIO(blob)
    c = _read(buf, old.dtype)
    idx = _read(buf, np.dtype(np.int64))
    vals = _read(buf, old.dtype)
    tail = _read(buf, old.dtype)
    if tail.ndim != old.ndim or tail.shape[1:] != old.shape[1:] or c.size > 1 or idx.shape != vals.shape:
        raise ValueError(f"a delta does not fit an array of shape {old.shape}")
    flat = old.reshape(-1) + c[0] if c.size else old.reshape(-1).copy()
    flat[idx] = vals
    out = flat.reshape(old.shape)
    return np.concatenate([out, tail]) if tail.shape[0] else out
