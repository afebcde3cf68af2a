"""Subjects trained elsewhere, studied by the DVC pipeline with training skipped.

A subject listed in ``params.yaml`` under ``external`` names a model trained on another
machine (a GPU cluster, a colleague's run): its checkpoint folder (any format `ncip rank`
reads; ``run-<r>/`` subfolders for several runs), the folder with its labelled
``train.npz``, ``val.npz`` and ``test.npz`` (``x``, ``y``, optional ``ids``), the model factory
and head as `ncip rank` takes them, the normalisation the model expects of inputs in [0, 1],
and optionally the paper subject it stands for (the report then sets the paper's column beside
it). ``prepare-data`` copies the data and writes a manifest of the checkpoint files' contents;
``train-with-checkpoints`` imports the checkpoints into the study's format instead of training
(one per file, in training order, each with its accuracy and σ_cos). Every later stage runs as
for a subject trained here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ncip.data import DataFormatError, DatasetInfo, Split
from ncip.logs import log, progress

ROOT = Path("data/external")  # where DVC tracks external runs (a dependency of prepare-data)
MANIFEST = "external.json"
TRAIN_ACC_SAMPLE = 5000  # imported runs report training accuracy on this many training inputs


class ExternalError(ValueError):
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


def prepare_external(spec: ExternalSpec) -> tuple[DatasetInfo, dict[str, Split], dict]:
    """(dataset info, the three splits, the manifest of the checkpoint files) of a subject."""
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
    if not text:
        xf = x.astype(np.float64) / (255.0 if x.dtype == np.uint8 else 1.0)
        info.mean = xf.mean(axis=(0, 2, 3)).tolist()
        info.std = np.maximum(xf.std(axis=(0, 2, 3)), 1e-3).tolist()
    from ncip.data import check_split

    for p, s in splits.items():
        try:
            check_split(s, info, spec.data / f"{p}.npz")
        except DataFormatError as e:
            raise ExternalError(str(e)) from None
    return info, splits, manifest(spec)


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


def manifest(spec: ExternalSpec) -> dict:
    """What the imported checkpoints depend on: the description and every file's content hash
    (so DVC re-imports exactly when a checkpoint changes)."""
    if not spec.checkpoints.is_dir():
        raise ExternalError(f"external subject {spec.name}: {spec.checkpoints} is not a folder")
    files = {}
    for f in sorted(p for p in spec.checkpoints.rglob("*") if p.is_file()):
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        files[str(f.relative_to(spec.checkpoints))] = h.hexdigest()
    return {
        "spec": {k: (str(v) if isinstance(v, Path) else v) for k, v in spec.__dict__.items()},
        "files": files,
    }


def import_external(
    spec: ExternalSpec,
    info: DatasetInfo,
    splits: dict[str, Split],
    out_dir: Path,
    subject: str,
    run: int,
    device: str = "cpu",
) -> pd.DataFrame:
    """Write the run's checkpoints in the study's format into ``out_dir`` (atomically, as a
    whole); return the history (epoch = position in training order, accuracies, σ_cos)."""
    from ncip.checkpoints import checkpoint_name, save_state
    from ncip.collapse import sigma_cos
    from ncip.formats import check_consistent, discover
    from ncip.io import atomic_dir, write_csv
    from ncip.models import ForeignClassifier
    from ncip.modelsource import load_model
    from ncip.predict import batched_outputs, resolve_device

    folder = run_folder(spec, run)
    cs = discover(folder)
    check_consistent(cs)
    dev = resolve_device(device)
    lm = load_model(spec.model, cs, info.num_classes, None, spec.head, dev)
    if lm.num_classes != info.num_classes:
        raise ExternalError(
            f"external subject {spec.name}: the model has {lm.num_classes} classes "
            f"but the data has {info.num_classes}"
        )
    wrapped = ForeignClassifier(lm.model, lm.head, spec.mean, spec.std).to(dev).eval()
    meta_base = {
        "arch": "external",
        "factory": spec.model,
        "head": lm.head,
        "head_key": f"net.{lm.head}.weight",
        "mean": spec.mean,
        "std": spec.std,
        "subject": subject,
        "run": run,
        "dataset": info.name,
        "num_classes": info.num_classes,
        "in_channels": info.in_channels,
        "input_shape": info.input_shape,
        "vocab_size": info.vocab_size,
    }
    if lm.hf:
        import json

        meta_base["hf_architecture"] = type(lm.model).__name__
        meta_base["hf_config"] = json.loads(lm.model.config.to_json_string())
    rng = np.random.default_rng(0)
    train = splits["train"]
    train = train.subset(np.sort(rng.permutation(len(train))[:TRAIN_ACC_SAMPLE]))
    rows = []
    with atomic_dir(out_dir) as tmp:
        for i, ck in enumerate(progress(cs, f"import {subject}/run-{run}", unit="ckpt"), 1):
            lm.load(ck)
            acc = {
                f"{p}_acc": float(
                    (batched_outputs(wrapped, s.x, source=str(ck.path)).argmax(1) == s.y).mean()
                )
                for p, s in (("train", train), ("val", splits["val"]), ("test", splits["test"]))
            }
            W = lm.model.state_dict()[f"{lm.head}.weight"].detach().cpu().double().numpy()
            row = {
                "epoch": i,
                **acc,
                "sigma_cos": sigma_cos(W.reshape(W.shape[0], -1)),
                "source": ck.name,
                "source_epoch": ck.epoch,
                "source_step": ck.step,
            }
            save_state(
                tmp / checkpoint_name(i),
                wrapped.state_dict(),
                {
                    **{k: v for k, v in meta_base.items() if v is not None},
                    "epoch": i,
                    "metrics": {k: v for k, v in row.items() if k.endswith("acc")},
                    "source": str(ck.path),
                },
            )
            rows.append(row)
        hist = pd.DataFrame(rows)
        write_csv(tmp / "history.csv", hist)
    log.info("imported %d checkpoints of %s (%s) into %s", len(rows), subject, cs.order, out_dir)
    return hist
