"""Neural-collapse measures on classifier heads, and NCIP's checkpoint selection (Algorithm 1)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ncip.core.errors import InputError

K = 30  # checkpoints NCIP selects (paper default)
ALPHA = 0.9  # candidate pool: the last round(ALPHA * m) checkpoints (paper default)


def sigma_cos(W: np.ndarray) -> float:
    """Std of the pairwise cosine similarities of the class vectors (rows of W) (NCIP Eq. 5).

    Population std (ddof 0) over the C(C-1)/2 distinct pairs; counting each pair twice, as
    ``j != k`` reads, gives the same value. Smaller means more equiangular (closer to NC).
    With C = 2 there is one pair, so the value is 0 for every checkpoint.
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] < 2:
        raise InputError(f"W must be [C, d] with at least 2 classes, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise InputError("the head holds NaN or infinite values (training diverged?)")
    norms = np.linalg.norm(W, axis=1)
    if np.any(norms == 0):
        raise InputError("a class weight vector is all zeros; its cosine is undefined")
    U = W / norms[:, None]
    cos = U @ U.T
    iu = np.triu_indices(W.shape[0], k=1)
    return float(np.std(cos[iu]))


def candidate_pool(m: int, alpha: float) -> np.ndarray:
    """Indices of the last round(alpha * m) of m checkpoints (at least one): the candidates."""
    if m <= 0:
        raise InputError("there are no checkpoints to select from")
    if not 0.0 < alpha <= 1.0:
        raise InputError(f"alpha must lie in (0, 1], got {alpha}")
    size = max(1, min(m, math.floor(alpha * m + 0.5)))  # round half up, not to even
    return np.arange(m - size, m)


def select_checkpoints(nc_scores: ArrayLike, k: int) -> np.ndarray:
    """NCIP Algorithm 1: farthest-point selection of checkpoints by their NC score.

    ``nc_scores`` are the candidates' scores in epoch order; the last candidate is the final
    checkpoint and is always kept. Then the candidate whose score is farthest (largest minimum
    absolute difference) from the selected set is added until ``k`` are chosen; ties go to the
    earliest candidate. Returns the selected candidate indices, ascending. With ``k`` at least
    the number of candidates, all are returned and a warning says so.
    """
    c = np.asarray(nc_scores, dtype=np.float64)
    if c.ndim != 1 or c.size == 0:
        raise InputError(f"nc_scores must be a non-empty 1-D array, got shape {c.shape}")
    if not np.all(np.isfinite(c)):
        raise InputError("nc_scores contain NaN or infinite values")
    if isinstance(k, bool) or int(k) != k or k <= 0:
        raise InputError(f"k must be a positive integer, got {k!r}")
    m = c.size
    if k >= m:
        warnings.warn(
            f"k = {k} is at least the candidate pool size {m}: selecting the whole pool",
            stacklevel=2,
        )
        return np.arange(m)
    selected = np.zeros(m, dtype=bool)
    selected[m - 1] = True
    dist = np.abs(c - c[m - 1])  # min distance of every candidate to the selected set
    for _ in range(int(k) - 1):
        d = np.where(selected, -np.inf, dist)
        u = int(np.argmax(d))  # argmax returns the first maximum: earliest candidate wins ties
        selected[u] = True
        dist = np.minimum(dist, np.abs(c - c[u]))
    return np.flatnonzero(selected)


def plan_selection(epochs: Sequence[int], nc_scores: ArrayLike, k: int, alpha: float) -> dict:
    """Everything the scoring stages need from checkpoint selection, as a JSON-able record.

    ``epochs`` and ``nc_scores`` describe all m checkpoints in epoch order. Returns the
    candidate pool, the NC-selected epochs (Algorithm 1 over the pool) and, for the "TVD only"
    ablation, the last k epochs of the run (no NC selection, no pool).
    """
    epochs = np.asarray(epochs, dtype=np.int64)
    scores = np.asarray(nc_scores, dtype=np.float64)
    if epochs.shape != scores.shape:
        raise InputError("epochs and nc_scores must have the same length")
    if np.any(np.diff(epochs) <= 0):
        raise InputError("epochs must be strictly increasing")
    if isinstance(k, bool) or int(k) != k or k <= 0:
        raise InputError(f"k must be a positive integer, got {k!r}")
    pool = candidate_pool(len(epochs), alpha)
    chosen = pool[select_checkpoints(scores[pool], int(k))]
    return {
        "k": int(k),
        "alpha": float(alpha),
        "num_checkpoints": int(len(epochs)),
        "final_epoch": int(epochs[-1]),
        "pool_epochs": epochs[pool].tolist(),
        "selected": [{"epoch": int(epochs[i]), "sigma_cos": float(scores[i])} for i in chosen],
        "selected_epochs": epochs[chosen].tolist(),
        "last_k_epochs": epochs[-int(k) :].tolist(),
        "sigma_cos": {int(e): float(s) for e, s in zip(epochs, scores, strict=True)},
    }
