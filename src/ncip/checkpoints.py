"""Per-epoch checkpoints as safetensors: atomic writes, metadata headers, head-only reads.

Each file holds the model's state dict and, in the safetensors header, a JSON record under the
key ``ncip``: epoch, architecture, dataset shape information, the name of the head's weight
tensor, the epoch's metrics and the resolved training configuration. The header can be read
without touching the tensors, and one tensor (the classifier head) can be read without loading
the others, which is what checkpoint selection needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ncip.io import atomic_path
from ncip.models import Classifier, create_model

HEAD_KEY = "head.weight"


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    epoch: int
    meta: dict[str, Any]


def checkpoint_name(epoch: int) -> str:
    return f"epoch-{epoch:03d}.safetensors"


def save_checkpoint(path: Path | str, model: Classifier, meta: dict[str, Any]) -> None:
    """Write the model's weights and ``meta`` (JSON-able) atomically."""
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    header = {"ncip": json.dumps({"head_key": HEAD_KEY, "arch": model.arch, **meta})}
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata=header)


def read_meta(path: Path | str) -> dict[str, Any]:
    """The checkpoint's metadata record, read from the header alone."""
    with safe_open(str(path), framework="pt") as f:
        header = f.metadata() or {}
    if "ncip" not in header:
        raise ValueError(f"{path} is not an ncip checkpoint (no 'ncip' metadata record)")
    return json.loads(header["ncip"])


def read_tensor(path: Path | str, key: str) -> np.ndarray:
    """Read one tensor from a checkpoint without loading the rest."""
    with safe_open(str(path), framework="pt") as f:
        if key not in f.keys():
            raise KeyError(f"{path} has no tensor {key!r}")
        return f.get_tensor(key).double().numpy()


def read_head(path: Path | str) -> np.ndarray:
    """The classifier head's weight matrix ``[C, d]`` (rows = class vectors)."""
    return read_tensor(path, read_meta(path).get("head_key", HEAD_KEY))


def build_model(meta: dict[str, Any]) -> Classifier:
    """An untrained model of the architecture a checkpoint's metadata describes."""
    return create_model(
        meta["arch"],
        meta["num_classes"],
        meta.get("in_channels", 1),
        vocab_size=meta.get("vocab_size"),
    )


def load_model(path: Path | str, device: str | torch.device = "cpu") -> Classifier:
    """Rebuild the model from a checkpoint's metadata and load its weights, in eval mode."""
    model = build_model(read_meta(path))
    model.load_state_dict(load_file(str(path)))
    return model.to(device).eval()


def load_weights(model: Classifier, path: Path | str) -> Classifier:
    """Load a checkpoint's weights into an existing model of the same architecture."""
    model.load_state_dict(load_file(str(path), device=str(next(model.parameters()).device)))
    return model


def list_checkpoints(directory: Path | str) -> list[CheckpointInfo]:
    """All checkpoints in a directory, ordered by the epoch recorded in their metadata."""
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"checkpoint directory {d} does not exist; train first")
    infos = []
    for p in d.glob("*.safetensors"):
        meta = read_meta(p)
        infos.append(CheckpointInfo(p, int(meta["epoch"]), meta))
    infos.sort(key=lambda c: c.epoch)
    epochs = [c.epoch for c in infos]
    if len(set(epochs)) != len(epochs):
        raise ValueError(f"{d} holds two checkpoints of the same epoch: {epochs}")
    return infos
