import json
import pickle

import numpy as np
import pytest
from helpers import make_cifar10, make_idx_dataset

from ncip.core.models import as_model_input
from ncip.study.data import (
    DatasetNotFoundError,
    list_datasets,
    load_info,
    load_raw,
    load_split,
    prepare_dataset,
    save_prepared,
)
from ncip.study.datasets.idx import read_idx


def test_registry_lists_every_dataset():
    assert {
        "fmnist",
        "mnist",
        "mnist5k",
        "digits",
        "cifar10",
        "cifar100",
        "tinyimagenet",
        "imdb",
        "agnews",
    } <= set(list_datasets())


@pytest.mark.parametrize("gz", [True, False])
def test_idx_reader_round_trip(tmp_path, gz):
    from helpers import write_idx

    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a", arr, gz)
    assert np.array_equal(read_idx(tmp_path / ("a.gz" if gz else "a")), arr)


def test_idx_reader_rejects_other_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04rest")
    with pytest.raises(ValueError, match="IDX"):
        read_idx(tmp_path / "bad")


def test_fmnist_from_data_raw_in_idx_format(raw_root):
    make_idx_dataset(raw_root / "fashion-mnist", gz=False)
    raw = load_raw("fmnist", raw_root)
    assert raw.train.x.shape == (60, 1, 28, 28) and raw.test.x.shape == (20, 1, 28, 28)
    assert raw.classes[0] == "T-shirt/top"
    assert raw.train.ids[5] == "fmnist:train:05"


def test_mnist_in_torchvision_layout(raw_root):
    make_idx_dataset(raw_root / "MNIST" / "raw")
    assert len(load_raw("mnist", raw_root).test) == 20


def test_missing_mnist_says_where_to_put_files(raw_root, monkeypatch):
    monkeypatch.setattr("ncip.study.datasets.idx.online", lambda *a, **k: False)
    with pytest.raises(DatasetNotFoundError, match="MNIST/raw"):
        load_raw("mnist", raw_root)


def test_missing_fmnist_names_the_debian_package(raw_root, monkeypatch):
    monkeypatch.setattr("ncip.study.datasets.idx.online", lambda *a, **k: False)
    monkeypatch.setattr("ncip.study.datasets.idx.DEBIAN_FASHION_MNIST", raw_root / "nowhere")
    with pytest.raises(DatasetNotFoundError, match="dataset-fashion-mnist"):
        load_raw("fmnist", raw_root)


def test_unknown_dataset_lists_the_valid_ones():
    with pytest.raises(ValueError, match="unknown dataset 'nope'.*fmnist"):
        load_raw("nope")


def test_cifar10_python_pickle_format(raw_root):
    make_cifar10(raw_root)
    raw = load_raw("cifar10", raw_root)
    assert raw.train.x.shape == (100, 3, 32, 32) and len(raw.test) == 20
    assert raw.classes[:2] == ["c0", "c1"]


def test_cifar100_fine_labels(raw_root):
    d = raw_root / "cifar-100-python"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for part, n in (("train", 30), ("test", 10)):
        with open(d / part, "wb") as f:
            pickle.dump(
                {
                    b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                    b"fine_labels": [i % 100 for i in range(n)],
                },
                f,
            )
    with open(d / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [f"f{i}".encode() for i in range(100)]}, f)
    raw = load_raw("cifar100", raw_root)
    assert len(raw.classes) == 100 and raw.train.y[29] == 29


def test_tinyimagenet_folder_format(raw_root):
    from PIL import Image

    d = raw_root / "tiny-imagenet-200"
    wnids = ["n01", "n02"]
    (d / "val" / "images").mkdir(parents=True)
    (d / "wnids.txt").write_text("\n".join(wnids) + "\n")
    ann = []
    for w in wnids:
        (d / "train" / w / "images").mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (64, 64), (i * 40, 0, 0)).save(
                d / "train" / w / "images" / f"{w}_{i}.JPEG"
            )
        Image.new("L", (64, 64)).save(d / "val" / "images" / f"val_{w}.JPEG")  # gray is converted
        ann.append(f"val_{w}.JPEG\t{w}\t0\t0\t10\t10")
    (d / "val" / "val_annotations.txt").write_text("\n".join(ann) + "\n")
    raw = load_raw("tinyimagenet", raw_root)
    assert raw.train.x.shape == (6, 3, 64, 64) and raw.test.y.tolist() == [0, 1]


def test_imdb_folder_format(raw_root):
    d = raw_root / "aclImdb"
    for part in ("train", "test"):
        for sub, text in (("neg", "awful boring film film"), ("pos", "great great film")):
            (d / part / sub).mkdir(parents=True)
            for i in range(2):
                (d / part / sub / f"{i}_1.txt").write_text(f"{text} <br /> number {i}")
    raw = load_raw("imdb", raw_root)
    assert raw.kind == "text" and raw.train.x.shape == (4, 400)
    assert raw.train.y.tolist() == [0, 0, 1, 1]
    assert raw.test.ids[0] == "imdb:test:neg/0_1.txt"
    assert raw.vocab_size > 2 and raw.train.x.max() < raw.vocab_size


def test_agnews_csv_format(raw_root):
    d = raw_root / "ag_news_csv"
    d.mkdir(parents=True)
    rows = '"1","Stocks fall","Markets dropped"\n"3","Team wins","Big match, big win"\n'
    (d / "train.csv").write_text(rows * 2)
    (d / "test.csv").write_text(rows)
    raw = load_raw("agnews", raw_root)
    assert raw.train.y.tolist() == [0, 2, 0, 2] and raw.classes[1] == "Sports"
    assert raw.test.x.shape == (2, 64)


def test_mnist5k_is_real_digits_split_4000_1000():
    raw = load_raw("mnist5k")
    assert len(raw.train) == 4000 and len(raw.test) == 1000
    assert np.bincount(raw.test.y).tolist() == [100] * 10
    assert not set(raw.train.ids) & set(raw.test.ids)


def test_prepare_holds_out_a_stratified_disjoint_validation_split(tmp_path):
    info, splits = prepare_dataset("digits", val_fraction=0.2, split_seed=3)
    tr, va = splits["train"], splits["val"]
    assert not set(tr.ids) & set(va.ids)
    assert len(tr) + len(va) == 1297
    assert np.all(np.abs(np.bincount(va.y) / np.bincount(va.y).sum() - 0.1) < 0.02)
    assert len(set(tr.ids)) == len(tr)  # stable ids are unique
    _, again = prepare_dataset("digits", val_fraction=0.2, split_seed=3)
    assert np.array_equal(again["val"].ids, va.ids)  # fixed split
    save_prepared(tmp_path, info, splits)
    assert np.array_equal(load_split(tmp_path / "val.npz").x, va.x)
    assert load_info(tmp_path).classes == info.classes
    assert json.loads((tmp_path / "info.json").read_text())["sizes"]["test"] == 500


def test_bad_val_fraction_is_rejected():
    with pytest.raises(ValueError, match="val_fraction"):
        prepare_dataset("digits", val_fraction=1.0)


def test_model_input_is_in_unit_range():
    x = as_model_input(np.array([[[[0, 255]]]], dtype=np.uint8))
    assert x.dtype.is_floating_point and x.min() == 0 and x.max() == 1


def test_mnist1d_is_generated_offline_as_40_sample_signals():
    raw = load_raw("mnist1d")
    assert len(raw.train) == 4000 and len(raw.test) == 1000
    assert raw.train.x.shape[1:] == (1, 1, 40) and raw.train.x.dtype == np.uint8
    assert raw.train.x.min() == 0 and raw.train.x.max() == 255  # scaled by the train range
    assert sorted(set(raw.test.y.tolist())) == list(range(10))
    again = load_raw("mnist1d")  # the generator is seeded: the same data every time
    assert np.array_equal(again.test.x, raw.test.x)


def test_channel_stats_are_the_exactly_rounded_mean_and_std():
    """Computed from integer sums and rounded once: the same bytes on every CPU (a float64
    mean's summation order depends on the SIMD width; issue 40 found info.json differing)."""
    from fractions import Fraction
    from math import sqrt

    from ncip.study.data import channel_stats

    x = np.random.default_rng(1).integers(0, 256, (300, 3, 5, 7), dtype=np.uint8)
    mean, std = channel_stats(x)
    for c in range(3):
        v = [int(a) for a in x[:, c].ravel()]
        m = Fraction(sum(v), len(v) * 255)
        var = Fraction(sum(a * a for a in v), len(v) * 255 * 255) - m * m
        assert mean[c] == float(m) and std[c] == sqrt(float(var))
    assert channel_stats(np.zeros((2, 1, 2, 2), np.uint8))[1] == [1e-3]


def test_prepare_data_writes_the_same_bytes_on_every_machine(tmp_path):
    """prepare-data's digits files, by md5 (scikit-learn's pinned digits, split seed 0): DVC's
    run-cache serves a study across machines only when they agree byte for byte."""
    import hashlib

    info, splits = prepare_dataset("digits")
    save_prepared(tmp_path, info, splits)
    got = {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(tmp_path.iterdir())}
    assert got == {
        "info.json": "eca3f4f1d353ccc54b676a00beb6d6f2",
        "test.npz": "1a29e207adf58ac69a3ae09554959ca5",
        "train.npz": "a990db1fed6e68b4a05e430feb52bde5",
        "val.npz": "d83ce6a3ba99d2d0469fd5a5d49cb25e",
    }
