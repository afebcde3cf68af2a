"""Evaluation metrics of a prioritization: RAUC-n, APFD and fault-type diversity.

Inputs are in rank order: ``is_fault[i]`` says whether the input ranked i-th (0-based) is
misclassified by the model under test.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from ncip.core.errors import InputError


def order_from_scores(scores: np.ndarray, seed: int = 0) -> np.ndarray:
    """Indices sorted by descending score; ties broken by a seeded random permutation.

    Never by dataset order: test sets are often grouped by class or source, which would bias
    RAUC (docs/baselines.md §0). NaN scores go last.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise InputError(f"scores must be 1-D, got shape {s.shape}")
    tiebreak = np.random.default_rng(seed).permutation(len(s))
    key = np.where(np.isnan(s), -np.inf, s)
    return np.lexsort((tiebreak, -key))


def _faults(is_fault) -> np.ndarray:
    a = np.asarray(is_fault)
    if a.ndim != 1:
        raise InputError(f"is_fault must be 1-D, got shape {a.shape}")
    return a.astype(bool)


def rauc(is_fault_in_rank_order: ArrayLike, n: int | None = None) -> float:
    """RAUC-n with the global ideal curve (NCIP Eq. 11; docs/baselines.md §3.1 (G)).

    ``sum_{i<=n} A(i) / sum_{i<=n} min(i, F)``, where A(i) counts faults among the first i
    inputs and F is the number of faults in the whole set: the ideal curve puts every fault
    first. ``n`` = None means all inputs (RAUC-ALL); n beyond N is clipped to N.
    NaN when there are no faults.
    """
    a = _faults(is_fault_in_rank_order)
    N = len(a)
    if n is not None and n <= 0:
        raise InputError(f"n must be positive, got {n}")
    n = N if n is None else min(int(n), N)
    F = int(a.sum())
    if F == 0 or n == 0:
        return float("nan")
    area = float(np.cumsum(a[:n], dtype=np.int64).sum())
    i = np.arange(1, n + 1, dtype=np.int64)
    ideal = float(np.minimum(i, F).sum())
    return area / ideal


def rauc_prefix(is_fault_in_rank_order: ArrayLike, n: int | None = None) -> float:
    """RAUC-n with the prefix ideal of CertPri's and TDPR's code (docs/baselines.md §3.1 (P)).

    The ideal only rearranges the m faults the method found in its own top n; 0 if m = 0.
    Equals :func:`rauc` at n = N. Reported only for comparison with those papers' tables.
    """
    a = _faults(is_fault_in_rank_order)
    N = len(a)
    n = N if n is None else min(int(n), N)
    if n == 0:
        return float("nan")
    m = int(a[:n].sum())
    if m == 0:
        return 0.0
    area = float(np.cumsum(a[:n], dtype=np.int64).sum())
    ideal = m * (m + 1) / 2 + (n - m) * m
    return area / ideal


def apfd(is_fault_in_rank_order: ArrayLike) -> float:
    """Average percentage of faults detected: ``1 - sum(o_k)/(N F) + 1/(2N)`` (baselines §3.2).

    ``o_k`` is the 1-based rank of the k-th fault. NaN when there are no faults.
    """
    a = _faults(is_fault_in_rank_order)
    N, F = len(a), int(a.sum())
    if F == 0:
        return float("nan")
    ranks = np.flatnonzero(a) + 1
    return 1.0 - ranks.sum() / (N * F) + 1.0 / (2 * N)


def fault_types(y_true: ArrayLike, y_pred: ArrayLike, order: ArrayLike, budget: int) -> int:
    """Number of distinct (true -> predicted) pairs among the misclassified top-``budget`` inputs.

    NCIP Eq. 12: the pairs are ordered, (cat -> dog) differs from (dog -> cat); only
    misclassified inputs count.
    """
    y_true, y_pred, order = np.asarray(y_true), np.asarray(y_pred), np.asarray(order)
    if not (len(y_true) == len(y_pred) == len(order)):
        raise InputError("y_true, y_pred and order must have the same length")
    if budget < 0:
        raise InputError(f"budget must be >= 0, got {budget}")
    top = order[:budget]
    wrong = top[y_true[top] != y_pred[top]]
    return len(set(zip(y_true[wrong].tolist(), y_pred[wrong].tolist(), strict=True)))


def expected_random_rauc(N: int, F: int, n: int | None = None) -> float:
    """Analytic expectation of :func:`rauc` under a uniformly random order (baselines §2.1).

    E[A(i)] = i F / N, so the expected RAUC-n is ``(F/N) sum_{i<=n} i / sum_{i<=n} min(i, F)``;
    at n = N this is ``(N + 1) / (2N - F + 1)``.
    """
    n = N if n is None else min(n, N)
    i = np.arange(1, n + 1, dtype=np.float64)
    return float((F / N) * i.sum() / np.minimum(i, F).sum())


def evaluate_order(
    order: np.ndarray,
    y_true: np.ndarray,
    y_pred: np.ndarray,
    budgets: Sequence[int] = (100, 200, 500, 1000),
    fault_fractions: Sequence[int] = tuple(range(1, 11)),
) -> dict[str, float]:
    """All metrics of one ordering: RAUC-n for each budget and ALL, APFD, the prefix-ideal
    RAUC-n, and fault-type counts at each percentage of N."""
    is_fault = (np.asarray(y_true) != np.asarray(y_pred))[order]
    N = len(order)
    out: dict[str, float] = {}
    for n in budgets:
        out[f"rauc_{n}"] = rauc(is_fault, n)
    out["rauc_all"] = rauc(is_fault)
    out["apfd"] = apfd(is_fault)
    for n in budgets:
        out[f"rauc_prefix_{n}"] = rauc_prefix(is_fault, n)
    for pct in fault_fractions:
        out[f"fault_types_{pct}pct"] = float(
            fault_types(y_true, y_pred, order, int(round(pct / 100 * N)))
        )
    return out


def run_seed(seed: int, run: int) -> int:
    """The seed of repetition ``run`` under the base ``seed``: ``seed * 1000 + run`` (training,
    attacks, random orders and retraining of a run all derive theirs from it)."""
    return int(seed) * 1000 + int(run)
