"""End to end (issue 40): UCI tables through every stage of `dvc repro`, a subject beside its
longer-trained variant (`-e<N>`), two runs: the report opens with the pre-registered primary
comparison over data sets, shows the longer-training section, and the paired intervals carry
the run-level t-interval."""

import json

import pandas as pd
import pytest
import yaml
from helpers import ROOT, copy_project, dvc_env, init_dvc_repo, run_ok

from ncip.study.datasets import uci

HAVE = all(
    any(
        (d / p / "data").is_dir()
        for d in (ROOT / "data" / "raw" / "r-cran", uci.user_cache(), uci.SYSTEM_R)
    )  # fmt: skip
    for p in ("mlbench", "kernlab")
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE, reason="r-cran data not here (scripts/setup.sh downloads it)"),
]


def test_tables_and_a_longer_variant_run_through_every_stage(tmp_path):

    d = tmp_path
    copy_project(d)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params.update(k=3, subjects=["vehicle-mlp", "vehicle-mlp-e8", "vowel-mlp"], runs=[0, 1])
    params["train"]["epochs"] = 5
    params["baselines"].update(random={"repeats": 2}, dropout={"samples": 10})
    params["analysis"].update(weak_steps="2", tsne_points=100)
    params["attack"]["attacks"] = "fgsm"
    params["retrain"]["runs"] = []
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = dvc_env()
    dvc = init_dvc_repo(d, env)
    run_ok(dvc + ["repro"], d, env)
    hist = pd.read_csv(d / "records" / "training" / "vehicle-mlp-e8-run-1.csv")
    assert hist["epoch"].max() == 8  # the variant's own length
    report = (d / "metrics" / "report.md").read_text()
    assert report.index("## Primary comparisons") < report.index("## Summary")
    # two data sets: the random-effects analysis needs 3, the median rule 6
    assert "**NCIP - Entropy over 2 data sets: no verdict: fewer than 3 data sets.**" in report
    assert "**Ens-Entropy - Entropy over 2 data sets: no verdict" in report
    assert "- NCIP - Entropy: median" in report and "no verdict: too few data sets" in report
    assert "## Checkpoint scores against Entropy and NCIP (secondary)" in report
    assert "| Flips | trajectory |" in report and (d / "plots" / "report" / "forest.png").is_file()
    primary = pd.read_csv(d / "metrics" / "primary.csv")
    assert set(zip(primary["method"], primary["against"], strict=True)) == {
        ("ncip", "entropy"),
        ("ensemble-entropy", "entropy"),
    }
    assert len(primary) == 6 and (primary["se"] > 0).all()  # 3 subjects x 2 questions
    assert "## Longer training: NCIP's gain over Entropy" in report
    assert "| vehicle-mlp | 5 |" in report and "a win or loss also needs the run-level" in report
    paired = pd.read_csv(d / "metrics" / "paired.csv")
    assert {"t_lo", "t_hi"} <= set(paired.columns)
    sig = json.loads((d / "metrics" / "significance.json").read_text())
    assert [q["datasets"] for q in sig["primary"]] == [2, 2]
    assert sig["subjects"] == ["vehicle-mlp", "vowel-mlp"]
