"""Significance across subjects (paper Table 5): one-sided Wilcoxon signed-rank tests, Holm's
correction and the matched-pairs rank-biserial effect size; the paired bootstrap within a
subject; and the pre-registered primary analysis over data sets (docs/preregistration.md): a
random-effects meta-analysis with the Hartung-Knapp adjustment, its prediction interval and a
TOST equivalence test, with the median rule of issue 40 as a sensitivity analysis."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

from ncip.core.errors import InputError


def holm(p_values: ArrayLike) -> np.ndarray:
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


def rank_biserial(x: ArrayLike, y: ArrayLike) -> float:
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


# ---------------------------------------------------------------------------------------------
# Per-subject paired intervals: a hierarchical bootstrap over runs, then test inputs


def weighted_rauc(
    fault_in_order: np.ndarray, weights: np.ndarray, n: int | None = None
) -> np.ndarray:
    """RAUC-n (global ideal, :func:`ncip.core.metrics.rauc`) of bootstrap resamples given as
    input weights: ``weights[b, i]`` copies of the i-th input of the order (``[B, N]``; the
    copies of one input sit together, which is how equal scores rank). Returns ``[B]``; NaN
    where a resample holds no fault. With every weight 1 it is :func:`rauc` itself."""
    f = np.asarray(fault_in_order, dtype=np.float64)[None, :]
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    wf = w * f
    before = np.cumsum(wf, axis=1) - wf  # faults ranked before each input's copies
    F = wf.sum(axis=1)
    if n is None:
        c, n_eff = w, w.sum(axis=1)
    else:
        start = np.cumsum(w, axis=1) - w  # positions taken before each input's copies
        c = np.clip(n - start, 0, w)  # copies inside the first n positions
        n_eff = np.minimum(float(n), w.sum(axis=1))
    area = (c * before + f * c * (c + 1) / 2).sum(axis=1)
    k = np.minimum(n_eff, F)
    ideal = k * (k + 1) / 2 + (n_eff - k) * F
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(F > 0, area / ideal, np.nan)


def weight_dtype(n: int) -> type:
    """Integer type of n inputs' resample weights: int32 holds every product in
    :func:`resampled_rauc` while n^2 < 2^31."""
    return np.int32 if n**2 < 2**31 else np.int64


def resampled_rauc(
    fault: np.ndarray, order: np.ndarray, weights: np.ndarray, budgets: tuple[int | None, ...]
) -> dict[int | None, np.ndarray]:
    """:func:`weighted_rauc` of one order under many resamples, every budget from one pass.

    ``fault[i]`` flags input i, ``order`` ranks the inputs (indices, best first) and
    ``weights[b, i]`` (integers) counts input i's copies in resample b, in input order (not
    rank order). Only the faulty inputs' cumulative positions are needed: with ``cum_q`` the
    copies ranked up to and including fault q and W all copies, RAUC-n's area is
    sum_q w_q (min(n, W) - min(n, cum_q)) + c_q (c_q + 1) / 2, c_q = clip(n - cum_q + w_q, 0, w_q)
    (each copy of fault q counts once for every copy ranked after it inside the budget, and its
    own copies count as a triangle). Every term is an integer, so the result equals
    :func:`weighted_rauc`'s to the last bit. Returns ``{budget: [B]}``."""
    f = np.asarray(fault, dtype=bool)
    w = np.asarray(weights, dtype=weight_dtype(np.shape(weights)[1]))
    # np.take along an axis: the same gathers as w[:, order], 2-3x faster here
    in_order = np.take(w, order, axis=1)
    cum = np.cumsum(in_order, axis=1, dtype=w.dtype)
    faulty = np.flatnonzero(f[order])
    wq = np.take(in_order, faulty, axis=1)
    cq = np.take(cum, faulty, axis=1)
    total = cum[:, -1]
    F = wq.sum(axis=1, dtype=np.int64)
    out = {}
    for n in budgets:
        if n is None:
            after, c, n_eff, w_n = total[:, None] - cq, wq, total, wq
        else:
            # cum_q rises along a row, so past a row's first fault with cum_q >= n every term is
            # 0 (no copy ranked after it inside the budget, none of its own inside): only the
            # columns up to the latest such fault over the rows are summed
            cut = max((int(np.searchsorted(row, n)) + 1 for row in cq), default=0)
            w_n, c_n = wq[:, :cut], cq[:, :cut]
            after = np.minimum(n, total)[:, None] - np.minimum(n, c_n)
            c = np.clip(n - c_n + w_n, 0, w_n)
            n_eff = np.minimum(n, total)
        area = (w_n * after + c * (c + 1) // 2).sum(axis=1, dtype=np.int64).astype(np.float64)
        k = np.minimum(n_eff, F).astype(np.float64)
        ideal = k * (k + 1) / 2 + (n_eff - k) * F.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[n] = np.where(F > 0, area / ideal, np.nan)
    return out


def bootstrap_chunk(n: int) -> int:
    """Resamples weighed at a time for n inputs: about 2**18 weights (1 MiB of int32), 10 to 100
    resamples, so the arrays of one chunk stay small whatever n. On the study's scores (16
    methods, N = 10,000 clean and 40,000 adversarial inputs, 2 threads) the speed hardly depends
    on it: 18.7-22.4 s for the whole bootstrap from 10 to 100 at a time (the gathers' np.take
    made the difference: 62.7 s before, at 100)."""
    return int(min(100, max(10, 2**18 // max(n, 1))))


T_RUNS_BELOW = 5  # with fewer runs, a verdict also needs the run-level t-interval


def t_interval(d: ArrayLike, level: float = 0.95) -> tuple[float, float]:
    """The t-interval of the mean of the per-run differences ``d`` (NaN with one run, or with
    identical differences: no seed variance to estimate)."""
    d = np.asarray(d, dtype=np.float64)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        return float("nan"), float("nan")
    sd = np.std(d, ddof=1)
    if sd == 0:
        return float(d.mean()), float(d.mean())
    half = stats.t.ppf(0.5 + level / 2, len(d) - 1) * sd / np.sqrt(len(d))
    return float(d.mean() - half), float(d.mean() + half)


def paired_bootstrap(
    runs: list[dict[str, tuple[np.ndarray, np.ndarray]]],
    reference: str,
    budgets: tuple[int | None, ...] = (None,),
    resamples: int = 1000,
    seed: int = 0,
    chunk: int | None = None,
) -> pd.DataFrame:
    """NCIP (``reference``) minus each other method, per RAUC budget, with a 95% interval from a
    paired hierarchical bootstrap: each replicate draws the runs, and **one** resample of the
    test inputs shared by every run it drew (the runs rank the same inputs, indexed alike, so
    their input error is shared, not independent) and by every method (the pairing).
    ``runs[r][method]`` is ``(order, fault)``: the method's ranking of the inputs (indices, best
    first) and each input's fault flag. Returns one row per (method, budget): the observed mean
    difference over runs, the 2.5% and 97.5% bootstrap quantiles and the bootstrap standard
    error (``se``: the sd of the resampled differences), the run-level t-interval
    (:func:`t_interval`; NaN with one run), and the verdict: a win or loss needs the bootstrap
    interval to exclude 0 and, with 2 to T_RUNS_BELOW - 1 runs, the t-interval too. ``chunk``
    replicates are weighed at a time (default: :func:`bootstrap_chunk`); it changes the speed,
    never the numbers (replicate b's inputs come from its own seeded generator)."""
    R = len(runs)
    if R == 0:
        raise InputError("no runs to resample")
    N = len(next(iter(runs[0].values()))[1])
    for r, by_method in enumerate(runs):
        for m, (order, fault) in by_method.items():
            if len(order) != N or len(fault) != N:
                raise InputError(f"run {r}: {m} ranks {len(order)} inputs, not {N} as run 0")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, R, size=(resamples, R))  # the runs of each resample
    methods = [m for m in runs[0] if m != reference]
    # diffs[m][budget][b, j]: the difference on the j-th run drawn in resample b
    diffs = {m: {n: np.empty((resamples, R)) for n in budgets} for m in methods}
    observed: dict = {m: {n: [] for n in budgets} for m in methods}
    ones = np.ones((1, N), dtype=np.int32)
    for by_method in runs:
        ref_obs = resampled_rauc(by_method[reference][1], by_method[reference][0], ones, budgets)
        for m in methods:
            obs = resampled_rauc(by_method[m][1], by_method[m][0], ones, budgets)
            for n in budgets:
                observed[m][n].append(ref_obs[n][0] - obs[n][0])
    step = chunk or bootstrap_chunk(N)
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        w = np.stack(
            [
                np.bincount(np.random.default_rng([seed, b]).integers(0, N, N), minlength=N)
                for b in range(start, stop)
            ]
        ).astype(weight_dtype(N))
        for r, by_method in enumerate(runs):
            slots = np.argwhere(picks[start:stop] == r)  # (b - start, j) that drew run r
            if not len(slots):
                continue
            rows = w[slots[:, 0]]
            o_ref, f_ref = by_method[reference]
            ref = resampled_rauc(f_ref, o_ref, rows, budgets)
            for m in methods:
                order, fault = by_method[m]
                got = resampled_rauc(fault, order, rows, budgets)
                for n in budgets:
                    diffs[m][n][slots[:, 0] + start, slots[:, 1]] = ref[n] - got[n]
    rows_out = []
    for m in methods:
        for n in budgets:
            stat = np.nanmean(diffs[m][n], axis=1)
            lo, hi = np.nanquantile(stat, [0.025, 0.975])
            t_lo, t_hi = t_interval(observed[m][n])
            both = 2 <= R < T_RUNS_BELOW
            win = lo > 0 and (not both or t_lo > 0)
            loss = hi < 0 and (not both or t_hi < 0)
            rows_out.append(
                {
                    "method": m,
                    "budget": "all" if n is None else str(int(n)),
                    "diff": float(np.nanmean(observed[m][n])),
                    "lo": float(lo),
                    "hi": float(hi),
                    "se": float(np.nanstd(stat, ddof=1)),
                    "t_lo": t_lo,
                    "t_hi": t_hi,
                    "resamples": resamples,
                    "verdict": "win" if win else "loss" if loss else "tie",
                }
            )
    return pd.DataFrame(rows_out)


def win_tie_loss(paired: pd.DataFrame) -> pd.DataFrame:
    """Per method, budget and split: on how many subjects NCIP's interval lies above 0 (win),
    below 0 (loss) or covers it (tie)."""
    counts = (
        paired.groupby(["split", "budget", "method"])["verdict"]
        .value_counts()
        .unstack(fill_value=0)
        .reindex(columns=["win", "tie", "loss"], fill_value=0)
    )
    return counts.reset_index()


# The primary comparison, fixed before any run of the extended study (issue 40): NCIP against
# the strongest confidence score (Entropy) on clean RAUC-ALL, one value per data set (subjects
# on one data set share their test inputs: they are one unit), two-sided; the median difference
# over data sets with a distribution-free 95% interval, and equivalence within +-MARGIN. The
# other baselines are secondary (Holm, Table 5). Since issue 45/49 (docs/preregistration.md)
# this median rule is the sensitivity analysis of the two co-primary questions below.
PRIMARY = {"method": "ncip", "against": "entropy", "metric": "rauc_all", "margin": 0.01}
PRIMARY_LEVEL = 0.95
# The co-primary questions (docs/preregistration.md), Holm-corrected over the two: each
# (method, against) on clean RAUC-ALL, method minus against.
PRIMARY_QUESTIONS = (("ncip", "entropy"), ("ensemble-entropy", "entropy"))
RE_MIN_DATASETS = 3  # the prediction interval's t has k - 2 degrees of freedom
SE_FLOOR = 1e-6  # a data set whose two orders agree on every resample weighs as if se = 1e-6


def random_effects(
    d: ArrayLike, se: ArrayLike, margin: float = PRIMARY["margin"], level: float = PRIMARY_LEVEL
) -> dict:
    """A random-effects meta-analysis of one difference per data set ``d`` with its standard
    error ``se`` (docs/preregistration.md): the DerSimonian-Laird between-data-set variance
    tau^2, the inverse-variance weighted mean with the Hartung-Knapp(-Sidik-Jonkman) variance
    ``sum w (d - mu)^2 / ((k - 1) sum w)`` and a t interval on k - 1 degrees of freedom; the
    prediction interval for a new data set ``mu +- t_{k-2} sqrt(tau^2 + se_mu^2)`` (Higgins,
    Thompson & Spiegelhalter 2009); I^2; the two-sided p of mu = 0 and the TOST p of
    equivalence within +-``margin`` (the larger of the two one-sided t-test p values)."""
    d = np.asarray(d, dtype=np.float64)
    v = np.maximum(np.asarray(se, dtype=np.float64), SE_FLOOR) ** 2
    if d.shape != v.shape or d.ndim != 1 or not np.all(np.isfinite(d) & np.isfinite(v)):
        raise InputError("random_effects needs one finite difference and standard error per set")
    k = len(d)
    if k < RE_MIN_DATASETS:
        return {"datasets": k, "verdict": "too few"}
    w = 1.0 / v
    mu_fixed = float((w * d).sum() / w.sum())
    q = float((w * (d - mu_fixed) ** 2).sum())
    c = float(w.sum() - (w**2).sum() / w.sum())
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    ws = 1.0 / (v + tau2)
    mu = float((ws * d).sum() / ws.sum())
    se_mu = float(np.sqrt((ws * (d - mu) ** 2).sum() / ((k - 1) * ws.sum())))
    t_ci = float(stats.t.ppf(0.5 + level / 2, k - 1))
    t_pi = float(stats.t.ppf(0.5 + level / 2, k - 2))
    half_pi = t_pi * float(np.sqrt(tau2 + se_mu**2))
    if se_mu > 0:
        p = float(2 * stats.t.sf(abs(mu) / se_mu, k - 1))
        p_tost = float(
            max(stats.t.sf((mu + margin) / se_mu, k - 1), stats.t.cdf((mu - margin) / se_mu, k - 1))
        )
    else:  # every data set gives the same difference
        p = 0.0 if mu != 0 else 1.0
        p_tost = 0.0 if abs(mu) < margin else 1.0
    return {
        "datasets": k,
        "estimate": mu,
        "se": se_mu,
        "low": mu - t_ci * se_mu,
        "high": mu + t_ci * se_mu,
        "pred_low": mu - half_pi,
        "pred_high": mu + half_pi,
        "tau": float(np.sqrt(tau2)),
        "i2": max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0,
        "p_two_sided": p,
        "p_tost": p_tost,
        "margin": margin,
    }


def re_verdicts(results: list[dict], alpha: float = 0.05) -> list[dict]:
    """Holm over the co-primary questions, for the test of a difference and for equivalence:
    "better" or "worse" where the Holm-corrected p of a difference is below ``alpha`` (with
    "within the margin" added when equivalence holds too), else "equivalent" where the
    corrected TOST p is, else "inconclusive"; "too few" without enough data sets."""
    live = [i for i, r in enumerate(results) if r.get("verdict") != "too few"]
    out = [dict(r) for r in results]
    if not live:
        return out
    p_diff = holm([results[i]["p_two_sided"] for i in live])
    p_eq = holm([results[i]["p_tost"] for i in live])
    for j, i in enumerate(live):
        r = out[i]
        r["p_holm"], r["p_tost_holm"] = float(p_diff[j]), float(p_eq[j])
        equivalent = p_eq[j] < alpha
        if p_diff[j] < alpha:
            r["verdict"] = ("better" if r["estimate"] > 0 else "worse") + (
                " (within the margin)" if equivalent else ""
            )
        else:
            r["verdict"] = "equivalent" if equivalent else "inconclusive"
    return out


def median_interval(x: ArrayLike, level: float = PRIMARY_LEVEL) -> tuple[float, float, float]:
    """A distribution-free interval for the median of ``x``: the order statistics
    ``[x_(k), x_(n+1-k)]`` with the largest k whose coverage (from the Binomial(n, 1/2)
    distribution of the count below the median) is at least ``level``. Returns (low, high,
    coverage); with too few values for that level, the range with its coverage."""
    v = np.sort(np.asarray(x, dtype=np.float64))
    n = len(v)
    if n == 0:
        raise InputError("no values for a median interval")
    best = 1
    for k in range(1, n // 2 + 1):
        if 1 - 2 * stats.binom.cdf(k - 1, n, 0.5) >= level:
            best = k
    coverage = float(1 - 2 * stats.binom.cdf(best - 1, n, 0.5))
    return float(v[best - 1]), float(v[n - best]), coverage


def primary_comparison(by_dataset: pd.Series, margin: float = PRIMARY["margin"]) -> dict:
    """The primary result from one difference per data set: the median, its interval, the
    two-sided Wilcoxon signed-rank p, and the verdict against the equivalence margin."""
    d = by_dataset.dropna()
    lo, hi, coverage = median_interval(d.to_numpy())
    p = float("nan")
    if len(d) >= 2 and np.any(d.to_numpy() != 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = float(stats.wilcoxon(d.to_numpy(), alternative="two-sided").pvalue)
    if coverage < PRIMARY_LEVEL:  # too few data sets for the interval: no verdict at all
        verdict = "too few"
    elif -margin < lo and hi < margin:
        verdict = "equivalent"
    elif lo > 0:
        verdict = "better"
    elif hi < 0:
        verdict = "worse"
    else:
        verdict = "inconclusive"
    return {
        "datasets": int(len(d)),
        "median": float(np.median(d)),
        "low": lo,
        "high": hi,
        "coverage": coverage,
        "p_two_sided": p,
        "margin": margin,
        "verdict": verdict,
        "by_dataset": {str(k): float(v) for k, v in d.items()},
    }
