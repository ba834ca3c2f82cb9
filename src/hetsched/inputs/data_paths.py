"""Where hetsched looks for the published data it reads but never ships or downloads
(Gavel's throughput table, Sia's profiles): an explicit path, an environment variable, then
``../shared/data/...`` beside a source checkout."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..errors import DataNotFoundError

__all__ = ["locate_data"]

#: The root of a source checkout (the directory holding ``pyproject.toml``), if this is one.
_CHECKOUT = Path(__file__).resolve().parents[3]


def locate_data(path: str | Path | None, *, env: str, checkout_relative: Path, accept: Callable[[Path], str | None],
                what: str) -> Path:
    """The first candidate ``accept`` takes: ``path`` when given (then nothing else), else
    ``$env``, else ``checkout_relative`` beside the source checkout.

    ``accept(candidate)`` returns None for a good candidate, or why it is not one (listed in
    the error).

    Raises
    ------
    DataNotFoundError
        No candidate is accepted; the message says ``what`` is looked for and every place tried.
    """
    if path is not None:
        candidates = [(Path(path), "`path`")]
    else:
        candidates = []
        value = os.environ.get(env)
        if value:
            candidates.append((Path(value), f"${env}"))
        if (_CHECKOUT / "pyproject.toml").is_file():
            candidates.append(((_CHECKOUT / checkout_relative).resolve(), "beside the source checkout"))
    tried: list[str] = []
    for cand, why in candidates:
        problem = accept(cand)
        if problem is None:
            return cand
        tried.append(f"{str(cand)!r} ({why}{': ' + problem if problem else ''})")
    raise DataNotFoundError(
        f"not found: {what}; tried: "
        + ("; ".join(tried) if tried else f"nothing (${env} is unset and this is not a source checkout)")
        + f". Pass `path=`, or set ${env} to it."
    )
