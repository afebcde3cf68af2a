"""The tests' shared fixtures; plain helpers are in helpers.py."""

import os

import pytest

os.environ.setdefault("DVC_NO_ANALYTICS", "1")


def pytest_collection_modifyitems(items):
    """The slow end-to-end modules first (a stable sort keeps each module's own order): with
    `pytest -n auto --dist loadscope` (make test) each module runs whole on one worker, so its
    module-scoped fixtures (a DVC project reproduced, a model trained) are built once, and the
    longest modules starting first keep the workers evenly loaded to the end."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") else 1)


@pytest.fixture
def raw_root(tmp_path):
    return tmp_path / "raw"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A LeNet-5 trained for 6 epochs on sklearn's digits, with its checkpoints."""
    from ncip.study.data import prepare_dataset, save_prepared
    from ncip.study.training import TrainConfig, train_with_checkpoints

    d = tmp_path_factory.mktemp("tiny")
    info, splits = prepare_dataset("digits")
    save_prepared(d / "data", info, splits)
    cfg = TrainConfig(arch="lenet5", epochs=6, batch_size=64, seed=0)
    hist = train_with_checkpoints(
        cfg, info, splits, d / "models", d / "work", subject="digits-lenet5"
    )
    return {"dir": d, "info": info, "splits": splits, "cfg": cfg, "history": hist}
