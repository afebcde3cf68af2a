import numpy as np
import pandas as pd
import pytest

from ncip.study.evaluation import aggregate, evaluate_table, method_order, nested
from ncip.study.scoretable import score_rows
from ncip.study.tables import render_table


def test_method_order_follows_the_paper_and_accepts_any_iterable():
    ms = ["ncip", "zeta", "deepgini", "random", "tdpr"]
    assert method_order(m for m in ms) == ["random", "deepgini", "tdpr", "ncip", "zeta"]


def _table():
    y = np.array([0, 1, 0, 1])
    p = np.array([1, 1, 0, 0])  # inputs 0 and 3 are faults
    ids = np.array(["a", "b", "c", "d"])
    good = np.array([4.0, 1.0, 2.0, 3.0])
    bad = -good
    parts = []
    for run in (0, 1):
        parts.append(score_rows("s-x", run, "test", ids, y, p, "good", good))
        parts.append(score_rows("s-x", run, "test", ids, y, p, "bad", bad))
        parts.append(
            score_rows(
                "s-x",
                run,
                "test",
                ids,
                y,
                p,
                "random",
                {r: np.random.default_rng(r).random(4) for r in range(3)},
            )
        )
    return pd.concat(parts, ignore_index=True)


def test_evaluation_averages_repeats_then_runs():
    per = evaluate_table(_table(), budgets=(2,), fault_fractions=(50,))
    assert len(per) == 2 * (1 + 1 + 3)
    mean, std = aggregate(per)
    good = mean[mean["method"] == "good"].iloc[0]
    assert good["rauc_all"] == pytest.approx(1.0) and good["rauc_2"] == pytest.approx(1.0)
    assert mean[mean["method"] == "bad"].iloc[0]["rauc_all"] < 0.5
    m = nested(mean, "test", ["rauc_all"])
    assert set(m["rauc_all"]) == {"good", "bad", "random"}
    md = render_table(mean, "test", "rauc_all", ["good", "bad"], std=std, avg=True)
    assert "**1.000 ± 0.000**" in md and "Avg" in md


def test_duplicate_ids_in_one_ordering_are_an_error():
    t = _table()
    t.loc[1, "sample_id"] = "a"
    with pytest.raises(ValueError, match="duplicate sample ids"):
        evaluate_table(t)


def test_the_ablation_keeps_table_8s_row_order():
    from ncip.study.evaluation import ablation

    assert ablation() == ["tvd", "tvd+nc", "tvd+margin", "tvd+random+margin", "ncip"]
