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


@contextmanager
def atomic_group(paths: list[Path]) -> Iterator[list[Path]]:
    """Yield a temporary path beside each of ``paths``; rename them all into place only if the
    block succeeds, so a failure leaves every previous file as it was."""
    tmps: list[Path] = []
    try:
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            os.close(fd)
            tmps.append(Path(tmp))
        yield tmps
        for tmp, p in zip(tmps, paths, strict=True):
            os.replace(tmp, p)
    finally:
        for tmp in tmps:
            if tmp.exists():
                tmp.unlink()


def write_json(path: Path | str, obj: Any) -> None:
    """Write strict JSON (NaN and infinities become null), atomically."""
    text = json.dumps(_finite(obj), indent=2, sort_keys=False, default=_jsonable, allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n")


def _finite(o: Any) -> Any:
    import math

    import numpy as np

    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_finite(v) for v in o]
    if isinstance(o, np.ndarray):
        return _finite(o.tolist())
    if isinstance(o, float | np.floating):
        return float(o) if math.isfinite(o) else None
    return o


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
