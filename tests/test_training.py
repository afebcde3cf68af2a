import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from ncip.core.checkpoints import list_checkpoints, load_model, read_head, read_meta
from ncip.core.collapse import sigma_cos
from ncip.study.training import TrainConfig, train_with_checkpoints
from ncip.study.trainstate import STATE_FILE


def test_training_writes_one_checkpoint_per_epoch(tiny_run):
    ckpts = list_checkpoints(tiny_run["dir"] / "models")
    assert [c.epoch for c in ckpts] == [1, 2, 3, 4, 5, 6]
    assert not (tiny_run["dir"] / "work").exists()  # resume state removed once complete
    hist = tiny_run["history"]
    assert list(hist.columns[:6]) == [
        "epoch",
        "loss",
        "train_acc",
        "val_acc",
        "test_acc",
        "sigma_cos",
    ]
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    assert hist["test_acc"].iloc[-1] > 0.5  # it learned something real
    meta = read_meta(ckpts[-1].path)
    assert meta.arch == "lenet5" and meta.epoch == 6 and meta.num_classes == 10
    assert meta.config["seed"] == 0 and meta.subject == "digits-lenet5"


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


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("epochs", 0, "epochs"),
        ("lr", -1.0, "lr"),
        ("optimizer", "rmsprop", "optimizer"),
        ("schedule", "step", "schedule"),
        ("label_smoothing", 1.0, "label_smoothing"),
        ("precision", "fp8", "precision"),
    ],
)
def test_bad_training_config(field, value, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(arch="lenet5", **{field: value}).validate()


def test_mixup_and_label_smoothing_variants_train(tiny_run, tmp_path):
    info, splits = tiny_run["info"], tiny_run["splits"]
    for kw in ({"mixup_alpha": 0.2}, {"label_smoothing": 0.1}):
        cfg = TrainConfig(arch="lenet1", epochs=1, batch_size=128, **kw)
        hist = train_with_checkpoints(cfg, info, splits, tmp_path / str(kw), None)
        assert np.isfinite(hist["loss"]).all()


@pytest.mark.parametrize(
    "kw", [{"precision": "bf16"}, {"precision": "fp16"}, {"channels_last": True}]
)
def test_gpu_options_train_on_the_cpu_too_and_write_plain_checkpoints(tiny_run, tmp_path, kw):
    """Mixed precision (fp16 through the gradient scaler) and channels-last: they learn, the
    checkpoints are ordinary contiguous fp32 safetensors, and the option is recorded."""
    info, splits = tiny_run["info"], tiny_run["splits"]
    cfg = TrainConfig(arch="lenet5", epochs=3, batch_size=64, **kw)
    hist = train_with_checkpoints(cfg, info, splits, tmp_path / "m", None)
    assert np.isfinite(hist["loss"]).all() and hist["test_acc"].iloc[-1] > 0.5
    weights = load_file(str(tmp_path / "m" / "epoch-003.safetensors"))
    assert all(w.dtype == torch.float32 and w.is_contiguous() for w in weights.values())
    meta = read_meta(tmp_path / "m" / "epoch-003.safetensors")
    assert all(meta.config[k] == v for k, v in kw.items())
    assert load_model(tmp_path / "m" / "epoch-003.safetensors") is not None


def test_channels_last_training_learns_the_same_model_as_contiguous(tiny_run, tmp_path):
    """A layout is not a different model: channels-last training ends within float rounding
    of the contiguous run on the CPU."""
    info, splits = tiny_run["info"], tiny_run["splits"]
    runs = {}
    for cl in (False, True):
        cfg = TrainConfig(arch="lenet5", epochs=2, batch_size=64, channels_last=cl)
        train_with_checkpoints(cfg, info, splits, tmp_path / str(cl), None)
        runs[cl] = load_file(str(tmp_path / str(cl) / "epoch-002.safetensors"))
    assert all(torch.allclose(runs[False][k], runs[True][k], atol=1e-3) for k in runs[False])


def test_a_training_set_too_big_for_the_gpu_share_stays_on_the_host(monkeypatch):
    from ncip.study import training

    x = torch.zeros(10, 1, 4, 4)
    assert training._place_training_data(x, torch.device("cpu")) is x  # CPU: as it is
    if not torch.cuda.is_available():
        pytest.skip("the pinned-memory path needs a GPU (scripts/gpu_check.sh)")
    monkeypatch.setattr(training, "DEVICE_DATA_SHARE", 0.0)
    assert training._place_training_data(x, torch.device("cuda")).is_pinned()


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.mark.parametrize("step", ["_write_history", "_mark_complete", "_drop_state", "_publish"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_at_any_step_of_finishing_is_recovered_by_the_next_run(
    tiny_run, tmp_path, monkeypatch, step, when
):
    import ncip.study.trainstate as trainstate  # where the finishing steps live

    info, splits, cfg = tiny_run["info"], tiny_run["splits"], tiny_run["cfg"]
    out, work = tmp_path / "models", tmp_path / "work"
    real = getattr(trainstate, step)

    def crash(*args, **kwargs):
        if when == "after":
            real(*args, **kwargs)
        raise RuntimeError("injected crash")

    monkeypatch.setattr(trainstate, step, crash)
    kw = {"subject": "digits-lenet5"}  # as the reference run records
    with pytest.raises(RuntimeError, match="injected crash"):
        train_with_checkpoints(cfg, info, splits, out, work, **kw)
    monkeypatch.setattr(trainstate, step, real)
    hist = train_with_checkpoints(cfg, info, splits, out, work, **kw)  # no hand step between
    assert hist["epoch"].tolist() == list(range(1, 7))
    assert not work.exists()
    want = _files(tiny_run["dir"] / "models")
    assert _files(out) == want  # the same bytes as a run that never crashed


def test_a_kill_between_the_fallback_renames_leaves_the_old_output_restorable(
    tmp_path, monkeypatch
):
    import ncip.core.io as io

    out = tmp_path / "out"
    with io.atomic_dir(out) as t:
        (t / "a").write_text("old")
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)  # a system without renameat2
    real_rename = type(out).rename
    calls = []

    def rename(self, target):
        calls.append(self)
        if len(calls) == 2:  # killed after moving the old output aside
            raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(type(out), "rename", rename)
    with pytest.raises(KeyboardInterrupt), io.atomic_dir(out) as t:
        (t / "a").write_text("new")
    monkeypatch.setattr(type(out), "rename", real_rename)
    assert not out.exists() and (tmp_path / ".out.old").exists()
    with io.atomic_dir(out) as t:  # the next call restores it first, then replaces it
        assert (out / "a").read_text() == "old"
        (t / "a").write_text("new")
    assert (out / "a").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing stale left


def test_checkpoint_files_are_byte_identical_across_runs(tiny_run, tmp_path):
    info, splits, cfg = tiny_run["info"], tiny_run["splits"], tiny_run["cfg"]
    train_with_checkpoints(cfg, info, splits, tmp_path / "again", None, subject="digits-lenet5")
    assert _files(tmp_path / "again") == _files(tiny_run["dir"] / "models")
    assert "seconds" not in read_meta(tmp_path / "again" / "epoch-006.safetensors").metrics


def test_a_diverging_run_stops_without_writing_nan_checkpoints(tiny_run, tmp_path):
    from safetensors.torch import load_file as load

    from ncip.study.training import TrainingDiverged

    info, splits = tiny_run["info"], tiny_run["splits"]
    cfg = TrainConfig(arch="lenet5", epochs=4, batch_size=64, lr=1e5, optimizer="sgd")
    with pytest.raises(TrainingDiverged, match=r"diverged at epoch \d+, batch \d+.*lower train.lr"):
        train_with_checkpoints(cfg, info, splits, tmp_path / "m", tmp_path / "w")
    assert not (tmp_path / "m").exists()
    for f in (tmp_path / "w").glob("*.safetensors"):
        assert all(torch.isfinite(t).all() for t in load(str(f)).values())


def test_the_resume_state_is_never_unpickled_beyond_tensors(tiny_run, tmp_path):
    import os

    info, splits, cfg = tiny_run["info"], tiny_run["splits"], tiny_run["cfg"]
    work = tmp_path / "work"
    train_with_checkpoints(cfg, info, splits, tmp_path / "m", work, stop_after=1)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    state = torch.load(work / STATE_FILE, weights_only=True)
    state["history"].append({"payload": Payload()})
    torch.save(state, work / STATE_FILE)
    with pytest.raises(Exception, match="Weights only load failed|Unsupported global"):
        train_with_checkpoints(cfg, info, splits, tmp_path / "m", work)
    assert not marker.exists()
