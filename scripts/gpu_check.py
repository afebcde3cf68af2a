"""The prepared device check: the whole DVC study on a CIFAR-10-format ResNet-18, with stage times.

In a temporary copy of the project it generates CIFAR-10 python batches (synthetic images
whose classes differ in colour and stripes, so the model learns), trains ResNet-18 with a few
checkpoints, runs every stage (selection, prediction, NCIP, all twelve baselines, attacks,
evaluation, retraining, report) with `dvc repro`, and prints one table of stage times with the
device named. `--dry` shrinks everything so that it runs on a CPU in a few minutes (the test
suite runs it); without it the sizes suit one GPU for about 8 minutes. Used by
scripts/gpu_check.sh.
"""

from __future__ import annotations

import os
import pickle
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import typer
import yaml

from ncip.study.paths import EXPERIMENT_METRICS, TRACKED_INPUTS

ROOT = Path(__file__).resolve().parents[1]

SIZES = {  # per CIFAR batch file (5 train batches + 1 test batch), epochs, study knobs
    "dry": {
        "per_batch": 16,
        "test": 60,
        "epochs": 3,
        "k": 2,
        "batch": 50,
        "val_size": 40,
        "steps": 3,
        "cw_steps": 3,
        "dropout": 5,
        "retrain_epochs": 1,
        "retrain_selected_epochs": 2,  # the paper's recipe: passes over the selection alone
        "train": {"channels_last": True},  # bf16 autocast is emulated (slow) on most CPUs
    },
    "gpu": {
        "per_batch": 2000,
        "test": 2000,
        "epochs": 10,
        "k": 5,
        "batch": 128,
        "val_size": 1000,
        "steps": 10,
        "cw_steps": 50,
        "dropout": 50,
        "retrain_epochs": 2,
        "train": {"precision": "bf16", "channels_last": True},  # the GPU presets' options
    },
}


def make_cifar10(raw: Path, per_batch: int, test: int, seed: int = 0) -> None:
    """CIFAR-10's python batches with learnable synthetic images: each class has its own
    mean colour and stripe frequency, plus noise."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(40, 216, (10, 3))
    d = raw / "cifar-10-batches-py"
    d.mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[0:32, 0:32]
    for name, n in [(f"data_batch_{i}", per_batch) for i in range(1, 6)] + [("test_batch", test)]:
        labels = rng.integers(0, 10, n)
        img = np.empty((n, 3, 32, 32), dtype=np.float64)
        for i, c in enumerate(labels):
            stripes = 30 * np.sin((xx + yy * (c % 3)) * (0.2 + 0.15 * c))
            img[i] = colours[c][:, None, None] + stripes + rng.normal(0, 45, (3, 32, 32))
        batch = {
            b"data": np.clip(img, 0, 255).astype(np.uint8).reshape(n, 3072),
            b"labels": labels.tolist(),
        }
        with open(d / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": [f"class{i}".encode() for i in range(10)]}, f, protocol=2)


def study_params(size: dict) -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params.update(subjects=["cifar10-resnet18"], runs=[0], k=size["k"], alpha=0.9)
    params["train"].update(epochs=size["epochs"], batch_size=size["batch"], **size["train"])
    params["attack"].update(
        val_size=size["val_size"], steps=size["steps"], cw_steps=size["cw_steps"]
    )
    params["baselines"].update(
        random={"repeats": 2},
        dropout={"samples": size["dropout"]},
        effimap={
            "labelled_inputs": 50,
            "input_mutants": 2,
            "max_mutants": 10,
            "search_steps": 20,
            "vae_images": 200,
            "vae_steps": 100,
            "trees": 10,
        },
    )
    params["analysis"].update(weak_steps="2", tsne_points=100)
    params["retrain"].update(seeds=1, epochs=size["retrain_epochs"])
    if "retrain_selected_epochs" in size:  # else params.yaml's
        params["retrain"]["selected_epochs"] = size["retrain_selected_epochs"]
    return params


def prepare(work: Path, size: dict) -> None:
    shutil.copy(ROOT / "dvc.yaml", work / "dvc.yaml")
    for folder in ("stages", "src", "scripts"):
        shutil.copytree(
            ROOT / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    for f in (*TRACKED_INPUTS, *EXPERIMENT_METRICS):
        (work / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, work / f)
    (work / "params.yaml").write_text(yaml.safe_dump(study_params(size), sort_keys=False))
    make_cifar10(work / "data" / "raw", size["per_batch"], size["test"])


def device_name() -> str:
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return f"{name} (CUDA {torch.version.cuda}, torch {torch.__version__})"
    return f"CPU only: {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def run_study(
    work: Path, env: dict, log: Path | None = None
) -> tuple[list[tuple[str, float]], int]:
    """`dvc repro --keep-going` (a failed stage does not hide the others), streaming its output
    to ``log``; prints each stage's time as it finishes (what a timed-out run still shows).
    Returns (stage, seconds) in the order they ran, and dvc's exit status."""
    dvc = [sys.executable, "-m", "dvc"]
    if shutil.which("git", path=env["PATH"]):
        subprocess.run(["git", "init", "-q"], cwd=work, env=env, check=True)
        subprocess.run(dvc + ["init", "-q"], cwd=work, env=env, check=True)
    else:  # a bare device image may have no git: DVC runs without one
        subprocess.run(dvc + ["init", "-q", "--no-scm"], cwd=work, env=env, check=True)
    shutil.copytree(ROOT / ".dvc" / "plots", work / ".dvc" / "plots", dirs_exist_ok=True)
    proc = subprocess.Popen(
        dvc + ["repro", "--keep-going"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    times: list[tuple[str, float]] = []
    current, started = None, time.perf_counter()
    sink = open(log, "w") if log else None  # noqa: SIM115  (closed below)

    def finish(now: float) -> None:
        if current:
            times.append((current, now - started))
            print(f"  {current}: {now - started:.1f} s", file=sys.stderr, flush=True)

    assert proc.stdout is not None
    for line in proc.stdout:
        if sink:
            sink.write(line)
            sink.flush()
        m = re.match(r"Running stage '([^']+)'", line)
        if m:
            now = time.perf_counter()
            finish(now)
            current, started = m.group(1), now
        elif line.startswith(("ERROR", "error:", "Traceback")) or "Error:" in line:
            print(line.rstrip(), file=sys.stderr, flush=True)
    rc = proc.wait()
    finish(time.perf_counter())
    if sink:
        sink.close()
    return times, rc


def main(
    dry: bool = typer.Option(False, "--dry", help="CPU-sized run (minutes), as the tests do"),
    keep: bool = typer.Option(False, help="keep the temporary study folder"),
    out: Path | None = typer.Option(None, help="also write the table to this file"),
    log: Path | None = typer.Option(None, help="write dvc's whole output to this file"),
) -> None:
    size = SIZES["dry" if dry else "gpu"]
    work = Path(tempfile.mkdtemp(prefix="ncip-gpu-check-"))
    env = {
        **os.environ,
        "DVC_NO_ANALYTICS": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "GIT_AUTHOR_NAME": "gpu-check",
        "GIT_AUTHOR_EMAIL": "gpu-check@localhost",
        "GIT_COMMITTER_NAME": "gpu-check",
        "GIT_COMMITTER_EMAIL": "gpu-check@localhost",
    }
    t0 = time.perf_counter()
    try:
        prepare(work, size)
        times, rc = run_study(work, env, log)
        if rc != 0:
            raise SystemExit(
                f"dvc repro failed (exit {rc}) after: "
                + ", ".join(f"{n} {t:.0f} s" for n, t in times)
                + f"; see --log for its output, or rerun with --keep to keep {work}"
            )
        report = (work / "metrics" / "report.md").read_text()
        if "Table 3" not in report:
            raise SystemExit("the report lacks Table 3")
        acc = yaml.safe_load((work / "metrics" / "accuracy.json").read_text())
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    lines = [
        f"ncip device check ({'dry, CPU-sized' if dry else 'GPU-sized'}): {device_name()}",
        f"cifar10-resnet18, {5 * size['per_batch']} train / {size['test']} test synthetic "
        f"images, {size['epochs']} epochs, K = {size['k']}; test accuracy "
        f"{acc['test']['cifar10-resnet18']:.3f}",
        "",
        "| stage | seconds |",
        "|---|---:|",
        *[f"| {name} | {sec:.1f} |" for name, sec in times],
        f"| **total (with set-up)** | {time.perf_counter() - t0:.1f} |",
    ]
    text = "\n".join(lines)
    print(text)
    if out is not None:
        out.write_text(text + "\n")


if __name__ == "__main__":
    typer.run(main)
