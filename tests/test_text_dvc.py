"""End to end: a text subject (WordNet glosses, TextCNN) through every stage of `dvc repro`,
as `make text` runs them (issue 37): no adversarial set, EffiMAP recorded as not defined for
text, no retraining arms, the selection control and the training section in the report."""

import json

import pandas as pd
import pytest
import yaml
from helpers import copy_project, dvc_env, init_dvc_repo, run_ok

from ncip.study.datasets import debian

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (debian.WORDNET_DIR / "data.noun").is_file(),
        reason="wordnet-base not installed (scripts/setup.sh installs it)",
    ),
]


def test_a_text_subject_runs_through_every_stage(tmp_path):
    d = tmp_path
    copy_project(d)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params.update(k=3, subjects=["wordnet4-textcnn"], runs=[0])
    params["train"]["epochs"] = 4
    params["baselines"].update(random={"repeats": 2}, dropout={"samples": 20})
    params["analysis"].update(weak_steps="2", tsne_points=200)
    params["retrain"]["runs"] = []  # as `ncip preset text`
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = dvc_env()
    dvc = init_dvc_repo(d, env)
    out = run_ok(dvc + ["repro"], d, env)
    assert "Running stage 'retrain-" not in out  # no retraining stage at all
    models = d / "models" / "wordnet4-textcnn" / "run-0"
    assert (models / "tokenizer.json").read_text() == (
        d / "data" / "prepared" / "wordnet4-textcnn" / "tokenizer.json"
    ).read_text()
    assert not any((d / "adversarial" / "wordnet4-textcnn" / "run-0").iterdir())
    cost = json.loads(
        (d / "scores" / "wordnet4-textcnn" / "run-0" / "baselines-cost.json").read_text()
    )
    assert cost["effimap"] == {
        "skipped": "not defined for text: it needs image inputs (it transforms pixels)"
    }
    per = pd.read_csv(d / "metrics" / "per_ordering.csv")
    assert {"ncip", "tvd+margin", "tvd+random+margin"} <= set(per["method"])
    assert set(per["split"]) == {"test"}
    report = (d / "metrics" / "report.md").read_text()
    for heading in (
        "## Training: accuracy and sigma_cos",
        "## Selection control: Algorithm 1's checkpoints against the last K and random K",
        "## What could not run",
    ):
        assert heading in report
    assert "Not run: `retrain.runs` is empty" in report
    assert "stands in for the paper's agnews columns" in report
    assert "generate-adversarial writes none for the text subjects (wordnet4-textcnn)" in report
    assert (d / "plots" / "retrain.csv").read_text().strip() == "method,average"
