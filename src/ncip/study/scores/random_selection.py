"""RS: random selection (docs/baselines.md §2.1), repeated over several seeds."""

from __future__ import annotations

import numpy as np

from ncip.core.errors import InputError
from ncip.core.metrics import run_seed
from ncip.study.scores.registry import ScoringContext, register_method


def random_scores(n: int, seed: int) -> np.ndarray:
    """A uniformly random priority order: a seeded permutation of 0..n-1 as scores."""
    return np.random.default_rng(seed).permutation(n).astype(np.float64)


@register_method("random", display="RS", paper="RS", options={"repeats": 10})
def _random(ctx: ScoringContext, split: str) -> dict[int, np.ndarray]:
    # docs/baselines.md D8 recommends at least 10 seeds; the metrics are averaged over them.
    repeats = int(ctx.option("random", "repeats"))
    if repeats <= 0:
        raise InputError(f"random.repeats must be positive, got {repeats}")
    n = len(ctx.split(split))
    return {r: random_scores(n, run_seed(ctx.seed, r)) for r in range(repeats)}
