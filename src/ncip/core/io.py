"""Small I/O helpers shared by the library: atomic writes and JSON/Parquet output."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


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


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or filesystem cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _restore_old(path: Path) -> None:
    """A kill between the two renames of the fallback swap leaves ``.name.old`` and no
    ``name``: put it back."""
    old = path.with_name(f".{path.name}.old")
    if old.exists() and not path.exists():
        old.rename(path)
    elif old.exists():
        shutil.rmtree(old, ignore_errors=True)


def _remove_stale_temps(path: Path) -> None:
    """Temporary folders (``.name.XXXX``) of atomic_dir calls that were killed."""
    for stale in path.parent.glob(f".{path.name}.*"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def atomic_dir(path: Path | str) -> Iterator[Path]:
    """Yield an empty temporary folder; on success it replaces ``path`` as a whole.

    The old and new folders are swapped in one step where the system allows (Linux), so the
    output is never missing; elsewhere a kill between the two renames leaves ``.name.old``,
    which the next call restores before it starts. A failure inside the block leaves ``path``
    as it was and removes the temporary folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _restore_old(path)
    _remove_stale_temps(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        replace_dir(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def replace_dir(src: Path | str, dst: Path | str) -> None:
    """Move folder ``src`` to ``dst``, replacing what is there in one step where the system
    allows (see :func:`atomic_dir`); ``src`` must be on the same filesystem as ``dst``."""
    src, dst = Path(src), Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    _restore_old(dst)
    if not dst.exists():
        src.rename(dst)
    elif _exchange(src, dst):
        shutil.rmtree(src)  # now the old output
    else:
        old = dst.with_name(f".{dst.name}.old")
        dst.rename(old)
        src.rename(dst)
        shutil.rmtree(old, ignore_errors=True)


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


def write_csv(path: Path | str, df: pd.DataFrame) -> None:
    """A DataFrame as CSV (no index), atomically."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)


def write_parquet(path: Path | str, df: pd.DataFrame) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def write_text(path: Path | str, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_parquet(path: Path | str, **kwargs: Any) -> pd.DataFrame:
    """A Parquet table, opened by Python (so that the files a stage reads are visible to
    Python's audit hooks, which the dependency check uses); kwargs go to pandas."""
    import pandas as pd

    with open(path, "rb") as f:
        return pd.read_parquet(f, **kwargs)


def safetensors_open(path: Path | str, framework: str = "pt") -> Any:
    """``safetensors.safe_open`` (PyTorch tensors, or NumPy arrays with ``framework="np"``,
    which reads headers and float tensors without importing PyTorch), announced as a read to
    Python's audit hooks first: the Rust reader opens the file where Python's `open` event
    cannot see it."""
    import sys

    from safetensors import safe_open

    sys.audit("open", str(path), "rb", 0)
    return safe_open(str(path), framework=framework)


def mirror_files(src: Path | str, dst: Path | str, suffix: str) -> list[str]:
    """Replace folder ``dst`` with byte copies of the ``*suffix`` files directly in ``src``
    (dotfiles, such as DVC's .gitignore, are left out); returns the names copied. An absent
    ``src`` gives an empty ``dst``."""
    src = Path(src)
    names = sorted(
        p.name for p in src.glob(f"*{suffix}") if p.is_file() and not p.name.startswith(".")
    )
    with atomic_dir(dst) as tmp:
        for name in names:
            shutil.copyfile(src / name, tmp / name)
    return names


def save_figure(fig: Any, path: Path | str) -> None:
    """Write a matplotlib figure as PNG atomically, then close it."""
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
