"""Importing a model trained elsewhere into the study: the one study module that uses the tool.

``ncip import-external SUBJECT`` reads each run's checkpoints in any format the tool reads (with
the model the user named in params.yaml), and writes them in the study's own format (ncip
safetensors, epochs 1..m in training order) into ``<data>/imported/run-<r>/``. The study's
stages then use only those files, through the core: a change to the tool re-runs no stage.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from torch import nn

from ncip.core.checkpoints import CheckpointMeta, checkpoint_name, save_state
from ncip.core.collapse import sigma_cos
from ncip.core.engine import resolve_device
from ncip.core.io import atomic_dir, write_csv, write_json
from ncip.core.logs import log, progress
from ncip.core.models import ForeignClassifier
from ncip.study.data import DatasetInfo, Split
from ncip.study.external import (
    IMPORT_RECORD,
    TRAIN_ACC_SAMPLE,
    ExternalError,
    ExternalSpec,
    file_hashes,
    imported_folder,
    load_external,
    run_folder,
)
from ncip.study.predict import batched_outputs
from ncip.tool.formats import check_consistent, discover
from ncip.tool.modelsource import LoadedModel, load_model
from ncip.tool.userspec import split_call


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
    folder = run_folder(spec, run)
    _check_apart(spec, folder, out_dir)
    _check_only_ours(spec, out_dir)
    sources = file_hashes(folder)
    cs = discover(folder)
    check_consistent(cs)
    dev = resolve_device(device)
    if spec.model and split_call(spec.model)[0] != spec.model:
        raise ExternalError(
            f"external subject {spec.name}: model {spec.model!r} passes arguments, but the "
            "study's stages import the factory by name alone; name a function that builds it "
            "without arguments (def make(num_classes): return Net(hidden=256, "
            "num_classes=num_classes))"
        )
    lm = load_model(spec.model, cs, info.num_classes, None, spec.head, dev, arguments=False)
    if lm.num_classes != info.num_classes:
        raise ExternalError(
            f"external subject {spec.name}: the model has {lm.num_classes} classes "
            f"but the data has {info.num_classes}"
        )
    wrapped = ForeignClassifier(lm.model, lm.head, spec.mean, spec.std).to(dev).eval()
    meta_base = _metadata(spec, lm, info, subject, run)
    rng = np.random.default_rng(0)
    train = splits["train"]
    train = train.subset(np.sort(rng.permutation(len(train))[:TRAIN_ACC_SAMPLE]))
    rows = []
    with atomic_dir(out_dir) as tmp:
        for i, ck in enumerate(progress(cs, f"import {subject}/run-{run}", unit="ckpt"), 1):
            lm.load(ck)
            acc = {
                f"{p}_acc": _accuracy(wrapped, s, str(ck.path))
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
                replace(
                    meta_base,
                    epoch=i,
                    metrics={k: v for k, v in row.items() if k.endswith("acc")},
                    source=str(ck.path),
                ),
            )
            rows.append(row)
        hist = pd.DataFrame(rows)
        write_csv(tmp / "history.csv", hist)
        write_json(tmp / IMPORT_RECORD, {"order": cs.order, "sources": sources})
    log.info("imported %d checkpoints of %s (%s) into %s", len(rows), subject, cs.order, out_dir)
    return hist


def _metadata(
    spec: ExternalSpec, lm: LoadedModel, info: DatasetInfo, subject: str, run: int
) -> CheckpointMeta:
    """What every imported checkpoint records about its model, data and origin."""
    return CheckpointMeta(
        arch="external",
        factory=spec.model,
        head=lm.head,
        head_key=f"net.{lm.head}.weight",
        mean=spec.mean,
        std=spec.std,
        subject=subject,
        run=run,
        dataset=info.name,
        num_classes=info.num_classes,
        in_channels=info.in_channels,
        input_shape=info.input_shape,
        vocab_size=info.vocab_size,
        hf_architecture=type(lm.model).__name__ if lm.hf else None,
        hf_config=json.loads(lm.model.config.to_json_string()) if lm.hf else None,
    )


def _accuracy(model: nn.Module, split: Split, source: str) -> float:
    return float((batched_outputs(model, split.x, source=source).argmax(1) == split.y).mean())


def _check_apart(spec: ExternalSpec, source: Path, out_dir: Path) -> None:
    """The imported folder replaces itself as a whole: it must not be, hold or lie inside the
    checkpoints it imports (that would delete the user's own files)."""
    a, b = Path(source).resolve(), Path(out_dir).resolve()
    if a == b or a in b.parents or b in a.parents:
        raise ExternalError(
            f"external subject {spec.name}: the import writes {out_dir}, which "
            f"{'is' if a == b else 'holds' if b in a.parents else 'lies inside'} its checkpoints "
            f"{source}, and would replace them; keep the checkpoints outside {out_dir} (set "
            "`checkpoints` to their own folder)"
        )


def _check_only_ours(spec: ExternalSpec, out_dir: Path) -> None:
    """The import replaces ``out_dir`` as a whole: refuse when it holds anything an import did
    not write (the record, the history, epoch-XXX.safetensors), which would be deleted."""
    import re

    out_dir = Path(out_dir)
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ExternalError(f"external subject {spec.name}: {out_dir} is a file, not a folder")
    ours = {IMPORT_RECORD, "history.csv"}
    pattern = re.compile(r"epoch-\d+\.safetensors")
    others = sorted(
        f.name for f in out_dir.iterdir() if f.name not in ours and not pattern.fullmatch(f.name)
    )
    if others or (any(out_dir.iterdir()) and not (out_dir / IMPORT_RECORD).is_file()):
        shown = ", ".join(others[:3]) or "files of no import"
        raise ExternalError(
            f"external subject {spec.name}: {out_dir} holds files an import did not write "
            f"({shown}{' ...' if len(others) > 3 else ''}), and importing replaces the folder "
            "as a whole; move them out (or delete the folder) and import again"
        )


def import_subject(spec: ExternalSpec, runs: list[int], device: str = "auto") -> list[Path]:
    """Import every run of an external subject into ``<data>/imported/run-<r>/``."""
    info, splits = load_external(spec)
    out = []
    for run in runs:
        folder = imported_folder(spec, run)
        import_external(spec, info, splits, folder, spec.name, run, device)
        out.append(folder)
    return out
