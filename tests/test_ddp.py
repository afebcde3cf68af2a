"""train-with-checkpoints under torchrun: 2 CPU processes with the gloo backend on digits.

Checkpoints are written once (by rank 0), carry no DDP ``module.`` prefix, rank with
`ncip rank`, and an interrupted DDP run resumes to the end."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from helpers import ROOT
from safetensors import safe_open

from ncip.study.data import prepare_dataset, save_prepared

STAGE = str(ROOT / "stages" / "train_with_checkpoints.py")


def _run(args, cwd, timeout=600):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, args))}\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    info, splits = prepare_dataset("digits")
    save_prepared(d / "data", info, splits)
    return d


def _train(d, out, epochs, nproc):
    return _run(
        [
            sys.executable,
            STAGE,
            "--subject",
            "digits-lenet5",
            "--data",
            "data",
            "--out",
            out,
            "--work",
            f"{out}-work",
            "--history-out",
            f"{out}.csv",
            "--epochs",
            str(epochs),
            "--batch-size",
            "64",
            "--nproc",
            str(nproc),
            "--params",
            os.devnull,
        ],
        d,
    )


def test_torchrun_two_processes_write_each_checkpoint_once_without_the_ddp_prefix(data):
    _train(data, "models", 4, 2)
    files = sorted((data / "models").glob("*.safetensors"))
    assert [f.name for f in files] == [f"epoch-00{e}.safetensors" for e in range(1, 5)]
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            assert not any(k.startswith("module.") for k in h.keys())  # noqa: SIM118
    hist = pd.read_csv(data / "models.csv")
    assert hist["epoch"].tolist() == [1, 2, 3, 4]
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0] and hist["test_acc"].iloc[-1] > 0.8
    assert not (data / "models-work").exists()  # handed over, like a single-process run
    _run(
        [
            sys.executable,
            "-m",
            "ncip",
            "rank",
            "models",
            "--inputs",
            "data/test.npz",
            "--out",
            "rank.csv",
            "--k",
            "2",
        ],
        data,
    )
    assert len(pd.read_csv(data / "rank.csv")) == 500


def test_an_interrupted_ddp_run_resumes(data):
    script = data / "interrupt.py"
    script.write_text(
        textwrap.dedent("""
        from ncip.study.data import load_info, load_split
        from ncip.study.training import TrainConfig, train_with_checkpoints
        info = load_info("data")
        splits = {n: load_split(f"data/{n}.npz", info) for n in ("train", "val", "test")}
        cfg = TrainConfig(arch="lenet5", epochs=4, batch_size=64, seed=0)
        train_with_checkpoints(cfg, info, splits, "resumed", "resumed-work",
                               subject="digits-lenet5", stop_after=2)
    """)
    )
    _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=2",
            "--",
            str(script),
        ],
        data,
    )
    work = data / "resumed-work"
    assert sorted(f.name for f in work.glob("*.safetensors")) == [
        "epoch-001.safetensors",
        "epoch-002.safetensors",
    ]
    before = (work / "epoch-002.safetensors").read_bytes()
    out = _train(data, "resumed", 4, 2)
    assert "resuming digits-lenet5/run-0 from epoch 2" in out
    assert (data / "resumed" / "epoch-002.safetensors").read_bytes() == before
    assert pd.read_csv(data / "resumed.csv")["epoch"].tolist() == [1, 2, 3, 4]
