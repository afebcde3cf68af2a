"""The language-model study's further readings (issue 49 item 5): the prediction-rejection
ratio against an independent computation, distinct-2, the repetition test and the per-prompt
table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ncip.study.lm.evaluation import NAMES, distinct2, evaluate, prompt_table, prr, repetition


def prr_by_loop(scores, quality):
    """PRR written out: reject j prompts, highest score first (no ties here), for j = 0..n-1."""
    n = len(quality)
    order = sorted(range(n), key=lambda i: -scores[i])
    oracle = sorted(range(n), key=lambda i: quality[i])

    def area(o):
        return sum(np.mean([quality[i] for i in o[j:]]) for j in range(n)) / n

    rnd = float(np.mean(quality))
    return (area(order) - rnd) / (area(oracle) - rnd)


def test_prr_equals_the_rejection_curve_written_out():
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.random(37)
        s = rng.standard_normal(37)
        assert prr(s, q) == pytest.approx(prr_by_loop(list(s), list(q)), abs=1e-12)


def test_prr_is_one_for_the_oracle_and_below_zero_for_its_reverse():
    q = np.linspace(0, 1, 50)
    assert prr(-q, q) == pytest.approx(1.0)  # lowest quality rejected first
    assert prr(q, q) < -0.9
    assert np.isnan(prr(np.arange(5.0), np.full(5, 0.3)))  # no oracle gain: undefined


def test_distinct2_reads_words_as_bleu2_does():
    got = distinct2(["a b a b", "one", "A a", ""])
    assert got[0] == pytest.approx(2 / 3) and got[2] == 1.0
    assert np.isnan(got[1]) and np.isnan(got[3])


def _tables(rng, link: bool, runs=(0, 1)):
    out = {}
    words = [f"w{i}" for i in range(40)]
    for r in runs:
        n = 200
        k = rng.integers(2, 12, n)  # distinct words per continuation of 12
        texts = [" ".join(rng.choice(words[:kk], 12)) for kk in k]
        d2 = distinct2(texts)
        noise = rng.standard_normal(n)
        ent = d2 + 0.05 * noise if link else noise
        bleu = np.clip((d2 if link else rng.random(n)) * 0.3 + 0.01 * rng.random(n), 0, 1)
        t = pd.DataFrame({"id": [f"p{i}" for i in range(n)], "continuation": texts})
        t["bleu2"] = bleu
        for m in NAMES:
            t[m] = rng.standard_normal(n)
        t["entropy"] = ent
        out[r] = t
    return out


def test_the_repetition_test_finds_a_link_where_there_is_one_and_not_otherwise():
    rng = np.random.default_rng(1)
    linked = repetition(_tables(rng, True))
    assert linked["holds"] and all(r["rho_entropy"] > 0.5 for r in linked["per_run"])
    assert not repetition(_tables(rng, False))["holds"]


def test_evaluate_and_the_per_prompt_table_keep_every_seed():
    rng = np.random.default_rng(2)
    tables = _tables(rng, True)
    res = evaluate(tables, seed=0)
    assert set(res["prr"]) == set(NAMES) and len(res["prr"]["ncip"]["per_run"]) == 2
    assert res["prr"]["ncip"]["ncip_minus"] is None
    assert res["prr"]["entropy"]["ncip_minus"] == pytest.approx(
        res["prr"]["ncip"]["mean"] - res["prr"]["entropy"]["mean"]
    )
    prompts = pd.DataFrame(
        {"id": [f"p{i}" for i in range(200)], "prompt": "x", "reference": "y", "source": "z"}
    )
    t = prompt_table(tables, prompts)
    assert len(t) == 400 and list(t.columns[:7]) == [
        "run",
        "id",
        "prompt",
        "reference",
        "continuation",
        "bleu2",
        "distinct2",
    ]
    assert t["fails_median"].dtype == bool and "fails_0.1" in t
