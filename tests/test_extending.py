"""docs/internals.md's recipes "Adding a baseline" and "Adding a dataset", followed: a throwaway
method and a throwaway dataset, registered the way the recipes say, reach metrics/report.md through
the stages (run in-process, with the paths and options dvc.yaml gives them)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_digits
from test_stages import invoke

from ncip.core.scores import deepgini
from ncip.study import data as data_module
from ncip.study.data import RawDataset, Split, register_dataset
from ncip.study.scores import registry
from ncip.study.scores.registry import ScoringContext, register_method


@pytest.fixture
def throwaways():
    """Register the recipe's method and dataset for one test, then remove them."""

    @register_method("confdrop", display="ConfDrop", options={"power": 1.0})
    def _confdrop(ctx: ScoringContext, split: str) -> np.ndarray:
        """DeepGini raised to a power (larger = tested earlier)."""
        return deepgini(ctx.final_logits(split)) ** float(ctx.option("confdrop", "power"))

    @register_dataset("tinydigits", kind="image")
    def _tinydigits(raw_root) -> RawDataset:
        d = load_digits()
        x = np.round(d.images * (255 / 16)).astype(np.uint8)[:, None]
        ids = np.array([f"tinydigits:row:{i:04d}" for i in range(len(x))])
        full = Split(x, d.target.astype(np.int64), ids)
        return RawDataset(
            "image",
            [str(c) for c in range(10)],
            full.subset(np.arange(0, 1200)),
            full.subset(np.arange(1200, 1600)),
        )

    yield
    registry._METHODS.pop("confdrop")
    data_module._DATASETS.pop("tinydigits")
    data_module._KIND.pop("tinydigits")


def test_a_registered_method_and_dataset_reach_the_report(throwaways, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s, r = "tinydigits-lenet1", 0
    params = tmp_path / "params.yaml"
    params.write_text(
        f"subjects: [{s}]\nruns: [0]\nk: 3\nalpha: 0.9\nseed: 0\ntrain: {{epochs: 5}}\n"
        "baselines:\n  methods: random,deepgini,confdrop\n  random: {repeats: 2}\n"
        "  confdrop: {power: 3}\n"
    )
    steps = [
        ("prepare_data", "--subject", s, "--out", f"data/prepared/{s}", "--params", params),
        (
            "train_with_checkpoints",
            "--subject",
            s,
            "--run",
            r,
            "--data",
            f"data/prepared/{s}",
            "--out",
            f"models/{s}/run-{r}",
            "--work",
            f"models/.resume/{s}/run-{r}",
            "--history-out",
            f"plots/training/{s}-run-{r}.csv",
            "--epochs",
            5,
            "--params",
            params,
        ),
        (
            "select_checkpoints",
            "--checkpoints",
            f"models/{s}/run-{r}",
            "--k",
            3,
            "--out",
            f"selection/{s}/run-{r}.json",
            "--plot-out",
            f"plots/sigma_cos/{s}-run-{r}.csv",
        ),
        (
            "predict_probabilities",
            "--checkpoints",
            f"models/{s}/run-{r}",
            "--data",
            f"data/prepared/{s}",
            "--out",
            f"predictions/{s}/run-{r}",
        ),
        (
            "score_ncip",
            "--predictions",
            f"predictions/{s}/run-{r}",
            "--selection",
            f"selection/{s}/run-{r}.json",
            "--out",
            f"scores/{s}/run-{r}/ncip.parquet",
            "--cost-out",
            f"scores/{s}/run-{r}/ncip-cost.json",
        ),
        (
            "score_baselines",
            "--subject",
            s,
            "--run",
            r,
            "--data",
            f"data/prepared/{s}",
            "--checkpoints",
            f"models/{s}/run-{r}",
            "--params",
            params,
            "--seed",
            0,
            "--predictions",
            f"predictions/{s}/run-{r}",
            "--out",
            f"scores/{s}/run-{r}/baselines.parquet",
            "--cost-out",
            f"scores/{s}/run-{r}/baselines-cost.json",
            "--batch-size",
            256,
        ),
        (
            "evaluate_rauc",
            "--params",
            params,
            "--scores",
            "scores",
            "--seed",
            0,
            "--budgets",
            "100,500",
            "--metrics-dir",
            "metrics",
            "--plots-dir",
            "plots",
        ),
        (
            "report",
            "--params",
            params,
            "--metrics-dir",
            "metrics",
            "--scores",
            "scores",
            "--plots-dir",
            "plots",
            "--out",
            "metrics/report.md",
        ),
    ]
    for name, *args in steps:
        res = invoke(name, *args)
        assert res.exit_code == 0, f"{name}: {res.output}"
    clean = json.loads((tmp_path / "metrics" / "clean.json").read_text())
    assert s in clean["rauc_all"]["confdrop"]
    # the option from params.yaml reached the method: DeepGini cubed orders like DeepGini
    assert clean["rauc_all"]["confdrop"][s] == pytest.approx(clean["rauc_all"]["deepgini"][s])
    report = (tmp_path / "metrics" / "report.md").read_text()
    table3 = report[report.index("(paper Table 3)") : report.index("(paper Table 4)")]
    assert "| ConfDrop |" in table3 and f"{s} (ours)" in table3
    assert "| ConfDrop |" in (tmp_path / "metrics" / "tables.md").read_text()


def test_every_registered_baseline_appears_in_the_report_tables():
    from ncip.study.evaluation import baselines, display
    from ncip.study.scores import list_methods

    assert set(baselines()) == set(list_methods())
    assert {display(m) for m in list_methods()} >= {"RS", "LSA", "DeepGini", "SETS", "TDPR"}


def test_options_are_checked_against_what_a_method_registers():
    from ncip.study.scores.registry import baseline_config

    methods, options = baseline_config({"methods": "nns,random", "nns": {"k": "5"}})
    assert methods == ["nns", "random"] and options["nns"] == {"k": 5, "lambda": 0.5}
    with pytest.raises(ValueError, match="'nns' has no option 'kk'; its options: k, lambda"):
        baseline_config({"methods": "nns", "nns": {"kk": 5}})
    with pytest.raises(ValueError, match="unknown method 'magic'"):
        baseline_config({"methods": "magic"})


def test_run_baselines_books_a_methods_own_preparation_apart_from_scoring(tiny_run):
    """scoring.run_baselines: a method's "prepare[<split>]" timing is preparation, taken out
    of that split's scoring time; the table has one row per input and the true labels."""
    import time

    from ncip.study.scoring import run_baselines

    @register_method("slowprep", display="SlowPrep")
    def _slowprep(ctx: ScoringContext, split: str) -> np.ndarray:
        with ctx.timed("slowprep", f"prepare[{split}]"):
            time.sleep(0.2)
        return deepgini(ctx.final_logits(split))

    try:
        s = tiny_run["splits"]
        ctx = ScoringContext(
            subject="digits-lenet5",
            seed=0,
            checkpoint_dir=tiny_run["dir"] / "models",
            eval_splits={"test": s["test"]},
        )
        table, cost = run_baselines(ctx, ["deepgini", "slowprep"], 0, {"test": s["test"]})
    finally:
        registry._METHODS.pop("slowprep")
    assert cost["slowprep"]["prepare[test]"] >= 0.2
    assert cost["slowprep"]["score"]["test"] < 0.2
    assert cost["seconds"] >= 0.2 and "final_model_inference" in cost
    assert len(table) == 2 * len(s["test"]) and (table["label"] >= 0).all()


def test_method_order_follows_the_registering_modules_whatever_was_imported_first():
    """list_methods() orders the built-in methods by the file that registers them (each
    method's own module, not a stack frame), whichever baseline module a process imports first."""
    import subprocess
    import sys

    code = (
        "import {first}\n"
        "from ncip.study.scores import list_methods\n"
        "from ncip.study.scores.registry import _MODULE\n"
        "names = list_methods(None)\n"
        "print(','.join(names)); print(','.join(_MODULE[n] for n in names))\n"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code.format(first=first)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for first in ("ncip", "ncip.study.scores.tdpr", "ncip.study.scores.uncertainty")
    ]
    assert outs[0] == outs[1] == outs[2]
    names, modules = (line.split(",") for line in outs[0])
    assert modules == sorted(modules) and len(set(modules)) >= 8
    assert {"ncip", "tvd", "deepgini", "effimap"} <= set(names)
    assert all(m.startswith("ncip.study.scores.") for m in modules)
