"""CIFAR-10 and CIFAR-100, the official python pickle versions, read with a restricted
unpickler."""

from __future__ import annotations

import codecs
import pickle
from pathlib import Path

import numpy as np

from ncip.study.data import (
    DataFormatError,
    DatasetNotFoundError,
    RawDataset,
    Split,
    register_dataset,
)
from ncip.study.datasets.common import sample_ids


class _CifarUnpickler(pickle.Unpickler):
    """Admits only what CIFAR's python batches hold: dicts, lists, bytes, numbers and numpy
    arrays. Any other object in the file (a code-running payload) is refused."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): np._core.multiarray._reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): codecs.encode,  # how protocol 2 writes bytes from Python 3
    }

    def find_class(self, module: str, name: str):
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        raise pickle.UnpicklingError(f"it holds a {module}.{name} object")


def _unpickle(path: Path) -> dict:
    """A CIFAR batch, read with the restricted unpickler."""
    try:
        with open(path, "rb") as f:
            obj = _CifarUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as e:
        raise DataFormatError(
            f"{path} is not a CIFAR python batch ({e}); extract the official python version again"
        ) from None
    if not isinstance(obj, dict):
        raise DataFormatError(
            f"{path} is not a CIFAR python batch (it holds a {type(obj).__name__}, not a dict)"
        )
    return obj


def _cifar(raw_root: Path, name: str, folder: str, parts: dict, label_key: bytes, meta: tuple):
    d = raw_root / folder
    if not d.is_dir():
        raise DatasetNotFoundError(
            f"{name.upper()} not found: extract the official python version "
            f"({folder.split('-py')[0] if 'batches' in folder else folder}-python.tar.gz from "
            f"https://www.cs.toronto.edu/~kriz/) so that {d}/ exists"
        )
    splits = {}
    for part, files in parts.items():
        xs, ys = [], []
        for fname in files:
            if not (d / fname).is_file():
                raise DatasetNotFoundError(f"{name}: {d / fname} is missing")
            batch = _unpickle(d / fname)
            xs.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            ys.append(np.asarray(batch[label_key], dtype=np.int64))
        x, y = np.concatenate(xs), np.concatenate(ys)
        splits[part] = Split(x, y, sample_ids(name, part, len(y)))
    meta_file, meta_key = meta
    classes = [c.decode() for c in _unpickle(d / meta_file)[meta_key]]
    return RawDataset("image", classes, splits["train"], splits["test"])


@register_dataset("cifar10", source="CIFAR")
def load_cifar10(raw_root: Path) -> RawDataset:
    """CIFAR-10, python pickle version, in data/raw/cifar-10-batches-py."""
    parts = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
    return _cifar(
        raw_root,
        "cifar10",
        "cifar-10-batches-py",
        parts,
        b"labels",
        ("batches.meta", b"label_names"),
    )


@register_dataset("cifar100", source="CIFAR")
def load_cifar100(raw_root: Path) -> RawDataset:
    """CIFAR-100 (fine labels), python pickle version, in data/raw/cifar-100-python."""
    parts = {"train": ["train"], "test": ["test"]}
    return _cifar(
        raw_root,
        "cifar100",
        "cifar-100-python",
        parts,
        b"fine_labels",
        ("meta", b"fine_label_names"),
    )
