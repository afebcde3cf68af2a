"""What the checkpoint scores (ncip.core.dynamics, issue 45) cost, beside what they are read from.

1. The study, on a default subject's shape: predict-probabilities' library call
   (`ncip.study.predict.predict_run`) runs a LeNet-5 with random weights, drifting between 60
   checkpoints like late epochs, on N Fashion-MNIST-shaped test inputs; then, on the stored
   predictions, score-ncip's NCIP with its ablations and the checkpoint scores (last K = 30 for
   the ensemble scores, the pool of 54 for the trajectory ones), each timed alone. The ratio is
   each score's time over predict-probabilities' (the stage predicts more splits than it
   scores, so the stage's own ratio is lower).
2. The tool: `ncip.rank` on --n-rank inputs, with and without the checkpoint scores
   (`checkpoint_scores=False`), interleaved, median of --repeats; the ratio of the medians.
   Two runs of 20 checkpoints, K = 10: LeNet-5 (random weights drifting as in 1.) on
   Fashion-MNIST-shaped uint8 images, and the worst case, benchmarks/bench_rank_memory.py's
   synthetic MLP (32 -> 64 -> C) on a memory-mapped table, whose inference costs almost
   nothing, so the scores' own arithmetic shows in full.

    .venv/bin/python benchmarks/bench_checkpoint_scores.py [--n 10000] [--n-rank 100000]
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_predict import checkpoints  # noqa: E402
from bench_rank_memory import _mlp, make_run  # noqa: E402

from ncip.core.collapse import plan  # noqa: E402
from ncip.study.data import Split  # noqa: E402
from ncip.study.predict import Predictions, predict_run  # noqa: E402
from ncip.study.scores.dynamics import study_checkpoint_scores  # noqa: E402
from ncip.study.scores.ncip import ablation_scores, needed_epochs  # noqa: E402


def study_table(n: int, epochs: int, k: int, alpha: float) -> list[tuple[str, float]]:
    model, states = checkpoints("lenet5", (1, 28, 28), epochs)
    rng = np.random.default_rng(0)
    test = Split(
        rng.integers(0, 256, (n, 1, 28, 28), dtype=np.uint8),
        np.zeros(n, dtype=np.int64),
        np.array([f"t{i}" for i in range(n)]),
    )
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        predict_run(
            model,
            lambda i: model.load_state_dict(states[i]),
            list(range(1, epochs + 1)),
            [f"epoch_{e}" for e in range(1, epochs + 1)],
            {"test": test},
            {},
            Path(d),
            "bench",
            "cpu",
        )
        predict = time.perf_counter() - t0
        sel = plan(rng.uniform(0.05, 0.2, epochs), k, alpha, epochs=list(range(1, epochs + 1)))
        stack = Predictions(d).stack("test", needed_epochs(sel, 0))
    t0 = time.perf_counter()
    ablation_scores(stack, sel, 0)
    ncip = time.perf_counter() - t0
    t0 = time.perf_counter()
    study_checkpoint_scores(stack, sel)
    scores = time.perf_counter() - t0
    return [
        (f"predict-probabilities ({epochs} checkpoints, {n} inputs)", predict),
        ("NCIP, ablations, selection control (score-ncip)", ncip),
        ("the 7 checkpoint scores (score-ncip)", scores),
    ]


def lenet_run(d: Path, n: int, checkpoints_kept: int) -> None:
    """Write a LeNet-5 run (epoch_1.pt ...) and ``x.npy``: n uint8 images [n, 1, 28, 28]."""
    _, states = checkpoints("lenet5", (1, 28, 28), checkpoints_kept)
    for e, sd in enumerate(states, 1):
        torch.save(sd, d / f"epoch_{e}.pt")
    x = np.random.default_rng(0).integers(0, 256, (n, 1, 28, 28), dtype=np.uint8)
    np.save(d / "x.npy", x)


def tool_table(case: str, n: int, k: int, repeats: int, classes: int) -> dict[bool, list[float]]:
    import ncip
    from ncip.core.models import create_model

    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as d:
        if case == "LeNet-5":
            lenet_run(Path(d), n, 20)
            factory = lambda num_classes=10: create_model("lenet5", num_classes, 1)  # noqa: E731
        else:
            make_run(Path(d), n, classes, 20)
            factory = lambda num_classes=classes: _mlp(num_classes)  # noqa: E731
        for _ in range(repeats):
            for with_scores in (False, True):
                t0 = time.perf_counter()
                ncip.rank(
                    d,
                    Path(d) / "x.npy",
                    factory,
                    k=k,
                    batch_size=4096,
                    show_progress=False,
                    checkpoint_scores=with_scores,
                )
                times[with_scores].append(time.perf_counter() - t0)
    return times


def main(
    n: int = typer.Option(10_000, help="test inputs of the study's default subject"),
    epochs: int = typer.Option(60, help="checkpoints of the run (params.yaml train.epochs)"),
    k: int = typer.Option(30, help="K"),
    alpha: float = typer.Option(0.9, help="alpha"),
    n_rank: int = typer.Option(100_000, help="inputs ncip.rank ranks"),
    classes: int = typer.Option(10, help="classes of the tool's synthetic run"),
    rank_k: int = typer.Option(10, help="K for ncip.rank (of 20 checkpoints)"),
    repeats: int = typer.Option(3, help="ncip.rank runs per variant"),
) -> None:
    torch.set_num_threads(torch.get_num_threads())
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    rows = study_table(n, epochs, k, alpha)
    base = rows[0][1]
    print("\n| study (one subject, one split) | seconds | / predict |")
    print("|---|---:|---:|")
    for name, s in rows:
        print(f"| {name} | {s:.2f} | {s / base:.3f} |")
    print(f"\n| ncip.rank, {n_rank} inputs, K = {rank_k} of 20 | without (s) | with (s) | ratio |")
    print("|---|---:|---:|---:|")
    for case in ("LeNet-5", f"MLP, {classes} classes"):
        t = tool_table(case, n_rank, rank_k, repeats, classes)
        off, on = statistics.median(t[False]), statistics.median(t[True])
        runs = " / ".join(f"{a:.2f}, {b:.2f}" for a, b in zip(t[False], t[True], strict=True))
        print(f"| {case} (runs without, with: {runs}) | {off:.2f} | {on:.2f} | {on / off:.3f} |")


if __name__ == "__main__":
    typer.run(main)
