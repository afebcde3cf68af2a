import gzip
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
ROOT = Path(__file__).resolve().parents[1]


def write_idx(path: Path, arr: np.ndarray, gz: bool = True) -> None:
    arr = np.asarray(arr, dtype=np.uint8)
    header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(d.to_bytes(4, "big") for d in arr.shape)
    data = header + arr.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(str(path) + ".gz", "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)


def make_idx_dataset(d: Path, n_train=60, n_test=20, classes=10, seed=0, gz=True) -> None:
    rng = np.random.default_rng(seed)
    write_idx(d / "train-images-idx3-ubyte", rng.integers(0, 256, (n_train, 28, 28)), gz)
    write_idx(d / "train-labels-idx1-ubyte", np.arange(n_train) % classes, gz)
    write_idx(d / "t10k-images-idx3-ubyte", rng.integers(0, 256, (n_test, 28, 28)), gz)
    write_idx(d / "t10k-labels-idx1-ubyte", np.arange(n_test) % classes, gz)


@pytest.fixture
def raw_root(tmp_path):
    return tmp_path / "raw"


def make_cifar10(raw: Path, per_batch=20) -> None:
    d = raw / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": [i % 10 for i in range(per_batch)]}  # fmt: skip
        with open(d / name, "wb") as f:
            pickle.dump(batch, f)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)]}, f)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A LeNet-5 trained for 6 epochs on sklearn's digits, with its checkpoints."""
    from ncip.data import prepare_dataset, save_prepared
    from ncip.training import TrainConfig, train_with_checkpoints

    d = tmp_path_factory.mktemp("tiny")
    info, splits = prepare_dataset("digits")
    save_prepared(d / "data", info, splits)
    cfg = TrainConfig(arch="lenet5", epochs=6, batch_size=64, seed=0)
    hist = train_with_checkpoints(cfg, info, splits, d / "models", d / "work", subject="digits-lenet5")
    return {"dir": d, "info": info, "splits": splits, "cfg": cfg, "history": hist}
