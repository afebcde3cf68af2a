"""Support for the thin stage scripts in ``stages/``: clean failures and atomic directory output.

A stage validates everything before it writes anything, and writes each output atomically, so
bad input exits nonzero with a one-line message and leaves existing outputs untouched.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable, Sequence
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


def check_outputs(*files: Path | None, dirs: Sequence[Path | None] = ()) -> None:
    """Refuse, before any work, output paths that cannot be written: a file output that is an
    existing folder, a folder output that is an existing file, a parent that is a file."""
    for path, want_dir in [(f, False) for f in files] + [(d, True) for d in dirs]:
        if path is None:
            continue
        path = Path(path)
        if path.exists() and path.is_dir() != want_dir:
            kind = "a folder" if path.is_dir() else "a file"
            raise StageError(f"output {path} is {kind}; give a {'folder' if want_dir else 'file'} "
                             "path (or move what is there)")
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise StageError(f"cannot write {path}: {parent} is a file, not a folder")
                break


def read_record(path: Path, made_by: str, keys: Sequence[str] = ()) -> dict:
    """A JSON record another stage wrote; StageError naming the file and that stage if it is
    missing, unreadable or lacks ``keys``."""
    path = Path(path)
    if not path.is_file():
        raise StageError(f"{path} does not exist; run {made_by} first")
    try:
        record = json.loads(path.read_text())
    except ValueError as e:
        raise StageError(f"{path} is not valid JSON ({e}); run {made_by} again") from None
    missing = [k for k in keys if not isinstance(record, dict) or k not in record]
    if missing:
        raise StageError(f"{path} lacks {', '.join(missing)}; run {made_by} again")
    return record


def split_list(value: str) -> list[str]:
    """Parse a comma-separated option (DVC cannot interpolate lists into a command)."""
    return [v.strip() for v in value.split(",") if v.strip()]
