"""Per-subject paired intervals (issue 22): the weighted RAUC behind the bootstrap, a hand-worked
case, and the single-level case against scipy's own bootstrap."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ncip.core.metrics import rauc
from ncip.study.statistics import (
    holm,
    median_interval,
    paired_bootstrap,
    primary_comparison,
    random_effects,
    re_verdicts,
    resampled_rauc,
    weighted_rauc,
    win_tie_loss,
)


def test_weighted_rauc_by_hand():
    # faults in rank order 1,0,1,0 with copies 2,1,0,1 -> 1,1,0,0: every fault first
    assert weighted_rauc([1, 0, 1, 0], [[2, 1, 0, 1]])[0] == pytest.approx(1.0)
    # 0,1 with copies 1,2 -> 0,1,1: A = 0,1,2 (sum 3), ideal min(i, 2) = 1,2,2 (sum 5)
    assert weighted_rauc([0, 1], [[1, 2]])[0] == pytest.approx(3 / 5)
    # RAUC-2 of the same: A = 0,1 (1), ideal 1,2 (3)
    assert weighted_rauc([0, 1], [[1, 2]], 2)[0] == pytest.approx(1 / 3)
    assert np.isnan(weighted_rauc([0, 0], [[1, 1]])[0])


@pytest.mark.parametrize("n", [None, 1, 5, 40])
def test_weighted_rauc_is_rauc_of_the_expanded_order(n):
    rng = np.random.default_rng(3)
    for _ in range(100):
        f = rng.random(30) < 0.3
        w = rng.integers(0, 4, 30)
        expanded = np.repeat(f, w)
        got = weighted_rauc(f, w[None], n)[0]
        want = rauc(expanded, n) if expanded.any() else np.nan
        assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want)


def _two_methods(seed=0, N=400):
    rng = np.random.default_rng(seed)
    fault = rng.random(N) < 0.2
    good = np.argsort(-(fault + rng.normal(0, 0.8, N)))  # ranks faults early
    poor = np.argsort(-(fault + rng.normal(0, 2.0, N)))
    return fault, good, poor


def test_one_run_matches_scipy_bootstrap():
    """With one run the hierarchy is one level: the interval is scipy's percentile bootstrap of
    the same statistic over resampled inputs (Monte Carlo error aside)."""
    fault, good, poor = _two_methods()
    runs = [{"ncip": (good, fault), "other": (poor, fault)}]
    ours = paired_bootstrap(runs, "ncip", (None,), resamples=2000, seed=1).iloc[0]

    rank_good = np.empty(len(fault), int)
    rank_good[good] = np.arange(len(fault))
    rank_poor = np.empty(len(fault), int)
    rank_poor[poor] = np.arange(len(fault))

    def statistic(idx):
        idx = np.asarray(idx)
        a = fault[idx][np.argsort(rank_good[idx], kind="stable")]
        b = fault[idx][np.argsort(rank_poor[idx], kind="stable")]
        return rauc(a) - rauc(b)

    ref = stats.bootstrap(
        (np.arange(len(fault)),),
        statistic,
        vectorized=False,
        n_resamples=2000,
        method="percentile",
        random_state=2,
    ).confidence_interval
    assert ours["diff"] == pytest.approx(rauc(fault[good]) - rauc(fault[poor]))
    assert ours["lo"] == pytest.approx(ref.low, abs=0.01)
    assert ours["hi"] == pytest.approx(ref.high, abs=0.01)
    assert ours["verdict"] == "win"
    # the standard error is the bootstrap distribution's sd: about a quarter of the interval
    assert ours["se"] == pytest.approx((ref.high - ref.low) / (2 * 1.96), rel=0.15)


def test_runs_are_resampled_and_verdicts_counted():
    runs = []
    for seed in range(3):
        fault, good, poor = _two_methods(seed)
        runs.append({"ncip": (good, fault), "same": (good, fault), "better": (poor, fault)})
    out = paired_bootstrap(runs, "ncip", (None, 50), resamples=300, seed=0)
    same = out[out["method"] == "same"]
    assert (same["diff"] == 0).all() and (same["lo"] == 0).all() and (same["hi"] == 0).all()
    assert set(same["verdict"]) == {"tie"}
    better = out[out["method"] == "better"].set_index("budget")
    assert (better["lo"] > 0).all()  # the bootstrap says win on both budgets, but with 3 runs
    # a win also needs the run-level t-interval above 0 (issue 40): only RAUC-50 has it
    assert better.loc["all", "t_lo"] < 0 and better.loc["all", "verdict"] == "tie"
    assert better.loc["50", "t_lo"] > 0 and better.loc["50", "verdict"] == "win"
    wtl = win_tie_loss(pd.concat([out.assign(subject="a", split="test"),
                                  out.assign(subject="b", split="test")]))  # fmt: skip
    row = wtl[(wtl["method"] == "better") & (wtl["budget"] == "50")].iloc[0]
    assert (row["win"], row["tie"], row["loss"]) == (2, 0, 0)


def test_one_input_resample_is_shared_by_the_runs_of_a_replicate():
    """Runs rank the same inputs: a replicate reweighs them alike in every run it draws, so two
    identical runs give the one-run interval, not a narrower one (independent resamples would
    average two draws of the same input error)."""
    fault, good, poor = _two_methods(3)
    one = [{"ncip": (good, fault), "other": (poor, fault)}]
    two = one * 2
    a = paired_bootstrap(one, "ncip", (None,), resamples=400, seed=5).iloc[0]
    b = paired_bootstrap(two, "ncip", (None,), resamples=400, seed=5).iloc[0]
    assert b["hi"] - b["lo"] == pytest.approx(a["hi"] - a["lo"], rel=0.15)
    assert np.isnan(a["t_lo"]) and b["t_lo"] == b["t_hi"] == pytest.approx(a["diff"])


@pytest.mark.parametrize("budgets", [(None,), (None, 1, 7, 40)])
def test_resampled_rauc_equals_weighted_rauc_bit_for_bit(budgets):
    """The bootstrap's fast path (faulty inputs only, integer sums) against the direct formula."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        N = 50
        fault = rng.random(N) < 0.25
        order = rng.permutation(N)
        w = rng.integers(0, 4, (6, N))
        fast = resampled_rauc(fault, order, w, budgets)
        for n in budgets:
            direct = weighted_rauc(fault[order], w[:, order], n)
            np.testing.assert_array_equal(fast[n], direct)


def test_median_interval_is_the_order_statistics_with_their_binomial_coverage():
    lo, hi, cov = median_interval(np.arange(13.0))
    assert (lo, hi) == (2.0, 10.0) and cov == pytest.approx(1 - 2 * stats.binom.cdf(2, 13, 0.5))
    assert cov >= 0.95


@pytest.mark.parametrize(
    ("diffs", "verdict"),
    [
        ([0.02, 0.03, 0.025, 0.04, 0.02, 0.05, 0.03], "better"),
        ([-0.02, -0.03, -0.025, -0.04, -0.02, -0.05, -0.03], "worse"),
        ([0.001, -0.002, 0.003, 0.0, -0.001, 0.002, 0.001], "equivalent"),
        ([0.05, -0.04, 0.03, -0.02, 0.01, -0.03, 0.04], "inconclusive"),
        # fewer than 6 data sets cannot give a 95% interval: no verdict, however clear they look
        ([0.03], "too few"),
        ([0.02, 0.03, 0.025, 0.04, 0.05], "too few"),
    ],
)
def test_the_primary_verdict(diffs, verdict):
    r = primary_comparison(pd.Series(diffs, index=[f"d{i}" for i in range(len(diffs))]))
    assert r["verdict"] == verdict and r["datasets"] == len(diffs)


# The pre-registered co-primary estimator (docs/preregistration.md)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_effects_matches_statsmodels_dersimonian_laird_with_hartung_knapp(seed):
    from statsmodels.stats.meta_analysis import combine_effects

    rng = np.random.default_rng(seed)
    k = 8 + 4 * seed
    se = rng.uniform(0.003, 0.06, k)
    d = rng.normal(-0.01, 0.02, k) + rng.normal(0, se)
    ours = random_effects(d, se)
    with warnings.catch_warnings():  # about its per-study intervals, which are not compared
        warnings.simplefilter("ignore")
        ref = combine_effects(d, se**2, method_re="dl", use_t=True)
        frame = ref.summary_frame()
    assert ours["tau"] ** 2 == pytest.approx(ref.tau2, rel=1e-9, abs=1e-15)
    assert ours["i2"] == pytest.approx(ref.i2, rel=1e-9)
    assert ours["estimate"] == pytest.approx(ref.mean_effect_re, rel=1e-9)
    hk = frame.loc["random effect wls"]  # the Hartung-Knapp-Sidik-Jonkman variance
    assert ours["se"] == pytest.approx(hk["sd_eff"], rel=1e-9)
    assert (ours["low"], ours["high"]) == pytest.approx((hk["ci_low"], hk["ci_upp"]), rel=1e-9)
    # the prediction interval: t on k - 2 degrees of freedom, tau^2 + se^2 (Higgins et al. 2009)
    half = stats.t.ppf(0.975, k - 2) * np.sqrt(ref.tau2 + hk["sd_eff"] ** 2)
    assert ours["pred_low"] == pytest.approx(ref.mean_effect_re - half, rel=1e-9)
    t = ours["estimate"] / ours["se"]
    assert ours["p_two_sided"] == pytest.approx(2 * stats.t.sf(abs(t), k - 1), rel=1e-9)


def test_random_effects_by_hand_without_heterogeneity():
    # equal differences: tau^2 = 0, the weighted mean is the common value, I^2 = 0
    r = random_effects([0.02, 0.02, 0.02, 0.02], [0.01, 0.02, 0.01, 0.005])
    assert r["tau"] == 0 and r["i2"] == 0 and r["estimate"] == pytest.approx(0.02)
    assert r["se"] == 0 and r["p_two_sided"] == 0 and r["p_tost"] == 1  # 0.02 is past 0.01
    # two data sets are too few for a prediction interval (t on k - 2 degrees of freedom)
    assert random_effects([0.1, 0.2], [0.01, 0.01])["verdict"] == "too few"


@pytest.mark.parametrize(
    ("d", "verdict"),
    [
        ([0.03, 0.025, 0.04, 0.035, 0.03, 0.028, 0.032, 0.036], "better"),
        ([-0.03, -0.025, -0.04, -0.035, -0.03, -0.028, -0.032, -0.036], "worse"),
        ([0.001, -0.002, 0.0015, 0.0, -0.001, 0.002, 0.0005, -0.0005], "equivalent"),
        ([0.05, -0.04, 0.03, -0.06, 0.01, -0.03, 0.04, 0.0], "inconclusive"),
    ],
)
def test_re_verdicts_holm_over_the_questions(d, verdict):
    se = np.full(len(d), 0.002)
    clear = random_effects(np.full(8, 0.03) + np.linspace(0, 0.004, 8), se)
    got = re_verdicts([random_effects(d, se), clear])
    assert got[0]["verdict"] == verdict
    p = [random_effects(d, se)["p_two_sided"], clear["p_two_sided"]]
    assert got[0]["p_holm"] == pytest.approx(holm(p)[0])
    assert re_verdicts([{"datasets": 2, "verdict": "too few"}])[0]["verdict"] == "too few"
