"""The tables of Debian's R data packages (issues 40, 49: mlbench, kernlab, modeldata, caret,
dslabs, carData), read without R: deterministic to the byte, so DVC's run-cache serves across
machines; a lazy-load database's objects inflated as R writes them."""

from __future__ import annotations

import bz2
import hashlib
import lzma
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from ncip.study.data import prepare_dataset, save_prepared
from ncip.study.datasets import uci

RAW = Path(__file__).resolve().parents[1] / "data" / "raw"
HAVE = all(
    any((d / pkg / "data").is_dir() for d in (RAW / "r-cran", uci.user_cache(), uci.SYSTEM_R))
    for pkg in uci.PACKAGES
)
pytestmark = pytest.mark.skipif(
    not HAVE, reason="the r-cran-* data packages are not here (scripts/setup.sh downloads them)"
)

# md5 of every file prepare-data writes for vehicle (Debian bookworm's r-cran-mlbench 2.1-3-1,
# split seed 0, val_fraction 0.1); a new package version changes them: check, then update
VEHICLE_MD5 = {
    "info.json": "d6fda302180af886de2f1c2f8c6e1f54",
    "test.npz": "b09508baa99fe7b66f230c307b214752",
    "train.npz": "f07076fc37e63fd9a5fa37cecb10fa2f",
    "val.npz": "02ea01d67bdc40996b45267862e44c29",
}
# one per loader family besides: a lazy-load database (carData 3.0.5-1's BEPS) and a caret
# .RData file (caret 6.0-93+dfsg-1's GermanCredit)
BEPS_MD5 = {
    "info.json": "d50fab85ad4cd024050660c67d245f0b",
    "test.npz": "278dd29f4422c682d15ddeb94fab7b83",
    "train.npz": "88025ba0fd7f1868c4a8f5dad726d6b0",
    "val.npz": "8e9a32807ce5931e33a0db003e884f9f",
}
GERMANCREDIT_MD5 = {
    "info.json": "35cdf634cad22ab0651a6c85e6569ae1",
    "test.npz": "ba64b5412810535d64de446981283318",
    "train.npz": "b24eca4650af42951975875ddabe3df3",
    "val.npz": "c68052b1baac9710c03cfb3d06883a5f",
}
# rows (complete rows where missing values are dropped), features (one-hot factors), classes;
# the packages' documentation gives the rows: income 8,993 with NAs, credit_data 4,454,
# wa_churn 7,043, TitanicSurvival 1,309, Chile 2,700
SHAPES = {
    "letter": (20000, 16, 26),
    "satellite": (6435, 36, 6),
    "spam": (4601, 57, 2),
    "dna": (3186, 180, 3),
    "vowel": (990, 9, 11),
    "vehicle": (846, 18, 4),
    "pima": (768, 8, 2),
    "glass": (214, 9, 6),
    "sonar": (208, 60, 2),
    "ionosphere": (351, 34, 2),
    "income": (6876, 75, 9),
    "ticdata": (9822, 668, 2),
    "credit": (4039, 26, 2),
    "hpc": (4331, 26, 4),
    "wachurn": (7032, 40, 2),
    "mlcchurn": (5000, 73, 2),
    "lending": (9857, 119, 2),
    "cells": (2019, 56, 2),
    "attrition": (1470, 73, 2),
    "germancredit": (1000, 61, 2),
    "mdrr": (528, 342, 2),
    "brca": (569, 30, 2),
    "olive": (572, 8, 9),
    "titanic": (1046, 6, 2),
    "chile": (2431, 14, 4),
    "beps": (1525, 10, 3),
    "wvs": (5381, 11, 3),
    "wells": (3020, 5, 2),
    "mroz": (753, 9, 2),
}


@pytest.mark.parametrize("name", sorted(uci.TABLES))
def test_each_table_is_a_deterministic_stratified_split_of_all_its_rows(name):
    raw = uci.load_table(name, RAW)
    rows, features, classes = SHAPES[name]
    assert len(raw.train.y) + len(raw.test.y) == rows and len(raw.classes) == classes
    assert raw.train.x.shape[1:] == (1, 1, features) and raw.train.x.dtype == np.uint8
    held = np.bincount(raw.test.y, minlength=classes)
    total = held + np.bincount(raw.train.y, minlength=classes)
    frac = uci.TABLES[name].test_fraction  # of every class's rows, to the nearest row
    assert np.all(np.abs(held - frac * total) <= 1)
    again = uci.load_table(name, RAW)
    assert np.array_equal(raw.test.x, again.test.x) and np.array_equal(raw.test.y, again.test.y)


@pytest.mark.parametrize(
    "name, md5", [("vehicle", VEHICLE_MD5), ("beps", BEPS_MD5), ("germancredit", GERMANCREDIT_MD5)]
)
def test_prepared_tables_are_the_same_to_the_byte(tmp_path, name, md5):
    info, splits = prepare_dataset(name, RAW)
    save_prepared(tmp_path, info, splits)
    got = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(tmp_path.iterdir())}
    assert got == md5, f"prepare-data's {name} files changed: {got}"


def test_every_table_names_a_source_and_the_study_counts_them():
    from ncip.study.data import dataset_source
    from ncip.study.presets import EXTENDED_SUBJECTS
    from ncip.study.subjects import parse_subject

    assert all(dataset_source(n) == uci.TABLES[n].source for n in uci.TABLES)
    sets = {parse_subject(s).dataset for s in EXTENDED_SUBJECTS}
    assert len(sets) >= 32 and len({dataset_source(d) for d in sets}) >= 24
    assert dataset_source("wordnet4") == dataset_source("wordnet10")


def test_a_missing_package_says_how_to_get_it(tmp_path, monkeypatch):
    from ncip.study.data import DatasetNotFoundError

    monkeypatch.setattr(uci, "SYSTEM_R", tmp_path / "none")
    monkeypatch.setattr(uci, "user_cache", lambda: tmp_path / "no-cache")
    with pytest.raises(DatasetNotFoundError, match="apt-get download r-cran-mlbench"):
        uci.load_table("vehicle", tmp_path / "raw")


PAYLOAD = b"X\n" + bytes(range(256)) * 40  # any bytes: the inflation does not parse them


def _blob(kind: bytes, body: bytes, size: int = len(PAYLOAD)) -> bytes:
    return struct.pack(">I", size) + kind + body


@pytest.mark.parametrize(
    "compressed, blob",
    [
        (1, _blob(b"", zlib.compress(PAYLOAD))),
        (
            3,
            _blob(
                b"Z", lzma.compress(PAYLOAD, lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2}])
            ),
        ),
        (3, _blob(b"2", bz2.compress(PAYLOAD))),
        (2, _blob(b"1", zlib.compress(PAYLOAD))),
        (3, _blob(b"0", PAYLOAD)),
    ],
)
def test_a_lazy_load_object_inflates_as_r_wrote_it(compressed, blob):
    assert uci._inflate(blob, compressed) == PAYLOAD


def test_a_lazy_load_object_that_does_not_add_up_is_refused():
    from ncip.study.data import DataFormatError

    with pytest.raises(DataFormatError, match="not 9"):
        uci._inflate(_blob(b"0", PAYLOAD, size=9), 3)
    with pytest.raises(DataFormatError, match="not known"):
        uci._inflate(_blob(b"Q", PAYLOAD), 3)
