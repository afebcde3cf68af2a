"""The Hugging Face examples users copy (issue 48 item 4), run as their docstrings say at a tiny
size: a text classifier trained with the Trainer and ranked from a CSV of raw texts, and a
causal language model ranked from its prompts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ncip.study.datasets import debian

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "rank-your-model"
pytest.importorskip("transformers")


def _run(*args, cwd: Path) -> str:
    r = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


@pytest.mark.skipif(not (debian.WORDNET_DIR / "data.noun").is_file(), reason="no wordnet-base")
def test_the_hf_text_classifier_example_ranks_its_raw_texts(tmp_path):
    _run(EXAMPLES / "train_hf_text.py", tmp_path, 3, 60, cwd=EXAMPLES)
    assert len(list((tmp_path / "hf").glob("checkpoint-*"))) == 3
    said = _run(
        "-m",
        "ncip",
        "rank",
        tmp_path / "hf",
        "--inputs",
        tmp_path / "test.csv",
        "--out",
        tmp_path / "r.csv",
        "--k",
        2,
        "--quiet",
        cwd=tmp_path,
    )
    table = pd.read_csv(tmp_path / "r.csv")
    assert len(table) == 48 and table["ncip"].is_monotonic_decreasing
    assert "attention mask" in " ".join(said.split())
    assert "RAUC-ALL" in said  # the labels, given by name, were read through id2label


@pytest.mark.skipif(not (debian.FORTUNES_DIR / "people").is_file(), reason="no fortunes")
def test_the_causal_lm_example_ranks_its_prompts(tmp_path):
    _run(EXAMPLES / "train_hf_lm.py", tmp_path, 3, 300, cwd=EXAMPLES)
    prompts = [json.loads(x) for x in (tmp_path / "prompts.jsonl").read_text().splitlines()]
    assert prompts and all({"id", "prompt", "reference"} <= set(p) for p in prompts)
    said = _run(
        "-m",
        "ncip",
        "rank",
        tmp_path / "hf",
        "--prompts",
        tmp_path / "prompts.jsonl",
        "--out",
        tmp_path / "r.csv",
        "--k",
        2,
        "--quiet",
        cwd=tmp_path,
    )
    table = pd.read_csv(tmp_path / "r.csv", keep_default_na=False)
    assert len(table) == len(prompts) and {"continuation", "bleu2"} <= set(table.columns)
    assert "RAUC-ALL" in said
