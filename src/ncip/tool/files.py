"""Files the tool writes into the user's folders: created with the user's umask (the atomic
writers of the core make private temporary files), and no stale temporary files left behind."""

from __future__ import annotations

import os
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
    """Temporary files (``.name.XXXX.tmp``) of a write that was killed before its rename."""
    path = Path(path)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        if stale.is_file():
            stale.unlink(missing_ok=True)
