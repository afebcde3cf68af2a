"""Classic UCI tables from Debian's R packages ``r-cran-mlbench`` and ``r-cran-kernlab``, read
without R: the packages' ``.rda`` files are read with ``rdata`` (PyPI).

The set-up gets the files with ``apt-get download`` and ``dpkg-deb -x`` into the user's cache,
``~/.cache/ncip/r-cran/<package>/data/`` (nothing is installed; outside the checkout, so DVC
experiments in a temporary copy find them); ``data/raw/r-cran/<package>/data/`` (by hand) and an
installed R package's folder (``/usr/lib/R/site-library/<package>/data``) are read as well.

Each table becomes a dataset of 1 x 1 x F uint8 "signals", like MNIST-1D, so every stage,
model (the MLP) and baseline runs on it unchanged: each feature is scaled by the training
split's minimum and maximum to [0, 255] and rounded (test values outside that range clipped);
0/1 categorical features (DNA's) become 0/255; heavy-tailed counts (spam's) go through
``log1p`` first. The split is stratified, TEST_FRACTION of the rows, drawn with
``default_rng(SEED)`` (PCG64: the same on every platform), so the data is deterministic.

Which tables, and why (enough misclassified test inputs for an MLP to rank, and no missing
values): ``letter`` (LetterRecognition, 20,000 x 16, 26 classes), ``satellite`` (Satellite,
6,435 x 36, 6), ``spam`` (kernlab's spam, 4,601 x 57, 2), ``dna`` (DNA, 3,186 x 180 binary,
3), ``vowel`` (Vowel, 990 x 9: its V1, the speaker's number, is no feature; 11 classes),
``vehicle`` (Vehicle, 846 x 18, 4). Left out: Shuttle (an
MLP reaches about 99.9%: a handful of test faults), Soybean and income (missing values),
musk (476 rows).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ncip.study.data import (
    DataFormatError,
    DatasetNotFoundError,
    RawDataset,
    Split,
    register_dataset,
    stratified_split,
)
from ncip.study.datasets.common import sample_ids

SEED = 0
TEST_FRACTION = 0.2
SYSTEM_R = Path("/usr/lib/R/site-library")


def user_cache() -> Path:
    """Where the set-up puts the packages' data files outside any checkout (so DVC experiments,
    which run in a temporary copy without ignored files, find them as they find Debian's own
    data under /usr/share): ``$XDG_CACHE_HOME/ncip/r-cran``, else ``~/.cache/ncip/r-cran``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ncip" / "r-cran"


@dataclass(frozen=True)
class Table:
    name: str  # the dataset's name here
    package: str  # the R package (Debian: r-cran-<package>)
    rda: str  # the data file's stem, and the object's name in it
    target: str  # the class column
    transform: str = "minmax"  # "minmax", "log1p" (then min-max) or "binary" (0/1 levels)
    drop: tuple[str, ...] = ()  # columns that are no feature (Vowel's V1: the speaker's id)


TABLES = {
    t.name: t
    for t in (
        Table("letter", "mlbench", "LetterRecognition", "lettr"),
        Table("satellite", "mlbench", "Satellite", "classes"),
        Table("spam", "kernlab", "spam", "type", "log1p"),
        Table("dna", "mlbench", "DNA", "Class", "binary"),
        Table("vowel", "mlbench", "Vowel", "Class", drop=("V1",)),
        Table("vehicle", "mlbench", "Vehicle", "Class"),
    )
}


def rda_path(raw_root: Path, t: Table) -> Path:
    for d in (
        Path(raw_root) / "r-cran" / t.package / "data",
        user_cache() / t.package / "data",
        SYSTEM_R / t.package / "data",
    ):
        if (d / f"{t.rda}.rda").is_file():
            return d / f"{t.rda}.rda"
    raise DatasetNotFoundError(
        f"{t.name} needs {t.rda}.rda of Debian's r-cran-{t.package}: `bash scripts/setup.sh` "
        f"gets it (apt-get download r-cran-{t.package}; dpkg-deb -x into "
        f"{user_cache() / t.package}), or put the package's data/ files in "
        f"{Path(raw_root) / 'r-cran' / t.package / 'data'}/"
    )


def read_table(path: Path, t: Table):
    try:
        import rdata
    except ModuleNotFoundError as e:
        raise DatasetNotFoundError(
            f"{t.name} needs the PyPI package rdata (pip install 'ncip[study]')"
        ) from e
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII." for every string
        objects = rdata.read_rda(str(path))
    if t.rda not in objects:
        raise DataFormatError(f"{path} holds no {t.rda!r} (it has {', '.join(objects)})")
    return objects[t.rda]


def features(df, t: Table) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(feature matrix as float64, integer labels, class names) of a table."""
    if t.target not in df.columns:
        raise DataFormatError(f"{t.rda} has no column {t.target!r}")
    if df.isna().any().any():
        raise DataFormatError(f"{t.rda} has missing values; it cannot be used as it is")
    y_cat = df[t.target].astype("category")
    classes = [str(c) for c in y_cat.cat.categories]
    y = y_cat.cat.codes.to_numpy().astype(np.int64)
    cols = [c for c in df.columns if c != t.target and c not in t.drop]
    if t.transform == "binary":
        x = np.stack([df[c].astype(str).astype(np.int64).to_numpy() for c in cols], axis=1)
        if not set(np.unique(x)) <= {0, 1}:
            raise DataFormatError(f"{t.rda}: features are not 0/1 levels")
    else:
        x = df[cols].to_numpy(dtype=np.float64)
        if t.transform == "log1p":
            x = np.log1p(x)
    return x.astype(np.float64), y, classes


def to_uint8(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each feature scaled by the training split's range to [0, 255], rounded, as [N, 1, 1, F]."""
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = np.clip((x - lo) / span, 0.0, 1.0)
    return np.round(scaled * 255.0).astype(np.uint8)[:, None, None, :]


def load_table(name: str, raw_root: Path) -> RawDataset:
    t = TABLES[name]
    x, y, classes = features(read_table(rda_path(raw_root, t), t), t)
    train_idx, test_idx = stratified_split(y, TEST_FRACTION, np.random.default_rng(SEED))
    lo, hi = x[train_idx].min(axis=0), x[train_idx].max(axis=0)
    ids = sample_ids(name, "row", len(y))
    full = Split(to_uint8(x, lo, hi), y, ids)
    return RawDataset("image", classes, full.subset(train_idx), full.subset(test_idx))


def _register(name: str) -> None:
    @register_dataset(name)
    def load(raw_root: Path) -> RawDataset:
        return load_table(name, raw_root)

    load.__doc__ = f"UCI {TABLES[name].rda} (Debian r-cran-{TABLES[name].package}), as signals."


for _name in TABLES:
    _register(_name)
