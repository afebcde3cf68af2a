"""Tables from Debian's R data packages, read without R: UCI's classic tables
(``r-cran-mlbench``, ``r-cran-kernlab``) and the data sets of ``r-cran-modeldata``,
``r-cran-caret``, ``r-cran-dslabs`` and ``r-cran-cardata`` (issue 49). ``.rda``/``.RData`` files
are read with ``rdata`` (PyPI); a package's lazy-load database (``data/Rdata.rdx`` and
``Rdata.rdb``: an index of offsets, then each object serialized and compressed on its own) is
read by :func:`lazy_load`, which hands each object's bytes to ``rdata``.

The set-up gets the files with ``apt-get download`` and ``dpkg-deb -x`` into the user's cache,
``~/.cache/ncip/r-cran/<package>/data/`` (nothing is installed; outside the checkout, so DVC
experiments in a temporary copy find them); ``data/raw/r-cran/<package>/data/`` (by hand) and an
installed R package's folder (``/usr/lib/R/site-library/<package>/data``) are read as well.

Each table becomes a dataset of 1 x 1 x F uint8 "signals", like MNIST-1D, so every stage,
model (the MLP) and baseline runs on it unchanged: each feature is scaled by the training
split's minimum and maximum to [0, 255] and rounded (test values outside that range clipped);
a factor (categorical) column becomes one 0/255 column per level (levels in R's order); 0/1
categorical features (DNA's) become 0/255; heavy-tailed amounts (spam's counts, incomes and
debts) go through ``log1p`` first (``transform="log1p"``: every numeric column with no negative
value). Rows with a missing value in a used column are dropped (``missing="drop"``; the count is
in the table's line below). The split is stratified, ``test_fraction`` of the rows (0.2; 0.5
for tables under about 3,000 rows, so that their final models get more test inputs wrong),
drawn with ``default_rng(SEED)`` (PCG64: the same on every platform), so the data is
deterministic to the byte for one package version.

Which tables, and why (enough misclassified test inputs for an MLP to rank; one per source):
``letter`` (LetterRecognition, 20,000 x 16, 26 classes), ``satellite`` (Satellite, 6,435 x 36,
6), ``spam`` (kernlab's spam, 4,601 x 57, 2), ``dna`` (DNA, 3,186 x 180 binary, 3), ``vowel``
(Vowel, 990 x 9: its V1, the speaker's number, is no feature; 11 classes), ``vehicle``
(Vehicle, 846 x 18, 4), ``pima``, ``glass``, ``sonar``, ``ionosphere`` (mlbench), ``income``
(kernlab, 9 income bands) and ``ticdata`` (kernlab, the CoIL 2000 caravan-insurance owners);
modeldata's ``credit`` (credit_data), ``hpc`` (hpc_data, 4 job-time classes), ``wachurn``
(IBM's telco churn), ``mlcchurn`` (MLC++'s churn), ``lending`` (Lending Club), ``cells`` (cell
segmentation quality), ``attrition`` (IBM's HR attrition); caret's ``germancredit`` and
``mdrr`` (multidrug resistance, 342 molecular descriptors); dslabs' ``brca`` (Wisconsin
diagnostic breast cancer) and ``olive`` (olive oils' 9 areas); carData's ``titanic``,
``chile`` (1988 plebiscite vote), ``beps`` (British election panel vote), ``wvs`` (World
Values Survey: government action on poverty), ``wells`` (Bangladesh well switching) and
``mroz`` (women's labour-force participation). Left out: Shuttle (an MLP reaches about 99.9%: a
handful of test faults), Soybean (missing values in most rows), musk (476 rows), caret's
segmentationData (the same cells as modeldata's), MASS's fgl, Pima and biopsy (the same as
mlbench's Glass, PimaIndiansDiabetes and BreastCancer).
"""

from __future__ import annotations

import bz2
import lzma
import os
import struct
import warnings
import zlib
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
SMALL = 0.5  # the test share of tables under about 3,000 rows
SYSTEM_R = Path("/usr/lib/R/site-library")
LAZY = "Rdata"  # a package's lazy-load database: data/Rdata.rdx (index) and Rdata.rdb


def user_cache() -> Path:
    """Where the set-up puts the packages' data files outside any checkout (so DVC experiments,
    which run in a temporary copy without ignored files, find them as they find Debian's own
    data under /usr/share): ``$XDG_CACHE_HOME/ncip/r-cran``, else ``~/.cache/ncip/r-cran``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ncip" / "r-cran"


@dataclass(frozen=True)
class Table:
    name: str  # the dataset's name here
    package: str  # the R package's folder name (Debian: r-cran-<package in lower case>)
    rda: str  # the data file's stem (.rda or .RData), or LAZY for the lazy-load database
    target: str  # the class column (with ``labels``: the object holding the classes)
    source: str  # where the data comes from, as the report names it
    transform: str = "minmax"  # "minmax", "log1p" (then min-max) or "binary" (0/1 levels)
    drop: tuple[str, ...] = ()  # columns that are no feature (Vowel's V1: the speaker's id)
    obj: str | None = None  # the object's name (default: rda); a list (x, y) reads as x + y
    labels: bool = False  # the classes are the object ``target`` beside the features' object
    missing: str = "refuse"  # "refuse" or "drop" (rows with a missing value)
    test_fraction: float = TEST_FRACTION

    @property
    def deb(self) -> str:
        return f"r-cran-{self.package.lower()}"

    @property
    def file(self) -> str:
        return (
            "Rdata.rdx"
            if self.rda == LAZY
            else f"{self.rda}.rda"
            if self.package in _RDA
            else f"{self.rda}.RData"
        )


_RDA = ("mlbench", "kernlab", "kohonen")  # packages whose files end in .rda (caret's: .RData)

TABLES = {
    t.name: t
    for t in (
        Table("letter", "mlbench", "LetterRecognition", "lettr", "UCI Letter Recognition"),
        Table("satellite", "mlbench", "Satellite", "classes", "UCI Statlog Landsat Satellite"),
        Table("spam", "kernlab", "spam", "type", "UCI Spambase", "log1p"),
        Table("dna", "mlbench", "DNA", "Class", "UCI Statlog DNA", "binary"),
        Table("vowel", "mlbench", "Vowel", "Class", "UCI Vowel", drop=("V1",)),
        Table("vehicle", "mlbench", "Vehicle", "Class", "UCI Statlog Vehicle"),
        Table(
            "pima",
            "mlbench",
            "PimaIndiansDiabetes",
            "diabetes",
            "Pima Indians diabetes",
            test_fraction=SMALL,
        ),
        Table("glass", "mlbench", "Glass", "Type", "UCI Glass", test_fraction=SMALL),
        Table("sonar", "mlbench", "Sonar", "Class", "UCI Sonar", test_fraction=SMALL),
        Table(
            "ionosphere",
            "mlbench",
            "Ionosphere",
            "Class",
            "UCI Ionosphere",
            drop=("V2",),
            test_fraction=SMALL,
        ),
        Table("income", "kernlab", "income", "INCOME", "UCI Marketing (income)", missing="drop"),
        Table("ticdata", "kernlab", "ticdata", "CARAVAN", "CoIL 2000 insurance"),
        Table(
            "credit",
            "modeldata",
            LAZY,
            "Status",
            "credit scoring (Belanche Muñoz)",
            "log1p",
            obj="credit_data",
            missing="drop",
        ),
        Table("hpc", "modeldata", LAZY, "class", "HPC job scheduling", "log1p", obj="hpc_data"),
        Table(
            "wachurn", "modeldata", LAZY, "churn", "IBM telco churn", obj="wa_churn", missing="drop"
        ),
        Table("mlcchurn", "modeldata", LAZY, "churn", "MLC++ churn", obj="mlc_churn"),
        Table("lending", "modeldata", LAZY, "Class", "Lending Club", "log1p", obj="lending_club"),
        Table(
            "cells",
            "modeldata",
            LAZY,
            "class",
            "cell segmentation (Hill et al.)",
            obj="cells",
            drop=("case",),
            test_fraction=SMALL,
        ),
        Table(
            "attrition",
            "modeldata",
            LAZY,
            "Attrition",
            "IBM HR attrition",
            obj="attrition",
            test_fraction=SMALL,
        ),
        Table(
            "germancredit",
            "caret",
            "GermanCredit",
            "Class",
            "UCI Statlog German credit",
            test_fraction=SMALL,
        ),
        Table(
            "mdrr",
            "caret",
            "mdrr",
            "mdrrClass",
            "multidrug resistance (Svetnik et al.)",
            obj="mdrrDescr",
            labels=True,
            test_fraction=SMALL,
        ),
        Table(
            "brca",
            "dslabs",
            LAZY,
            "y",
            "UCI breast cancer Wisconsin (diagnostic)",
            obj="brca",
            test_fraction=SMALL,
        ),
        Table(
            "olive",
            "dslabs",
            LAZY,
            "area",
            "olive oils (Forina et al.)",
            obj="olive",
            drop=("region",),
            test_fraction=SMALL,
        ),
        Table(
            "titanic",
            "carData",
            LAZY,
            "survived",
            "Titanic passengers",
            obj="TitanicSurvival",
            missing="drop",
            test_fraction=SMALL,
        ),
        Table(
            "chile",
            "carData",
            LAZY,
            "vote",
            "Chile 1988 plebiscite survey",
            obj="Chile",
            missing="drop",
            test_fraction=SMALL,
        ),
        Table(
            "beps",
            "carData",
            LAZY,
            "vote",
            "British Election Panel Study",
            obj="BEPS",
            test_fraction=SMALL,
        ),
        Table("wvs", "carData", LAZY, "poverty", "World Values Survey", obj="WVS"),
        Table(
            "wells",
            "carData",
            LAZY,
            "switch",
            "Bangladesh wells (Gelman & Hill)",
            obj="Wells",
            test_fraction=SMALL,
        ),
        Table(
            "mroz",
            "carData",
            LAZY,
            "lfp",
            "Mroz labour-force participation",
            obj="Mroz",
            test_fraction=SMALL,
        ),
    )
}
PACKAGES = tuple(dict.fromkeys(t.package for t in TABLES.values()))  # the set-up's list


def data_dir(raw_root: Path, t: Table) -> Path:
    for d in (
        Path(raw_root) / "r-cran" / t.package / "data",
        user_cache() / t.package / "data",
        SYSTEM_R / t.package / "data",
    ):
        if (d / t.file).is_file():
            return d
    raise DatasetNotFoundError(
        f"{t.name} needs {t.file} of Debian's {t.deb}: `bash scripts/setup.sh` gets it "
        f"(apt-get download {t.deb}; dpkg-deb -x into {user_cache() / t.package}), or put "
        f"the package's data/ files in {Path(raw_root) / 'r-cran' / t.package / 'data'}/"
    )


def _rdata():
    try:
        import rdata
    except ModuleNotFoundError as e:
        raise DatasetNotFoundError(
            "the R tables need the PyPI package rdata (pip install 'ncip[study]')"
        ) from e
    return rdata


def _convert(parsed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII." for every string
        return _rdata().conversion.convert(parsed)


def _inflate(blob: bytes, compressed: int) -> bytes:
    """One object of a lazy-load .rdb (R's serialize.c, R_decompress1/2/3): 4 bytes of the
    uncompressed length (big-endian), then zlib (compressed = 1), or a type byte and the data
    (2 and 3: 'Z' raw LZMA2, '2' bzip2, '1' zlib, '0' stored)."""
    if len(blob) < 5:
        raise DataFormatError("a lazy-load object shorter than its header")
    size = struct.unpack(">I", blob[:4])[0]
    if compressed == 1:
        out = zlib.decompress(blob[4:])
    else:
        kind, body = blob[4:5], blob[5:]
        if kind == b"Z":
            out = lzma.decompress(body, format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2}])
        elif kind == b"2":
            out = bz2.decompress(body)
        elif kind == b"1":
            out = zlib.decompress(body)
        elif kind == b"0":
            out = body
        else:
            raise DataFormatError(f"a lazy-load object compressed as {kind!r}, not known here")
    if len(out) != size:
        raise DataFormatError(f"a lazy-load object inflated to {len(out)} bytes, not {size}")
    return out


def lazy_load(folder: Path, name: str):
    """The object ``name`` of an R package's lazy-load database ``folder/Rdata.{rdx,rdb}``,
    converted by ``rdata`` (a data frame, a list as a dict)."""
    rdata = _rdata()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown file type: assumed RDS" (the .rdx is one)
        index = rdata.conversion.convert(rdata.parser.parse_file(folder / "Rdata.rdx"))
    variables = {str(k): v for k, v in index["variables"].items()}
    if name not in variables:
        raise DataFormatError(f"{folder / 'Rdata.rdx'} holds no {name!r}")
    offset, length = (int(v) for v in variables[name])
    flag = np.asarray(index["compressed"]).ravel()[0]
    compressed = 1 if flag is True or flag == 1 else int(flag)
    with open(folder / "Rdata.rdb", "rb") as f:
        f.seek(offset)
        blob = f.read(length)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = rdata.parser.parse_data(_inflate(blob, compressed), expand_altrep=True)
    return _convert(parsed)


def read_table(folder: Path, t: Table):
    """The table as a pandas data frame with the class column ``t.target``."""
    import pandas as pd

    name = t.obj or t.rda
    if t.rda == LAZY:
        obj = lazy_load(folder, name)
        objects = {name: obj}
    else:
        path = folder / t.file
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            objects = _rdata().read_rda(str(path))
        if name not in objects:
            raise DataFormatError(f"{path} holds no {name!r} (it has {', '.join(objects)})")
    df = objects[name]
    if isinstance(df, dict) and set(df) >= {"x", "y"}:  # dslabs' list(x = matrix, y = factor)
        x = df["x"]
        cols = getattr(x, "columns", None)
        frame = pd.DataFrame(np.asarray(x, dtype=np.float64))
        frame.columns = (
            [str(c) for c in cols] if cols is not None else [f"x{i}" for i in range(frame.shape[1])]
        )
        frame[t.target] = pd.Categorical(df["y"])
        return frame
    if t.labels:
        if t.target not in objects:
            raise DataFormatError(f"{t.file} holds no {t.target!r}")
        df = df.copy()
        df[t.target] = pd.Categorical(objects[t.target])
    return df


def features(df, t: Table) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(feature matrix as float64, integer labels, class names) of a table."""
    import pandas as pd

    if t.target not in df.columns:
        raise DataFormatError(f"{t.obj or t.rda} has no column {t.target!r}")
    cols = [c for c in df.columns if c != t.target and c not in t.drop]
    df = df[[*cols, t.target]]
    if df.isna().any().any():
        if t.missing != "drop":
            raise DataFormatError(
                f"{t.obj or t.rda} has missing values; it cannot be used as it is"
            )
        df = df.dropna()
    y_cat = df[t.target].astype("category")
    y_cat = y_cat.cat.remove_unused_categories()
    classes = [str(c) for c in y_cat.cat.categories]
    y = y_cat.cat.codes.to_numpy().astype(np.int64)
    if t.transform == "binary":
        x = np.stack([df[c].astype(str).astype(np.int64).to_numpy() for c in cols], axis=1)
        if not set(np.unique(x)) <= {0, 1}:
            raise DataFormatError(f"{t.rda}: features are not 0/1 levels")
        return x.astype(np.float64), y, classes
    parts = []
    for c in cols:
        col = df[c]
        if (
            isinstance(col.dtype, pd.CategoricalDtype)
            or col.dtype == object
            or str(col.dtype) in ("string", "boolean", "bool")
        ):
            cat = col.astype("category")
            parts += [(cat == level).to_numpy(dtype=np.float64) for level in cat.cat.categories]
        else:
            v = col.to_numpy(dtype=np.float64)
            if t.transform == "log1p" and v.min() >= 0:
                v = np.log1p(v)
            parts.append(v)
    return np.stack(parts, axis=1), y, classes


def to_uint8(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each feature scaled by the training split's range to [0, 255], rounded, as [N, 1, 1, F]."""
    span = np.where(hi > lo, hi - lo, 1.0)
    scaled = np.clip((x - lo) / span, 0.0, 1.0)
    return np.round(scaled * 255.0).astype(np.uint8)[:, None, None, :]


def load_table(name: str, raw_root: Path) -> RawDataset:
    t = TABLES[name]
    x, y, classes = features(read_table(data_dir(raw_root, t), t), t)
    train_idx, test_idx = stratified_split(y, t.test_fraction, np.random.default_rng(SEED))
    lo, hi = x[train_idx].min(axis=0), x[train_idx].max(axis=0)
    ids = sample_ids(name, "row", len(y))
    full = Split(to_uint8(x, lo, hi), y, ids)
    return RawDataset("image", classes, full.subset(train_idx), full.subset(test_idx))


def _register(name: str) -> None:
    @register_dataset(name, source=TABLES[name].source)
    def load(raw_root: Path) -> RawDataset:
        return load_table(name, raw_root)

    t = TABLES[name]
    load.__doc__ = f"{t.source}: {t.obj or t.rda} of Debian's {t.deb}, as signals."


for _name in TABLES:
    _register(_name)
