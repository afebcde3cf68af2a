"""Small I/O helpers shared by the library: atomic writes and JSON/Parquet output."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it into place only if the block succeeds.

    A crash or Ctrl-C leaves the previous file (or none) in place, never a half-written one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_json(path: Path | str, obj: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_jsonable) + "\n")


def _jsonable(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"cannot write {type(o).__name__} as JSON")


def write_parquet(path: Path | str, df) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_text(path: Path | str, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
