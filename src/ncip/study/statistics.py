"""Significance across subjects (paper Table 5): one-sided Wilcoxon signed-rank tests, Holm's
correction and the matched-pairs rank-biserial effect size."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from ncip.core.errors import InputError


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def rank_biserial(x, y) -> float:
    """Matched-pairs rank-biserial correlation of x - y: (R+ - R-) / (R+ + R-), zeros dropped."""
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    d = d[d != 0]
    if d.size == 0:
        return 0.0
    r = stats.rankdata(np.abs(d))
    pos, neg = r[d > 0].sum(), r[d < 0].sum()
    return float((pos - neg) / (pos + neg))


def wilcoxon_table(wide: pd.DataFrame, reference: str = "ncip") -> pd.DataFrame:
    """One-sided Wilcoxon signed-rank tests of ``reference`` > each other column (paper Table 5).

    ``wide`` has one row per paired unit (a subject, or a subject and run) and one column per
    method. Pairs with a missing value are dropped per comparison. Returns n, the raw and
    Holm-corrected p-values and the rank-biserial effect size per baseline.
    """
    if reference not in wide.columns:
        raise InputError(f"no column {reference!r} to test against")
    rows = []
    for method in [c for c in wide.columns if c != reference]:
        pair = wide[[reference, method]].dropna()
        x, y = pair[reference].to_numpy(), pair[method].to_numpy()
        if len(pair) == 0 or np.all(x == y):
            p = 1.0
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # small-sample notes from scipy
                p = float(stats.wilcoxon(x, y, alternative="greater").pvalue)
        rows.append(
            {
                "baseline": method,
                "n": len(pair),
                "p_raw": p,
                "effect_size": rank_biserial(x, y) if len(pair) else np.nan,
            }
        )
    out = pd.DataFrame(rows)
    if not out.empty:
        out["p_holm"] = holm(out["p_raw"])
    return out
