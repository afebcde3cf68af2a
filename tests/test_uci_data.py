"""The UCI tables of Debian's r-cran-mlbench and r-cran-kernlab (issue 40), read without R:
deterministic to the byte, so DVC's run-cache serves across machines."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from ncip.study.data import prepare_dataset, save_prepared
from ncip.study.datasets import uci

RAW = Path(__file__).resolve().parents[1] / "data" / "raw"
HAVE = all(
    any((d / pkg / "data").is_dir() for d in (RAW / "r-cran", uci.user_cache(), uci.SYSTEM_R))
    for pkg in ("mlbench", "kernlab")
)
pytestmark = pytest.mark.skipif(
    not HAVE, reason="r-cran-mlbench's data not here (scripts/setup.sh downloads it)"
)

# md5 of every file prepare-data writes for vehicle (Debian bookworm's r-cran-mlbench 2.1-3-1,
# split seed 0, val_fraction 0.1); a new package version changes them: check, then update
VEHICLE_MD5 = {
    "info.json": "d6fda302180af886de2f1c2f8c6e1f54",
    "test.npz": "b09508baa99fe7b66f230c307b214752",
    "train.npz": "f07076fc37e63fd9a5fa37cecb10fa2f",
    "val.npz": "02ea01d67bdc40996b45267862e44c29",
}
SHAPES = {  # rows (train + test), features, classes
    "letter": (20000, 16, 26),
    "satellite": (6435, 36, 6),
    "spam": (4601, 57, 2),
    "dna": (3186, 180, 3),
    "vowel": (990, 9, 11),
    "vehicle": (846, 18, 4),
}


@pytest.mark.parametrize("name", sorted(uci.TABLES))
def test_each_table_is_a_deterministic_stratified_split_of_all_its_rows(name):
    raw = uci.load_table(name, RAW)
    rows, features, classes = SHAPES[name]
    assert len(raw.train.y) + len(raw.test.y) == rows and len(raw.classes) == classes
    assert raw.train.x.shape[1:] == (1, 1, features) and raw.train.x.dtype == np.uint8
    share = np.bincount(raw.test.y, minlength=classes) / np.bincount(raw.train.y, minlength=classes)
    assert np.allclose(share, 0.25, atol=0.02)  # every class 20% of its rows held out
    again = uci.load_table(name, RAW)
    assert np.array_equal(raw.test.x, again.test.x) and np.array_equal(raw.test.y, again.test.y)


def test_prepared_vehicle_is_the_same_to_the_byte(tmp_path):
    info, splits = prepare_dataset("vehicle", RAW)
    save_prepared(tmp_path, info, splits)
    got = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(tmp_path.iterdir())}
    assert got == VEHICLE_MD5, f"prepare-data's vehicle files changed: {got}"


def test_a_missing_package_says_how_to_get_it(tmp_path, monkeypatch):
    from ncip.study.data import DatasetNotFoundError

    monkeypatch.setattr(uci, "SYSTEM_R", tmp_path / "none")
    monkeypatch.setattr(uci, "user_cache", lambda: tmp_path / "no-cache")
    with pytest.raises(DatasetNotFoundError, match="apt-get download r-cran-mlbench"):
        uci.load_table("vehicle", tmp_path / "raw")
