"""What MC-Dropout (ncip.study.scores.dropout) costs per test input and pass on the text models.

The study's TextCNN and Transformer (random weights; cost does not depend on them) on the first
--n test texts of a text set (`wordnet10` by default: 40 tokens, about 13 of them words), at the
study's batch size. For each model, interleaved and the median of --repeats:

- `eval`: one forward pass in eval mode (no dropout; the Transformer's fused inference kernel);
- `mc_dropout_probs`: the library's MC-Dropout, per pass (T = --samples): on the TextCNN, whose
  only dropout is the last step of its features, the convolutions run once per batch; on the
  Transformer every pass runs the whole encoder with its dropout on (no fused kernel);
- `full passes`: T full forward passes with the same modules in train mode, the way MC-Dropout
  is written out (what the TextCNN's result equals, bit for bit; tests/test_baselines.py).

The last column is the minutes MC-Dropout at --samples passes takes over a test split of
--rows inputs (the text study's largest, wordnet10's 4,000).

    .venv/bin/python benchmarks/bench_mc_dropout.py [--dataset wordnet10] [--samples 20]
"""

from __future__ import annotations

import platform
import statistics
import time

import numpy as np
import torch
import typer

from ncip.core.models import as_model_input, textcnn, transformer
from ncip.study.data import prepare_dataset
from ncip.study.scores.dropout import _stochastic_modules, mc_dropout_probs


def _full_passes(model: torch.nn.Module, x: np.ndarray, samples: int, batch: int) -> None:
    model.eval()
    for m in _stochastic_modules(model):
        m.train()
    with torch.inference_mode():
        for i in range(0, len(x), batch):
            xb = as_model_input(x[i : i + batch])
            for _ in range(samples):
                model(xb)
    model.eval()


def _eval_pass(model: torch.nn.Module, x: np.ndarray, batch: int) -> None:
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(x), batch):
            model(as_model_input(x[i : i + batch]))


def main(
    dataset: str = "wordnet10",
    n: int = 1024,
    samples: int = 20,
    batch: int = 256,
    repeats: int = 3,
    rows: int = 4000,
) -> None:
    info, splits = prepare_dataset(dataset)
    x = splits["test"].x[:n]
    vocab = int(splits["train"].x.max()) + 1
    print(
        f"# {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}; {dataset}: {n} test texts of {x.shape[1]} tokens, "
        f"batch {batch}, T = {samples}, median of {repeats}"
    )
    print(
        "| model | eval pass (ms/input) | mc_dropout_probs (ms/input/pass) "
        f"| full passes (ms/input/pass) | full / library | min for {rows} inputs, T = {samples} |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for build in (textcnn, transformer):
        torch.manual_seed(0)
        model = build(info.num_classes, vocab)
        jobs = {
            "eval": lambda model=model: _eval_pass(model, x, batch),
            "lib": lambda model=model: mc_dropout_probs(model, x, samples, 0.5, 0, batch),
            "full": lambda model=model: _full_passes(model, x, samples, batch),
        }
        times: dict[str, list[float]] = {k: [] for k in jobs}
        for _ in range(repeats):
            for k, job in jobs.items():
                t = time.perf_counter()
                job()
                times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        per = {k: med[k] / n * 1000 / (1 if k == "eval" else samples) for k in med}
        print(
            f"| {build.__name__} | {per['eval']:.3f} | {per['lib']:.3f} | {per['full']:.3f} "
            f"| {med['full'] / med['lib']:.1f} | {med['lib'] / n * rows / 60:.1f} |"
        )


if __name__ == "__main__":
    typer.run(main)
