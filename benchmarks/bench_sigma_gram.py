"""sigma_cos of a vocabulary-sized head: the Gram route against all V(V-1)/2 pairs.

A language model's LM head has one row per token (GPT-2: 50,257 x 768). The direct route
builds the V x V cosine matrix (GPT-2: 20 GB in float64), the Gram route a d x d matrix
(ncip.core.collapse._sigma_cos_gram). Random Gaussian heads; the time is the best of
``repeats``; "extra MiB" is the route's largest temporary array.

    .venv/bin/python benchmarks/bench_sigma_gram.py [--repeats 3]
"""

import time

import numpy as np
import typer

from ncip.core.collapse import GRAM_ABOVE, _sigma_cos_gram, sigma_cos

SIZES = [(1_000, 64), (4_096, 256), (8_192, 512), (50_257, 768)]
DIRECT_MAX = 8_192  # the V x V matrix beyond this is larger than is sensible here


def _direct(W: np.ndarray) -> float:
    U = W / np.linalg.norm(W, axis=1, keepdims=True)
    cos = U @ U.T
    return float(np.std(cos[np.triu_indices(len(W), k=1)]))


def _best(fn, repeats: int) -> tuple[float, float]:
    times, value = [], 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return min(times), value


def main(repeats: int = 3) -> None:
    rng = np.random.default_rng(0)
    print(f"sigma_cos takes the Gram route above {GRAM_ABOVE} rows")
    print(
        f"{'V x d':>12} | {'Gram (s)':>8} | {'extra MiB':>9} | {'direct (s)':>10} | "
        f"{'extra MiB':>9} | {'|difference|':>12}"
    )
    print("-" * 76)
    for v, d in SIZES:
        W = rng.standard_normal((v, d))
        norms = np.linalg.norm(W, axis=1)
        tg, g = _best(lambda W=W, norms=norms: _sigma_cos_gram(W, norms), repeats)
        gram_mib = (min(v, 8192) * d + d * d) * 8 / 2**20
        if v <= DIRECT_MAX:
            td, direct = _best(lambda W=W: _direct(W), repeats)
            cells = f"{td:>10.3f} | {v * v * 8 * 1.5 / 2**20:>9.0f} | {abs(g - direct):>12.1e}"
        else:
            cells = f"{'-':>10} | {v * v * 8 * 1.5 / 2**20:>9.0f} | {'-':>12}"
        print(f"{v:>6} x {d:<4} | {tg:>8.3f} | {gram_mib:>9.1f} | {cells}")
    t, _ = _best(lambda: sigma_cos(W), 1)
    print(f"\nsigma_cos (public, float64 copy and norms included) of {v} x {d}: {t:.2f} s")


if __name__ == "__main__":
    typer.run(main)
