"""Support for the thin stage scripts in ``stages/``: clean failures and atomic directory output.

A stage validates everything before it writes anything, and writes each output atomically, so
bad input exits nonzero with a one-line message and leaves existing outputs untouched.
"""

from __future__ import annotations

import functools
import logging
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from ncip.logs import setup_logging

EXIT_BAD_INPUT = 2


class StageError(Exception):
    """A problem with a stage's input that the user must fix; the message says how."""


def stage_main(fn: Callable) -> Callable:
    """Wrap a typer command: log to stderr; turn input errors into a message and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        setup_logging(logging.INFO)
        try:
            return fn(*args, **kwargs)
        except (StageError, ValueError, FileNotFoundError, KeyError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else e
            print(f"error: {msg}", file=sys.stderr)
            raise typer.Exit(EXIT_BAD_INPUT) from None

    return wrapper


def split_list(value: str) -> list[str]:
    """Parse a comma-separated option (DVC cannot interpolate lists into a command)."""
    return [v.strip() for v in value.split(",") if v.strip()]


@contextmanager
def atomic_dir(path: Path | str) -> Iterator[Path]:
    """Yield an empty temporary directory; on success it replaces ``path`` as a whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
