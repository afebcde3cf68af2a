"""Beyond one machine with DVC's own mechanisms, simulated with clones on this machine.

Each "machine" is a separate git clone with its own DVC cache; they share a bare git repository
(the git remote) and a local directory (the DVC remote). The pipeline is the study's own
dvc.yaml on sklearn's digits, trained for 3 epochs, two runs.

- Two machines: the second restores the first's training through the remote and run-cache
  without running it (`dvc repro --pull`), byte for byte.
- A sweep across machines: each queues and runs an experiment (`dvc exp run --queue`,
  `--run-all`) and `dvc exp push`es it; a third pulls both and shows and applies them.
- The SLURM launcher with submitit's local executor: one task per training item, each in its
  own worktree on a cache of its own, pushing its run; the head then restores every item.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import copy_plot_templates, copy_project, dvc_env

pytestmark = pytest.mark.slow
STAGE = "train-with-checkpoints"
ITEMS = [f"{STAGE}@digits-lenet1-{r}" for r in (0, 1)]


def sh(args, cwd: Path, timeout=600, stdout_only=False) -> str:
    env = {**dvc_env(), "OMP_NUM_THREADS": "1"}
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, args))}\n{r.stdout}\n{r.stderr}"
    return r.stdout if stdout_only else r.stdout + r.stderr


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    """A bare git repository holding the study (digits, 3 epochs, runs 0 and 1, k = 2) with
    a default DVC remote in a shared directory."""
    base = tmp_path_factory.mktemp("machines")
    seed = base / "seed"
    seed.mkdir()
    copy_project(seed)
    import yaml

    params = yaml.safe_load((seed / "params.yaml").read_text())
    params.update(subjects=["digits-lenet1"], runs=[0, 1], k=2)
    params["train"]["epochs"] = 3
    (seed / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(["git", "init", "-q", "-b", "main"], seed)
    sh(["dvc", "init", "-q"], seed)
    copy_plot_templates(seed)
    sh(["dvc", "remote", "add", "-d", "shared", str(base / "dvc-remote")], seed)
    sh(["git", "add", "-A"], seed)
    sh(["git", "commit", "-qm", "study"], seed)
    sh(["git", "clone", "-q", "--bare", str(seed), str(base / "origin.git")], base)
    return base


def clone(origin: Path, name: str) -> Path:
    sh(["git", "clone", "-q", str(origin / "origin.git"), name], origin)
    return origin / name


def files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_second_machine_restores_training_from_the_remote_without_running_it(origin):
    a = clone(origin, "machine-a")
    out = sh(["dvc", "repro", STAGE], a)
    assert all(f"Running stage '{i}'" in out for i in ITEMS)
    sh(["dvc", "push", "--run-cache"], a)

    b = clone(origin, "machine-b")
    out = sh(["dvc", "repro", "--pull", STAGE], b)
    assert "Running stage" not in out, out  # neither prepare-data nor training ran here
    assert all(f"Stage '{i}' is cached - skipping run" in out for i in ITEMS), out
    for r in (0, 1):
        ckpt = f"models/digits-lenet1/run-{r}"
        assert files(b / ckpt) == files(a / ckpt) and len(files(b / ckpt)) >= 3
        rec = f"records/training/digits-lenet1-run-{r}.csv"
        assert (b / rec).read_bytes() == (a / rec).read_bytes()
    # what depends on the restored training runs here as usual, from the restored files
    out = sh(["dvc", "repro", "select-checkpoints"], b)
    assert "Running stage 'select-checkpoints@digits-lenet1-0'" in out
    assert f"Running stage '{STAGE}" not in out


def test_a_sweep_across_machines_meets_in_the_git_and_dvc_remotes(origin):
    runs = {}
    for machine, k in (("sweep-a", 2), ("sweep-b", 3)):
        m = clone(origin, machine)
        sh(["dvc", "exp", "run", "--queue", "-n", f"k{k}", "-S", f"k={k}", "select-checkpoints"], m)
        sh(["dvc", "exp", "run", "--run-all"], m)
        sh(["dvc", "exp", "push", "origin", f"k{k}"], m)
        runs[k] = m

    head = clone(origin, "sweep-head")
    sh(["dvc", "exp", "pull", "origin", "k2", "k3"], head)
    shown = json.loads(sh(["dvc", "exp", "show", "--json"], head, stdout_only=True))
    names = {
        e["name"]: e
        for base in shown
        for e in (base.get("experiments") or [])
        for e in [e["revs"][0]]
        if e.get("name")
    }
    assert set(names) == {"k2", "k3"}
    for k in (2, 3):
        params = names[f"k{k}"]["data"]["params"]["params.yaml"]["data"]
        assert params["k"] == k
        # its lock and outputs: the outputs came with `dvc exp pull` through the DVC remote
        sh(["git", "checkout", names[f"k{k}"]["rev"], "--", "dvc.lock", "params.yaml"], head)
        sh(["dvc", "checkout", "select-checkpoints"], head)
        sel = json.loads((head / "selection/digits-lenet1/run-0.json").read_text())
        assert len(sel["selected_epochs"]) == k
        sh(["git", "checkout", "HEAD", "--", "."], head)
    diff = sh(["dvc", "params", "diff", "main", "k3"], head)
    assert "k" in diff and "3" in diff


def test_the_slurm_launcher_runs_each_item_in_a_worktree_and_the_head_restores_them(
    origin, monkeypatch
):
    from ncip.study.launch import launch

    # the tasks inherit this environment: one thread, as machine-a trained, so the bytes match
    # (a different thread count changes the CPU kernels' summation order)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    remote = origin / "launch-remote"
    head = clone(origin, "launch-head")
    sh(["dvc", "remote", "add", "--local", "-d", "cluster", str(remote)], head)
    results = launch(
        head,
        STAGE,
        origin / "launch-work",
        cluster="local",
        cache=origin / "task-cache",  # not the head's cache: the tasks are other machines
        timeout_min=10,
    )
    assert sorted(r.item for r in results) == ITEMS
    assert all(r.item in r.ran and r.pushed for r in results)
    assert not any((origin / "launch-work").glob(f"{STAGE}*"))  # worktrees removed
    assert (remote / "runs").is_dir()

    out = sh(["dvc", "repro", "--pull", STAGE], head)
    assert "Running stage" not in out, out
    assert all(f"Stage '{i}' is cached - skipping run" in out for i in ITEMS), out
    a = origin / "machine-a"  # the same seeds give the same bytes on every machine
    if a.exists():
        for r in (0, 1):
            ckpt = f"models/digits-lenet1/run-{r}"
            assert files(head / ckpt) == files(a / ckpt)


def test_the_launcher_refuses_uncommitted_changes_before_submitting(origin):
    from ncip.study.launch import LaunchError, launch

    head = clone(origin, "dirty-head")
    (head / "params.yaml").write_text((head / "params.yaml").read_text() + "\n# edited\n")
    with pytest.raises(LaunchError, match="commit first"):
        launch(head, STAGE, origin / "dirty-work", cluster="local")
    assert not (origin / "dirty-work").exists() or not any((origin / "dirty-work").iterdir())
    shutil.rmtree(head)
