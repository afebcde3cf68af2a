"""Fan a matrix stage out over a cluster with DVC's own remote and run-cache (``ncip launch``).

DVC has no multi-machine runner, but it can restore any stage run it has seen from its
run-cache, and it can share that run-cache through a remote. So each item of a matrix stage
(``train-with-checkpoints@fmnist-lenet5-0``, ...) becomes one task of a SLURM job array
(`submitit`), in its own git worktree of the current commit on a shared DVC cache:

    dvc repro --pull <item>          # runs it (or restores it, if anyone ran it before)
    dvc push --run-cache             # if a default remote is set: the run and its outputs

When all tasks have finished, the head node runs ``dvc repro --pull``: every item that a task
ran is restored from the run-cache instead of run again, and the rest of the DAG runs as
usual. With ``cluster="local"`` the tasks are subprocesses of this machine (submitit's local
executor), which is how the tests run it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ncip.core.errors import NcipError

RESTORED = re.compile(r"Stage '([^']+)' is cached - skipping run")
RAN = re.compile(r"Running stage '([^']+)'")


class LaunchError(NcipError, ValueError):
    """A problem the user must fix before launching; the message says how."""


@dataclass
class TaskResult:
    item: str
    ran: list[str]  # stages this task ran
    restored: list[str]  # stages it restored from the run-cache
    pushed: bool
    seconds: float


def _env() -> dict:
    bindir = os.path.dirname(sys.executable)
    return {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
    }


def _run(args: list[str], cwd: Path) -> str:
    r = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"`{' '.join(args)}` failed in {cwd}: {tail[0]}")
    return r.stdout + r.stderr


def stage_items(repo: Path, stage: str) -> list[str]:
    """The items of matrix stage ``stage`` (``stage@...``), or the stage itself."""
    try:
        names = _run(["dvc", "stage", "list", "--name-only"], repo).split()
    except RuntimeError as e:
        raise LaunchError(f"DVC cannot list the stages of {repo} ({e})") from None
    items = [n for n in names if n == stage or n.startswith(f"{stage}@")]
    if not items:
        raise LaunchError(f"dvc.yaml has no stage {stage!r}; `dvc stage list` shows the names")
    return items


def _has_remote(repo: Path) -> bool:
    r = subprocess.run(
        ["dvc", "config", "core.remote"], cwd=repo, env=_env(), capture_output=True, text=True
    )
    return r.returncode == 0 and bool(r.stdout.strip())


def _check_committed(repo: Path) -> None:
    dirty = _run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "dvc.yaml", "params.yaml"]
        + [p for p in ("src", "stages") if (repo / p).exists()],
        repo,
    ).strip()
    if dirty:
        raise LaunchError(
            "dvc.yaml, params.yaml or the code has uncommitted changes; the tasks run the "
            "current commit in their own worktrees, so commit first (or `dvc exp run --queue`)"
        )


def prepare_worktrees(repo: Path, items: list[str], workdir: Path, cache: Path) -> list[Path]:
    """One detached worktree of HEAD per item under ``workdir``, each using ``cache`` and
    this repository's local DVC config (its remote, if set there)."""
    trees = []
    for item in items:
        tree = workdir / re.sub(r"[^A-Za-z0-9_.-]", "_", item)
        if tree.exists():
            _run(["git", "worktree", "remove", "--force", str(tree)], repo)
        _run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], repo)
        local = repo / ".dvc" / "config.local"
        if local.exists():
            shutil.copy(local, tree / ".dvc" / "config.local")
        _run(["dvc", "cache", "dir", "--local", str(cache)], tree)
        trees.append(tree)
    return trees


def run_item(tree: str, item: str) -> TaskResult:
    """The task: reproduce one item (restoring what the run-cache has), then share the run."""
    t0 = time.perf_counter()
    out = _run(["dvc", "repro", "--pull", item], Path(tree))
    pushed = _has_remote(Path(tree))
    if pushed:
        _run(["dvc", "push", "--run-cache"], Path(tree))
    return TaskResult(
        item, RAN.findall(out), RESTORED.findall(out), pushed, time.perf_counter() - t0
    )


def launch(
    repo: Path,
    stage: str,
    workdir: Path,
    cluster: str | None = None,
    cache: Path | None = None,
    keep: bool = False,
    **parameters,
) -> list[TaskResult]:
    """Run every item of ``stage`` as one task of a job array and wait for them.

    ``cluster``: "slurm", "local" or None (submitit picks Slurm when ``srun`` exists);
    ``cache``: the shared DVC cache (default: this repository's); ``parameters`` go to
    ``submitit.AutoExecutor.update_parameters`` (``timeout_min``, ``gpus_per_node``,
    ``slurm_partition``, ``slurm_array_parallelism``, ...). Worktrees are removed afterwards
    unless ``keep``. Raises LaunchError before submitting anything when the repository is not
    ready."""
    import submitit

    repo, workdir = Path(repo).resolve(), Path(workdir).resolve()
    if not (repo / "dvc.yaml").is_file():
        raise LaunchError(f"{repo} has no dvc.yaml; run `ncip launch` in the project's root")
    try:
        _check_committed(repo)
    except RuntimeError as e:
        raise LaunchError(f"{repo} is not a git repository with a commit ({e})") from None
    items = stage_items(repo, stage)
    cache = Path(cache).resolve() if cache else Path(_cache_dir(repo))
    workdir.mkdir(parents=True, exist_ok=True)
    trees = prepare_worktrees(repo, items, workdir, cache)
    executor = submitit.AutoExecutor(folder=workdir / "submitit" / "%j", cluster=cluster)
    executor.update_parameters(name=f"ncip-{stage}", **parameters)
    jobs = executor.map_array(run_item, [str(t) for t in trees], items)
    try:
        return [job.result() for job in jobs]
    finally:
        if not keep:
            for tree in trees:
                _run(["git", "worktree", "remove", "--force", str(tree)], repo)


def _cache_dir(repo: Path) -> str:
    from dvc.repo import Repo

    with Repo(str(repo)) as r:
        return r.cache.local.path
