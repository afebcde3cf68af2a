"""Neural-collapse measures on classifier heads, and NCIP's checkpoint selection (Algorithm 1)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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
    if W.shape[0] > GRAM_ABOVE:
        return _sigma_cos_gram(W, norms)
    U = W / norms[:, None]
    cos = U @ U.T
    iu = np.triu_indices(W.shape[0], k=1)
    return float(np.std(cos[iu]))


GRAM_ABOVE = 4096  # heads with more rows (a language model's vocabulary) take the Gram route
_GRAM_ROWS = 8192  # rows normalised at a time: extra memory O(rows * d + d^2)


def _sigma_cos_gram(W: np.ndarray, norms: np.ndarray) -> float:
    """σ_cos of a head with many rows (V x d, V >> d) without the V x V cosine matrix.

    With unit rows u_j: the sum of cos(u_j, u_k) over ordered pairs j != k is
    ||sum_j u_j||^2 - V, and the sum of their squares is ||U^T U||_F^2 - V, so mean and
    variance over the V(V-1)/2 distinct pairs come from a d-vector and a d x d Gram matrix:
    O(V d^2) time, O(d^2) memory beyond W (GPT-2's 50,257 x 768 head: about 1 s on 2 CPU
    cores). Equal to the direct value within 1e-9 on heads where both run (tests/test_collapse).
    """
    v, d = W.shape
    total = np.zeros(d)
    gram = np.zeros((d, d))
    for start in range(0, v, _GRAM_ROWS):
        U = W[start : start + _GRAM_ROWS] / norms[start : start + _GRAM_ROWS, None]
        total += U.sum(axis=0)
        gram += U.T @ U
    pairs = v * (v - 1)  # ordered pairs; each distinct pair counted twice in both sums
    mean = (total @ total - v) / pairs
    mean_sq = ((gram * gram).sum() - v) / pairs
    return float(np.sqrt(max(mean_sq - mean * mean, 0.0)))


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


def check_k_alpha(k: int, alpha: float) -> None:
    """K an integer of at least 2 (NCIP compares checkpoints), alpha in (0, 1]."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2:
        raise InputError(
            f"k must be an integer of at least 2 (NCIP compares checkpoints), got {k!r}"
        )
    candidate_pool(1, alpha)  # InputError naming alpha when it is not in (0, 1]


def checked_pool(m: int, k: int, alpha: float) -> np.ndarray:
    """The candidate pool of m checkpoints, after refusing a K or alpha that leaves fewer than
    two checkpoints to compare."""
    check_k_alpha(k, alpha)
    pool = candidate_pool(m, alpha)
    if len(pool) < 2 and m >= 2:
        need = math.ceil(1.5 / m * 100) / 100
        raise InputError(
            f"alpha {alpha:g} leaves {len(pool)} of {m} checkpoints in the pool; NCIP "
            f"compares at least two: use --alpha {need:.2f} or more"
        )
    return pool


def selection_note(m: int, pool: int, k: int, alpha: float) -> str | None:
    """One plain line when K >= the pool (selection then keeps everything), saying what would
    make it select; None otherwise."""
    if k < pool:
        return None
    line = (
        f"K = {k} is at least the {pool} checkpoints in the pool (the last {alpha:g} of "
        f"{m}): selection keeps the whole pool, so sigma_cos chooses nothing"
    )
    if pool <= 2:
        return line + "; keep more checkpoints for NCIP to select from"
    hint = f"use --k below {pool} (e.g. --k {max(2, pool // 2)})"
    if m > k:
        a = math.ceil((k + 0.5) / m * 100) / 100
        if a <= 1:
            hint += f" or --alpha {a:.2f} or more"
    return f"{line}; {hint}, or keep more checkpoints"


def sigma_cos_series(heads: Iterable[ArrayLike], names: Sequence[str] | None = None) -> list[float]:
    """σ_cos of every checkpoint's head over a run, in training order: NaN for a one-row
    (binary) head, which has no pair of class vectors. A bad head raises InputError naming its
    checkpoint (``names[i]``, else its position)."""
    out = []
    for i, h in enumerate(heads):
        W = np.asarray(h, dtype=np.float64)
        W = W.reshape(W.shape[0], -1) if W.ndim > 2 else W
        try:
            out.append(float("nan") if W.ndim == 2 and W.shape[0] == 1 else sigma_cos(W))
        except InputError as e:
            where = names[i] if names is not None else f"checkpoint {i + 1}"
            raise InputError(f"{where}: {e}") from None
    return out


@dataclass(frozen=True)
class Selection:
    """NCIP's checkpoint selection over one run: the one record both faces use (``ncip rank``
    writes it with each checkpoint's file, the study as :meth:`to_record`).

    ``epochs`` and ``sigma`` describe all m checkpoints in training order (epochs, or positions
    1..m when a folder has none); ``pool`` and ``chosen`` are indices into them. ``note`` says,
    in one line, when K keeps the whole pool or a one-logit head made Algorithm 1 moot.
    """

    k: int
    alpha: float
    epochs: tuple[int, ...]
    sigma: tuple[float, ...]
    pool: tuple[int, ...]
    chosen: tuple[int, ...]
    note: str | None = None

    @classmethod
    def keep_all(cls, sigma: Sequence[float], k: int, alpha: float) -> Selection:
        """Every checkpoint as selected, no pool: predictions given without heads or σ_cos, or
        a folder already pruned to NCIP's selection (epochs are positions 1..m)."""
        every = tuple(range(len(sigma)))
        positions = tuple(range(1, len(sigma) + 1))
        return cls(int(k), float(alpha), positions, tuple(float(s) for s in sigma), every, every)

    @property
    def final_epoch(self) -> int:
        return self.epochs[-1]

    @property
    def pool_epochs(self) -> list[int]:
        return [self.epochs[i] for i in self.pool]

    @property
    def selected_epochs(self) -> list[int]:
        return [self.epochs[i] for i in self.chosen]

    @property
    def last_k_epochs(self) -> list[int]:
        """The "TVD only" ablation's checkpoints: the last K of the run, no NC selection."""
        return list(self.epochs[-self.k :])

    def to_record(self) -> dict[str, Any]:
        """The JSON-able record (what select-checkpoints writes; :meth:`from_record` reads it)."""
        return {
            "k": self.k,
            "alpha": self.alpha,
            "num_checkpoints": len(self.epochs),
            "final_epoch": self.final_epoch,
            "pool_epochs": self.pool_epochs,
            "selected": [
                {"epoch": self.epochs[i], "sigma_cos": self.sigma[i]} for i in self.chosen
            ],
            "selected_epochs": self.selected_epochs,
            "last_k_epochs": self.last_k_epochs,
            "sigma_cos": dict(zip(self.epochs, self.sigma, strict=True)),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Selection:
        """The selection a :meth:`to_record` record holds; InputError naming what is missing or
        inconsistent."""
        try:
            sig = {int(e): float(s) for e, s in record["sigma_cos"].items()}
            epochs = tuple(sorted(sig))
            where = {e: i for i, e in enumerate(epochs)}
            pool = tuple(where[int(e)] for e in record["pool_epochs"])
            chosen = tuple(where[int(e)] for e in record["selected_epochs"])
            k, alpha = int(record["k"]), float(record["alpha"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"not a selection record ({type(e).__name__}: {e})") from None
        if not chosen or not set(chosen) <= set(pool):
            raise InputError("not a selection record: the selected epochs are not in the pool")
        return cls(k, alpha, epochs, tuple(sig[e] for e in epochs), pool, chosen)


def plan(
    sigma: Sequence[float],
    k: int,
    alpha: float,
    epochs: Sequence[int] | None = None,
    binary: bool = False,
) -> Selection:
    """NCIP's selection over m checkpoints in training order: the candidate pool, then
    Algorithm 1 over its σ_cos (``binary``: the last K of the pool, since a one-logit head,
    extended to two as [-w, w], has the same geometry at every checkpoint). Refuses a K or
    alpha that leaves fewer than two checkpoints: NCIP compares checkpoints, and with one the
    TVD is 0 and NCIP is the margin alone. ``epochs`` default to positions 1..m."""
    s = np.asarray(sigma, dtype=np.float64)
    m = len(s)
    ep = np.arange(1, m + 1) if epochs is None else np.asarray(epochs, dtype=np.int64)
    if ep.shape != s.shape:
        raise InputError(f"{len(ep)} epochs for {m} sigma_cos values")
    if np.any(np.diff(ep) <= 0):
        raise InputError("epochs must be strictly increasing")
    pool = checked_pool(m, k, alpha)
    if binary:
        chosen = pool[-min(int(k), len(pool)) :]
        note: str | None = (
            f"one-logit (binary) head: sigma_cos needs two class vectors, so NCIP uses the last "
            f"{len(chosen)} checkpoints of the pool of {len(pool)} instead of Algorithm 1"
        )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the note says it better
            chosen = pool[select_checkpoints(s[pool], k)]
        note = selection_note(m, len(pool), k, alpha)
    return Selection(
        int(k),
        float(alpha),
        tuple(int(e) for e in ep),
        tuple(float(v) for v in s),
        tuple(int(i) for i in pool),
        tuple(int(i) for i in chosen),
        note,
    )
