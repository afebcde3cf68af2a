"""Files the tool writes into the user's folders: created with the user's umask (the atomic
writers of the core make private temporary files), and no stale temporary files left behind."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def follow_umask(paths: Iterable[Path]) -> None:
    """Give files the mode a plain ``open`` would have (0666 less the umask)."""
    mode = 0o666 & ~umask()
    for p in paths:
        if Path(p).is_file():
            os.chmod(p, mode)


def clean_stale_temps(path: Path) -> None:
    """Temporary files of a write that was killed before its rename: exactly the names
    ``tempfile.mkstemp`` gives ncip's atomic writers (``.name.`` + 8 of [a-z0-9_] + ``.tmp``),
    so a user's own ``.name.mine.tmp`` is left alone."""
    path = Path(path)
    ours = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]{{8}}\.tmp")
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        if ours.fullmatch(stale.name) and stale.is_file():
            stale.unlink(missing_ok=True)
