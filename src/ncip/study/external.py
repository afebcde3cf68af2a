"""Subjects trained elsewhere, studied by the DVC pipeline with training skipped.

A subject listed in ``params.yaml`` under ``external`` names a model trained on another
machine (a GPU cluster, a colleague's run): its checkpoint folder (any format `ncip rank`
reads; ``run-<r>/`` subfolders for several runs), the folder with its labelled
``train.npz``, ``val.npz`` and ``test.npz`` (``x``, ``y``, optional ``ids``), the model factory
and head as `ncip rank` takes them, the normalisation the model expects of inputs in [0, 1],
and optionally the paper subject it stands for (the report then sets the paper's column beside
it). ``ncip import-external`` (:mod:`ncip.study.importing`, the one study module that uses the
tool) writes its checkpoints in the study's format (one per file, in training order, each with
its accuracy and σ_cos) into ``<data>/imported/``; ``prepare-data`` copies the data and writes a
manifest of the imported files' contents; ``train-with-checkpoints`` copies the imported run
instead of training. Every later stage runs as for a subject trained here.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ncip.core.errors import NcipError
from ncip.core.io import atomic_dir
from ncip.study.data import DataFormatError, DatasetInfo, Split

ROOT = Path("data/external")  # where DVC tracks external runs (a dependency of prepare-data)
MANIFEST = "external.json"
IMPORTED = "imported"  # inside the subject's data folder: `ncip import-external` writes here
IMPORT_RECORD = "import.json"
TRAIN_ACC_SAMPLE = 5000  # imported runs report training accuracy on this many training inputs


class ExternalError(NcipError, ValueError):
    """An external subject's description or files are unusable; the message says which."""


@dataclass(frozen=True)
class ExternalSpec:
    name: str
    checkpoints: Path
    data: Path
    model: str | None = None
    head: str | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    paper: str | None = None
    classes: list[str] | None = None


def parse_external(external: Any, where: str = "params.yaml") -> dict[str, ExternalSpec]:
    """The ``external`` group of params.yaml: name -> spec (types checked, not files)."""
    if external in (None, {}):
        return {}
    if not isinstance(external, dict):
        raise ExternalError(f"{where}: `external` must map subject names to their description")
    out = {}
    for name, spec in external.items():
        if not isinstance(spec, dict) or "checkpoints" not in spec or "data" not in spec:
            raise ExternalError(
                f"{where}: external subject {name!r} needs `checkpoints` (a folder) "
                "and `data` (a folder with train.npz, val.npz, test.npz)"
            )
        unknown = set(spec) - {
            "checkpoints",
            "data",
            "model",
            "head",
            "mean",
            "std",
            "paper",
            "classes",
        }
        if unknown:
            raise ExternalError(
                f"{where}: external subject {name!r} has unknown keys {sorted(unknown)}"
            )
        if (spec.get("mean") is None) != (spec.get("std") is None):
            raise ExternalError(f"{where}: external subject {name!r}: give mean and std together")
        out[str(name)] = ExternalSpec(
            str(name),
            Path(spec["checkpoints"]),
            Path(spec["data"]),
            spec.get("model"),
            spec.get("head"),
            spec.get("mean"),
            spec.get("std"),
            spec.get("paper"),
            spec.get("classes"),
        )
    return out


def _load_npz(path: Path, name: str) -> Split:
    if not path.is_file():
        raise ExternalError(
            f"external subject {name}: {path} does not exist (train.npz, val.npz "
            "and test.npz with x, y and optional ids)"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            if "x" not in z.files or "y" not in z.files:
                raise ExternalError(f"{path} needs arrays x and y (it has {', '.join(z.files)})")
            x, y = z["x"], z["y"]
            ids = z["ids"].astype(str) if "ids" in z.files else None
    except (OSError, ValueError) as e:
        if isinstance(e, ExternalError):
            raise
        raise ExternalError(f"{path} is not a readable .npz of plain arrays ({e})") from None
    if ids is None:
        ids = np.array([f"{name}:{path.stem}:{i}" for i in range(len(x))])
    if y.dtype.kind not in "iu":
        raise ExternalError(f"{path}: y must be integer class indices, not {y.dtype}")
    return Split(x, y.astype(np.int64), ids)


def load_external(spec: ExternalSpec) -> tuple[DatasetInfo, dict[str, Split]]:
    """(dataset info, the three splits) of an external subject."""
    splits = {p: _load_npz(spec.data / f"{p}.npz", spec.name) for p in ("train", "val", "test")}
    x = splits["train"].x
    text = x.ndim == 2 and x.dtype.kind in "iu"
    if not text and x.ndim != 4:
        raise ExternalError(
            f"external subject {spec.name}: images must be [N, C, H, W] (uint8, or "
            f"float32 in [0, 1]) and text [N, L] token ids; train.npz has "
            f"{list(x.shape)} {x.dtype}"
        )
    y_max = max(int(s.y.max()) for s in splits.values())
    classes = spec.classes or [str(c) for c in range(y_max + 1)]
    info = DatasetInfo(
        name=spec.name,
        kind="text" if text else "image",
        classes=list(classes),
        input_shape=list(x.shape[1:]),
        vocab_size=int(max(int(s.x.max()) for s in splits.values()) + 1) if text else None,
        sizes={k: len(v) for k, v in splits.items()},
    )
    from ncip.study.data import channel_stats, check_split

    if not text:
        info.mean, info.std = channel_stats(x)

    for p, s in splits.items():
        try:
            check_split(s, info, spec.data / f"{p}.npz")
        except DataFormatError as e:
            raise ExternalError(str(e)) from None
    return info, splits


def run_folder(spec: ExternalSpec, run: int) -> Path:
    """The checkpoint folder of one run: ``run-<r>/`` inside the folder, or the folder (run 0)."""
    sub = spec.checkpoints / f"run-{run}"
    if sub.is_dir():
        return sub
    if run == 0 and spec.checkpoints.is_dir():
        return spec.checkpoints
    raise ExternalError(
        f"external subject {spec.name} has no checkpoints for run {run}: put them in "
        f"{sub}/ (or study runs: [0])"
    )


def file_hashes(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` -> the sha256 of its content."""
    files = {}
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        files[str(f.relative_to(folder))] = h.hexdigest()
    return files


def imported_folder(spec: ExternalSpec, run: int) -> Path:
    """Where ``ncip import-external`` writes a run's checkpoints in the study's format."""
    return spec.data / IMPORTED / f"run-{run}"


def manifest(spec: ExternalSpec) -> dict:
    """What the study's copy of the run depends on: the description and the content hash of
    every imported file (so DVC re-runs training's copy exactly when an import changes)."""
    if not spec.checkpoints.is_dir():
        raise ExternalError(f"external subject {spec.name}: {spec.checkpoints} is not a folder")
    root = spec.data / IMPORTED
    if not root.is_dir():
        raise ExternalError(
            f"external subject {spec.name} is not imported yet: run "
            f"`ncip import-external {spec.name}` (it writes {root}/)"
        )
    return {
        "spec": {k: (str(v) if isinstance(v, Path) else v) for k, v in spec.__dict__.items()},
        "files": file_hashes(root),
    }


def adopt_imported(spec: ExternalSpec, run: int, out_dir: Path) -> pd.DataFrame:
    """Copy one imported run into the study's checkpoint folder; return its history. Refuses
    an import whose source checkpoints changed since (import again)."""
    src = imported_folder(spec, run)
    record = src / IMPORT_RECORD
    if not record.is_file():
        raise ExternalError(
            f"external subject {spec.name} has no imported run {run} in {src}: run "
            f"`ncip import-external {spec.name}`"
        )
    sources = json.loads(record.read_text())["sources"]
    if sources != file_hashes(run_folder(spec, run)):
        raise ExternalError(
            f"the checkpoints of external subject {spec.name} (run {run}) changed since they "
            f"were imported: run `ncip import-external {spec.name}` again"
        )
    with atomic_dir(out_dir) as tmp:
        for f in src.glob("*.safetensors"):
            shutil.copy2(f, tmp / f.name)
    return pd.read_csv(src / "history.csv")
