"""Helpers the tests share (plain functions and constants; the fixtures are in conftest.py):
the project root, small files in the datasets' real formats, a user's own model, and a copy of
the project for the end-to-end DVC tests."""

import gzip
import os
import pickle
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


# A user's own CNN, as source text (written to a module that `--model file.py:Net` names): its
# head is called `classifier`, not `head`, and it knows nothing of ncip. The rank, writer and
# external-subject tests use it.
USER_NET = textwrap.dedent('''
    import torch.nn as nn

    class Net(nn.Module):
        """A user's own CNN; its head is called `classifier`, not `head`."""

        def __init__(self, num_classes=10):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                      nn.Linear(6 * 8 * 8, 32), nn.ReLU())
            self.classifier = nn.Linear(32, num_classes)

        def forward(self, x):
            return self.classifier(self.body(x))
''')


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


def save_drifting_epochs(net, folder: Path, epochs: int, step: float = 0.05) -> None:
    """A made-up training history in ``folder``: ``net``'s weights nudged by noise from torch's
    global generator (seed it first) before each ``epoch_<e>.safetensors`` (e = 1..epochs, the
    epoch also in the file's metadata), as a user's plain loop saving with safetensors would."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    for e in range(1, epochs + 1):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(step * torch.randn_like(p))
        state = {k: v.contiguous() for k, v in net.state_dict().items()}
        save_file(state, folder / f"epoch_{e}.safetensors", metadata={"epoch": str(e)})


def make_cifar10(raw: Path, per_batch=20) -> None:
    d = raw / "cifar-10-batches-py"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"labels": [i % 10 for i in range(per_batch)],
        }
        with open(d / name, "wb") as f:
            pickle.dump(batch, f)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"c{i}".encode() for i in range(10)]}, f)


def copy_project(d: Path) -> None:
    """What a fresh clone has that `dvc repro` uses: dvc.yaml, params.yaml, .dvcignore, the
    code and the tracked inputs (``ncip.study.paths.TRACKED_INPUTS``; DVC's plot template is
    copied by :func:`copy_plot_templates` after `dvc init`)."""
    import shutil

    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, d / name)
    for folder in ("stages", "scripts"):
        shutil.copytree(ROOT / folder, d / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "src", d / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    from ncip.study.paths import EXPERIMENT_METRICS, TRACKED_INPUTS

    for f in (*TRACKED_INPUTS, *EXPERIMENT_METRICS):
        (d / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, d / f)


def copy_plot_templates(d: Path) -> None:
    """The project's DVC plot templates (.dvc/plots), into a repo after `dvc init`."""
    import shutil

    shutil.copytree(ROOT / ".dvc" / "plots", d / ".dvc" / "plots", dirs_exist_ok=True)


def dvc_env() -> dict:
    """The environment the end-to-end tests run git and DVC with."""
    import sys

    return {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }


def run_ok(cmd: list, cwd: Path, env: dict) -> str:
    """Run a command of an end-to-end test; its output, or a failure showing the output's end."""
    import subprocess

    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, (
        f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    )
    return r.stdout + r.stderr


def init_dvc_repo(d: Path, env: dict) -> list[str]:
    """git and DVC in a copied project (DVC's plot templates included), everything committed;
    returns the `dvc` command to run there."""
    import sys

    dvc = [sys.executable, "-m", "dvc"]
    run_ok(["git", "init", "-q"], d, env)
    run_ok(dvc + ["init", "-q"], d, env)
    copy_plot_templates(d)
    run_ok(["git", "add", "-A"], d, env)
    run_ok(["git", "commit", "-qm", "init"], d, env)
    return dvc
