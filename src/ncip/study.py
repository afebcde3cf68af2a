"""Study-level analyses: significance across subjects (Table 5), weak neural collapse (Fig. 9),
prediction instability against the number of checkpoints (Fig. 3)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from ncip.collapse import candidate_pool, select_checkpoints
from ncip.metrics import fault_types, order_from_scores, rauc
from ncip.scores.ncip import ncip_score, tvd


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
        raise ValueError(f"no column {reference!r} to test against")
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
        rows.append({"baseline": method, "n": len(pair), "p_raw": p,
                     "effect_size": rank_biserial(x, y) if len(pair) else np.nan})  # fmt: skip
    out = pd.DataFrame(rows)
    if not out.empty:
        out["p_holm"] = holm(out["p_raw"])
    return out


def weak_collapse_curve(probs: np.ndarray, labels: np.ndarray, sigma: np.ndarray, k: int,
                        alpha: float, steps, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """NCIP when only the first E' checkpoints exist (paper Fig. 9), for each E' in ``steps``.

    ``probs`` is ``[E, N, C]`` for every epoch, ``sigma`` their sigma_cos. For each E', the
    model under test is checkpoint E' (faults are its errors), the candidate pool is the last
    alpha share of the first E', and Algorithm 1 picks k of them.
    """
    rows = []
    for e in steps:
        if e < 1 or e > len(probs):
            continue
        pool = candidate_pool(e, alpha)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # k >= pool size is expected for small E'
            chosen = pool[select_checkpoints(sigma[pool], k)]
        p = probs[chosen]
        pred = probs[e - 1].argmax(1)
        s = ncip_score(p)
        order = order_from_scores(s, seed)
        is_fault = (pred != labels)[order]
        n5 = int(round(0.05 * len(labels)))
        rows.append({"checkpoints": e, "accuracy": float((pred == labels).mean()),
                     "rauc_all": rauc(is_fault), "rauc_500": rauc(is_fault, 500),
                     "fault_types_5pct": fault_types(labels, pred, order, n5),
                     "selected": len(chosen)})  # fmt: skip
    return pd.DataFrame(rows)


def tvd_curve(probs: np.ndarray, labels: np.ndarray, max_points: int = 60) -> pd.DataFrame:
    """Mean and std of TVD over the last n checkpoints, for correct and misclassified inputs of
    the final model, against n (paper Fig. 3)."""
    E = len(probs)
    wrong = probs[-1].argmax(1) != labels
    ns = np.unique(np.linspace(2, E, min(max_points, E - 1)).round().astype(int)) if E > 1 else []
    rows = []
    for n in ns:
        t = tvd(probs[E - n :])
        rows.append({"checkpoints": int(n),
                     "correct_mean": float(t[~wrong].mean()), "correct_std": float(t[~wrong].std()),
                     "misclassified_mean": float(t[wrong].mean()) if wrong.any() else np.nan,
                     "misclassified_std": float(t[wrong].std()) if wrong.any() else np.nan})  # fmt: skip
    return pd.DataFrame(rows)
