"""Multi-checkpoint inference: the engine against K sequential passes, measured side by side.

For LeNet-5 on Fashion-MNIST-shaped inputs and ResNet-18 on CIFAR-shaped inputs (random
weights, each checkpoint a small drift of the last), K in {1, 10, 30}:

- "K x one": K times the median time of one checkpoint's sequential pass (contiguous tensors,
  batch 1024: what ncip did before the engine);
- "sequential": the K passes themselves;
- "engine": ncip.core.engine with its `auto` path (and, with --bf16, the same in bfloat16);
- ratio = time / (K x one); max |dp| = the largest difference of a probability to sequential.

    .venv/bin/python benchmarks/bench_predict.py [--n-lenet 10000] [--n-resnet 500] [--bf16]

"one" and the engine are medians of --repeats runs; the K sequential passes (the reference
outputs) are timed once. With --bf16, "rank rho" is the Spearman correlation between the NCIP
scores from the bfloat16 outputs and from the fp32 sequential ones (all K checkpoints used).
"""

from __future__ import annotations

import copy
import platform
import time

import numpy as np
import torch
import typer
from scipy.stats import spearmanr

from ncip.core.engine import Engine, EngineConfig
from ncip.core.models import as_model_input, create_model
from ncip.core.scores import softmax64
from ncip.tool.ranking import rank_probs


def checkpoints(name: str, shape: tuple, k: int, seed: int = 0):
    """K checkpoints of one random-weight model that behave like late training checkpoints.

    Batch-norm statistics are first estimated on random inputs (so activations stay in range,
    as in a trained network), then each checkpoint drifts from the last by 1% of each floating
    tensor's standard deviation: small steps, as between late epochs.
    """
    torch.manual_seed(seed)
    model = create_model(name, 10, shape[0])
    with torch.no_grad():
        model.train()
        for _ in range(5):
            model(torch.rand(256, *shape))
    model.eval()
    states = [copy.deepcopy(model.state_dict())]
    for _ in range(k - 1):
        states.append(
            {
                n: v + 0.01 * (v.std() if v.numel() > 1 else v.abs()) * torch.randn_like(v)
                if v.is_floating_point() and "running" not in n
                else v
                for n, v in states[-1].items()
            }
        )
    return model, states


@torch.inference_mode()
def sequential(model, states, x, batch_size=1024) -> np.ndarray:
    out = []
    for sd in states:
        model.load_state_dict(sd)
        out.append(
            np.concatenate(
                [
                    model(as_model_input(x[i : i + batch_size])).numpy()
                    for i in range(0, len(x), batch_size)
                ]
            )
        )
    return np.stack(out)


def engine_run(model, states, x, config: EngineConfig) -> tuple[np.ndarray, str]:
    m = copy.deepcopy(model)
    engine = Engine(m, "cpu", config)
    z = [z for _, z, _ in engine.outputs(lambda i: m.load_state_dict(states[i]), len(states), x)]
    return np.stack(z), engine.path


def median_time(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def rank_agreement(z_ref: np.ndarray, z: np.ndarray) -> float:
    """Spearman correlation of the NCIP scores computed from two sets of logits."""
    a = rank_probs(list(softmax64(z_ref)), kind="probs").table.sort_values("sample_id")
    b = rank_probs(list(softmax64(z)), kind="probs").table.sort_values("sample_id")
    return float(spearmanr(a["ncip"], b["ncip"]).statistic)


def main(
    n_lenet: int = typer.Option(10_000, help="Fashion-MNIST-shaped inputs for LeNet-5"),
    n_resnet: int = typer.Option(500, help="CIFAR-shaped inputs for ResNet-18"),
    ks: str = typer.Option("1,10,30"),
    repeats: int = typer.Option(3, help="engine timings are medians of this many runs"),
    bf16: bool = typer.Option(False, help="also the engine in bfloat16"),
) -> None:
    print(
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}; 'one' and engine times are medians of {repeats} runs, "
        "sequential K passes timed once"
    )
    head = (
        f"{'model':<9} | {'N':>6} | {'K':>3} | {'K x one (s)':>11} | {'seq. (s)':>8} | "
        f"{'ratio':>5} | {'engine (s)':>10} | {'ratio':>5} | {'path':<13} | {'max |dp|':>8}"
    )
    if bf16:
        head += f" | {'bf16 (s)':>8} | {'ratio':>5} | {'max |dp|':>8} | {'rank rho':>8}"
    print(head)
    rng = np.random.default_rng(0)
    for name, shape, n in (("lenet5", (1, 28, 28), n_lenet), ("resnet18", (3, 32, 32), n_resnet)):
        x = rng.integers(0, 256, (n, *shape)).astype(np.uint8)
        kmax = max(int(k) for k in ks.split(","))
        model, states = checkpoints(name, shape, kmax)
        sequential(model, states[:1], x[:256])  # warm-up
        one, _ = median_time(lambda m=model, s=states, x=x: sequential(m, s[:1], x), repeats)
        for k in (int(k) for k in ks.split(",")):
            st = states[-k:]
            t_seq, ref = timed(lambda m=model, s=st, x=x: sequential(m, s, x))
            t_eng, (z, path) = median_time(
                lambda m=model, s=st, x=x: engine_run(m, s, x, EngineConfig()), repeats
            )
            dp = float(np.max(np.abs(softmax64(z) - softmax64(ref))))
            row = (
                f"{name:<9} | {n:>6} | {k:>3} | {k * one:>11.2f} | {t_seq:>8.2f} | "
                f"{t_seq / (k * one):>5.2f} | {t_eng:>10.2f} | {t_eng / (k * one):>5.2f} | "
                f"{path:<13} | {dp:>8.1e}"
            )
            if bf16:
                t_b, (zb, _) = median_time(
                    lambda m=model, s=st, x=x: engine_run(m, s, x, EngineConfig(precision="bf16")),
                    repeats,
                )
                dpb = float(np.max(np.abs(softmax64(zb) - softmax64(ref))))
                rho = rank_agreement(ref, zb) if k > 1 else float("nan")
                row += f" | {t_b:>8.2f} | {t_b / (k * one):>5.2f} | {dpb:>8.1e} | {rho:>8.4f}"
            print(row, flush=True)


if __name__ == "__main__":
    typer.run(main)
