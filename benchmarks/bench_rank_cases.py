"""`ncip rank` on four models ncip did not train, on the 10,000 real Fashion-MNIST test images.

Trains (once; cached in --work) the examples in examples/rank-your-model/: a plain loop with
`torch.save(state_dict)`, PyTorch Lightning, the Hugging Face Trainer (a ViT from a config) and
torchvision's ResNet-18 in its reference scripts' format. Then runs `ncip rank` on each, one
command each, in a fresh process, and prints its wall time and peak memory (ru_maxrss of that
process) beside the labelled comparison `ncip rank --labels` prints.

    .venv/bin/python benchmarks/bench_rank_cases.py [--work /tmp/ncip-cases] [--k 10]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "rank-your-model"
CASES = {
    # case: (training script, checkpoint folder args, test inputs, extra options)
    "plain loop": ("train_plain.py", ["--model", f"{EXAMPLES / 'common.py'}:Net"], "test.npz", []),
    "Lightning": (
        "train_lightning.py",
        ["--model", f"{EXAMPLES / 'common.py'}:Net"],
        "test.npz",
        [],
    ),
    "HF Trainer": ("train_hf.py", [], "test.npz", []),
    "torchvision": (
        "train_torchvision.py",
        ["--model", "torchvision:resnet18"],
        "test.npy",
        ["--labels", "test_y.npy"],
    ),
}


def run_measured(cmd: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """(seconds, peak RSS in MiB of that process, its result)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)  # reaps it, with its own resource usage
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        return (
            seconds,
            usage.ru_maxrss / 1024,
            subprocess.CompletedProcess(cmd, code, out.read(), err.read()),
        )


def main(work: Path = typer.Option(Path("/tmp/ncip-cases")), k: int = typer.Option(10)) -> None:
    rows = []
    for case, (script, model, test, extra) in CASES.items():
        d = work / script.removesuffix(".py")
        train_s = float("nan")
        if not (d / "ckpt").exists():
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, str(EXAMPLES / script), str(d)],
                cwd=EXAMPLES,
                check=True,
                capture_output=True,
            )
            train_s = time.perf_counter() - t0
        out = d / "ranking.csv"
        cmd = [
            sys.executable,
            "-m",
            "ncip",
            "rank",
            str(d / "ckpt"),
            *model,
            "--inputs",
            str(d / test),
            "--out",
            str(out),
            "--k",
            str(k),
            "--quiet",
        ]
        cmd += [str(d / a) if a.endswith(".npy") else a for a in extra]
        seconds, peak, r = run_measured(cmd, ROOT)
        if r.returncode != 0:
            raise SystemExit(f"{case}: ncip rank failed:\n{r.stderr}")
        sel = json.loads((d / "ranking.selection.json").read_text())
        evaluation = json.loads((d / "ranking.evaluation.json").read_text())
        ev = {m["method"]: m for m in evaluation["methods"]}
        rows.append(
            (
                case,
                sel["checkpoints"][0]["format"],
                sel["num_checkpoints"],
                len(sel["used"]),
                train_s,
                seconds,
                peak,
                ev,
            )
        )
    print(f"ncip rank, K = {k}, on the 10,000 Fashion-MNIST test images (2 CPU cores)")
    print(
        f"{'case':<12} | {'format':<10} | {'ckpts':>5} | {'used':>4} | {'train s':>7} | "
        f"{'rank s':>6} | {'peak MiB':>8} | {'NCIP':>5} | {'Margin':>6} | {'DeepGini':>8} | "
        f"{'test acc':>8}"
    )
    print("-" * 108)
    for case, fmt, m, used, train_s, seconds, peak, ev in rows:
        acc = 1 - ev["NCIP"]["faults"] / ev["NCIP"]["inputs"]
        print(
            f"{case:<12} | {fmt:<10} | {m:>5} | {used:>4} | {train_s:>7.0f} | {seconds:>6.1f} | "
            f"{peak:>8.0f} | {ev['NCIP']['rauc_all']:>5.3f} | {ev['Margin']['rauc_all']:>6.3f} | "
            f"{ev['DeepGini']['rauc_all']:>8.3f} | {acc:>8.4f}"
        )
    print(
        "NCIP / Margin / DeepGini: RAUC-ALL on the test images; 'train s' is blank (nan) when "
        "the checkpoints were cached from an earlier run"
    )


if __name__ == "__main__":
    typer.run(main)
