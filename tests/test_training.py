import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ncip.checkpoints import list_checkpoints, load_model, read_head, read_meta
from ncip.collapse import sigma_cos
from ncip.training import STATE_FILE, TrainConfig, train_with_checkpoints


def test_training_writes_one_checkpoint_per_epoch(tiny_run):
    ckpts = list_checkpoints(tiny_run["dir"] / "models")
    assert [c.epoch for c in ckpts] == [1, 2, 3, 4, 5, 6]
    assert not (tiny_run["dir"] / "work").exists()  # resume state removed once complete
    hist = tiny_run["history"]
    assert list(hist.columns[:6]) == ["epoch", "loss", "train_acc", "val_acc", "test_acc",
                                      "sigma_cos"]  # fmt: skip
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    assert hist["test_acc"].iloc[-1] > 0.5  # it learned something real
    meta = read_meta(ckpts[-1].path)
    assert meta["arch"] == "lenet5" and meta["epoch"] == 6 and meta["num_classes"] == 10
    assert meta["config"]["seed"] == 0 and meta["subject"] == "digits-lenet5"


def test_head_read_matches_the_full_model_and_the_history(tiny_run):
    path = list_checkpoints(tiny_run["dir"] / "models")[-1].path
    W = read_head(path)
    model = load_model(path)
    assert np.allclose(W, model.head.weight.detach().double().numpy())
    assert sigma_cos(W) == pytest.approx(tiny_run["history"]["sigma_cos"].iloc[-1])


def test_interrupted_training_resumes_to_identical_weights(tiny_run, tmp_path):
    info, splits, cfg = tiny_run["info"], tiny_run["splits"], tiny_run["cfg"]
    out, work = tmp_path / "models", tmp_path / "work"
    part = train_with_checkpoints(cfg, info, splits, out, work, stop_after=2)
    assert len(part) == 2 and (work / STATE_FILE).exists() and not out.exists()
    # a crash mid-epoch leaves only a temporary file behind; it must not matter
    (work / ".epoch-003.safetensors.xyz.tmp").write_bytes(b"partial")
    hist = train_with_checkpoints(cfg, info, splits, out, work)
    assert hist["epoch"].tolist() == list(range(1, 7))
    a = load_file(str(out / "epoch-006.safetensors"))
    b = load_file(str(tiny_run["dir"] / "models" / "epoch-006.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert np.allclose(hist["loss"], tiny_run["history"]["loss"])


def test_changed_config_discards_stale_resume_state(tiny_run, tmp_path):
    info, splits, cfg = tiny_run["info"], tiny_run["splits"], tiny_run["cfg"]
    work = tmp_path / "work"
    train_with_checkpoints(cfg, info, splits, tmp_path / "m", work, stop_after=1)
    other = TrainConfig(**{**cfg.__dict__, "epochs": 2, "lr": 5e-3})
    hist = train_with_checkpoints(other, info, splits, tmp_path / "m", work)
    assert hist["epoch"].tolist() == [1, 2]


@pytest.mark.parametrize("field,value,match", [
    ("epochs", 0, "epochs"), ("lr", -1.0, "lr"), ("optimizer", "rmsprop", "optimizer"),
    ("schedule", "step", "schedule"), ("label_smoothing", 1.0, "label_smoothing"),
])  # fmt: skip
def test_bad_training_config(field, value, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(arch="lenet5", **{field: value}).validate()


def test_mixup_and_label_smoothing_variants_train(tiny_run, tmp_path):
    info, splits = tiny_run["info"], tiny_run["splits"]
    for kw in ({"mixup_alpha": 0.2}, {"label_smoothing": 0.1}):
        cfg = TrainConfig(arch="lenet1", epochs=1, batch_size=128, **kw)
        hist = train_with_checkpoints(cfg, info, splits, tmp_path / str(kw), None)
        assert np.isfinite(hist["loss"]).all()
