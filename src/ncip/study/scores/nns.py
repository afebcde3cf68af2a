"""NNS: neighbour-smoothed DeepGini (Bao et al., ISSTA 2023), docs/baselines.md §2.9.

Each candidate's softmax vector is mixed with those of its K = 10 nearest candidates (cosine
distance in softmax space, self excluded, inverse-distance weights): ``p~ = lambda p + (1 -
lambda) sum_j w_j p_j`` with lambda = 0.5, then scored ``1 - sum_c p~_c^2`` (computed as
:func:`ncip.core.scores.gini_impurity`, so saturated rows do not tie at 0). lambda = 1 gives
plain DeepGini. No official code exists; these constants follow the public reimplementation.
"""

from __future__ import annotations

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.core.scores import gini_impurity, softmax64
from ncip.study.scores.registry import ScoringContext, register_method


def knn_cosine(p: np.ndarray, k: int, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(indices, cosine distances) of each row's k nearest other rows."""
    t = torch.from_numpy(np.asarray(p, dtype=np.float64))
    u = t / t.norm(dim=1, keepdim=True).clamp_min(1e-300)
    n = len(t)
    k = min(k, n - 1)
    idx = np.empty((n, k), dtype=np.int64)
    dist = np.empty((n, k))
    for i in range(0, n, chunk):
        d = 1.0 - u[i : i + chunk] @ u.T
        rows = torch.arange(i, min(n, i + chunk))
        d[rows - i, rows] = np.inf  # exclude self
        v, j = torch.topk(d, k, dim=1, largest=False)
        idx[i : i + chunk], dist[i : i + chunk] = j.numpy(), v.clamp_min(0).numpy()
    return idx, dist


def nns(probs: np.ndarray, k: int, lam: float) -> np.ndarray:
    """Neighbour-smoothed Gini impurity of ``probs`` ``[N, C]``."""
    p = np.asarray(probs, dtype=np.float64)
    if not 0.0 <= lam <= 1.0:
        raise InputError(f"NNS lambda must lie in [0, 1], got {lam}")
    if k < 1:
        raise InputError(f"NNS k must be at least 1, got {k}")
    if lam == 1.0 or len(p) < 2:
        smoothed = p
    else:
        idx, dist = knn_cosine(p, k)
        w = 1.0 / (dist + 1e-8)
        w /= w.sum(axis=1, keepdims=True)
        smoothed = lam * p + (1.0 - lam) * np.einsum("nk,nkc->nc", w, p[idx])
    return gini_impurity(smoothed)


@register_method("nns", display="NNS", paper="NNS", options={"k": 10, "lambda": 0.5})
def _nns(ctx: ScoringContext, split: str) -> np.ndarray:
    k = int(ctx.option("nns", "k"))
    lam = float(ctx.option("nns", "lambda"))
    return nns(softmax64(ctx.final_logits(split)), k, lam)
