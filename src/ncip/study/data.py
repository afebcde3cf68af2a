"""Dataset registry, splits and prepared data: what every loader returns and how it is kept.

The loaders for standard on-disk formats live in :mod:`ncip.study.datasets` (one module per format;
importing the package registers them). Every loader returns the dataset's own train and test
splits; :func:`prepare_dataset` then holds out a fixed, stratified validation split of the
training data (never trained on; the baselines that learn from labelled data use it). Images are
kept as uint8 ``[N, C, H, W]`` and reach the model in [0, 1] (:func:`as_model_input`);
normalisation lives inside the model. Text is kept as int32 token ids ``[N, L]`` (0 = padding, 1
= unknown word).

Every sample carries a stable id ``<dataset>:<source split>:<index or file>`` that survives
shuffling, subsetting and adversarial perturbation.
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ncip.core.errors import InputError, MissingFileError, NcipError
from ncip.core.io import atomic_path


class DatasetNotFoundError(NcipError, FileNotFoundError):
    """A dataset's files are missing; the message says what to install or where to put them."""


class DataFormatError(NcipError, ValueError):
    """A data file is corrupt or not in the expected format; the message names it."""


@dataclass(frozen=True)
class Split:
    """One split of a dataset: inputs, integer labels and stable sample ids."""

    x: np.ndarray
    y: np.ndarray
    ids: np.ndarray

    def __post_init__(self) -> None:
        if not (len(self.x) == len(self.y) == len(self.ids)):
            raise InputError(
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
    # text: the encoding as a `tokenizers` JSON string; kept as TOKENIZER_FILE beside info.json
    tokenizer: str | None = field(default=None, repr=False)

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
    tokenizer: str | None = None  # text: the encoding, a `tokenizers` JSON string


TOKENIZER_FILE = "tokenizer.json"  # beside a text dataset's prepared splits and checkpoints
Loader = Callable[[Path], RawDataset]
_DATASETS: dict[str, Loader] = {}
_KIND: dict[str, str] = {}
_SOURCE: dict[str, str] = {}


KINDS = ("image", "text")


def register_dataset(
    name: str, kind: str = "image", source: str | None = None
) -> Callable[[Loader], Loader]:
    """Register a loader ``(raw_root) -> RawDataset`` under ``name``; ``kind`` is "image"
    (uint8 [N, C, H, W]) or "text" (int32 token ids [N, L]). ``source`` names where the data
    comes from, shared by data sets drawn from one collection ("WordNet", "MNIST-like digits"):
    the study's analyses by source read it (default: the data set is its own source)."""
    if kind not in KINDS:
        raise InputError(f"dataset kind must be one of {KINDS}, got {kind!r}")

    def wrap(fn: Loader) -> Loader:
        if name in _DATASETS:
            raise InputError(f"dataset {name!r} is registered twice")
        _DATASETS[name] = fn
        _KIND[name] = kind
        _SOURCE[name] = source or name
        return fn

    return wrap


def _registered() -> dict[str, Loader]:
    import ncip.study.datasets  # noqa: F401  (importing the package registers every loader)

    return _DATASETS


def list_datasets() -> list[str]:
    return sorted(_registered())


def dataset_kind(name: str) -> str:
    """ "image" or "text", as the dataset registered itself."""
    if name not in _registered():
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(list_datasets())}")
    return _KIND[name]


def dataset_source(name: str) -> str:
    """The source a dataset registered with (its own name when it named none)."""
    if name not in _registered():
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(list_datasets())}")
    return _SOURCE[name]


def load_raw(name: str, raw_root: Path | str = "data/raw") -> RawDataset:
    """Load a registered dataset's own train and test splits from disk."""
    if name not in _registered():
        raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(list_datasets())}")
    raw = _DATASETS[name](Path(raw_root))
    if raw.kind != _KIND[name]:
        raise InputError(f"dataset {name!r} registered as {_KIND[name]} but loaded {raw.kind}")
    return raw


def prepare_dataset(
    name: str, raw_root: Path | str = "data/raw", val_fraction: float = 0.1, split_seed: int = 0
) -> tuple[DatasetInfo, dict[str, Split]]:
    """Load a dataset and hold out a stratified validation split of its training data."""
    if not 0.0 < val_fraction < 1.0:
        raise InputError(f"val_fraction must lie in (0, 1), got {val_fraction}")
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
        tokenizer=raw.tokenizer,
    )
    if raw.kind == "image":
        info.mean, info.std = channel_stats(splits["train"].x)
    return info, splits


def channel_stats(x: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and std (at least 1e-3) of images ``[N, C, H, W]`` in [0, 1] units
    (uint8 pixels, or floats already in [0, 1]), the same bytes on every machine: a float64
    mean's pairwise, SIMD-width-dependent summation differs in the last bit between CPUs, and
    info.json with it, which would defeat DVC's run-cache across machines. uint8: exact
    integer sums, rounded once; floats: math.fsum, exactly rounded whatever the order."""
    means, stds = [], []
    for c in range(x.shape[1]):
        if x.dtype == np.uint8:
            v = x[:, c].astype(np.int64)
            n, s1, s2 = v.size, int(v.sum()), int((v * v).sum())  # exact: n * 255^2 fits int64
            mean = s1 / (n * 255)  # one rounding of an exact fraction
            var = (s2 * n - s1 * s1) / (n * n * 255 * 255)  # population variance, as np.std
        else:
            v = x[:, c].astype(np.float64).ravel()
            mean = math.fsum(v) / v.size
            var = math.fsum((v - mean) ** 2) / v.size
        means.append(mean)
        stds.append(max(math.sqrt(var), 1e-3))
    return means, stds


def check_labels(raw: RawDataset, name: str) -> None:
    """Every label is a class index of the dataset; else the raw files are corrupt."""
    c = len(raw.classes)
    for part, split in (("train", raw.train), ("test", raw.test)):
        if len(split) == 0:
            raise DataFormatError(f"{name}: the {part} split holds no samples; check its files")
        bad = np.flatnonzero((split.y < 0) | (split.y >= c))
        if len(bad):
            i = int(bad[0])
            raise DataFormatError(
                f"{name}: {part} label {int(split.y[i])} of sample "
                f"{split.ids[i]} is outside its {c} classes (0..{c - 1}); "
                f"{len(bad)} labels are bad: the label file is corrupt"
            )


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
    record = asdict(info)
    tokenizer = record.pop("tokenizer")
    if tokenizer is not None:
        with atomic_path(out / TOKENIZER_FILE) as tmp:
            tmp.write_text(tokenizer)
    with atomic_path(out / "info.json") as tmp:
        tmp.write_text(json.dumps(record, indent=2) + "\n")


def save_split(path: Path | str, split: Split) -> None:
    with atomic_path(Path(path)) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, x=split.x, y=split.y, ids=split.ids.astype(str))


def load_split(path: Path | str, info: DatasetInfo | None = None) -> Split:
    """A split saved by :func:`save_split`, checked; with ``info``, against the dataset too
    (input shape, value type and range, labels in range)."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"{path} does not exist; run the prepare-data stage first")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in ("x", "y", "ids") if k not in z.files]
            if missing:
                raise DataFormatError(
                    f"{path} lacks {', '.join(missing)}; write it with "
                    "np.savez(path, x=..., y=..., ids=...)"
                )
            x, y, ids = z["x"], z["y"], z["ids"]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        if isinstance(e, DataFormatError):
            raise
        raise DataFormatError(f"{path} is not a readable .npz file ({e})") from None
    if len(x) == 0:
        raise DataFormatError(f"{path} holds no samples")
    if not (len(x) == len(y) == len(ids)):
        raise DataFormatError(
            f"{path}: x, y and ids disagree in length ({len(x)}, {len(y)}, {len(ids)})"
        )
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
        raise DataFormatError(
            f"{path}: inputs have shape {shape} but {info.name} has {list(info.input_shape)}"
        )
    kind = split.x.dtype.kind
    if info.kind == "image":
        if kind == "f":
            lo, hi = float(split.x.min()), float(split.x.max())
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise DataFormatError(f"{path}: inputs hold NaN or infinite values")
            if lo < 0 or hi > 1:
                raise DataFormatError(
                    f"{path}: float images must lie in [0, 1], these lie in "
                    f"[{lo:g}, {hi:g}]; store 8-bit images as uint8"
                )
        elif split.x.dtype != np.uint8:
            raise DataFormatError(
                f"{path}: images are {split.x.dtype}; store them as uint8 (or float32 in [0, 1])"
            )
    elif kind not in "iu" or (info.vocab_size and int(split.x.max()) >= info.vocab_size):
        raise DataFormatError(
            f"{path}: text inputs must be integer token ids below the "
            f"vocabulary size {info.vocab_size}"
        )
    c = info.num_classes
    bad = np.flatnonzero((split.y < 0) | (split.y >= c))
    if len(bad):
        raise DataFormatError(
            f"{path}: label {int(split.y[bad[0]])} is outside the {c} classes of {info.name}"
        )


def load_info(data_dir: Path | str) -> DatasetInfo:
    path = Path(data_dir) / "info.json"
    if not path.exists():
        raise MissingFileError(f"{path} does not exist; run the prepare-data stage first")
    try:
        info = DatasetInfo(**json.loads(path.read_text()))
    except (ValueError, TypeError) as e:
        raise DataFormatError(
            f"{path} is not a dataset description ({e}); run prepare-data again"
        ) from None
    tokenizer = Path(data_dir) / TOKENIZER_FILE
    if tokenizer.is_file():
        info.tokenizer = tokenizer.read_text()
    return info


def adversarial_sets(
    directory: Path | str, source: str = "test", info: DatasetInfo | None = None
) -> dict[str, Split]:
    """The combined adversarial version of ``source`` in a generate-adversarial output, keyed
    "adv"; empty when there is none (no directory given, or a text dataset). With ``info``
    the set is checked against the dataset (shape, [0, 1] range, labels)."""
    if directory is None:
        return {}
    name = "adv.npz" if source == "test" else f"{source}-adv.npz"
    path = Path(directory) / name
    return {"adv": load_split(path, info)} if path.exists() else {}


def load_prepared(
    data_dir: Path | str, dataset: str | None = None
) -> tuple[DatasetInfo, dict[str, Split]]:
    """(info, {"train", "val", "test"} splits) of a prepare-data folder; with ``dataset``, a
    folder of another dataset is refused by name."""
    info = load_info(data_dir)
    if dataset is not None and info.name != dataset:
        raise InputError(f"{data_dir} holds {info.name}, but the subject trains on {dataset}")
    return info, {
        n: load_split(Path(data_dir) / f"{n}.npz", info) for n in ("train", "val", "test")
    }
