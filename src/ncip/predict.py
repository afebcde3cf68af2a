"""Batched inference, and multi-checkpoint prediction tables (one Parquet file per checkpoint).

A prediction table has one row per (split, sample): metadata columns ``subject``, ``epoch``,
``split``, ``sample_id``, ``label``, ``pred``, then ``logit_0..C-1`` (float32, as the model
produced them) and ``prob_0..C-1`` (float64 softmax of those logits). Scores that need precision
beyond float64 probabilities (MSP, PCS, DeepGini on saturated outputs) use the logits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ncip.data import Split, as_model_input
from ncip.logs import progress

META_COLUMNS = ["subject", "epoch", "split", "sample_id", "label", "pred"]


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use 'cpu'")
    return torch.device(device)


@torch.inference_mode()
def batched_outputs(
    model: torch.nn.Module,
    x: np.ndarray,
    batch_size: int = 1024,
    features: bool = False,
    desc: str | None = None,
    source: str | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Logits (and, with ``features``, penultimate features) of ``x`` in eval mode, as float32.

    With ``source`` (the checkpoint's name), non-finite logits raise ValueError naming it."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    logits, feats = [], []
    starts = range(0, len(x), batch_size)
    if desc:
        starts = progress(starts, desc, total=len(starts), unit="batch")
    for i in starts:
        xb = as_model_input(x[i : i + batch_size]).to(device)
        if features:
            f = model.features(xb)
            feats.append(f.float().cpu().numpy())
            logits.append(model.head(f).float().cpu().numpy())
        else:
            logits.append(model(xb).float().cpu().numpy())
    model.train(was_training)
    z = np.concatenate(logits) if logits else np.zeros((0, 0), np.float32)
    if source is not None and not np.all(np.isfinite(z)):
        bad = int((~np.isfinite(z)).any(axis=1).sum())
        raise ValueError(f"{source} produces NaN or infinite outputs on {bad} of {len(z)} inputs")
    if features:
        return z, (np.concatenate(feats) if feats else np.zeros((0, 0), np.float32))
    return z


def softmax64(logits: np.ndarray) -> np.ndarray:
    """Softmax in float64 (stable), along the last axis."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def prediction_table(
    logits: np.ndarray, split: Split, subject: str, epoch: int, split_name: str
) -> pd.DataFrame:
    """One checkpoint's outputs on one split as a table (see the module docstring)."""
    c = logits.shape[1]
    probs = softmax64(logits)
    df = pd.DataFrame(
        {
            "subject": subject,
            "epoch": np.int32(epoch),
            "split": split_name,
            "sample_id": split.ids.astype(str),
            "label": split.y.astype(np.int64),
            "pred": logits.argmax(axis=1).astype(np.int64),
        }
    )
    logit_cols = pd.DataFrame(logits.astype(np.float32), columns=[f"logit_{i}" for i in range(c)])
    prob_cols = pd.DataFrame(probs, columns=[f"prob_{i}" for i in range(c)])
    return pd.concat([df, logit_cols, prob_cols], axis=1)


def predict_checkpoint(
    model: torch.nn.Module,
    splits: Mapping[str, Split],
    subject: str,
    epoch: int,
    batch_size: int = 1024,
    source: str | None = None,
) -> pd.DataFrame:
    """Prediction table of one model over several splits (outputs checked finite)."""
    parts = [
        prediction_table(batched_outputs(model, s.x, batch_size, source=source or f"epoch {epoch}"),
                         s, subject, epoch, name)
        for name, s in splits.items()
    ]
    return pd.concat(parts, ignore_index=True)


@dataclass
class ProbStack:
    """Predictions of several checkpoints on one split, aligned by sample."""

    epochs: np.ndarray  # [K], ascending
    probs: np.ndarray  # [K, N, C] float64
    logits: np.ndarray  # [K, N, C] float32
    sample_id: np.ndarray  # [N]
    label: np.ndarray  # [N]

    def at(self, epochs) -> ProbStack:
        """The stack restricted to the given epochs (kept in ascending order)."""
        wanted = np.asarray(sorted(set(int(e) for e in epochs)))
        missing = set(wanted) - set(self.epochs.tolist())
        if missing:
            raise KeyError(f"no predictions for epochs {sorted(missing)}")
        idx = np.searchsorted(self.epochs, wanted)
        return ProbStack(wanted, self.probs[idx], self.logits[idx], self.sample_id, self.label)


def read_prediction_dir(directory: Path | str) -> pd.DataFrame:
    """All prediction tables in a directory, concatenated."""
    files = sorted(Path(directory).glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"no prediction files in {directory}; run predict-probabilities")
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def stack_split(table: pd.DataFrame, split: str) -> ProbStack:
    """Turn the rows of one split in a (multi-checkpoint) table into aligned arrays."""
    part = table[table["split"] == split]
    if part.empty:
        raise KeyError(f"no predictions for split {split!r}; have {sorted(table['split'].unique())}")
    prob_cols = sorted(
        (c for c in part.columns if c.startswith("prob_")), key=lambda c: int(c[5:])
    )
    logit_cols = [f"logit_{c[5:]}" for c in prob_cols]
    epochs = np.sort(part["epoch"].unique())
    first = part[part["epoch"] == epochs[0]]
    order = first["sample_id"].to_numpy()
    probs, logits = [], []
    for e in epochs:
        rows = part[part["epoch"] == e].set_index("sample_id").loc[order]
        probs.append(rows[prob_cols].to_numpy(np.float64))
        logits.append(rows[logit_cols].to_numpy(np.float32))
    return ProbStack(
        epochs=epochs.astype(np.int64),
        probs=np.stack(probs),
        logits=np.stack(logits),
        sample_id=order,
        label=first["label"].to_numpy(np.int64),
    )
