"""train-with-checkpoints per epoch: the study's training loop on the real Fashion-MNIST, by
memory layout and CPU threads.

Training is the default study's largest stage (2,817 of 8,047 s in the committed run). This
times `ncip.study.training.train_with_checkpoints` itself (every epoch: one pass over the
54,000 training images, accuracy on val and test, sigma_cos, a safetensors checkpoint and the
resume state), for LeNet-1 and LeNet-5 with the study's settings (Adam, lr 1e-3, batch 128,
fp32), contiguous against channels-last tensors, with 1 and 2 intra-op threads. It also says
whether a setting trains the same weights as the first row (contiguous, the first thread
count), since a faster layout that changes the numbers changes every metric downstream.

    .venv/bin/python benchmarks/bench_train.py [--archs lenet1,lenet5] [--epochs 2]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
import typer
from safetensors.torch import load_file

from ncip.core.checkpoints import list_checkpoints
from ncip.study.data import prepare_dataset
from ncip.study.training import TrainConfig, train_with_checkpoints


def _run(arch: str, epochs: int, channels_last: bool, threads: int, info, splits, d: Path):
    torch.set_num_threads(threads)
    out = d / f"{arch}-{int(channels_last)}-{threads}"
    cfg = TrainConfig(arch=arch, epochs=epochs, channels_last=channels_last)
    t0 = time.perf_counter()
    hist = train_with_checkpoints(cfg, info, splits, out, d / f"{out.name}-work", subject=arch)
    total = time.perf_counter() - t0
    last = load_file(str(list_checkpoints(out)[-1].path))
    return total / epochs, float(hist["seconds"].mean()), float(hist["val_acc"].iloc[-1]), last


def main(
    archs: str = "lenet1,lenet5",
    epochs: int = typer.Option(2, min=1),
    threads: str = typer.Option("2,1", help="intra-op thread counts; the first is the baseline"),
    raw_root: Path = Path("data/raw"),
) -> None:
    info, splits = prepare_dataset("fmnist", raw_root)
    counts = [int(t) for t in threads.split(",")]
    print(
        f"Fashion-MNIST, {len(splits['train'].y)} training images, {epochs} epochs per setting, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads available\n"
    )
    print(
        "| model | layout | threads | s / epoch (stage) | s / epoch (loop + eval) | ratio | "
        "val acc | max abs weight diff to default |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        # one untimed epoch first: the first training in a process pays one-time set-up
        _run(archs.split(",")[0], 1, False, counts[0], info, splits, Path(tmp) / "warm-up")
        for arch in archs.split(","):
            base = None
            for channels_last in (False, True):
                for n in counts:
                    per_epoch, loop, val, weights = _run(
                        arch, epochs, channels_last, n, info, splits, Path(tmp)
                    )
                    if base is None:
                        base = (per_epoch, weights)
                    diff = max(float((weights[k] - base[1][k]).abs().max()) for k in weights)
                    layout = "channels-last" if channels_last else "contiguous"
                    print(
                        f"| {arch} | {layout} | {n} | {per_epoch:.2f} | {loop:.2f} | "
                        f"{per_epoch / base[0]:.2f} | {val:.4f} | {diff:.1e} |"
                    )


if __name__ == "__main__":
    typer.run(main)
