"""SETS (Wang et al. 2025): uncertainty-shrunk pool, strided chunks, greedy log-det gain (§2.10).

For a budget b: the pool is the ``min(N, max(1, floor(a b)))`` most uncertain inputs (``1 - max
p``, a = 3); chunk k holds pool ranks k, k+b, k+2b, ...; each chunk in turn contributes the
candidate maximising ``u_i * g^_i``, where ``g_i = log|det(F F^T)|`` of the selection plus i minus
that of the selection, normalised within the chunk as ``(g - min)/(max - min + 0.5)``.

Deviations, both documented in docs/study.md: the features are the model's own penultimate
features, min-max scaled over the test pool (SETS uses ImageNet VGG16 features, which cannot be
downloaded here); and since those have few dimensions (84 for LeNet-5), a ridge ``eps * I`` is
added to the Gram matrix so the log-det stays finite once the selection outgrows the feature
dimension (docs/baselines.md §2.10, pitfall 2). The log-det is updated incrementally with a Cholesky
factor, which gives the same values as recomputing it.

SETS selects a subset, not an order. The full order (RAUC-ALL, APFD) is SETS(b) in selection
order followed by the rest by descending uncertainty (decision D5). The budget b is a share of
the split's size, ``budget_share`` (default 5%: SETS(500) on 10,000 inputs, the paper's RAUC-500
budget on its 10,000-input test sets), so that on a small test set the pool is not the whole set
with two-input chunks; ``budget`` sets an absolute b instead (``-S '++baselines.sets.budget=500'``).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from ncip.core.errors import InputError
from ncip.core.metrics import order_from_scores
from ncip.core.scores import _rest_mass, log_softmax64
from ncip.study.scores.registry import ScoringContext, register_method

RIDGE = 1e-6


def minmax_scale(features: np.ndarray) -> np.ndarray:
    f = np.asarray(features, dtype=np.float64)
    lo, hi = f.min(axis=0), f.max(axis=0)
    rng = np.where(hi > lo, hi - lo, 1.0)  # a zero range is replaced by 1, as in SETS
    return (f - lo) / rng


def sets_select(
    features: np.ndarray,
    uncertainty: np.ndarray,
    budget: int,
    a: float = 3.0,
    seed: int = 0,
    ridge: float = RIDGE,
) -> np.ndarray:
    """Indices selected by SETS, in selection order (at most ``budget``)."""
    F = np.asarray(features, dtype=np.float64)
    u = np.asarray(uncertainty, dtype=np.float64)
    n = len(u)
    if budget < 1:
        raise InputError(f"SETS budget must be at least 1, got {budget}")
    pool_size = min(n, max(1, int(np.floor(a * budget))))
    pool = order_from_scores(u, seed)[:pool_size]
    chosen: list[int] = []
    L = np.zeros((0, 0))
    g_s = 0.0  # log det of the selection's Gram matrix (0 for the empty selection)
    for k in range(budget):
        chunk = pool[k::budget]
        if len(chunk) == 0:
            continue
        fc = F[chunk]
        sq = (fc * fc).sum(axis=1) + ridge
        if chosen:
            kv = F[chosen] @ fc.T  # [|S|, chunk]
            y = solve_triangular(L, kv, lower=True)
            resid = sq - (y * y).sum(axis=0)
        else:
            y, resid = None, sq
        gd = g_s + np.log(np.maximum(resid, 1e-300))
        gain = gd - g_s
        lo, hi = gain.min(), gain.max()
        norm = (gain - lo) / (hi - lo + 0.5) if hi > lo else np.zeros_like(gain)
        j = int(np.argmax(u[chunk] * norm))  # first strict maximum
        winner = int(chunk[j])
        # extend the Cholesky factor of G_S + ridge*I by the winner's row
        if chosen:
            row = y[:, j]
            L = np.block(
                [
                    [L, np.zeros((len(L), 1))],
                    [row[None, :], np.sqrt(max(resid[j], 1e-300)) * np.ones((1, 1))],
                ]
            )
        else:
            L = np.sqrt(np.array([[resid[j]]]))
        g_s = float(gd[j])
        chosen.append(winner)
    return np.asarray(chosen, dtype=np.int64)


def sets_order_scores(
    features: np.ndarray, uncertainty: np.ndarray, budget: int, a: float = 3.0, seed: int = 0
) -> np.ndarray:
    """Scores whose descending order is SETS(budget), then the rest by descending uncertainty."""
    u = np.asarray(uncertainty, dtype=np.float64)
    n = len(u)
    picked = sets_select(features, u, budget, a, seed)
    by_u = order_from_scores(u, seed)  # descending uncertainty, seeded tie-break
    rest = by_u[~np.isin(by_u, picked)]
    order = np.concatenate([picked, rest])
    scores = np.empty(n)
    scores[order] = np.arange(n, 0, -1, dtype=np.float64)
    return scores


def max_p_uncertainty(logits: np.ndarray) -> np.ndarray:
    """``1 - max p`` computed as the mass of the other classes (precise near saturation)."""
    return _rest_mass(log_softmax64(logits))[1]


def sets_budget(n: int, budget_share: float, budget: int | None = None) -> int:
    """SETS's b for a split of ``n`` inputs: ``budget`` if given, else round(share * n), at
    least 1 and at most n."""
    if budget is None:
        if not 0 < budget_share <= 1:
            raise InputError(f"SETS budget_share must lie in (0, 1], got {budget_share}")
        budget = int(round(budget_share * n))
    elif int(budget) < 1:
        raise InputError(f"SETS budget must be at least 1, got {budget}")
    return int(min(n, max(1, int(budget))))


@register_method(
    "sets",
    display="SETS",
    paper="SETS",
    options={"budget_share": 0.05, "budget": None, "a": 3.0},
)
def _sets(ctx: ScoringContext, split: str) -> np.ndarray:
    """SETS(b) in selection order, then descending uncertainty; b = budget_share * N (5%:
    SETS(500) on 10,000 inputs) unless the absolute `budget` is set."""
    a = float(ctx.option("sets", "a"))
    feats = minmax_scale(ctx.final_features(split))
    u = max_p_uncertainty(ctx.final_logits(split))
    b = sets_budget(len(u), float(ctx.option("sets", "budget_share")), ctx.option("sets", "budget"))
    return sets_order_scores(feats, u, b, a, ctx.seed)
