"""End to end: `dvc repro` on a tiny config, then `dvc exp run -S k=...` and `dvc metrics diff`."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import copy_plot_templates, copy_project, dvc_env

pytestmark = pytest.mark.slow


def run(cmd, cwd, env):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    copy_project(d)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params.update(k=3, subjects=["digits-lenet5"], runs=[0])
    params["train"]["epochs"] = 6
    params["baselines"].update(random={"repeats": 2}, dropout={"samples": 20})
    params["attack"]["cw_steps"] = 10
    params["analysis"].update(weak_steps="2,4", tsne_points=200)
    params["retrain"]["seeds"] = 1
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = dvc_env()
    dvc = [sys.executable, "-m", "dvc"]
    run(["git", "init", "-q"], d, env)
    run(dvc + ["init", "-q"], d, env)
    copy_plot_templates(d)
    run(dvc + ["config", "core.autostage", "true"], d, env)
    run(["git", "add", "-A"], d, env)
    run(["git", "commit", "-qm", "init"], d, env)
    out = run(dvc + ["repro"], d, {**env, "NCIP_RECORD_READS": str(d.parent / "reads.jsonl")})
    run(["git", "add", "-A"], d, env)
    run(["git", "commit", "-qm", "repro"], d, env)
    return d, env, dvc, out


def test_repro_runs_every_stage_and_writes_metrics(repo):
    d, _, _, out = repo
    for st in (
        "prepare-data",
        "train-with-checkpoints",
        "generate-adversarial",
        "select-checkpoints",
        "predict-probabilities",
        "score-ncip",
        "score-baselines",
        "evaluate-rauc",
        "analyze-checkpoints",
        "retrain-ncip",
        "retrain-baselines",
        "retrain-controls",
        "publish-records",
        "report",
    ):
        assert f"Running stage '{st}" in out
    for name in ("clean.json", "adversarial.json"):
        m = json.loads((d / "metrics" / name).read_text())
        assert set(m["rauc_all"]) >= {
            "ncip",
            "tvd",
            "tvd+nc",
            "tvd+margin",
            "random",
            "lsa",
            "dsa",
            "entropy",
            "deepgini",
            "msp",
            "pcs",
            "dropout",
            "effimap",
            "nns",
            "tdpr",
            "sets",
        }
    report = (d / "metrics" / "report.md").read_text()
    for table in ("Table 3", "Table 4", "Table 5", "Table 6", "Table 7", "Table 8", "Table 9"):
        assert table in report
    for part in ("Control: nothing added", "Control: random", "## Tied scores", "attainable"):
        assert part in report
    per_order = (d / "metrics" / "per_ordering.csv").read_text().splitlines()[0]
    assert per_order.endswith("tied_share,largest_tie")
    # the heavy stages' records reach git-tracked files through publish-records, unchanged
    for rec, pub in (
        ("records/training/digits-lenet5-run-0.csv", "plots/training/digits-lenet5-run-0.csv"),
        ("records/attacks/digits-lenet5-run-0.json", "metrics/attacks/digits-lenet5-run-0.json"),
    ):
        assert (d / rec).read_bytes() == (d / pub).read_bytes()
    # retraining: one record per group of arms, merged into one per subject-run
    groups = sorted(
        p.stem for p in (d / "records" / "retrain" / "digits-lenet5-run-0").glob("*.json")
    )
    assert groups == [
        f"{g}-{r}" for g in ("baselines", "controls", "ncip") for r in ("selected", "union")
    ]
    merged = json.loads((d / "metrics" / "retrain" / "digits-lenet5-run-0.json").read_text())
    assert {"control:none", "control:random", "ncip", "deepgini"} <= set(merged["methods"])
    assert merged["methods"]["control:none"]["vs_none"] == 0.0
    assert set(merged["recipes"]) == {"union", "selected"}
    assert merged["recipes"]["union"]["methods"] == merged["methods"]
    assert "ncip" in merged["recipes"]["selected"]["methods"]
    assert (d / "plots" / "analysis" / "digits-lenet5-run-0" / "tsne.png").exists()
    assert len(list((d / "models" / "digits-lenet5" / "run-0").glob("*.safetensors"))) == 6


def test_every_file_a_stage_reads_is_a_declared_dependency(repo):
    """Each stage recorded the files it opened for reading (NCIP_RECORD_READS); every one must
    be a dependency DVC knows of (or the stage's own output, e.g. resume state)."""
    import shlex

    from dvc.repo import Repo

    d = repo[0]
    records = [json.loads(line) for line in (d.parent / "reads.jsonl").read_text().splitlines()]
    with Repo(str(d)) as r:
        stages = {tuple(shlex.split(st.cmd)[1:]): st for st in r.index.stages}
    gaps, matched = [], 0
    for rec in records:
        st = stages.get(tuple(rec["argv"]))
        assert st is not None, f"no stage runs {rec['argv']}"
        matched += 1
        declared = [x.def_path for x in st.deps] + [x.def_path for x in st.outs]
        for f in rec["reads"]:
            if not any(f == p or f.startswith(p.rstrip("/") + "/") for p in declared):
                gaps.append(f"{st.addressing}: {f}")
    assert matched >= 11 and any(rec["reads"] for rec in records)
    assert not gaps, "files read but not declared in dvc.yaml:\n" + "\n".join(gaps)


def test_editing_the_tool_leaves_every_study_stage_up_to_date(repo):
    """The layers at work: a change to any tool-only module re-runs no stage of the study."""
    d, env, dvc, _ = repo
    tool = sorted((d / "src" / "ncip" / "tool").glob("*.py"))
    assert len(tool) >= 8
    saved = {f: f.read_text() for f in tool}
    try:
        for f in tool:
            f.write_text(saved[f] + "\n# a tool-only change\n")
        out = run(dvc + ["status"], d, env)
        assert "up to date" in out, out
        (d / "src" / "ncip" / "core" / "collapse.py").write_text(
            (d / "src" / "ncip" / "core" / "collapse.py").read_text() + "\n# a core change\n"
        )
        out = run(dvc + ["status"], d, env)
        assert "select-checkpoints@digits-lenet5-0" in out  # the check can fail
    finally:
        for f, text in saved.items():
            f.write_text(text)
        core = d / "src" / "ncip" / "core" / "collapse.py"
        core.write_text(core.read_text().replace("\n# a core change\n", ""))
    assert "up to date" in run(dvc + ["status"], d, env)


def test_stage_commands_run_the_project_interpreter_without_it_on_the_path(tmp_path):
    """`.venv/bin/dvc repro` from a shell whose PATH lacks the venv runs the stages with the
    project's interpreter (scripts/py), not whatever `python` the shell finds."""
    root = Path(__file__).resolve().parents[1]
    venv = root / ".venv"
    if not (venv / "bin" / "dvc").exists():
        pytest.skip("needs the project's .venv (make test creates it)")
    d = tmp_path / "p"
    (d / "scripts").mkdir(parents=True)
    (d / "scripts" / "py").write_bytes((root / "scripts" / "py").read_bytes())
    (d / "scripts" / "py").chmod(0o755)
    (d / ".venv").symlink_to(venv)
    (d / "dvc.yaml").write_text(
        'stages:\n  which:\n    cmd: scripts/py -c "import sys, pandas; '
        "open('out.txt', 'w').write(sys.prefix)\"\n    outs:\n      - out.txt\n"
    )
    env = {**dvc_env(), "PATH": "/usr/bin:/bin"}
    run(["git", "init", "-q"], d, env)
    run([str(venv / "bin" / "dvc"), "init", "-q"], d, env)
    run([str(venv / "bin" / "dvc"), "repro"], d, env)
    assert Path((d / "out.txt").read_text()).resolve() == venv.resolve()


def test_exp_run_k_reruns_selection_onwards_but_not_training(repo):
    d, env, dvc, _ = repo
    ckpts = sorted((d / "models" / "digits-lenet5" / "run-0").glob("*.safetensors"))
    before = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in ckpts]
    out = run(dvc + ["exp", "run", "-S", "k=4"], d, env)
    assert "Running stage 'select-checkpoints@digits-lenet5-0'" in out
    assert "Running stage 'score-ncip@digits-lenet5-0'" in out
    assert "Running stage 'evaluate-rauc'" in out
    assert "Running stage 'train-with-checkpoints" not in out
    assert "Running stage 'generate-adversarial" not in out
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in ckpts] == before
    assert "Running stage 'score-baselines" not in out
    # of the retraining arms, only NCIP's re-run: the baselines' and the controls' stay
    assert "Running stage 'retrain-ncip@digits-lenet5-0-union'" in out
    assert "Running stage 'retrain-ncip@digits-lenet5-0-selected'" in out
    assert "Running stage 'retrain-baselines" not in out
    assert "Running stage 'retrain-controls" not in out
    sel = json.loads((d / "selection" / "digits-lenet5" / "run-0.json").read_text())
    assert sel["k"] == 4 and len(sel["selected_epochs"]) == 4
    diff = run(dvc + ["metrics", "diff", "--json"], d, env)
    changed = json.loads(diff)["metrics/clean.json"]
    assert any(key.startswith("rauc_all.ncip") for key in changed)  # K moved NCIP's numbers
    assert not any(".deepgini." in key for key in changed)  # baselines did not move


def test_sweep_makes_sensitivity_figures_and_experiments_compare(repo):
    d, env, dvc, _ = repo
    run(["git", "add", "-A"], d, env)
    run(["git", "commit", "-qm", "after k experiment", "--allow-empty"], d, env)
    run(["bash", "scripts/sweep.sh"], d, {**env, "ALPHAS": "0.5", "KS": "2"})
    md = (d / "metrics" / "sensitivity.md").read_text()
    assert "RAUC-ALL against alpha" in md and "RAUC-ALL against k" in md
    for f in ("alpha-rauc_all", "k-rauc_all", "alpha-fault_types_5pct", "k-fault_types_5pct"):
        assert (d / "plots" / "sensitivity" / f"{f}.png").exists()
        assert not pd.read_csv(d / "plots" / "sensitivity" / f"{f}.csv").isna().any().any()
    assert "Sensitivity to alpha and K" in (d / "metrics" / "report.md").read_text()
    diff = json.loads(
        run(dvc + ["metrics", "diff", "sweep-alpha-0.5", "sweep-k-2", "--json"], d, env)
    )
    assert any(k.startswith("rauc_all.ncip") for k in diff["metrics/clean.json"])
    run(dvc + ["plots", "diff", "sweep-alpha-0.5", "sweep-k-2", "-o", str(d / "pdiff")], d, env)
    assert (d / "pdiff" / "index.html").stat().st_size > 10_000
