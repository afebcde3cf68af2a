"""Choosing the score that ranks a model's inputs from a labelled holdout, and handing the
ranking to labelling tools (issue 46): the rule on made-up candidates whose answer is known,
then `ncip rank --holdout` end to end with Label Studio tasks (checked against a schema written
from Label Studio's documented import format), the top-N CSV and the detection plot."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import save_drifting_epochs
from typer.testing import CliRunner

from ncip.cli import app
from ncip.tool.choose import CANDIDATES, DEFAULT, MIN_FAULTS, choice_paragraph, choose

runner = CliRunner()


def _faults(n=400, rate=0.2, seed=0):
    return np.random.default_rng(seed).random(n) < rate


def test_the_best_score_is_chosen():
    f = _faults()
    rng = np.random.default_rng(1)
    cands = {c: rng.random(len(f)) for c in CANDIDATES}  # random orders...
    cands["ncip"] = f + 0.3 * rng.random(len(f))  # ...but NCIP finds the faults first
    rec = choose(cands, f, seed=0, resamples=200)
    assert rec["chosen"] == rec["best"] == "ncip" and rec["faults"] == int(f.sum())
    rows = {r["method"]: r for r in rec["candidates"]}
    assert rows["ncip"]["rauc_all"] > 0.95 and rows["msp"]["hi"] < 0  # clearly worse
    assert "ranked by NCIP, chosen on the holdout" in choice_paragraph({"holdout": rec})


def test_a_simpler_score_that_ties_the_best_is_chosen():
    f = _faults()
    rng = np.random.default_rng(2)
    good = f + 0.6 * rng.random(len(f))
    cands = {c: rng.random(len(f)) for c in CANDIDATES}
    cands["aum"] = good + 1e-3 * rng.random(len(f))  # the best by a hair...
    cands["entropy"] = good  # ...and Entropy, simpler, level with it
    rec = choose(cands, f, seed=0, resamples=200)
    assert rec["best"] in ("aum", "entropy") and rec["chosen"] == "entropy"
    said = choice_paragraph({"holdout": rec})
    assert said.startswith("ranked by Entropy") and "NCIP would have given" in said


def test_too_few_holdout_faults_fall_back_to_the_default():
    f = np.zeros(300, dtype=bool)
    f[: MIN_FAULTS - 1] = True
    rec = choose({c: np.arange(300.0) for c in CANDIDATES}, f)
    assert rec["chosen"] is None
    said = choice_paragraph({"holdout": rec})
    assert f"fewer than {MIN_FAULTS}" in said and f"ranked by {DEFAULT.upper()}" in said


# ---------------------------------------------------------------------------------------------
# End to end

MLP = """
import torch.nn as nn


def build(num_classes=4):
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, num_classes))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A made-up run of 8 epochs and labelled pool and holdout sets on which the final model
    errs on its least confident inputs (so the scores have something to find)."""
    d = tmp_path_factory.mktemp("choose")
    (d / "mlp.py").write_text(MLP)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    save_drifting_epochs(net, d / "ck", 8)
    rng = np.random.default_rng(0)
    for name, n in (("pool", 300), ("hold", 400)):
        x = rng.standard_normal((n, 12)).astype("f4")
        with torch.no_grad():
            p = torch.softmax(net(torch.from_numpy(x)), 1).numpy()
        top2 = np.sort(p, axis=1)
        unsure = (top2[:, -1] - top2[:, -2]) < np.quantile(top2[:, -1] - top2[:, -2], 0.3)
        y = p.argmax(1)
        flip = unsure & (rng.random(n) < 0.7)
        y[flip] = (y[flip] + 1) % 4
        np.savez(d / f"{name}.npz", x=x, y=y, ids=np.array([f"{name}-{i}" for i in range(n)]))
    return d


def _rank(d, *extra):
    return runner.invoke(
        app,
        ["rank", str(d / "ck"), "--model", f"{d / 'mlp.py'}:build", "--inputs",
         str(d / "pool.npz"), "--k", "3", *map(str, extra)],
    )  # fmt: skip


# Label Studio's task import format (its "basic Label Studio JSON format" with predictions):
# what each task must hold, written from its documentation
def _check_label_studio(tasks: list) -> None:
    assert isinstance(tasks, list) and tasks
    for t in tasks:
        assert set(t) <= {"id", "data", "predictions", "annotations"}
        assert isinstance(t["data"], dict) and t["data"]
        for p in t["predictions"]:
            assert isinstance(p["model_version"], str) and isinstance(p["score"], float)
            for r in p["result"]:
                assert {"from_name", "to_name", "type", "value"} <= set(r)
                assert r["type"] == "choices"
                assert all(isinstance(c, str) for c in r["value"]["choices"])


def test_rank_with_a_holdout_chooses_says_why_and_hands_over(run, tmp_path):
    out = tmp_path / "r.csv"
    r = _rank(run, "--holdout", run / "hold.npz", "--out", out, "--label-studio",
              tmp_path / "ls.json", "--top", 25, "--plot", tmp_path / "curves.png")  # fmt: skip
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "holdout: 400 labelled inputs" in said and "chosen on the holdout" in said
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    method = sel["method"]
    h = method["holdout"]
    assert h["inputs"] == 400 and h["faults"] >= 20 and method["chosen"] == h["chosen"]
    assert {c["method"] for c in h["candidates"]} == set(CANDIDATES)
    table = pd.read_csv(out)
    assert (np.diff(table["score"]) <= 0).all()  # ordered by the chosen score
    tasks = json.loads((tmp_path / "ls.json").read_text())
    _check_label_studio(tasks)
    assert [t["data"]["sample_id"] for t in tasks] == table["sample_id"].tolist()
    assert tasks[0]["predictions"][0]["model_version"] == f"ncip-{method['chosen']}"
    scores = [t["predictions"][0]["score"] for t in tasks]
    assert scores == sorted(scores)  # Label Studio shows the lowest score first
    top = pd.read_csv(tmp_path / "r.top.csv")
    assert len(top) == 25 and top["sample_id"].tolist() == table["sample_id"].head(25).tolist()
    assert (tmp_path / "curves.png").stat().st_size > 1000
    # --method forces a score; without a holdout the default ranks, and the run says how to
    # choose
    r = _rank(run, "--method", "entropy", "--out", tmp_path / "e.csv")
    assert r.exit_code == 0 and "ranked by Entropy (--method entropy)" in r.output
    r = _rank(run, "--out", tmp_path / "d.csv")
    assert r.exit_code == 0
    assert "ranked by NCIP, the default" in " ".join(r.output.split())
    r = _rank(run, "--method", "magic", "--out", tmp_path / "m.csv")
    assert r.exit_code == 2 and "is not a score ncip computes" in r.output


def test_a_holdout_without_labels_or_of_another_shape_is_refused(run, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((30, 12), dtype="f4"))
    r = _rank(run, "--holdout", tmp_path / "x.npy", "--out", tmp_path / "r.csv")
    assert r.exit_code == 2 and "has no labels" in r.output
    np.savez(tmp_path / "w.npz", x=np.zeros((30, 7), dtype="f4"), y=np.zeros(30, dtype=int))
    r = _rank(run, "--holdout", tmp_path / "w.npz", "--out", tmp_path / "r.csv")
    assert r.exit_code == 2 and not (tmp_path / "r.csv").exists()
    r = runner.invoke(
        app,
        ["rank", str(run / "ck"), "--model", f"{run / 'mlp.py'}:build", "--inputs",
         str(tmp_path / "x.npy"), "--k", "3", "--plot", str(tmp_path / "p.png"), "--out",
         str(tmp_path / "r.csv")],
    )  # fmt: skip
    assert r.exit_code == 2 and "--plot draws the detection curves on labelled" in r.output
    assert not (tmp_path / "r.csv").exists()
