"""What makes training resumable and its hand-over crash-safe (:mod:`ncip.study.training`):
the per-epoch checkpoint and resume state, the resume itself, and the finishing steps (history,
tokenizer, completion marker, then the folder swapped into place), each repeatable."""

from __future__ import annotations

import json
import pickle
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ncip.core.checkpoints import CheckpointMeta, checkpoint_name, load_weights, save_checkpoint
from ncip.core.errors import InputError
from ncip.core.io import atomic_path, replace_dir, write_csv, write_json
from ncip.core.logs import log
from ncip.study.data import TOKENIZER_FILE, DatasetInfo

STATE_FILE = "train-state.pt"
HISTORY_FILE = "history.csv"
COMPLETE_FILE = "complete.json"


def _resume(
    work: Path, fingerprint: str, model, opt, sched, dev, label: str, discard: bool = True
) -> tuple[list[dict[str, Any]], int]:
    """Load the resume state of an interrupted run of the same configuration and data into
    model, optimizer and schedule; returns (history so far, first epoch to train)."""
    state_path = work / STATE_FILE
    if not state_path.exists():
        return [], 1
    try:
        state = torch.load(state_path, map_location=dev, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as e:
        first = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        raise InputError(
            f"the resume state {state_path} holds more than tensors and plain "
            f"containers, or is corrupt ({first}); ncip did not load it. "
            f"Delete {work} to train from epoch 1"
        ) from None
    ckpt = work / checkpoint_name(state["epoch"])
    if state.get("fingerprint") != fingerprint or not ckpt.exists():
        if discard:
            log.info("discarding resume state in %s: configuration or data changed", work)
            shutil.rmtree(work)
        return [], 1
    load_weights(model, ckpt)
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    log.info("resuming %s from epoch %d in %s", label, state["epoch"], work)
    return state["history"], state["epoch"] + 1


def _save_epoch(
    work: Path, model, meta: CheckpointMeta, row: dict, opt, sched, history, fingerprint: str
) -> None:
    """The epoch's checkpoint (its metrics without the seconds: same seed, same bytes), then
    the resume state pointing at it."""
    timeless = {k: v for k, v in row.items() if k != "seconds"}
    save_checkpoint(work / checkpoint_name(meta.epoch), model, replace(meta, metrics=timeless))
    state = {
        "epoch": meta.epoch,
        "fingerprint": fingerprint,
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "history": history,
    }
    with atomic_path(work / STATE_FILE) as tmp:
        torch.save(state, tmp)


def _is_complete(work: Path, fingerprint: str) -> bool:
    marker = work / COMPLETE_FILE
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("fingerprint") == fingerprint
    except ValueError:
        return False


def _write_history(work: Path, hist: pd.DataFrame) -> None:
    # the folder's copy has no wall-clock column, so the folder's bytes depend on the seed only
    write_csv(work / HISTORY_FILE, hist.drop(columns=["seconds"], errors="ignore"))


def _mark_complete(work: Path, fingerprint: str, epochs: int) -> None:
    write_json(work / COMPLETE_FILE, {"fingerprint": fingerprint, "epochs": epochs})


def _drop_state(work: Path) -> None:
    (work / STATE_FILE).unlink(missing_ok=True)


def _publish(work: Path, out_dir: Path) -> None:
    """Make ``work`` the new ``out_dir`` in one step (see :func:`ncip.core.io.replace_dir`)."""
    replace_dir(work, out_dir)


def _finish(
    work: Path, out_dir: Path, hist: pd.DataFrame, fingerprint: str, info: DatasetInfo
) -> pd.DataFrame:
    """History (and a text dataset's tokenizer, so the checkpoints carry their encoding) and
    marker into the work folder, resume state out, then the hand-over. Each step is
    repeatable, so a crash anywhere in here is recovered by calling again."""
    if not _is_complete(work, fingerprint):
        _write_history(work, hist)
        if info.tokenizer is not None:
            with atomic_path(work / TOKENIZER_FILE) as tmp:
                tmp.write_text(info.tokenizer)
        _mark_complete(work, fingerprint, len(hist))
    _drop_state(work)
    if work.resolve() != out_dir.resolve():
        _publish(work, out_dir)
    return hist
