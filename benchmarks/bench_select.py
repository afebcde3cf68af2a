"""select-checkpoints time against the number of candidate checkpoints.

Writes m synthetic LeNet-5 checkpoints (real safetensors files, random weights), then times the
stage's work: reading every head tensor (no model load), sigma_cos of each, Algorithm 1 with
K = 30 over the pool. Compared with loading every full model instead of only its head.

    .venv/bin/python benchmarks/bench_select.py [--sizes 50,100,200,400,800]
"""

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import typer

from ncip.core.checkpoints import (
    CheckpointMeta,
    checkpoint_name,
    list_checkpoints,
    load_model,
    read_head,
    save_checkpoint,
)
from ncip.core.collapse import plan, sigma_cos_series
from ncip.core.models import create_model


def main(sizes: str = "50,100,200,400,800", k: int = 30, repeats: int = 3) -> None:
    torch.manual_seed(0)
    model = create_model("lenet5", 10, 1)
    meta = CheckpointMeta(num_classes=10, in_channels=1)
    print(
        f"{'candidates':>10} | {'select (s)':>10} | {'per ckpt (ms)':>13} | "
        f"{'full loads (s)':>14} | ratio"
    )
    print("-" * 66)
    with tempfile.TemporaryDirectory() as d:
        made = 0
        for m in sorted(int(s) for s in sizes.split(",")):
            for e in range(made + 1, m + 1):
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(torch.randn_like(p) * 0.01)
                save_checkpoint(Path(d) / checkpoint_name(e), model, replace(meta, epoch=e))
            made = m
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                infos = list_checkpoints(d)
                scores = sigma_cos_series(read_head(c.path) for c in infos)
                plan(scores, k, 0.9, epochs=[c.epoch for c in infos])
                best = min(best, time.perf_counter() - t0)
            t0 = time.perf_counter()
            for c in list_checkpoints(d):
                load_model(c.path)
            full = time.perf_counter() - t0
            print(
                f"{m:>10} | {best:>10.3f} | {1000 * best / m:>13.2f} | {full:>14.3f} | "
                f"{full / best:5.1f}x"
            )


if __name__ == "__main__":
    typer.run(main)
