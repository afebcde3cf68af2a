"""Logging to stderr and progress bars for long work."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

log = logging.getLogger("ncip")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (tests swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def setup_logging(level: int = logging.INFO) -> None:
    if not log.handlers:
        h = _StderrHandler()
        h.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.addHandler(h)
    log.setLevel(level)


def progress(it: Iterable[T], desc: str, total: int | None = None, **kw) -> Iterable[T]:
    """A tqdm bar on stderr; in logs (no terminal) it prints at most every 10 seconds."""
    interactive = sys.stderr.isatty()
    return tqdm(
        it,
        desc=desc,
        total=total,
        file=sys.stderr,
        mininterval=0.2 if interactive else 10.0,
        dynamic_ncols=interactive,
        leave=True,
        **kw,
    )


def progress_bar(total: int, desc: str, enabled: bool = True, **kw) -> tqdm:
    """A manual tqdm bar (``update``), like :func:`progress`; silent when not ``enabled``."""
    interactive = sys.stderr.isatty()
    return tqdm(
        total=total,
        desc=desc,
        file=sys.stderr,
        mininterval=0.2 if interactive else 10.0,
        dynamic_ncols=interactive,
        disable=not enabled,
        **kw,
    )
