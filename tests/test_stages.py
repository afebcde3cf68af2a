"""Stage scripts: bad input exits nonzero with a clear message and leaves outputs untouched."""

import importlib.util
import json
import subprocess
import sys

import pytest
from helpers import ROOT
from typer.testing import CliRunner

runner = CliRunner()


def stage(name):
    spec = importlib.util.spec_from_file_location(f"stage_{name}", ROOT / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def invoke(name, *args):
    return runner.invoke(stage(name), [str(a) for a in args])


@pytest.fixture
def existing(tmp_path):
    p = tmp_path / "out.json"
    p.write_text('{"previous": true}')
    return p


@pytest.mark.parametrize(
    "k,alpha,match",
    [
        (0, 0.9, "k must be an integer of at least 2"),
        (-2, 0.9, "k must be an integer of at least 2"),
        (1, 0.9, "k must be an integer of at least 2"),
        (5, 0.0, "alpha"),
        (5, 1.5, "alpha"),
    ],
)
def test_select_rejects_bad_k_and_alpha_and_keeps_outputs(tiny_run, existing, k, alpha, match):
    r = invoke(
        "select_checkpoints",
        "--checkpoints",
        tiny_run["dir"] / "models",
        "--k",
        k,
        "--alpha",
        alpha,
        "--out",
        existing,
        "--plot-out",
        existing.with_suffix(".csv"),
    )
    assert r.exit_code == 2
    assert match in r.output
    assert existing.read_text() == '{"previous": true}'
    assert not existing.with_suffix(".csv").exists()


def test_select_writes_the_plan(tiny_run, tmp_path):
    out = tmp_path / "sel.json"
    r = invoke(
        "select_checkpoints",
        "--checkpoints",
        tiny_run["dir"] / "models",
        "--k",
        3,
        "--alpha",
        0.5,
        "--out",
        out,
        "--plot-out",
        tmp_path / "s.csv",
    )
    assert r.exit_code == 0, r.output
    plan = json.loads(out.read_text())
    assert plan["pool_epochs"] == [4, 5, 6] and plan["selected_epochs"] == [4, 5, 6]
    assert plan["subject"] == "digits-lenet5"


def test_select_warns_when_k_exceeds_the_pool(tiny_run, tmp_path):
    r = invoke(
        "select_checkpoints",
        "--checkpoints",
        tiny_run["dir"] / "models",
        "--k",
        50,
        "--alpha",
        0.9,
        "--out",
        tmp_path / "s.json",
        "--plot-out",
        tmp_path / "s.csv",
    )
    assert r.exit_code == 0 and "whole pool" in r.output


@pytest.mark.parametrize(
    "subject,match",
    [
        ("nope-lenet5", "unknown dataset 'nope'"),
        ("digits-lenet9", "unknown model 'lenet9'"),
        ("digits", "<dataset>-<model>"),
        ("digits-lenet5-extra", "unknown training variant"),
        ("imdb-lenet5", "text dataset"),
    ],
)
def test_bad_subjects_are_rejected(tmp_path, subject, match):
    r = invoke("prepare_data", "--subject", subject, "--out", tmp_path / "d")
    assert r.exit_code == 2 and match in r.output
    assert not (tmp_path / "d").exists()


def test_unknown_method_is_rejected_before_any_work(tiny_run, existing):
    d = tiny_run["dir"]
    params = existing.parent / "params.yaml"
    params.write_text("baselines: {methods: 'deepgini,magic'}\n")
    r = invoke(
        "score_baselines",
        "--subject",
        "digits-lenet5",
        "--data",
        d / "data",
        "--checkpoints",
        d / "models",
        "--params",
        params,
        "--out",
        existing,
        "--cost-out",
        existing.with_suffix(".cost"),
        "--seed",
        0,
        "--batch-size",
        256,
    )
    assert r.exit_code == 2 and "unknown method 'magic'" in r.output
    assert existing.read_text() == '{"previous": true}'


def test_training_rejects_bad_options_before_writing(tiny_run, tmp_path):
    d = tiny_run["dir"]
    r = invoke(
        "train_with_checkpoints",
        "--subject",
        "digits-lenet5",
        "--data",
        d / "data",
        "--out",
        tmp_path / "m",
        "--work",
        tmp_path / "w",
        "--history-out",
        tmp_path / "h.csv",
        "--optimizer",
        "rmsprop",
    )
    assert r.exit_code == 2 and "optimizer" in r.output
    assert not (tmp_path / "m").exists() and not (tmp_path / "w").exists()


def test_evaluate_names_missing_scores(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("subjects: [digits-lenet5]\nruns: [0]\n")
    (tmp_path / "scores").mkdir()
    r = invoke(
        "evaluate_rauc",
        "--params",
        params,
        "--scores",
        tmp_path / "scores",
        "--seed",
        0,
        "--budgets",
        "100",
        "--metrics-dir",
        tmp_path / "m",
        "--plots-dir",
        tmp_path / "p",
    )
    assert r.exit_code == 2 and "no score tables" in r.output
    assert not (tmp_path / "m").exists()


def test_stages_chain_on_the_tiny_run(tiny_run, tmp_path):
    d = tiny_run["dir"]
    sel, pred, scores = (
        tmp_path / "sel.json",
        tmp_path / "pred",
        tmp_path / "scores" / "s" / "run-0",
    )
    assert (
        invoke(
            "select_checkpoints",
            "--checkpoints",
            d / "models",
            "--k",
            3,
            "--alpha",
            0.9,
            "--out",
            sel,
            "--plot-out",
            tmp_path / "s.csv",
        ).exit_code
        == 0
    )
    r = invoke(
        "predict_probabilities", "--checkpoints", d / "models", "--data", d / "data", "--out", pred
    )
    assert r.exit_code == 0, r.output
    import pandas as pd

    plan = json.loads(sel.read_text())
    files = sorted(p.name for p in pred.glob("epoch-*.parquet"))
    assert files == [f"epoch-{e:03d}.parquet" for e in range(1, 7)]  # every checkpoint, once
    t = pd.read_parquet(pred / files[-1])
    assert {"subject", "epoch", "split", "sample_id", "label", "pred", "logit_9"} <= set(t.columns)
    assert set(t["split"]) == {"test", "val"}
    feats = pd.read_parquet(pred / "final-features.parquet")
    assert set(feats["split"]) == {"test", "train"} and "feat_83" in feats
    wanted = sorted(set(plan["selected_epochs"]) | set(plan["last_k_epochs"]))
    r = invoke(
        "score_ncip",
        "--predictions",
        pred,
        "--selection",
        sel,
        "--out",
        scores / "ncip.parquet",
        "--cost-out",
        scores / "ncip-cost.json",
    )
    assert r.exit_code == 0, r.output
    cost = json.loads((scores / "ncip-cost.json").read_text())
    assert cost["predicted_checkpoints"] == len(wanted) and cost["predict"] > 0
    # score-ncip reads Parquet and one record: it runs without importing PyTorch (or any
    # baseline's module), and computes the same table as in-process
    code = (
        "import runpy, sys\n"
        "sys.argv = ['score_ncip.py', '--predictions', sys.argv[1], '--selection', sys.argv[2],"
        " '--out', sys.argv[3], '--cost-out', sys.argv[4]]\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / 'stages' / 'score_ncip.py')!r}, run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
    )
    again = [str(pred), str(sel), str(tmp_path / "again.parquet"), str(tmp_path / "c.json")]
    r2 = subprocess.run([sys.executable, "-c", code, *again], capture_output=True, text=True)
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout.strip().splitlines()[-1] == "no torch"
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "again.parquet"), pd.read_parquet(scores / "ncip.parquet")
    )
    params = tmp_path / "params.yaml"
    params.write_text(
        "subjects: [digits-lenet5]\nruns: [0]\nbaselines:\n"
        "  methods: random,entropy,deepgini,msp,pcs\n  random: {repeats: 3}\n"
    )
    r = invoke(
        "score_baselines",
        "--subject",
        "digits-lenet5",
        "--data",
        d / "data",
        "--checkpoints",
        d / "models",
        "--out",
        scores / "baselines.parquet",
        "--cost-out",
        scores / "cost.json",
        "--params",
        params,
        "--seed",
        0,
        "--batch-size",
        256,
        "--predictions",
        pred,
    )
    assert r.exit_code == 0, r.output
    assert (
        len(
            pd.read_parquet(scores / "baselines.parquet")
            .query("method == 'random'")["repeat"]
            .unique()
        )
        == 3
    )
    r = invoke(
        "evaluate_rauc",
        "--params",
        params,
        "--scores",
        tmp_path / "scores",
        "--seed",
        0,
        "--budgets",
        "100,200",
        "--metrics-dir",
        tmp_path / "metrics",
        "--plots-dir",
        tmp_path / "plots",
    )
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "metrics" / "clean.json").read_text())
    for method in (
        "ncip",
        "tvd",
        "tvd+nc",
        "tvd+margin",
        "random",
        "entropy",
        "deepgini",
        "msp",
        "pcs",
    ):
        assert 0 < m["rauc_all"][method]["digits-lenet5"] <= 1
    assert m["rauc_all"]["deepgini"]["digits-lenet5"] > m["rauc_all"]["random"]["digits-lenet5"]
    assert "Table 3" in (tmp_path / "metrics" / "tables.md").read_text()
    assert (tmp_path / "plots" / "figures" / "fault_diversity-digits-lenet5.png").stat().st_size


@pytest.mark.parametrize(
    "text,match",
    [
        ("subjects: []\n", "lists no subjects"),
        ("subjects: [digits-lenet5]\nruns: [-1]\n", "runs"),
        ("subjects: [digits-lenet5]\nruns: []\n", "runs"),
        ("subjects: [digits-lenet9]\n", "unknown model"),
    ],
)
def test_evaluate_rejects_bad_study_parameters(tmp_path, text, match):
    params = tmp_path / "params.yaml"
    params.write_text(text)
    r = invoke(
        "evaluate_rauc",
        "--params",
        params,
        "--scores",
        tmp_path,
        "--seed",
        0,
        "--budgets",
        "100",
        "--metrics-dir",
        tmp_path / "m",
        "--plots-dir",
        tmp_path / "p",
    )
    assert r.exit_code == 2 and match in r.output
    assert not (tmp_path / "m").exists()


def test_stored_predictions_give_the_baselines_what_running_the_models_gives(tiny_run, tmp_path):
    """Every output a baseline reads from predict-probabilities equals running the models."""
    import numpy as np

    from ncip.study.data import load_split
    from ncip.study.predict import Predictions
    from ncip.study.scores import ScoringContext

    d = tiny_run["dir"]
    r = invoke(
        "predict_probabilities",
        "--checkpoints",
        d / "models",
        "--data",
        d / "data",
        "--out",
        tmp_path / "pred",
    )
    assert r.exit_code == 0, r.output
    splits = {"test": load_split(d / "data" / "test.npz")}
    kw = dict(
        subject="s",
        seed=0,
        checkpoint_dir=d / "models",
        eval_splits=splits,
        train=load_split(d / "data" / "train.npz"),
        labelled={"test": load_split(d / "data" / "val.npz")},
    )
    stored = ScoringContext(**kw, predictions=Predictions(tmp_path / "pred"))
    run = ScoringContext(**kw)
    for a, b in (
        (stored.final_logits("test"), run.final_logits("test")),
        (stored.final_features("test"), run.final_features("test")),
        (stored.outputs("train", None)[1], run.outputs("train", kw["train"].x)[1]),
    ):
        assert np.allclose(a, b, atol=1e-5)
    for key, x in (("eval:test", splits["test"].x), ("labelled:test", kw["labelled"]["test"].x)):
        a, b = stored.checkpoint_logits(key, x), run.checkpoint_logits(key, x)
        assert len(a) == len(b) == 6 and all(
            np.allclose(u, v, atol=1e-5) for u, v in zip(a, b, strict=True)
        )
    assert "final_model" not in stored._cache  # nothing was run


def test_selection_reads_heads_without_pytorch(tiny_run, tmp_path):
    """select-checkpoints reads headers and one float32 head through NumPy: PyTorch (2-3 s
    to import) is never loaded, and the head equals PyTorch's reading of it."""
    import subprocess
    import sys

    import numpy as np

    from ncip.core.checkpoints import list_checkpoints, read_head, read_safetensors

    code = (
        "import runpy, sys\n"
        "sys.argv = ['select_checkpoints.py', '--checkpoints', sys.argv[1], '--k', '3',"
        " '--alpha', '0.5', '--out', sys.argv[2], '--plot-out', sys.argv[3]]\n"
        "try:\n"
        f"    runpy.run_path({str(ROOT / 'stages' / 'select_checkpoints.py')!r},"
        " run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
    )
    models = tiny_run["dir"] / "models"
    args = [str(models), str(tmp_path / "sel.json"), str(tmp_path / "s.csv")]
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "no torch"
    assert json.loads((tmp_path / "sel.json").read_text())["selected_epochs"] == [4, 5, 6]
    info = list_checkpoints(models)[-1]
    key = info.meta.head_key
    by_torch = read_safetensors(info.path, [key])[key].double().numpy()
    assert np.array_equal(read_head(info.path), by_torch)
