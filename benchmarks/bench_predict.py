"""predict-probabilities time against K, next to K x one checkpoint's inference time.

Uses a real prepared test split and real checkpoints (a finished `dvc repro`):

    .venv/bin/python benchmarks/bench_predict.py --checkpoints models/fmnist-lenet5/run-0 \\
        --data data/prepared/fmnist-lenet5 [--ks 1,5,10,20,30]

"predict K" is what the stage does per checkpoint (load weights, batched inference under
inference_mode, build the Parquet table, write it); "K x one" is K times the bare inference
of the final checkpoint.
"""

import tempfile
import time
from pathlib import Path

import typer

from ncip.checkpoints import list_checkpoints, load_model
from ncip.data import load_split
from ncip.io import write_parquet
from ncip.predict import batched_outputs, predict_checkpoint


def main(
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    data: Path = typer.Option(..., help="prepared data directory (its test split is used)"),
    ks: str = typer.Option("1,5,10,20,30"),
    batch_size: int = typer.Option(1024),
) -> None:
    infos = list_checkpoints(checkpoints)
    test = load_split(data / "test.npz")
    final = load_model(infos[-1].path)
    batched_outputs(final, test.x[:batch_size], batch_size)  # warm-up
    t0 = time.perf_counter()
    batched_outputs(final, test.x, batch_size)
    one = time.perf_counter() - t0
    print(f"{len(test)} test inputs; one checkpoint's bare inference: {one:.3f} s")
    print(f"{'K':>4} | {'predict K (s)':>13} | {'K x one (s)':>11} | overhead")
    print("-" * 46)
    with tempfile.TemporaryDirectory() as d:
        for k in (int(s) for s in ks.split(",")):
            chosen = infos[-k:]
            t0 = time.perf_counter()
            for c in chosen:
                table = predict_checkpoint(load_model(c.path), {"test": test}, "bench", c.epoch,
                                           batch_size)  # fmt: skip
                write_parquet(Path(d) / f"epoch-{c.epoch:03d}.parquet", table)
            t = time.perf_counter() - t0
            print(f"{k:>4} | {t:>13.3f} | {k * one:>11.3f} | {t / (k * one):6.2f}x")


if __name__ == "__main__":
    typer.run(main)
