"""Every bad input gets one line naming the culprit and the fix, exit code 2, no traceback, and
leaves what was already there byte-identical.

One table: each case prepares a broken input in its own folder (from a real tiny run: LeNet-5
on scikit-learn's digits), names the command (a stage script or `ncip rank`) with its
arguments, the outputs to protect, and what the error line must say.
"""

import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import ROOT, make_idx_dataset
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from ncip.cli import app as ncip_app

runner = CliRunner()


def stage_app(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"stage_{name}", ROOT / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


@pytest.fixture(scope="module")
def base(tiny_run, tmp_path_factory):
    """The tiny run's data and checkpoints, a selection and predictions made from them."""
    d = tmp_path_factory.mktemp("base")
    src = tiny_run["dir"]
    shutil.copytree(src / "data", d / "data")
    shutil.copytree(src / "models", d / "models")
    r = runner.invoke(
        stage_app("select_checkpoints"),
        [
            "--checkpoints",
            str(d / "models"),
            "--k",
            "3",
            "--out",
            str(d / "sel.json"),
            "--plot-out",
            str(d / "s.csv"),
        ],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        stage_app("predict_probabilities"),
        ["--checkpoints", str(d / "models"), "--data", str(d / "data"), "--out", str(d / "pred")],
    )
    assert r.exit_code == 0, r.output
    with np.load(d / "data" / "test.npz") as z:
        np.savez(d / "test.npz", x=z["x"], y=z["y"], ids=z["ids"])
    return d


@dataclass
class Case:
    name: str
    # (case folder, base folder) -> (command: "rank" or a stage, arguments, outputs to protect)
    build: Callable[[Path, Path], tuple[str, list, list[Path]]]
    match: str  # the error line must contain this


def copy_models(t, b, name="models"):
    shutil.copytree(b / "models", t / name)
    return t / name


def corrupt(path, fn):
    sd = load_file(str(path))
    fn(sd)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    save_file(sd, str(path), metadata=meta)


def nan_input(t, b):
    with np.load(b / "test.npz") as z:
        x = z["x"].astype(np.float32) / 255
        x[7, 0, 2, 2] = np.nan
        np.savez(t / "in.npz", x=x, ids=z["ids"])
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def nan_final(t, b):
    m = copy_models(t, b)
    corrupt(
        m / "epoch-006.safetensors",
        lambda sd: sd["backbone.1.weight"].view(-1).__setitem__(0, float("nan")),
    )
    return "rank", [m, "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def nan_selected(t, b):
    m = copy_models(t, b)
    corrupt(
        m / "epoch-005.safetensors",
        lambda sd: sd["backbone.1.weight"].view(-1).__setitem__(0, float("inf")),
    )
    return "rank", [m, "--inputs", b / "test.npz", "--out", t / "r.csv", "--k", 5], [t / "r.csv"]


def nan_head_rank(t, b):
    m = copy_models(t, b)
    corrupt(m / "epoch-004.safetensors", lambda sd: sd["head.weight"].fill_(float("nan")))
    return "rank", [m, "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def nan_head_select(t, b):
    m = copy_models(t, b)
    corrupt(m / "epoch-004.safetensors", lambda sd: sd["head.weight"].fill_(float("nan")))
    return (
        "select_checkpoints",
        ["--checkpoints", m, "--out", t / "s.json", "--plot-out", t / "s.csv"],
        [t / "s.json", t / "s.csv"],
    )


def stray_checkpoint(t, b):
    from ncip.core.checkpoints import CheckpointMeta, save_checkpoint
    from ncip.core.models import create_model

    m = copy_models(t, b)
    torch.manual_seed(1)
    save_checkpoint(
        m / "epoch-007.safetensors",
        create_model("lenet5", 10),
        CheckpointMeta(
            epoch=7,
            num_classes=10,
            subject="fmnist-lenet5",
            run=0,
            input_shape=[1, 28, 28],
            in_channels=1,
        ),
    )
    return "rank", [m, "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def stray_checkpoint_select(t, b):
    cmd, args, _ = stray_checkpoint(t, b)
    return (
        "select_checkpoints",
        ["--checkpoints", t / "models", "--out", t / "s.json", "--plot-out", t / "s.csv"],
        [t / "s.json"],
    )


def float_255(t, b):
    with np.load(b / "test.npz") as z:
        np.savez(t / "in.npz", x=z["x"].astype(np.float32))  # pixels as floats in [0, 255]
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def wrong_size(t, b):
    np.savez(t / "in.npz", x=np.zeros((5, 1, 28, 28), np.uint8))  # 28x28 into an 8x8 model
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def three_channels(t, b):
    np.savez(t / "in.npz", x=np.zeros((5, 8, 8, 3), np.uint8))  # HWC RGB for a 1-channel model
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def long_ids(t, b):
    with np.load(b / "test.npz") as z:
        np.savez(t / "in.npz", x=z["x"], ids=np.arange(len(z["x"]) + 3).astype(str))
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def bad_labels(t, b):
    with np.load(b / "test.npz") as z:
        y = z["y"].copy()
        y[3] = 203
        np.savez(t / "in.npz", x=z["x"], y=y)
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def no_inputs(t, b):
    np.savez(t / "in.npz", x=np.zeros((0, 1, 8, 8), np.uint8))
    return "rank", [b / "models", "--inputs", t / "in.npz", "--out", t / "r.csv"], [t / "r.csv"]


def truncated_safetensors(t, b):
    m = copy_models(t, b)
    f = m / "epoch-003.safetensors"
    f.write_bytes(f.read_bytes()[:500])
    return "rank", [m, "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def truncated_safetensors_select(t, b):
    m = copy_models(t, b)
    f = m / "epoch-003.safetensors"
    f.write_bytes(f.read_bytes()[:500])
    return (
        "select_checkpoints",
        ["--checkpoints", m, "--out", t / "s.json", "--plot-out", t / "s.csv"],
        [t / "s.json"],
    )


def out_is_folder(t, b):
    (t / "r.csv").mkdir()
    (t / "r.csv" / "keep").write_text("keep")
    return "rank", [b / "models", "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def pickled_module(t, b):
    torch.save(torch.nn.Linear(2, 2), t / "epoch_1.pt")
    torch.save(torch.nn.Linear(2, 2).state_dict(), t / "epoch_2.pt")
    return (
        "rank",
        [t, "--model", "torchvision:resnet18", "--inputs", b / "test.npz", "--out", t / "r.csv"],
        [t / "r.csv"],
    )


def only_junk(t, b):
    (t / "ck").mkdir()
    (t / "ck" / "notes.txt").write_text("hi")
    torch.save(
        torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), 0.1).state_dict(),
        t / "ck" / "optimizer.pt",
    )
    return (
        "rank",
        [
            t / "ck",
            "--model",
            "torchvision:resnet18",
            "--inputs",
            b / "test.npz",
            "--out",
            t / "r.csv",
        ],
        [t / "r.csv"],
    )


def one_checkpoint(t, b):
    (t / "m").mkdir()
    shutil.copy(b / "models" / "epoch-006.safetensors", t / "m")
    return "rank", [t / "m", "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def k_one(t, b):
    return (
        "rank",
        [b / "models", "--inputs", b / "test.npz", "--out", t / "r.csv", "--k", 1],
        [t / "r.csv"],
    )


def truncated_idx(t, b):
    raw = t / "raw" / "fashion-mnist"
    make_idx_dataset(raw)
    f = raw / "train-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:200])  # a broken download
    return (
        "prepare_data",
        ["--subject", "fmnist-lenet5", "--raw-root", t / "raw", "--out", t / "prep"],
        [t / "prep"],
    )


def garbage_gz(t, b):
    raw = t / "raw" / "fashion-mnist"
    make_idx_dataset(raw)
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(b"this is no gzip stream at all")
    return (
        "prepare_data",
        ["--subject", "fmnist-lenet5", "--raw-root", t / "raw", "--out", t / "prep"],
        [t / "prep"],
    )


def trailing_idx(t, b):
    raw = t / "raw" / "fashion-mnist"
    make_idx_dataset(raw, gz=False)
    with open(raw / "train-labels-idx1-ubyte", "ab") as f:
        f.write(b"\x01\x02\x03")
    return (
        "prepare_data",
        ["--subject", "fmnist-lenet5", "--raw-root", t / "raw", "--out", t / "prep"],
        [t / "prep"],
    )


def label_203(t, b):
    from helpers import write_idx

    raw = t / "raw" / "fashion-mnist"
    make_idx_dataset(raw)
    labels = np.arange(60) % 10
    labels[5] = 203
    write_idx(raw / "train-labels-idx1-ubyte", labels)
    return (
        "prepare_data",
        ["--subject", "fmnist-lenet5", "--raw-root", t / "raw", "--out", t / "prep"],
        [t / "prep"],
    )


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def cifar_payload(t, b):
    from helpers import make_cifar10

    make_cifar10(t / "raw")
    with open(t / "raw" / "cifar-10-batches-py" / "data_batch_3", "wb") as f:
        pickle.dump({b"data": _Payload(t / "pwned"), b"labels": [0]}, f)
    return (
        "prepare_data",
        ["--subject", "cifar10-resnet18", "--raw-root", t / "raw", "--out", t / "prep"],
        [t / "prep"],
    )


def diverging_training(t, b):
    return (
        "train_with_checkpoints",
        [
            "--subject",
            "digits-lenet5",
            "--data",
            b / "data",
            "--out",
            t / "m",
            "--work",
            t / "w",
            "--history-out",
            t / "h.csv",
            "--epochs",
            3,
            "--lr",
            1e5,
            "--optimizer",
            "sgd",
        ],
        [t / "m", t / "h.csv"],
    )


def resume_payload(t, b):
    from ncip.study.data import load_info, load_split
    from ncip.study.training import TrainConfig, train_with_checkpoints
    from ncip.study.trainstate import STATE_FILE

    info = load_info(b / "data")
    splits = {n: load_split(b / "data" / f"{n}.npz") for n in ("train", "val", "test")}
    cfg = TrainConfig(
        arch="lenet5", epochs=3, batch_size=128, seed=0, mixup_alpha=0.0, label_smoothing=0.0
    )
    train_with_checkpoints(
        cfg, info, splits, t / "m", t / "w", subject="digits-lenet5", stop_after=1
    )
    state = torch.load(t / "w" / STATE_FILE, weights_only=True)
    state["payload"] = _Payload(t / "pwned")
    torch.save(state, t / "w" / STATE_FILE)
    return (
        "train_with_checkpoints",
        [
            "--subject",
            "digits-lenet5",
            "--data",
            b / "data",
            "--out",
            t / "m",
            "--work",
            t / "w",
            "--history-out",
            t / "h.csv",
            "--epochs",
            3,
            "--batch-size",
            128,
        ],
        [t / "h.csv"],
    )


def float_255_adversarial(t, b):
    (t / "adv").mkdir()
    with np.load(b / "test.npz") as z:  # an adversarial set scaled to [0, 255] by mistake
        np.savez(
            t / "adv" / "adv.npz",
            x=z["x"].astype(np.float32),
            y=z["y"],
            ids=np.char.add(z["ids"].astype(str), "@pgd"),
        )
    return (
        "predict_probabilities",
        [
            "--checkpoints",
            b / "models",
            "--data",
            b / "data",
            "--adversarial",
            t / "adv",
            "--out",
            t / "pred",
        ],
        [t / "pred"],
    )


def data_of_other_shape(t, b):
    from ncip.study.data import load_info

    shutil.copytree(b / "data", t / "data")
    info = json.loads((t / "data" / "info.json").read_text())
    info["input_shape"] = [1, 28, 28]
    (t / "data" / "info.json").write_text(json.dumps(info))
    np.savez(
        t / "data" / "test.npz",
        x=np.zeros((4, 1, 28, 28), np.uint8),
        y=np.arange(4),
        ids=np.arange(4).astype(str),
    )
    load_info(t / "data")
    return (
        "predict_probabilities",
        ["--checkpoints", b / "models", "--data", t / "data", "--out", t / "pred"],
        [t / "pred"],
    )


def empty_test_split(t, b):
    shutil.copytree(b / "data", t / "data")
    np.savez(
        t / "data" / "test.npz",
        x=np.zeros((0, 1, 8, 8), np.uint8),
        y=np.zeros(0, np.int64),
        ids=np.zeros(0, str),
    )
    return (
        "predict_probabilities",
        ["--checkpoints", b / "models", "--data", t / "data", "--out", t / "pred"],
        [t / "pred"],
    )


def corrupt_selection(t, b):
    (t / "sel.json").write_text('{"selected_epochs": [4, 5,')
    return (
        "score_ncip",
        [
            "--predictions",
            b / "pred",
            "--selection",
            t / "sel.json",
            "--out",
            t / "ncip.parquet",
            "--cost-out",
            t / "cost.json",
        ],
        [t / "ncip.parquet", t / "cost.json"],
    )


def missing_index(t, b):
    shutil.copytree(b / "pred", t / "pred")
    (t / "pred" / "index.json").unlink()
    return (
        "score_ncip",
        [
            "--predictions",
            t / "pred",
            "--selection",
            b / "sel.json",
            "--out",
            t / "ncip.parquet",
            "--cost-out",
            t / "cost.json",
        ],
        [t / "ncip.parquet", t / "cost.json"],
    )


def cost_out_is_folder(t, b):
    (t / "cost.json").mkdir()
    return (
        "score_ncip",
        [
            "--predictions",
            b / "pred",
            "--selection",
            b / "sel.json",
            "--out",
            t / "ncip.parquet",
            "--cost-out",
            t / "cost.json",
        ],
        [t / "ncip.parquet", t / "cost.json"],
    )


def no_attacks(t, b):
    return (
        "generate_adversarial",
        [
            "--checkpoints",
            b / "models",
            "--data",
            b / "data",
            "--out",
            t / "adv",
            "--metrics-out",
            t / "a.json",
            "--attacks",
            "",
        ],
        [t / "adv", t / "a.json"],
    )


def subjects_not_a_list(t, b):
    (t / "params.yaml").write_text("subjects: digits-lenet5\nruns: [0]\n")
    return "check-params", [t / "params.yaml"], []


def subjects_null(t, b):
    (t / "params.yaml").write_text("subjects:\nruns: [0]\n")
    return (
        "evaluate_rauc",
        [
            "--params",
            t / "params.yaml",
            "--scores",
            t,
            "--seed",
            0,
            "--budgets",
            "100",
            "--metrics-dir",
            t / "metrics",
            "--plots-dir",
            t / "plots",
        ],
        [t / "metrics"],
    )


def attacks_empty_in_params(t, b):
    text = (ROOT / "params.yaml").read_text().replace("attacks: fgsm,pgd,bim,cw", "attacks: ''")
    (t / "params.yaml").write_text(text)
    return "check-params", [t / "params.yaml"], []


def bad_k(t, b):
    return (
        "select_checkpoints",
        ["--checkpoints", b / "models", "--k", 0, "--out", t / "s.json", "--plot-out", t / "s.csv"],
        [t / "s.json", t / "s.csv"],
    )


def unknown_method(t, b):
    (t / "params.yaml").write_text("baselines: {methods: 'deepgini,magic'}\n")
    return (
        "score_baselines",
        [
            "--subject",
            "digits-lenet5",
            "--data",
            b / "data",
            "--checkpoints",
            b / "models",
            "--params",
            t / "params.yaml",
            "--out",
            t / "b.parquet",
            "--cost-out",
            t / "c.json",
            "--seed",
            0,
            "--batch-size",
            64,
        ],
        [t / "b.parquet"],
    )


def unknown_subject(t, b):
    return "prepare_data", ["--subject", "digits-lenet9", "--out", t / "prep"], [t / "prep"]


# --- issue 23: the red team's cases -----------------------------------------------------------


def out_is_labels(t, b):
    with np.load(b / "test.npz") as z:
        y = z["y"]
    (t / "y.csv").write_text("\n".join(map(str, y)) + "\n")
    return (
        "rank",
        [b / "models", "--inputs", b / "test.npz", "--labels", t / "y.csv", "--out", t / "y.csv"],
        [t / "y.csv"],
    )


def selection_sidecar_is_folder(t, b):
    (t / "r.selection.json").mkdir()
    return (
        "rank",
        [b / "models", "--inputs", b / "test.npz", "--out", t / "r.csv"],
        [t / "r.csv", t / "r.selection.json"],
    )


def prune_k_one(t, b):
    copy_models(t, b)
    return "prune", [t / "models", "--k", 1, "--yes"], [t / "models"]


def prune_tiny_alpha(t, b):
    copy_models(t, b)
    return "prune", [t / "models", "--alpha", 0.05, "--yes"], [t / "models"]


def _writer_folder_naming(t, b, factory: str):
    """The tiny run's checkpoints re-recorded as a writer folder whose metadata names
    ``factory`` (a crafted folder: its model_def.py would leave a file `pwned` if run)."""
    from ncip.core.checkpoints import CheckpointMeta, read_meta, save_state

    (t / "ck").mkdir()
    (t / "ck" / "model_def.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(t / 'pwned')!r}).write_text('ran')\n"
        "import torch.nn as nn\n"
        "def Net(num_classes=10):\n    return nn.Linear(64, num_classes)\n"
    )
    for f in sorted((b / "models").glob("*.safetensors")):
        meta = read_meta(f)
        meta = CheckpointMeta(
            epoch=meta.epoch, head_key=meta.head_key, num_classes=meta.num_classes, factory=factory
        )
        save_state(t / "ck" / f.name, load_file(str(f)), meta)
    return "rank", [t / "ck", "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def recorded_file_factory(t, b):
    return _writer_folder_naming(t, b, str(t / "ck" / "model_def.py") + ":Net")


def recorded_abort_factory(t, b):
    return _writer_folder_naming(t, b, "os:abort")


def infinite_std(t, b):
    return (
        "rank",
        [
            b / "models",
            "--inputs",
            b / "test.npz",
            "--out",
            t / "r.csv",
            "--mean",
            0,
            "--std",
            "inf",
        ],
        [t / "r.csv"],
    )


def _rank_user_model(t, b, body: str):
    """`ncip rank` of the tiny run with `--model mymodel.py:Net`, the module holding ``body``."""
    (t / "mymodel.py").write_text(body)
    args = [b / "models", "--inputs", b / "test.npz", "--out", t / "r.csv", "--model",
            f"{t / 'mymodel.py'}:Net"]  # fmt: skip
    return "rank", args, [t / "r.csv"]


def model_exits_on_import(t, b):
    return _rank_user_model(t, b, "import sys\nsys.exit(0)\n")


def model_raises_on_import(t, b):
    return _rank_user_model(t, b, "import json\njson.loads('{not json')\n")


def truncated_npz(t, b):
    (t / "x.npz").write_bytes((b / "test.npz").read_bytes()[:300])
    return "rank", [b / "models", "--inputs", t / "x.npz", "--out", t / "r.csv"], [t / "r.csv"]


def text_as_npz(t, b):
    (t / "x.npz").write_text("sample_id,x\n1,0.5\n")
    return "rank", [b / "models", "--inputs", t / "x.npz", "--out", t / "r.csv"], [t / "r.csv"]


def npy_as_npz(t, b):
    with np.load(b / "test.npz") as z:
        np.save(t / "x.npy", z["x"])
    (t / "x.npy").rename(t / "x.npz")
    return "rank", [b / "models", "--inputs", t / "x.npz", "--out", t / "r.csv"], [t / "r.csv"]


def empty_npy(t, b):
    (t / "x.npy").write_bytes(b"")
    return "rank", [b / "models", "--inputs", t / "x.npy", "--out", t / "r.csv"], [t / "r.csv"]


def scalar_npy(t, b):
    np.save(t / "x.npy", np.float32(3.0))
    return "rank", [b / "models", "--inputs", t / "x.npy", "--out", t / "r.csv"], [t / "r.csv"]


def ids_2d(t, b):
    with np.load(b / "test.npz") as z:
        np.savez(t / "x.npz", x=z["x"], ids=z["ids"][:, None])
    return "rank", [b / "models", "--inputs", t / "x.npz", "--out", t / "r.csv"], [t / "r.csv"]


def torch_file_with_a_module(t, b):
    torch.save({"x": torch.zeros(4, 1, 8, 8), "model": torch.nn.Linear(2, 2)}, t / "x.pt")
    return "rank", [b / "models", "--inputs", t / "x.pt", "--out", t / "r.csv"], [t / "r.csv"]


def torch_file_without_x(t, b):
    torch.save({"images": torch.zeros(4, 1, 8, 8)}, t / "x.pt")
    return "rank", [b / "models", "--inputs", t / "x.pt", "--out", t / "r.csv"], [t / "r.csv"]


def trained_on_after_prune(t, b):
    from ncip.core.checkpoints import read_meta, save_state
    from ncip.tool.prune import apply_prune, plan_prune

    copy_models(t, b)
    apply_prune(plan_prune(t / "models", k=3))
    last = sorted((t / "models").glob("*.safetensors"))[-1]
    meta = replace(read_meta(last), epoch=7)
    save_state(t / "models" / "epoch-007.safetensors", load_file(str(last)), meta)
    return "rank", [t / "models", "--inputs", b / "test.npz", "--out", t / "r.csv"], [t / "r.csv"]


def huge_input(t, b):
    with np.load(b / "test.npz") as z:
        x = z["x"].astype(np.float32) / 255
        x[3, 0, 0, 0] = 3e38
        np.savez(t / "x.npz", x=x, ids=z["ids"])
    return "rank", [b / "models", "--inputs", t / "x.npz", "--out", t / "r.csv"], [t / "r.csv"]


def rank_tiny_alpha(t, b):
    args = [b / "models", "--inputs", b / "test.npz", "--out", t / "r.csv", "--alpha", 0.05]
    return "rank", args, [t / "r.csv"]


def mean_nan(t, b):
    args = [b / "models", "--inputs", b / "test.npz", "--out", t / "r.csv"]
    return "rank", args + ["--mean", "nan", "--std", 1], [t / "r.csv"]


def empty_labels(t, b):
    (t / "y.npy").write_bytes(b"")
    args = [b / "models", "--inputs", b / "test.npz", "--labels", t / "y.npy"]
    return "rank", args + ["--out", t / "r.csv"], [t / "r.csv"]


def factory_returns_a_number(t, b):
    return _rank_user_model(t, b, "def Net(num_classes=10):\n    return 42\n")


def factory_of_another_width(t, b):
    """A user's factory of the run's LeNet-5 with a narrower first hidden layer: the class count
    it guesses from the file is right, another tensor is not, and the message names that one."""
    return _rank_user_model(
        t,
        b,
        "import torch.nn as nn\n"
        "from ncip.core.models import lenet5\n"
        "def Net(num_classes=10):\n"
        "    m = lenet5(num_classes, 1)\n"
        "    m.backbone[8], m.backbone[10] = nn.Linear(400, 64), nn.Linear(64, 84)\n"
        "    return m\n",
    )


def model_script_parses_argv(t, b):
    return _rank_user_model(
        t,
        b,
        "import argparse\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--data', required=True)\n"
        "args = p.parse_args()\n",
    )


def final_of_other_classes(t, b):
    """Plain state dicts (epoch_1.pt ...), the final one of another class count."""
    (t / "ck").mkdir()
    files = sorted((b / "models").glob("*.safetensors"))
    for e, f in enumerate(files, 1):
        sd = load_file(str(f))
        if e == len(files):
            sd["head.weight"], sd["head.bias"] = sd["head.weight"][:5], sd["head.bias"][:5]
        torch.save(sd, t / "ck" / f"epoch_{e}.pt")
    args = [t / "ck", "--model", "lenet5", "--inputs", b / "test.npz", "--out", t / "r.csv"]
    return "rank", args, [t / "r.csv"]


def _params_with(t, change: str):
    import yaml

    if change.startswith("-"):  # a YAML list, not a mapping
        (t / "params.yaml").write_text(change)
    else:
        cfg = yaml.safe_load((ROOT / "params.yaml").read_text())
        for k, v in yaml.safe_load(change).items():
            if isinstance(v, dict):
                cfg.setdefault(k, {}).update(v)
            else:
                cfg[k] = v
        (t / "params.yaml").write_text(yaml.safe_dump(cfg))
    return "check-params", [t / "params.yaml"], []


PARAM_CASES = [
    ("runs: 5", "runs must be a non-empty list"),
    ("- k\n- alpha\n", "holds a list, not a mapping"),
    ("train: {lr: fast}", "train.lr must be a positive number"),
    ("seed: abc", "seed must be an integer"),
    ("attack: {val_size: -5}", "attack.val_size must be an integer >= 0"),
    ("analysis: {tsne_points: -1}", "analysis.tsne_points must be an integer of at least 2"),
    ("analysis: {tsne_runs: '0,x'}", "analysis.tsne_runs (--tsne-runs) must be comma-separated"),
    ("analysis: {tsne_runs: '4'}", "analysis.tsne_runs [4] are not all among runs [0, 1, 2]"),
    ("train: {device: tpu}", "train.device must be auto, cpu or cuda"),
    ("train: {epochs: 2.5}", "train.epochs must be an integer"),
    ("runs: [0, 0]", "runs lists 0 more than once"),
    ("subjects: [fmnist-lenet1, fmnist-lenet1]", "subjects lists fmnist-lenet1 more than once"),
    ("k: 1", "k must be an integer of at least 2"),
    # issue 39: values check-params called valid that a later step refuses
    (f"seed: {2**70}", "seed must be an integer from 0 to 4294966"),
    ("subjects: [../evil]", "subjects must be a non-empty list of subject names"),
    ("alpha: 0.01", "with train.epochs 60, alpha 0.01 leaves 1 of 60 checkpoints"),
    ("data: {val_fraction: 0}", "data.val_fraction must be a number between 0 and 1"),
    ("data: {val_fraction: 2.5}", "data.val_fraction must be a number between 0 and 1"),
    ("external: {x: {checkpoints: /etc, data: /etc}}", "external.x.checkpoints is /etc, a system"),
    ("external: {x: {checkpoints: nowhere, data: nowhere}}", "external.x.checkpoints nowhere is"),
    # issue 47: every lm.* key against the rule the lm stages use; a model with arguments
    ("lm: {k: 1}", "lm.k must be an integer of at least 2"),
    ("lm: {alpha: 5}", "lm.alpha must be a number in (0, 1]"),
    ("lm: {prompts: -3}", "lm.prompts must be an integer of at least 1"),
    ("lm: {models: [gpt-9]}", "unknown language model 'gpt-9'"),
    ("lm: {models: tiny-gpt2}", "lm.models must be a list of language-model names"),
    ("lm: {finetune: {epochs: 0}}", "lm.finetune.epochs must be an integer of at least 1"),
    ("lm: {pretrain: {lr: -0.1}}", "lm.pretrain.lr must be a positive number"),
    ("lm: {runs: [0, 0]}", "lm: runs lists 0 more than once"),
    ("lm: {colour: red}", "lm.colour is not a key of the language-model study"),
    ("lm: {alpha: 0.01}", "lm, with finetune.epochs 30: alpha 0.01 leaves 1 of 30"),
]


def duplicated_key(t, b):
    (t / "params.yaml").write_text((ROOT / "params.yaml").read_text() + "k: 10\n")
    return "check-params", [t / "params.yaml"], []


CASES = [
    Case("NaN in the inputs", nan_input, "input 'digits:row:"),
    Case("NaN weight in the final checkpoint", nan_final, "epoch-006.safetensors holds NaN"),
    Case("inf weight in a selected checkpoint", nan_selected, "epoch-005.safetensors holds NaN"),
    Case(
        "NaN head (rank)",
        nan_head_rank,
        "epoch-004.safetensors holds NaN or infinite values in its head",
    ),
    Case(
        "NaN head (select-checkpoints)",
        nan_head_select,
        "epoch-004.safetensors: the head holds NaN",
    ),
    Case(
        "a checkpoint of another subject in the folder",
        stray_checkpoint,
        "epoch-007.safetensors records",
    ),
    Case(
        "a checkpoint of another subject (select)",
        stray_checkpoint_select,
        "epoch-007.safetensors records",
    ),
    Case("float pixels in [0, 255]", float_255, "takes images in [0, 1]"),
    Case("28x28 inputs for an 8x8 model", wrong_size, "trained on [1, 8, 8]"),
    Case("3-channel HWC inputs for a 1-channel model", three_channels, "trained on [1, 8, 8]"),
    Case("more ids than inputs", long_ids, "ids for 500 inputs"),
    Case("a label outside the classes", bad_labels, "label 203"),
    Case("zero inputs", no_inputs, "holds no inputs"),
    Case(
        "truncated safetensors (rank)",
        truncated_safetensors,
        "epoch-003.safetensors is not a readable safetensors",
    ),
    Case(
        "truncated safetensors (select)",
        truncated_safetensors_select,
        "epoch-003.safetensors is not a readable safetensors",
    ),
    Case("--out is a folder", out_is_folder, "r.csv is a folder"),
    Case(
        "a pickled module, not a state dict",
        pickled_module,
        "epoch_1.pt needs arbitrary unpickling",
    ),
    Case("a folder of no checkpoints", only_junk, "holds no model checkpoints"),
    Case("a single checkpoint", one_checkpoint, "NCIP needs at least 2"),
    Case("k = 1", k_one, "k must be an integer of at least 2"),
    Case("truncated .gz IDX file", truncated_idx, "train-images-idx3-ubyte.gz cannot be read"),
    Case("garbage .gz IDX file", garbage_gz, "t10k-labels-idx1-ubyte.gz cannot be read"),
    Case("IDX file with trailing bytes", trailing_idx, "train-labels-idx1-ubyte has 3 bytes after"),
    Case("label 203 of 10 classes", label_203, "train label 203"),
    Case(
        "a code-running object in a CIFAR batch",
        cifar_payload,
        "data_batch_3 is not a CIFAR python batch",
    ),
    Case("diverging training (lr 1e5)", diverging_training, "diverged"),
    Case(
        "a code-running object in the resume state",
        resume_payload,
        "train-state.pt holds more than tensors",
    ),
    Case(
        "adversarial floats in [0, 255]",
        float_255_adversarial,
        "adv.npz: float images must lie in [0, 1]",
    ),
    Case("data of another shape than the checkpoints", data_of_other_shape, "trained on [1, 8, 8]"),
    Case("an empty test split", empty_test_split, "test.npz holds no samples"),
    Case("a corrupt selection record", corrupt_selection, "sel.json is not valid JSON"),
    Case(
        "a missing predictions index",
        missing_index,
        "index.json does not exist; run predict-probabilities",
    ),
    Case("--cost-out is a folder", cost_out_is_folder, "cost.json is a folder"),
    Case("--attacks ''", no_attacks, "no attacks given"),
    Case("subjects: a string", subjects_not_a_list, "subjects must be a non-empty list"),
    Case("subjects: null", subjects_null, "lists no subjects"),
    Case("attacks: '' in params.yaml", attacks_empty_in_params, "attack.attacks: no attacks given"),
    Case("k = 0", bad_k, "k must be an integer of at least 2"),
    Case("a key given twice in params.yaml", duplicated_key, "'k' is given twice (line 2 too)"),
    Case("an unknown baseline", unknown_method, "unknown method 'magic'"),
    Case("an unknown model in a subject", unknown_subject, "unknown model 'lenet9'"),
    Case("--out is the --labels file", out_is_labels, "is one of this run's inputs"),
    Case(
        "<stem>.selection.json is a folder",
        selection_sidecar_is_folder,
        "r.selection.json is a folder",
    ),
    Case("prune --k 1", prune_k_one, "k must be an integer of at least 2"),
    Case("prune --alpha 0.05", prune_tiny_alpha, "alpha 0.05 leaves 1 of 6"),
    Case(
        "metadata naming a model file in the folder",
        recorded_file_factory,
        "ncip runs no code named inside checkpoint files",
    ),
    Case("metadata naming os:abort", recorded_abort_factory, "pass --model os:abort"),
    Case("--mean 0 --std inf", infinite_std, "--mean and --std must be finite"),
    Case("a --model module calling sys.exit(0)", model_exits_on_import, "called sys.exit(0)"),
    Case("a --model module raising on import", model_raises_on_import, "raised JSONDecodeError"),
    Case("a truncated .npz", truncated_npz, "x.npz is not a readable .npz"),
    Case("a text file named .npz", text_as_npz, "x.npz is not a .npz archive (no zip header)"),
    Case("a .npy named .npz", npy_as_npz, "x.npz is a single .npy array, not a .npz"),
    Case("an empty .npy", empty_npy, "x.npy cannot be read as an array"),
    Case("a 0-d .npy", scalar_npy, "holds one number"),
    Case("2-D ids", ids_2d, "ids have shape"),
    Case("a .pt holding a module", torch_file_with_a_module, "cannot be read as tensors"),
    Case("a .pt dict without x", torch_file_without_x, "a dict without 'x'"),
    Case("training went on after a prune", trained_on_after_prune, "came later in training"),
    Case("an input at 3e38", huge_input, "holds values up to 3e+38"),
    Case("rank --alpha 0.05", rank_tiny_alpha, "alpha 0.05 leaves 1 of 6"),
    Case("--mean nan", mean_nan, "--mean and --std must be finite"),
    Case("an empty labels file", empty_labels, "y.npy cannot be read as labels"),
    Case("a factory returning a number", factory_returns_a_number, "returned a int"),
    Case("a --model script that parses argv", model_script_parses_argv, "called sys.exit(2)"),
    Case(
        "a factory of another hidden width",
        factory_of_another_width,
        "built with 10 classes (the closest of 10, 120, 84), the model's 'backbone.8.weight' is "
        "[64, 400], the file's [120, 400] (2 more differ)",
    ),
    Case(
        "a final checkpoint of 5 classes",
        final_of_other_classes,
        "epoch_6.pt: the final",
    ),
] + [
    Case(f"params: {change.strip()}", lambda t, b, c=change: _params_with(t, c), match)
    for change, match in PARAM_CASES
]


def snapshot(paths):
    out = {}
    for p in paths:
        if p.is_dir():
            out[p] = {f: f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}
        elif p.exists():
            out[p] = p.read_bytes()
    return out


def plant(paths):
    """Give every output something earlier runs wrote, unless the case made it already."""
    for p in paths:
        if p.exists():
            continue
        if p.suffix:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(b"earlier output\n")
        else:
            p.mkdir(parents=True)
            (p / "earlier.txt").write_text("earlier output\n")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_gets_one_line_exit_2_and_outputs_untouched(case, base, tmp_path):
    cmd, args, protect = case.build(tmp_path, base)
    plant(protect)
    before = snapshot(protect)
    args = [str(a) for a in args]
    if cmd in ("rank", "check-params", "prune"):
        r = runner.invoke(ncip_app, [cmd, *args, *(["--quiet"] if cmd == "rank" else [])])
    else:
        r = runner.invoke(stage_app(cmd), args)
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2, r.output
    assert len(errors) == 1 and case.match in errors[0], r.output
    assert isinstance(r.exception, SystemExit)  # handled, not a crash
    assert "Traceback" not in r.output
    assert snapshot(protect) == before
    assert not (tmp_path / "pwned").exists()  # no payload ran


def test_skip_bad_drops_a_bad_checkpoint_with_a_warning(base, tmp_path):
    cmd, args, _ = nan_selected(tmp_path, base)
    r = runner.invoke(ncip_app, [cmd, *map(str, args), "--skip-bad", "--quiet"])
    assert r.exit_code == 0, r.output
    assert "WARNING ncip: dropped epoch-005.safetensors" in r.output
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sel["dropped"] == ["epoch-005.safetensors"] and len(sel["used"]) == 4


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in CASES
        if c.name
        in (
            "truncated .gz IDX file",
            "NaN in the inputs",
            "a code-running object in the resume state",
        )
    ],
    ids=lambda c: c.name,
)
def test_real_processes_print_one_line_and_no_traceback(case, base, tmp_path):
    cmd, args, protect = case.build(tmp_path, base)
    plant(protect)
    before = snapshot(protect)
    args = [str(a) for a in args]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    argv = (
        [sys.executable, "-m", "ncip", cmd, *args, "--quiet"]
        if cmd == "rank"
        else [sys.executable, str(ROOT / "stages" / f"{cmd}.py"), *args]
    )
    r = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and case.match in errors[0] and "Traceback" not in r.stderr
    assert snapshot(protect) == before


def test_the_gz_used_above_is_really_broken(tmp_path):
    make_idx_dataset(tmp_path)
    f = tmp_path / "train-images-idx3-ubyte.gz"
    f.write_bytes(f.read_bytes()[:200])
    with pytest.raises(EOFError), gzip.open(f) as g:
        g.read()
