"""The holdout chooser's rule in one home (ncip.core.choice) and the study's measure of its
regret (issue 46 item 3): the vectorised bootstrap against a plain loop, the regret on
made-up subjects whose best score is known, and the report's summary of it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ncip.core.choice import MIN_FAULTS, choose, resample_counts, resampled_rauc_all
from ncip.core.metrics import order_from_scores, rauc
from ncip.study.evaluation import chooser_candidates, chooser_regret
from ncip.study.report.chooser import chooser_section, chooser_summary


@pytest.mark.parametrize("n, rate", [(50, 0.3), (300, 0.1), (301, 0.5)])
def test_resampled_rauc_all_is_rauc_all_of_each_resample(n, rate):
    rng = np.random.default_rng(n)
    fault, s = rng.random(n) < rate, rng.random(n)  # untied scores: one order per resample
    counts = resample_counts(n, 40, 7)
    idx = np.random.default_rng(7).integers(0, n, (40, n))  # the same draws, one by one
    assert np.array_equal(counts, np.stack([np.bincount(i, minlength=n) for i in idx]))
    want = [rauc(fault[i][order_from_scores(s[i], 0)]) for i in idx]
    np.testing.assert_allclose(resampled_rauc_all(order_from_scores(s, 0), fault, counts), want)


def test_a_resample_without_faults_is_nan_and_the_hand_case_holds():
    fault = np.array([True, False, False])
    counts = np.array([[0, 2, 1], [3, 0, 0], [1, 1, 1]])
    got = resampled_rauc_all(np.array([0, 1, 2]), fault, counts)
    assert np.isnan(got[0]) and got[1] == 1.0 and got[2] == 1.0  # the fault ranked first
    # fault last of three: area 1, ideal 3
    assert resampled_rauc_all(np.array([1, 2, 0]), fault, counts)[2] == pytest.approx(1 / 3)


def test_the_core_rule_takes_the_simplest_of_those_tying_the_best():
    f = np.random.default_rng(0).random(600) < 0.2
    noise = np.random.default_rng(1).random(600)
    cands = {"a": f + 0.5 * noise, "b": f + 0.5 * noise + 1e-9 * np.arange(600), "c": noise}
    rec = choose(cands, f, ("a", "b", "c"), resamples=300)
    assert rec["chosen"] == "a" and {r["method"] for r in rec["candidates"]} == {"a", "b", "c"}
    assert choose(cands, f[:50] & False, ("a",))["chosen"] is None  # no faults: no choice


def _table(n=1200, rate=0.15, best="entropy", subjects=("wells-mlp", "beps-mlp"), seed=0):
    rng = np.random.default_rng(seed)
    parts = []
    for subject in subjects:
        label = rng.integers(0, 3, n)
        pred = np.where(rng.random(n) < rate, (label + 1) % 3, label)
        fault = label != pred
        for m in chooser_candidates():
            score = fault * (1.0 if m == best else 0.1) + rng.random(n)
            parts.append(
                pd.DataFrame(
                    dict(
                        subject=subject,
                        run=0,
                        split="test",
                        method=m,
                        repeat=0,
                        label=label,
                        pred=pred,
                        sample_id=[f"{subject}:{i}" for i in range(n)],
                        score=score,
                    )
                )
            )
    return pd.concat(parts, ignore_index=True)


def test_the_chooser_finds_the_best_score_and_always_ncip_pays_for_it():
    got = chooser_regret(_table(), sizes=(100, 500, 1000), draws=4, resamples=200)
    assert set(got["size"]) == {100, 500}  # 1000 is more than half of 1,200 inputs
    big = got[got["size"] == 500]
    assert (big["chosen"] == "entropy").all() and (big["regret"] == 0).all()
    assert (big["regret_ncip"] > 0.05).all() and (big["regret_entropy"] == 0).all()
    again = chooser_regret(_table(), sizes=(100, 500, 1000), draws=4, resamples=200)
    pd.testing.assert_frame_equal(got, again)  # seeded


def test_a_holdout_with_too_few_faults_falls_back_to_ncip():
    got = chooser_regret(_table(rate=0.03), sizes=(100,), draws=5, resamples=100)
    few = got[got["holdout_faults"] < MIN_FAULTS]
    assert len(few) and few["fallback"].all() and (few["chosen"] == "ncip").all()
    assert np.allclose(few["regret"], few["regret_ncip"])


def test_the_report_summarises_the_regret_over_data_sets():
    subjects = [f"{d}-mlp" for d in ("wells", "beps", "chile", "mroz", "pima", "wvs", "credit")]
    regret = chooser_regret(_table(subjects=subjects), sizes=(100, 500), draws=3, resamples=100)
    r = SimpleNamespace(chooser=regret, independent=subjects, external={})
    rows = chooser_summary(r)
    assert [s["size"] for s in rows] == [100, 500] and rows[1]["datasets"] == 7
    assert rows[1]["regret"]["median"] == 0 and rows[1]["regret_ncip"]["median"] > 0.05
    text = "\n".join(chooser_section(r))
    assert "| 500 | 7 |" in text and "met." in text and "not met." not in text


def test_a_sensitivity_analysis_with_enough_units_is_rendered():
    from ncip.study.report.primary import _sensitivity_line
    from ncip.study.statistics import random_effects

    res = {"method": "ncip", "against": "entropy"}
    res["by_source"] = random_effects([0.01, -0.02, 0.03, 0.0], [0.01, 0.01, 0.02, 0.01])
    line = _sensitivity_line(res, "by_source", "one unit per source")
    assert "one unit per source (4 units)" in line and "prediction interval" in line
