"""End to end: the language-model study (`make lm`, issue 38) at a small size through DVC, as
`ncip preset lm` runs it: `dvc exp run -S lm.models=[tiny-gpt2] lm-evaluate` runs the lm-*
stages and none of the classifiers'; a new K re-runs only what depends on it."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from helpers import copy_project, dvc_env, init_dvc_repo, run_ok

from ncip.study.datasets import debian
from ncip.study.lm.corpus import PYTHON_DOC
from ncip.study.presets import set_args

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (debian.WORDNET_DIR / "data.noun").is_file()
        or not (PYTHON_DOC / "index.html").is_file(),
        reason="wordnet-base or python3-doc not installed (scripts/setup.sh installs them)",
    ),
]


def test_the_language_model_study_runs_as_its_own_experiment(tmp_path):
    d = tmp_path
    copy_project(d)
    params = yaml.safe_load((d / "params.yaml").read_text())
    assert params["lm"]["models"] == []  # the default study runs no language-model stage
    params["lm"].update(k=2, prompts=40)
    params["lm"]["pretrain"]["steps"] = 40
    params["lm"]["finetune"].update(epochs=4, paragraphs=60)
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = dvc_env()
    dvc = init_dvc_repo(d, env)
    args = set_args("lm", runs=2)  # what `make lm` runs, with two seeds
    assert args[-1] == "lm-evaluate"
    out = run_ok(dvc + ["exp", "run", *args], d, env)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {
        "lm-data@tiny-gpt2",
        "lm-pretrain@tiny-gpt2",
        "lm-finetune@tiny-gpt2-0",
        "lm-finetune@tiny-gpt2-1",
        "lm-score@tiny-gpt2-0",
        "lm-score@tiny-gpt2-1",
        "lm-evaluate@tiny-gpt2",
    }
    run_dir = d / "models" / "lm" / "tiny-gpt2" / "run-1"
    folders = sorted(run_dir.glob("checkpoint-*"))
    assert len(folders) == 4 and all((f / "tokenizer.json").is_file() for f in folders)
    t = pd.read_parquet(d / "scores" / "lm" / "tiny-gpt2" / "run-0.parquet")
    assert len(t) == 40 and {"ncip", "ncip_lastk", "ncip_random", "entropy", "bleu2"} <= set(t)
    md = (d / "metrics" / "lm" / "tiny-gpt2.md").read_text()
    assert "(primary, fixed before any ranking)" in md and "Random (expected)" in md
    m = json.loads((d / "metrics" / "lm" / "tiny-gpt2.json").read_text())
    assert m["median"]["failure_rate"] >= 0.5 and set(m) == {"median", "0.1", "prr"}
    assert "Prediction-rejection ratio" in md and "Are the confident continuations" in md
    per_prompt = pd.read_csv(d / "metrics" / "lm" / "tiny-gpt2-prompts.csv")
    assert len(per_prompt) == 80 and sorted(set(per_prompt["run"])) == [0, 1]
    assert {"prompt", "reference", "continuation", "bleu2", "distinct2", "fails_median"} <= set(
        per_prompt
    )
    shown = run_ok(dvc + ["metrics", "show"], d, env)
    assert "metrics/lm/tiny-gpt2.json" in shown
    # `ncip rank --prompts` on the study's own Trainer run, as a user would
    r = subprocess.run(
        [sys.executable, "-m", "ncip", "rank", str(run_dir), "--prompts",
         str(d / "data" / "lm" / "tiny-gpt2" / "prompts.jsonl"), "--out", str(d / "r.csv"),
         "--k", "2", "--quiet"],
        capture_output=True, text=True, env=env, cwd=d,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # K changes only what depends on it
    out = run_ok(dvc + ["exp", "run", *args[:-1], "-S", "lm.k=3", "lm-evaluate"], d, env)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"lm-score@tiny-gpt2-0", "lm-score@tiny-gpt2-1", "lm-evaluate@tiny-gpt2"}
