import json

import numpy as np
import pandas as pd
import pytest
import scipy.stats

from ncip.core.errors import InputError
from ncip.core.scores import softmax64
from ncip.study import paper
from ncip.study.curves import tsne_runs, tvd_curve, weak_collapse_curve
from ncip.study.data import Split
from ncip.study.report.agreement import gaps_by_dataset, tie_markdown
from ncip.study.report.common import column_of, cost_table, side_by_side
from ncip.study.report.paired import paired_paragraph
from ncip.study.report.retraining import retrain_by_subject, retrain_by_subject_sentence
from ncip.study.report.significance import extended_significance_sentence
from ncip.study.retrain import (
    RetrainConfig,
    resolution,
    retrain_gains,
    split_pool,
    summarize,
    training_config,
)
from ncip.study.statistics import holm, rank_biserial, wilcoxon_table


def test_holm_by_hand():
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]).tolist() == pytest.approx([1.0, 1.0])


def test_rank_biserial_by_hand():
    # differences 1, 2, -3: ranks 1, 2, 3 -> (3 - 3) / 6 = 0
    assert rank_biserial([2, 3, 0], [1, 1, 3]) == pytest.approx(0.0)
    assert rank_biserial([2, 3, 4], [1, 1, 1]) == 1.0
    assert rank_biserial([1, 1], [1, 1]) == 0.0


def test_wilcoxon_matches_scipy_and_the_papers_extremes():
    rng = np.random.default_rng(0)
    base = rng.random(14)
    wide = pd.DataFrame(
        {"ncip": base + 0.01 + rng.random(14) * 0.01, "deepgini": base, "random": base - 0.3}
    )
    t = wilcoxon_table(wide).set_index("baseline")
    # NCIP above a baseline on all 14 pairs: the exact one-sided p is 2^-14 = 6.10e-5 (Table 5)
    assert t.loc["random", "p_raw"] == pytest.approx(2**-14)
    assert t.loc["random", "effect_size"] == 1.0
    ref = scipy.stats.wilcoxon(wide["ncip"], wide["deepgini"], alternative="greater").pvalue
    assert t.loc["deepgini", "p_raw"] == pytest.approx(ref)
    assert t.loc["random", "p_holm"] == pytest.approx(min(1, 2 * 2**-14))


def test_tsne_runs_parses_the_comma_list_dvc_passes():
    assert tsne_runs("0") == [0]
    assert tsne_runs(" 0, 2 ,") == [0, 2]
    assert tsne_runs(1) == [1]  # YAML may hand over a number
    assert tsne_runs("") == [] and tsne_runs(" ") == []
    assert tsne_runs(None) == tsne_runs("0")  # the study's default
    for bad in ("0,x", "-1", "1.5"):
        with pytest.raises(InputError, match="comma-separated run numbers"):
            tsne_runs(bad)


def test_weak_collapse_and_tvd_curves():
    rng = np.random.default_rng(1)
    probs = softmax64(rng.normal(size=(12, 300, 4)) * np.linspace(0.5, 3, 12)[:, None, None])
    labels = probs[-1].argmax(1).copy()
    labels[:60] = (labels[:60] + 1) % 4  # 60 faults of the final model
    sigma = np.linspace(0.3, 0.1, 12)
    w = weak_collapse_curve(probs, labels, sigma, k=3, alpha=0.9, steps=[4, 8, 12])
    assert w["checkpoints"].tolist() == [4, 8, 12]
    assert w["accuracy"].iloc[-1] == pytest.approx(0.8)
    assert ((w["rauc_all"] > 0) & (w["rauc_all"] <= 1)).all()
    t = tvd_curve(probs, labels)
    assert t["checkpoints"].iloc[0] == 2 and t["checkpoints"].iloc[-1] == 12
    assert (t["correct_mean"] >= 0).all()


def test_retraining_uses_a_disjoint_pool_one_recipe_and_two_controls(tiny_run):
    from ncip.core.checkpoints import list_checkpoints, load_model

    s = tiny_run["splits"]
    cfg = RetrainConfig(epochs=1, seeds=2)
    pool, evaluation = split_pool(s["test"], cfg)
    assert not set(pool) & set(evaluation) and len(pool) + len(evaluation) == len(s["test"])
    final = list_checkpoints(tiny_run["dir"] / "models")[-1].path
    model = load_model(final)
    rng = np.random.default_rng(0)
    scores = {"a": rng.random(len(s["test"])), "b": rng.random(len(s["test"]))}
    training = training_config(final)
    assert training["optimizer"] == "adam"  # the training run's, recorded in its checkpoints
    rows = retrain_gains(model, s["train"], s["test"], scores, cfg, training=training)
    assert sorted(rows["method"].unique()) == ["a", "b", "control:none", "control:random"]
    assert len(rows) == 8 and rows["selected"].nunique() == 1
    assert rows["selected"].iloc[0] == round(0.2 * len(pool))
    assert np.allclose(rows["gain"], rows["after"] - rows["before"])
    assert rows["before"].nunique() == 1 and (rows["evaluation_inputs"] == len(evaluation)).all()
    none = rows[rows["method"] == "control:none"]
    assert none["faults_selected"].isna().all()  # nothing from the pool
    again = retrain_gains(model, s["train"], s["test"], scores, cfg, training=training)
    assert np.allclose(rows["after"], again["after"])  # seeded
    summary = summarize(rows)
    assert summary["control:none"]["vs_none"] == 0.0
    a = summary["a"]
    assert a["gain"] == pytest.approx(np.mean(a["gains"])) and len(a["gains"]) == 2
    half = scipy.stats.t.ppf(0.975, 1) * np.std(a["gains"], ddof=1) / np.sqrt(2)
    assert a["gain_ci95"] == pytest.approx(half)
    res = resolution(rows)
    assert res["evaluation_inputs"] == len(evaluation)
    assert (
        res["averaged"] == (100 / len(evaluation) <= 0.05)
        and (res["reason"] == "") == (res["averaged"])
    )
    with pytest.raises(ValueError, match="budget"):
        RetrainConfig(budget=0).validate()


def test_paper_values_are_the_papers():
    assert paper.TABLE3["ncip"][("fmnist", "lenet5")] == 0.931
    assert paper.TABLE4["tdpr"][("fmnist", "lenet5")] == 0.655
    assert paper.TABLE6_RAUCALL["tdpr"][("cifar10", "resnet18")] == 0.937
    assert paper.TABLE6_RAUC500["ncip"][("tinyimagenet", "densenet201")] == 0.988
    assert paper.TABLE8["tvd+nc"][("imdb", "transformer")] == 0.851
    assert paper.TABLE7["ncip"][("cifar100", "densenet121")] == 374
    assert ("imdb", "textcnn") not in paper.TABLE3["effimap"]  # "–" in the paper
    assert paper.paper_column("mnist5k", "lenet1") == ("mnist", "lenet1")


def test_side_by_side_sets_ours_beside_the_paper():
    mean = pd.DataFrame(
        {
            "subject": "fmnist-lenet5",
            "split": "test",
            "method": ["ncip", "deepgini"],
            "rauc_all": [0.93, 0.89],
        }
    )
    md = side_by_side(
        mean, "test", "rauc_all", paper.TABLE3, ["deepgini", "ncip"], ["fmnist-lenet5"]
    )
    assert "| NCIP | **0.930** | **0.931** |" in md
    assert "| DeepGini | 0.890 | 0.898 |" in md


def test_side_by_side_uses_the_alias_of_a_subject_trained_elsewhere():
    mean = pd.DataFrame({"subject": "mine", "split": "test", "method": ["ncip"], "rauc_all": [0.5]})
    assert column_of("mine") is None
    assert column_of("mine", {"mine": "fmnist-lenet5"}) == ("fmnist", "lenet5")
    md = side_by_side(
        mean,
        "test",
        "rauc_all",
        paper.TABLE3,
        ["ncip"],
        ["mine"],
        aliases={"mine": "fmnist-lenet5"},
    )
    assert "| NCIP | **0.500** | **0.931** |" in md


def test_paired_paragraph_names_wins_losses_and_ties_per_subject():
    rows = [
        ("a", "deepgini", "win"),
        ("a", "tdpr", "loss"),
        ("a", "dsa", "tie"),
        ("b", "deepgini", "win"),
        ("b", "tdpr", "win"),
        ("b", "dsa", "win"),
        ("b", "tvd", "loss"),  # an ablation: left to the section with every value
    ]
    paired = pd.DataFrame(
        [
            {"subject": s, "method": m, "verdict": v, "split": "test", "budget": "all"}
            for s, m, v in rows
        ]
    ).assign(resamples=200)
    text = paired_paragraph(paired)
    assert "200 resamples" in text
    assert (
        "RAUC-ALL on clean data: a: better than 1 (DeepGini), worse than 1 (TDPR), "
        "no clear difference from 1 (DSA); b: better than all 3." in text
    )


def test_the_summary_reads_the_extended_studys_table_5():
    """The summary's Table 5 sentence reports the extended study's Holm p from
    metrics/extended.md (the table under its "### Significance" heading, not another)."""
    extended = "\n".join(
        [
            "### RAUC-ALL on clean data (paper Table 3)",
            "",
            "| Method | a (ours) | paper |",
            "|---|---:|---:|",
            "| RS | 0.5 | - |",
            "",
            "### Significance: NCIP vs each baseline on RAUC-ALL (paper Table 5)",
            "",
            "Text before the table.",
            "",
            "| Baseline | n | p (raw) | p (Holm) | effect size (RBC) |",
            "|---|---:|---:|---:|---:|",
            "| RS | 9 | 0.00195 | 0.0234 | 1.000 |",
            "| LSA | 9 | 0.00391 | 0.0430 | 0.950 |",
            "| DSA | 9 | 0.0100 | 0.0900 | 0.700 |",
            "",
            "### Paired intervals",
            "| Method | a |",
            "|---|---:|",
            "| RS | +0.1 |",
        ]
    )
    text = extended_significance_sentence(extended)
    assert "pairs 9 independent subjects: 2 of 3 one-sided comparisons" in text
    assert "(RS, LSA)" in text and "other 1 " in text
    assert extended_significance_sentence(None) == ""
    assert extended_significance_sentence("no table here") == ""


def test_paper_gaps_are_averaged_per_dataset_not_pooled():
    text = gaps_by_dataset([("fmnist", -0.003), ("fmnist", 0.001), ("mnist5k", -0.05)])
    assert text == (
        "by -0.001 on average on fmnist (2 subjects, largest gap -0.003); "
        "by -0.050 on average on mnist5k (1 subject, largest gap -0.050)"
    )


def test_the_retraining_summary_shows_each_subject_against_the_control():
    """A sign flip between subjects stays visible: counts above the nothing-added control and
    intervals wholly above or below 0, per subject-run; the controls are not counted."""

    def arm(vs_none, ci):
        return {"gain": 0.0, "vs_none": vs_none, "vs_none_ci95": ci}

    retrain = {
        "a/run-0": {
            "methods": {
                "ncip": arm(0.01, 0.001),
                "msp": arm(0.002, 0.005),
                "control:none": arm(0.0, 0.0),
                "control:random": arm(0.3, 0.0),
            }
        },
        "b/run-0": {"methods": {"ncip": arm(-0.01, 0.001), "msp": arm(-0.002, 0.005)}},
    }
    text = retrain_by_subject_sentence(retrain)
    assert "a/run-0: 2 of 2 methods above it (1 with the interval above 0, 0 below 0)" in text
    assert "b/run-0: 0 of 2 methods above it (0 with the interval above 0, 1 below 0)" in text


def test_the_tie_table_measures_the_adversarial_sets_too():
    mean = pd.DataFrame(
        [
            {
                "subject": "a",
                "split": "test",
                "method": "tdpr",
                "tied_share": 0.5,
                "largest_tie": 0.2,
            },
            {
                "subject": "a",
                "split": "adv",
                "method": "tdpr",
                "tied_share": 0.99,
                "largest_tie": 0.3,
            },
            {
                "subject": "a",
                "split": "adv",
                "method": "msp",
                "tied_share": 0.0,
                "largest_tie": 0.0,
            },
        ]
    )
    assert "| TDPR | 50.0% (20.0%) |" in tie_markdown(mean, ["a"], ["tdpr", "msp"])
    adv = tie_markdown(mean, ["a"], ["tdpr", "msp"], split="adv")
    assert "| TDPR | 99.0% (30.0%) |" in adv and "MSP" not in adv


def test_degenerate_retraining_intervals_say_so():
    from ncip.study.report.retraining import retrain_markdown

    gains = {
        "a/run-0": {
            "methods": {
                "ncip": {"gain": 0.01, "gain_ci95": 0.0, "vs_none": 0.0},
                "msp": {"gain": 0.02, "gain_ci95": 0.004, "vs_none": 0.01},
                "control:none": {"gain": 0.01, "gain_ci95": None, "vs_none": 0.0},
            }
        }
    }
    text = retrain_markdown(gains)
    assert "+1.00 (every seed equal)" in text and "± 0.00" not in text
    assert "+2.00 ± 0.40 (+1.00)" in text and "+1.00 (one seed)" in text


def test_cost_table_charges_each_method_the_shared_inference_it_reads():
    k = "fmnist-lenet5/run-0"
    cost = {
        "stages": {},
        "methods": {
            "lsa": {k: {"prepare": 0.0, "score": 2.0}},
            "dsa": {k: {"prepare": 0.0, "score": 3.0}},
            **{
                m: {k: {"prepare": 0.0, "score": 0.25}}
                for m in ("entropy", "deepgini", "msp", "pcs")
            },
            "tdpr": {k: {"prepare": 4.0, "score": 1.5}},
            "ncip": {k: {"prepare": 0.5, "predict": 6.0, "score": 0.1}},
        },
        "shared_inference": {
            k: {
                "all_checkpoints": 10.0,
                "final_model_test_sets": 1.0,
                "final_model_train": 0.5,
                "rows": {"test": 60, "adv": 0, "val": 20, "val-adv": 20},
            }
        },
    }
    md = cost_table(cost)
    # SA = 2 + 3 + the training-set features 0.5; Uncert = 4 x 0.25 + the final model's 1.0;
    # TDPR = its ranker + every checkpoint, 40% of the inputs for training, 60% for scoring
    assert f"| {k} | 5.50 | 2.00 | – |" in md and "| 8.00 | 7.50 | 0.50 | 6.00 |" in md
    assert "↳ paper | 72.93" in md


def test_retrain_aggregation():
    g = retrain_by_subject(
        {
            "s-x/run-0": {"methods": {"ncip": {"gain": 0.01}}},
            "s-x/run-1": {"methods": {"ncip": {"gain": 0.03}}},
        }
    )
    assert g["s-x"]["ncip"] == pytest.approx(2.0)


def test_sweep_collection_reads_dvcs_experiment_listing(tmp_path):
    import importlib.util

    from helpers import ROOT

    spec = importlib.util.spec_from_file_location("collect", ROOT / "scripts" / "collect_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    exp = lambda name, alpha, v: {  # noqa: E731
        "rev": "abc",
        "name": name,
        "data": {
            "params": {"params.yaml": {"data": {"alpha": alpha, "k": 30}}},
            "metrics": {
                "metrics/clean.json": {
                    "data": {
                        "rauc_all": {"ncip": {"s-x": v}},
                        "fault_types_5pct": {"ncip": {"s-x": 3}},
                    }
                }
            },
        },
    }
    listing = [
        {
            "rev": "workspace",
            "name": None,
            "data": {},
            "experiments": [
                {"revs": [exp("sweep-alpha-0.1", 0.1, 0.8)]},
                {"revs": [exp("sweep-alpha-0.9", 0.9, 0.9)]},
                {"revs": [exp("other", 0.5, 0.1)]},
            ],
        }
    ]
    found = mod.experiments(listing)
    assert sorted(n for n, _, _ in found) == ["other", "sweep-alpha-0.1", "sweep-alpha-0.9"]
    f = tmp_path / "exps.json"
    f.write_text(json.dumps(listing))
    params = tmp_path / "params.yaml"
    params.write_text("subjects: [s-x]\n")
    from typer.testing import CliRunner

    r = CliRunner().invoke(
        mod.app,
        [
            "--exps",
            str(f),
            "--params",
            str(params),
            "--metrics-out",
            str(tmp_path / "s.md"),
            "--plots-dir",
            str(tmp_path / "p"),
        ],
    )
    assert r.exit_code == 0, r.output
    csv = pd.read_csv(tmp_path / "p" / "alpha-rauc_all.csv")
    assert csv["alpha"].tolist() == [0.1, 0.9] and csv["s-x"].tolist() == [0.8, 0.9]
    assert (tmp_path / "p" / "alpha-rauc_all.png").exists()
    md = (tmp_path / "s.md").read_text()
    assert "| 0.1 | 0.800 |" in md and "| 0.9 | 3 |" in md and "RAUC-ALL against alpha" in md


def test_sweep_tables_give_the_spread_over_runs_from_each_experiments_commit(tmp_path, monkeypatch):
    """With several training runs, each cell is the mean ± sd over runs, the sd computed from
    the experiment's own metrics/per_ordering.csv (read from its git commit)."""
    import importlib.util
    import subprocess

    from helpers import ROOT

    spec = importlib.util.spec_from_file_location("collect", ROOT / "scripts" / "collect_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    repo = tmp_path / "repo"
    (repo / "metrics").mkdir(parents=True)
    rows = [
        {"subject": "s-x", "run": r, "split": sp, "method": m, "rauc_all": v, "fault_types_5pct": f}
        for r, v, f in ((0, 0.80, 3), (1, 0.84, 5))
        for sp, m in (("test", "ncip"), ("adv", "ncip"), ("test", "msp"))
    ]
    pd.DataFrame(rows).to_csv(repo / "metrics" / "per_ordering.csv", index=False)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(git + ["add", "-A"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-qm", "exp"], cwd=repo, check=True)
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.chdir(repo)
    spread = mod.run_spread(rev)
    assert spread["rauc_all"].tolist() == [0.80, 0.84]
    assert mod.run_spread("0" * 40) is None
    assert mod.cell(0.82, spread["rauc_all"].std(), "{:.3f}", "{:.3f}") == "0.820 ± 0.028"
    assert mod.cell(4.0, 1.41421, "{:.0f}", "{:.1f}") == "4 ± 1.4"
    assert mod.cell(0.82, None, "{:.3f}", "{:.3f}") == "0.820"


def test_split_sizes():
    s = Split(np.zeros((10, 1, 2, 2), np.uint8), np.arange(10) % 2, np.arange(10).astype(str))
    pool, ev = split_pool(s, RetrainConfig(pool_fraction=0.4))
    assert len(pool) == 4 and len(ev) == 6
