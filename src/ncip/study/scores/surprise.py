"""Surprise adequacy (Kim et al., ICSE 2019): LSA and DSA on penultimate features.

docs/baselines.md §2.7-2.8.

Activation traces (ATs) are the penultimate features of the final model (the input of its last
``nn.Linear``; decision D2), for the whole training split and the test set. Training inputs are
grouped by the model's *predicted* class, as in Kim's code.

LSA: per predicted class, a Gaussian KDE with scipy's defaults (Scott's factor
``n^(-1/(d+4))``, kernel covariance = factor^2 x sample covariance); neurons whose within-class
variance is below 1e-5 in any class are dropped for all classes. The score is
``-logpdf`` of the test input under its predicted class's KDE, computed here by whitening with a
Cholesky factor, which equals ``scipy.stats.gaussian_kde(...).logpdf`` (tested) and runs in
chunks. If a class's covariance is singular even so, the fallbacks of decision D4 apply: first
keep only the 300 highest-variance neurons, then add ``eps * I`` to the covariance.

DSA: ``dist_a / dist_b`` with ``dist_a`` the distance to the nearest training AT of the predicted
class (x_a) and ``dist_b`` the distance from *x_a* (not from x) to the nearest training AT of any
other class. Distances are exact (float64) and chunked, so 60,000 training inputs fit.

A predicted class with no training members gives +inf (tested first) for both.
"""

from __future__ import annotations

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.core.logs import log
from ncip.study.scores.registry import ScoringContext, register_method

VAR_THRESHOLD = 1e-5
MAX_FEATURES = 300
JITTER = 1e-6


def _chunks(n: int, size: int):
    for i in range(0, n, size):
        yield slice(i, min(n, i + size))


class ClassKDE:
    """A Gaussian KDE over rows of ``data`` with scipy's default (Scott) bandwidth."""

    def __init__(self, data: np.ndarray, jitter: float = 0.0):
        self.data = np.asarray(data, dtype=np.float64)
        n, d = self.data.shape
        factor = n ** (-1.0 / (d + 4))
        cov = np.atleast_2d(np.cov(self.data, rowvar=False, ddof=1)) * factor**2
        if jitter:
            cov = cov + jitter * np.eye(d)
        self.L = np.linalg.cholesky(cov)  # raises LinAlgError if singular
        self.white = np.linalg.solve(self.L, self.data.T).T  # whitened training points
        self.log_norm = np.log(n) + 0.5 * d * np.log(2 * np.pi) + np.log(np.diag(self.L)).sum()

    def logpdf(self, x: np.ndarray, chunk: int = 2048) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        wx = np.linalg.solve(self.L, x.T).T
        w = torch.from_numpy(self.white)
        out = np.empty(len(x))
        for sl in _chunks(len(x), chunk):
            d2 = torch.cdist(torch.from_numpy(wx[sl]), w).pow_(2)
            out[sl] = (torch.logsumexp(-0.5 * d2, dim=1)).numpy()
        return out - self.log_norm


def _fit_class_kde(data: np.ndarray, cls: int) -> tuple[ClassKDE, np.ndarray]:
    """Fit with the documented fallbacks; returns the KDE and the columns it uses."""
    cols = np.arange(data.shape[1])
    try:
        return ClassKDE(data), cols
    except np.linalg.LinAlgError:
        pass
    if data.shape[1] > MAX_FEATURES:
        cols = np.sort(np.argsort(data.var(axis=0))[-MAX_FEATURES:])
        try:
            log.warning(
                "LSA class %d: singular covariance; keeping the %d highest-variance neurons",
                cls,
                MAX_FEATURES,
            )
            return ClassKDE(data[:, cols]), cols
        except np.linalg.LinAlgError:
            pass
    log.warning("LSA class %d: singular covariance; adding %g * I", cls, JITTER)
    return ClassKDE(data[:, cols], jitter=JITTER), cols


def lsa(
    train_at: np.ndarray,
    train_pred: np.ndarray,
    test_at: np.ndarray,
    test_pred: np.ndarray,
    var_threshold: float = VAR_THRESHOLD,
) -> np.ndarray:
    """Likelihood-based surprise adequacy ``-log KDE_c(at)`` with c the predicted class."""
    train_at = np.asarray(train_at, dtype=np.float64)
    test_at = np.asarray(test_at, dtype=np.float64)
    train_pred, test_pred = np.asarray(train_pred), np.asarray(test_pred)
    classes = np.unique(train_pred)
    drop = np.zeros(train_at.shape[1], dtype=bool)
    for c in classes:
        members = train_at[train_pred == c]
        if len(members) > 1:
            drop |= members.var(axis=0) < var_threshold
    keep = np.flatnonzero(~drop)
    if keep.size == 0:
        raise InputError("LSA: every neuron's within-class variance is below the threshold")
    out = np.full(len(test_at), np.inf)
    for c in np.unique(test_pred):
        members = train_at[train_pred == c][:, keep]
        idx = np.flatnonzero(test_pred == c)
        if len(members) < 2:
            continue  # no KDE for this class: top priority (+inf)
        kde, cols = _fit_class_kde(members, int(c))
        out[idx] = -kde.logpdf(test_at[idx][:, keep][:, cols])
    return out


def _nearest(
    query: np.ndarray, ref: np.ndarray, chunk: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """Index of and distance to the nearest row of ``ref`` for every row of ``query``.

    Exact (the reference's brute force: Euclidean distances in float64, the first index on
    ties), at matrix-product speed: ``|q|^2 + |r|^2 - 2 q.r`` finds the candidates within a
    rounding tolerance of each row's minimum, and only those distances are computed exactly.
    """
    r = torch.from_numpy(np.ascontiguousarray(ref, dtype=np.float64))
    q_all = torch.from_numpy(np.ascontiguousarray(query, dtype=np.float64))
    r2 = (r * r).sum(dim=1)
    scale = float(r2.max()) if len(r2) else 0.0
    idx = np.empty(len(query), dtype=np.int64)
    dist = np.empty(len(query))
    for sl in _chunks(len(query), chunk):
        q = q_all[sl]
        q2 = (q * q).sum(dim=1)
        d2 = q2[:, None] + r2[None, :] - 2.0 * (q @ r.T)
        # float64 cancellation in d2 is below 1e-12 of the squared norms; 1e-9 is generous
        tol = 1e-9 * (q2 + scale) + 1e-300
        rows, cols = torch.nonzero(d2 <= (d2.min(dim=1).values + tol)[:, None], as_tuple=True)
        exact = torch.sqrt(((q[rows] - r[cols]) ** 2).sum(dim=1))
        # per row: the smallest exact distance, and the first column among equals
        key = exact.numpy()
        rows_np, cols_np = rows.numpy(), cols.numpy()
        order = np.lexsort((cols_np, key, rows_np))
        first = np.flatnonzero(np.r_[True, rows_np[order][1:] != rows_np[order][:-1]])
        pick = order[first]
        idx[sl] = cols_np[pick]
        dist[sl] = key[pick]
    return idx, dist


def dsa(
    train_at: np.ndarray,
    train_pred: np.ndarray,
    test_at: np.ndarray,
    test_pred: np.ndarray,
    eps: float = 1e-12,
) -> np.ndarray:
    """Distance-based surprise adequacy ``dist_a / dist_b`` (dist_b measured from x_a)."""
    train_at = np.asarray(train_at, dtype=np.float64)
    test_at = np.asarray(test_at, dtype=np.float64)
    train_pred, test_pred = np.asarray(train_pred), np.asarray(test_pred)
    out = np.full(len(test_at), np.inf)
    for c in np.unique(test_pred):
        same = np.flatnonzero(train_pred == c)
        other = np.flatnonzero(train_pred != c)
        idx = np.flatnonzero(test_pred == c)
        if len(same) == 0 or len(other) == 0:
            continue
        near, dist_a = _nearest(test_at[idx], train_at[same])
        # dist_b depends only on x_a: compute it once per distinct reference point
        ref_points, inverse = np.unique(same[near], return_inverse=True)
        _, dist_b = _nearest(train_at[ref_points], train_at[other])
        out[idx] = dist_a / np.maximum(dist_b[inverse], eps)
    return out


def _train_outputs(ctx: ScoringContext) -> tuple[np.ndarray, np.ndarray]:
    if ctx.train is None:
        raise InputError("LSA/DSA need the training split's inputs (ScoringContext.train)")
    logits, feats = ctx.outputs("train", ctx.train.x)
    return feats, logits.argmax(axis=1)


@register_method("lsa", display="LSA", paper="LSA", needs=("train",))
def _lsa(ctx: ScoringContext, split: str) -> np.ndarray:
    train_at, train_pred = _train_outputs(ctx)
    return lsa(
        train_at, train_pred, ctx.final_features(split), ctx.final_logits(split).argmax(axis=1)
    )


@register_method("dsa", display="DSA", paper="DSA", needs=("train",))
def _dsa(ctx: ScoringContext, split: str) -> np.ndarray:
    train_at, train_pred = _train_outputs(ctx)
    return dsa(
        train_at, train_pred, ctx.final_features(split), ctx.final_logits(split).argmax(axis=1)
    )
