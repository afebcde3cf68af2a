"""Choosing the score that ranks a model's inputs from a labelled holdout (issue 46): the rule
both faces apply, ``ncip rank --holdout`` (:mod:`ncip.tool.choose`) and the study's measure of
its regret (:func:`ncip.study.evaluation.chooser_regret`).

Each candidate (a label-free score, larger = label first) is scored by RAUC-ALL against the
final model's faults on the holdout, with a paired bootstrap of the holdout inputs against the
best. The rule, fixed before any holdout is seen: the best candidate by holdout RAUC-ALL,
unless a simpler one (earlier in the caller's ``candidates``) ties it, its paired 95% interval
of the difference covering 0; then the simplest of those. A holdout with fewer than
:data:`MIN_FAULTS` faults (or nothing but faults) separates nothing: no choice, the caller's
default ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ncip.core.metrics import order_from_scores, rauc

MIN_FAULTS = 20
RESAMPLES = 1000


def resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of ``n`` inputs is drawn in each of ``resamples`` bootstrap resamples of
    size ``n`` (a [resamples, n] array; ``default_rng(seed)``)."""
    idx = np.random.default_rng(seed).integers(0, n, (resamples, n))
    flat = (idx + n * np.arange(resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n)


def resampled_rauc_all(order: np.ndarray, fault: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """RAUC-ALL (:func:`ncip.core.metrics.rauc`) of ``order`` (the holdout's indices, first
    ranked first) restricted to each bootstrap resample, the copies of one input side by side
    (they share its fault, so their order among themselves changes nothing); NaN for a resample
    without faults. With the area ``sum_i A(i) = sum over faults (N - position + 1)``: the m
    copies of an input placed after ``b`` others add ``m (N - b) - m (m - 1) / 2``."""
    c = counts[:, order].astype(np.float64)
    f = np.asarray(fault, dtype=bool)[order]
    n = counts.shape[1]
    before = np.cumsum(c, axis=1) - c
    area = ((c * (n - before) - c * (c - 1) / 2) * f).sum(axis=1)
    faults = (c * f).sum(axis=1)
    ideal = faults * (faults + 1) / 2 + (n - faults) * faults
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(faults > 0, area / ideal, np.nan)


def choose(
    holdout: Mapping[str, np.ndarray],
    fault: np.ndarray,
    candidates: Sequence[str],
    seed: int = 0,
    resamples: int = RESAMPLES,
    min_faults: int = MIN_FAULTS,
) -> dict:
    """The choice among ``candidates`` (simplest first; those ``holdout`` scores) on a labelled
    holdout: ``inputs``, ``faults``, ``chosen`` (None when the holdout has fewer than
    ``min_faults`` faults, or only faults), ``best`` and one row per candidate (``method``,
    ``rauc_all``, ``minus_best``, the paired bootstrap's 95% interval ``lo``/``hi`` of its
    difference to the best, ``ties_best``). Orders are :func:`order_from_scores`' (seeded
    tie-break); one resample of the holdout inputs is shared by every candidate."""
    f = np.asarray(fault, dtype=bool)
    n, faults = len(f), int(f.sum())
    record: dict = {"inputs": n, "faults": faults, "min_faults": min_faults}
    if faults < min_faults or faults == n:
        return record | {"chosen": None, "candidates": []}
    names = [c for c in candidates if c in holdout]
    orders = {c: order_from_scores(holdout[c], seed) for c in names}
    observed = {c: float(rauc(f[orders[c]])) for c in names}
    best = max(names, key=lambda c: (observed[c], -names.index(c)))
    counts = resample_counts(n, resamples, seed)
    ref = resampled_rauc_all(orders[best], f, counts)
    rows = []
    for c in names:
        if c == best:
            lo = hi = 0.0
        else:
            lo, hi = np.nanquantile(resampled_rauc_all(orders[c], f, counts) - ref, [0.025, 0.975])
        row = {"method": c, "rauc_all": observed[c], "minus_best": observed[c] - observed[best]}
        rows.append(row | {"lo": float(lo), "hi": float(hi), "ties_best": bool(lo <= 0 <= hi)})
    tied = [r["method"] for r in rows if r["ties_best"]]
    chosen = min(tied, key=names.index)  # the simplest of the best and those tying it
    return record | {"chosen": chosen, "best": best, "candidates": rows}
