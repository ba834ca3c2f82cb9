"""Named validation rules with one message template, used by every public entry point.

Every rule raises :class:`~hetsched.errors.ValidationError` worded

    ``"`<argument>` must be <rule>; got <value>."``

(for an array, ``"...; <position> is <value>."``: the first offending entry), so a message
always names the argument as the user wrote it, the rule it broke and the value. The rules:

=========================  ==================================================================
:func:`check_bool`         ``True`` / ``False`` (``numpy.bool_`` too; never ``1`` or ``"no"``)
:func:`check_int`          an integer (``numpy`` integers too, never ``bool``), ``low``/``high``
:func:`check_real`         a real number (not bool), finite unless ``allow_inf``, in a range with
                           open or closed ends; ``allow_none``
:func:`check_positive`     a positive finite number (optionally "of seconds" etc.)
:func:`check_nonneg`       a finite number >= 0 (optionally inf)
:func:`check_probability`  a number in [0, 1]
:func:`check_choice`       one of a list of values
:func:`check_nonempty_str` a non-empty string
:func:`check_instance`     an instance of a class (the message shows the value's type)
:func:`check_mapping`      a mapping (``collections.abc.Mapping``)
:func:`check_type_map`     a mapping GPU type -> number, each entry checked by a rule
:func:`check_matrix`       a numeric array of a given shape, finite and non-negative
:func:`check_names`        a sequence of unique non-empty names (not a lone string)
:func:`check_vector`       a float array of shape (n,), a scalar repeated
:func:`check_integer_array` whole numbers >= low in a float array (named entry on failure)
:func:`check_interval`     a pair (low, high) of finite numbers, low <= high, within bounds
:func:`as_rng`             a non-negative int seed or a ``numpy.random.Generator``
=========================  ==================================================================

Examples
--------
>>> check_int(3, "max_steps", low=1)
3
>>> check_bool(1, "sort")
Traceback (most recent call last):
...
hetsched.errors.ValidationError: `sort` must be True or False; got 1.
>>> check_real(0.5, "alpha", low=0.0, high=1.0, low_open=True)
0.5
>>> check_positive(float("nan"), "round_seconds", unit="seconds")
Traceback (most recent call last):
...
hetsched.errors.ValidationError: `round_seconds` must be a positive finite number of seconds; got nan.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .errors import ValidationError, show

__all__ = [
    "as_rng",
    "check_bool",
    "check_choice",
    "check_instance",
    "check_int",
    "check_interval",
    "check_mapping",
    "check_matrix",
    "check_names",
    "check_nonempty_str",
    "check_nonneg",
    "check_output_path",
    "check_positive",
    "check_probability",
    "check_real",
    "check_type_map",
    "check_vector",
    "fail",
    "fail_at",
    "is_int",
    "is_real",
    "is_whole",
    "range_rule",
]

T = TypeVar("T")


# ------------------------------------------------------------------------------ template
def fail(name: str, rule: str, value: Any, *, shown: str | None = None) -> ValidationError:
    """The error for argument ``name`` breaking ``rule`` with ``value`` (to ``raise``).

    ``shown`` replaces the value's ``repr`` (e.g. a type name for a wrong container).
    """
    return ValidationError(f"`{name}` must be {rule}; got {show(value) if shown is None else shown}.")


def fail_at(name: str, rule: str, where: str, value: Any, *, verb: str = "is") -> ValidationError:
    """The error for entry ``where`` of array argument ``name`` breaking ``rule``
    ("...; row 1, column 0 is nan.", or with ``verb="has"``: "...; job 'a' has -1.0.")."""
    return ValidationError(f"`{name}` must be {rule}; {where} {verb} {show(value)}.")


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number (Python or numpy int / float, not bool)."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (Python or numpy, not bool)."""
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer))


# ------------------------------------------------------------------------------ scalars
def check_bool(value: Any, name: str, *, allow_none: bool = False) -> bool | None:
    """``value`` as a bool: ``True`` / ``False`` (or ``numpy.bool_``); None when ``allow_none``."""
    if value is None and allow_none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise fail(name, "True, False or None" if allow_none else "True or False", value)
    return bool(value)


def _int_rule(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"an integer in [{low}, {high}]"
    if low == 1:
        return "a positive integer"
    if low == 0:
        return "a non-negative integer"
    if low is not None:
        return f"an integer >= {low}"
    if high is not None:
        return f"an integer <= {high}"
    return "an integer"


def is_whole(value: Any) -> bool:
    """Whether ``value`` is an integer or a finite float with no fraction (``2.0``), not bool."""
    if is_int(value):
        return True
    return isinstance(value, (float, np.floating)) and math.isfinite(value) and float(value).is_integer()


def check_int(value: Any, name: str, *, low: int | None = None, high: int | None = None,
              allow_none: bool = False, whole_floats: bool = False, rule: str | None = None) -> int | None:
    """``value`` as an int: an integer (not bool) in ``[low, high]``; None when ``allow_none``.

    ``whole_floats`` also accepts floats without a fraction (``8.0``: counts read from JSON).
    ``rule`` overrides the wording (default: "a positive integer" for ``low=1``,
    "a non-negative integer" for ``low=0``, else "an integer >= low" / "in [low, high]").
    """
    if value is None and allow_none:
        return None
    if rule is None:
        rule = _int_rule(low, high) + (" or None" if allow_none else "")
    ok = is_whole(value) if whole_floats else is_int(value)
    if not ok or (low is not None and value < low) or (high is not None and value > high):
        raise fail(name, rule, value)
    return int(value)


def range_rule(low: float | None = None, high: float | None = None, *, low_open: bool = False,
               high_open: bool = False, allow_inf: bool = False, unit: str | None = None) -> str:
    """The wording of a real-number rule: "a number in [0, 1)", "a finite number >= 0", ...

    ``unit`` goes after "number" ("a finite number of seconds >= 0").
    """
    noun = "number" + (f" of {unit}" if unit else "")
    finite = "" if allow_inf else "finite "
    if low is not None and high is not None:
        return f"a {noun} in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low == 0 and low_open:
        return f"a positive {finite}{noun}"
    if low is not None:
        return f"a {finite}{noun} {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"a {finite}{noun} {'<' if high_open else '<='} {high:g}"
    return f"a {finite}{noun}"


def check_real(value: Any, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False, allow_inf: bool = False,
               allow_none: bool = False, unit: str | None = None, rule: str | None = None) -> float | None:
    """``value`` as a float: a real number (not bool, not NaN), finite unless ``allow_inf``,
    within ``low`` / ``high`` (``low_open`` / ``high_open`` exclude the bound itself).

    ``rule`` overrides the wording of :func:`range_rule`; " or None" is added with
    ``allow_none``.
    """
    if value is None and allow_none:
        return None
    if rule is None:
        rule = range_rule(low, high, low_open=low_open, high_open=high_open, allow_inf=allow_inf, unit=unit)
        rule += " or None" if allow_none else ""
    if not is_real(value):
        raise fail(name, rule, value)
    v = float(value)
    if math.isnan(v) or (not allow_inf and math.isinf(v)):
        raise fail(name, rule, value)
    if low is not None and (v < low or (low_open and v == low)):
        raise fail(name, rule, value)
    if high is not None and (v > high or (high_open and v == high)):
        raise fail(name, rule, value)
    return v


def check_positive(value: Any, name: str, *, unit: str | None = None, allow_none: bool = False,
                   rule: str | None = None) -> float | None:
    """``value`` as a float > 0, finite ("a positive finite number [of <unit>]")."""
    return check_real(value, name, low=0.0, low_open=True, unit=unit, allow_none=allow_none, rule=rule)


def check_nonneg(value: Any, name: str, *, unit: str | None = None, allow_inf: bool = False,
                 allow_none: bool = False, rule: str | None = None) -> float | None:
    """``value`` as a float >= 0, finite unless ``allow_inf`` ("a finite number >= 0")."""
    return check_real(value, name, low=0.0, unit=unit, allow_inf=allow_inf, allow_none=allow_none, rule=rule)


def check_probability(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1] ("a probability in [0, 1]")."""
    out = check_real(value, name, low=0.0, high=1.0, rule="a probability in [0, 1]")
    assert out is not None
    return out


def check_choice(value: Any, name: str, choices: Iterable[T], *, rule: str | None = None) -> T:
    """``value`` if it is one of ``choices`` (same type and ``==``: a string matches only a
    string, ``1`` never matches ``True``); the message lists them ("one of ['a', 'b']")."""
    options = list(choices)
    for c in options:
        if type(value) is type(c) and value == c:
            return c
    raise fail(name, rule or f"one of {options!r}", value)


def check_nonempty_str(value: Any, name: str, *, allow_none: bool = False) -> str | None:
    """``value`` if it is a non-empty string (None when ``allow_none``)."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value:
        raise fail(name, "a non-empty string" + (" or None" if allow_none else ""), value)
    return value


def read_json_file(path: str | os.PathLike, what: str) -> Any:
    """The JSON value in the file ``path``; ``what`` names the file in errors (e.g.
    ``"`topology` file"``).

    Raises
    ------
    ValidationError
        The file does not exist, cannot be read, or is not valid JSON (the message names the
        file and, for bad JSON, the line).
    """
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise ValidationError(f"{what} {str(p)!r} does not exist.") from None
    except OSError as exc:
        raise ValidationError(f"{what} {str(p)!r} cannot be read: {exc.strerror or exc}.") from None
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{what} {str(p)!r} is not valid JSON: {exc.msg} at line {exc.lineno}.") from None


def check_instance(value: Any, name: str, types: type | tuple[type, ...], rule: str, *,
                   allow_none: bool = False) -> Any:
    """``value`` if it is an instance of ``types`` (None passes with ``allow_none``).

    ``rule`` names what is expected ("a hetsched.Cluster"); " or None" is added with
    ``allow_none``. The message shows the value's type, not its ``repr``.

    Examples
    --------
    >>> check_instance([1], "cluster", dict, "a hetsched.Cluster", allow_none=True)
    Traceback (most recent call last):
    ...
    hetsched.errors.ValidationError: `cluster` must be a hetsched.Cluster or None; got list.
    """
    if value is None and allow_none:
        return None
    if not isinstance(value, types):
        raise fail(name, rule + (" or None" if allow_none else ""), value, shown=type(value).__name__)
    return value


# ------------------------------------------------------------------------------ containers
def check_mapping(value: Any, name: str, *, rule: str = "a mapping", allow_none: bool = False) -> Mapping | None:
    """``value`` if it is a mapping (None when ``allow_none``); the message shows the type."""
    if value is None and allow_none:
        return None
    if not isinstance(value, Mapping):
        raise fail(name, rule + (" or None" if allow_none else ""), value, shown=type(value).__name__)
    return value


def check_type_map(value: Any, name: str, entry: Callable[[Any, str], T], *, what: str,
                   known: Sequence[str] | None = None, known_name: str = "counts") -> dict[str, T]:
    """A mapping GPU type -> value, each value checked by ``entry(value, "name['type']")``.

    ``what`` names the values in the rule ("a mapping of GPU type -> count"); with
    ``known``, every key must be one of those types (named after ``known_name``).
    """
    check_mapping(value, name, rule=f"a mapping of GPU type -> {what}")
    out: dict[str, T] = {}
    for key, v in value.items():
        if known is not None and key not in known:
            raise ValidationError(
                f"`{name}` names GPU type {key!r}, which is not in `{known_name}` ({list(known)}).")
        if known is None and (not isinstance(key, str) or not key):
            raise ValidationError(f"`{name}` keys must be non-empty strings; got {show(key)}.")
        out[key] = entry(v, f"{name}[{key!r}]")
    return out


def check_names(value: Any, name: str, *, what: str = "names", allow_empty: bool = False) -> tuple[str, ...]:
    """A sequence of unique non-empty strings (a lone string is refused, not split)."""
    rule = f"a sequence of {what}"
    if isinstance(value, str):
        raise ValidationError(f"`{name}` must be {rule}; got the string {value!r}.")
    try:
        names = tuple(value)
    except TypeError:
        raise fail(name, rule, value) from None
    if not names and not allow_empty:
        raise fail(name, f"a non-empty sequence of {what}", list(names))
    for t in names:
        if not isinstance(t, str) or not t:
            raise fail(name, "a sequence of non-empty strings", t)
    if len(set(names)) != len(names):
        dup = sorted({t for t in names if names.count(t) > 1})
        raise ValidationError(f"`{name}` must be unique; {dup} appear more than once.")
    return names


def check_matrix(value: Any, name: str, *, shape: tuple[int, ...] | None = None, shape_text: str | None = None,
                 where: Callable[[tuple[int, ...]], str] | None = None, finite: bool = True,
                 nonneg: bool = True) -> np.ndarray:
    """``value`` as a float array of ``shape``, finite and non-negative (one check for both).

    Parameters
    ----------
    shape : tuple of int, optional
        Required shape (``-1`` matches any length on that axis).
    shape_text : str, optional
        How the shape is described in the rule (default: the tuple).
    where : callable, optional
        ``where(index)``: the position of an offending entry in words ("row 1, column 0",
        "job 'a' on 'v100'"); default "entry (i, j)".
    finite, nonneg : bool, default True
        Which value rules apply; the rule reads "finite and non-negative" with both.

    Returns
    -------
    numpy.ndarray
        A new float array (the caller may freeze it).
    """
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise fail(name, "numeric", value, shown=f"{show(value):.80}") from None
    if shape is not None:
        if arr.size == 0 and arr.ndim != len(shape):
            arr = arr.reshape(tuple(max(s, 0) for s in shape))
        ok = arr.ndim == len(shape) and all(s < 0 or s == a for s, a in zip(shape, arr.shape))
        if not ok:
            raise ValidationError(f"`{name}` must have shape {shape_text or shape}; got {arr.shape}.")
    parts = [p for p, on in (("finite", finite), ("non-negative", nonneg)) if on]
    if parts:
        with np.errstate(invalid="ignore"):
            bad = (~np.isfinite(arr) if finite else np.isnan(arr)) | ((arr < 0) if nonneg else False)
        if np.any(bad):
            idx = tuple(int(v) for v in np.argwhere(bad)[0])
            label = where(idx) if where is not None else f"entry {idx if len(idx) > 1 else idx[0]}"
            raise fail_at(name, " and ".join(parts), label, arr[idx])
    return arr


def check_interval(value: Any, name: str, *, low: float = -math.inf, high: float = math.inf,
                   low_open: bool = False) -> tuple[float, float]:
    """A pair ``(lo, hi)`` of finite numbers with ``lo <= hi``, ``lo >= low`` (``> low``
    with ``low_open``) and ``hi <= high``."""
    bound = "" if low == -math.inf else f", low {'>' if low_open else '>='} {low:g}"
    bound += "" if high == math.inf else f", high <= {high:g}"
    rule = f"a pair (low, high) of finite numbers with low <= high{bound}"
    try:
        a, b = value
    except (TypeError, ValueError):
        raise fail(name, rule, value) from None
    if not (is_real(a) and is_real(b)):
        raise fail(name, rule, value)
    a, b = float(a), float(b)
    ok_low = (a > low) if low_open else (a >= low)
    if not (math.isfinite(a) and math.isfinite(b) and ok_low and a <= b <= high):
        raise fail(name, rule, value)
    return a, b


def as_rng(seed: Any, name: str = "seed") -> np.random.Generator:
    """``seed`` as a generator: a non-negative integer seed, or a ``numpy.random.Generator``
    passed through (the only ways randomness enters)."""
    if isinstance(seed, np.random.Generator):
        return seed
    value = check_int(seed, name, low=0, rule="a non-negative int or a numpy.random.Generator")
    return np.random.default_rng(value)


def check_vector(value: Any, name: str, n: int, *, length: str = "n_jobs") -> np.ndarray:
    """``value`` as a float array of shape ``(n,)``; a scalar is repeated ``n`` times.

    ``length`` names what ``n`` counts in the rule ("must have shape (n_jobs,) = (3,)").
    """
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise fail(name, "numeric", value, shown=f"{show(value):.80}") from None
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValidationError(f"`{name}` must have shape ({length},) = ({n},); got {arr.shape}.")
    return arr


def check_integer_array(values: np.ndarray, name: str, where: Callable[[int], str], *, low: int = 1) -> np.ndarray:
    """Float ``values`` (1-D) as int64: every entry a whole number >= ``low`` ("positive
    integers" for ``low=1``, "non-negative integers" for ``low=0``); the first offending
    entry is named by ``where(i)`` ("job 'a' has 2.5")."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(values) | (values < low) | (values != np.round(values))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        rule = {1: "positive integers", 0: "non-negative integers"}.get(low, f"integers >= {low}")
        raise fail_at(name, rule, where(i), values[i], verb="has")
    return values.astype(np.int64)


def check_output_path(value: str | None, kind: str, option: str = "--out") -> None:
    """Refuse an output path that cannot be written, before the run (not after it).

    ``kind`` "dir": a directory to write into (created if missing); "file": a file to
    write (its directory created if missing). Raises :class:`ValidationError` (exit 2)
    naming the option, the rule and the value.
    """
    if value is None:
        return
    p = Path(value)
    if kind == "dir":
        rule = f"`{option}` must be a directory that exists or can be created, and is writable"
        if p.exists() and not p.is_dir():
            raise ValidationError(f"{rule}; got {value!r}, which is an existing file.")
        folder = p
    else:
        rule = f"`{option}` must be a file path in a directory that exists or can be created, and is writable"
        if value.endswith(("/", os.sep)) or p.is_dir():
            raise ValidationError(f"{rule}; got {value!r}, which is a directory.")
        if p.exists() and not os.access(p, os.W_OK):
            raise ValidationError(f"{rule}; got {value!r}, an existing file that is not writable.")
        folder = p.parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ValidationError(f"{rule}; got {value!r}, but {str(existing)!r} is a file, not a directory.")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == folder else f"cannot be created: {str(existing)!r} is not writable"
        raise ValidationError(f"{rule}; got {value!r}, whose directory {what}.")
