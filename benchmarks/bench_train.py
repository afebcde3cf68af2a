"""train-with-checkpoints per epoch: the study's training loop on a registered data set (the real
Fashion-MNIST by default), by memory layout, autocast precision and CPU threads.

Training is the default study's largest stage (2,817 of 8,047 s in the committed run), and 72 of
the text study's 97 stage-minutes at a1a96b4. This times
`ncip.study.training.train_with_checkpoints` itself (every epoch: one pass over the training
split, accuracy on val and test, sigma_cos, a safetensors checkpoint and the resume state) with
the study's settings (Adam, lr 1e-3, batch 128), for each model, layout (contiguous or
channels-last tensors), precision (fp32, or bf16/fp16 autocast: the text preset trains under
bf16) and intra-op thread count. It also says whether a setting trains the same weights as the
model's first row, since a faster setting that changes the numbers changes every metric
downstream.

    .venv/bin/python benchmarks/bench_train.py [--archs lenet1,lenet5] [--epochs 2]
    .venv/bin/python benchmarks/bench_train.py --dataset wordnet10 --archs textcnn,transformer \
        --layouts contiguous --precisions fp32,bf16 --threads 2
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


def _run(arch, epochs, channels_last, precision, threads, info, splits, d: Path):
    torch.set_num_threads(threads)
    out = d / f"{arch}-{int(channels_last)}-{precision}-{threads}"
    cfg = TrainConfig(arch=arch, epochs=epochs, channels_last=channels_last, precision=precision)
    t0 = time.perf_counter()
    hist = train_with_checkpoints(cfg, info, splits, out, d / f"{out.name}-work", subject=arch)
    total = time.perf_counter() - t0
    last = load_file(str(list_checkpoints(out)[-1].path))
    return total / epochs, float(hist["seconds"].mean()), float(hist["val_acc"].iloc[-1]), last


def main(
    archs: str = "lenet1,lenet5",
    dataset: str = typer.Option("fmnist", help="a registered data set (ncip datasets)"),
    epochs: int = typer.Option(2, min=1),
    layouts: str = typer.Option("contiguous,channels-last", help="tensor layouts to time"),
    precisions: str = typer.Option("fp32", help="fp32, bf16, fp16 (autocast); first: baseline"),
    threads: str = typer.Option("2,1", help="intra-op thread counts; the first is the baseline"),
    raw_root: Path = Path("data/raw"),
) -> None:
    info, splits = prepare_dataset(dataset, raw_root)
    counts = [int(t) for t in threads.split(",")]
    kinds = precisions.split(",")
    lasts = {"contiguous": False, "channels-last": True}
    print(
        f"{dataset}, {len(splits['train'].y)} training inputs, {epochs} epochs per setting, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads available\n"
    )
    print(
        "| model | layout | precision | threads | s / epoch (stage) | s / epoch (loop + eval) "
        "| ratio | val acc | max abs weight diff to first row |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        # one untimed epoch first: the first training in a process pays one-time set-up
        arch0 = archs.split(",")[0]
        _run(arch0, 1, False, kinds[0], counts[0], info, splits, Path(tmp) / "warm-up")
        for arch in archs.split(","):
            base = None
            for layout in layouts.split(","):
                for precision in kinds:
                    for n in counts:
                        per_epoch, loop, val, weights = _run(
                            arch, epochs, lasts[layout], precision, n, info, splits, Path(tmp)
                        )
                        if base is None:
                            base = (per_epoch, weights)
                        diff = max(float((weights[k] - base[1][k]).abs().max()) for k in weights)
                        print(
                            f"| {arch} | {layout} | {precision} | {n} | {per_epoch:.2f} | "
                            f"{loop:.2f} | {per_epoch / base[0]:.2f} | {val:.4f} | {diff:.1e} |"
                        )


if __name__ == "__main__":
    typer.run(main)
