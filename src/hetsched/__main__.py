"""``python -m hetsched``: see :mod:`hetsched.cli`."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
