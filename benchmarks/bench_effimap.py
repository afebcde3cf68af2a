"""EffiMAP's preparation at two sizes, side by side, on a reproduced study's own runs.

For each subject-run of a study folder (after `make repro`), the score-baselines stage runs
EffiMAP alone twice, with the `reduced` size before and after issue 21:

- "before": the VAE trained 1,600 steps on 2,000 labelled images (the earlier `reduced`);
- "now": the VAE trained the reference's 100 epochs on the 500 labelled inputs it mutates.

Everything else (mutant search, 500 inputs x 20 VAE mutants, 100 trees, seeds) is the same. The
table prints each size's preparation seconds (clean + adversarial fits) and RAUC-ALL on the clean
and adversarial test sets, then per subject the mean and run-to-run sd of each.

    .venv/bin/python benchmarks/bench_effimap.py --study /path/to/reproduced/study

It runs the stage as `dvc repro` would (scripts/py, the study's own data, checkpoints, stored
predictions and attacks) into a temporary folder; the study folder is only read.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import typer
import yaml

from ncip.core.metrics import order_from_scores, rauc

ROOT = Path(__file__).resolve().parents[1]
SIZES = {
    "before": {"vae_images": 2000, "vae_steps": 1600, "vae_epochs": None},
    "now": {},  # the registered `reduced` defaults
}


def run_effimap(study: Path, subject: str, run: int, options: dict, work: Path, seed: int):
    params = work / "params.yaml"
    params.write_text(yaml.safe_dump({"baselines": {"methods": "effimap", "effimap": options}}))
    out, cost = work / "scores.parquet", work / "cost.json"
    item = f"{subject}/run-{run}"
    subprocess.run(
        [
            str(ROOT / "scripts" / "py"),
            str(ROOT / "stages" / "score_baselines.py"),
            f"--subject={subject}",
            f"--run={run}",
            f"--data={study / 'data' / 'prepared' / subject}",
            f"--checkpoints={study / 'models' / item}",
            f"--adversarial={study / 'adversarial' / item}",
            f"--predictions={study / 'predictions' / item}",
            f"--params={params}",
            f"--seed={seed}",
            f"--out={out}",
            f"--cost-out={cost}",
            "--batch-size=256",
        ],
        check=True,
        capture_output=True,
    )
    table = pd.read_parquet(out)
    c = json.loads(cost.read_text())["effimap"]
    prep = sum(v for k, v in c.items() if k.startswith("prepare"))
    row = {"prepare_s": prep}
    for split, g in table.groupby("split"):
        fault = (g["label"] != g["pred"]).to_numpy()
        order = order_from_scores(g["score"].to_numpy(), seed)
        row[f"rauc_{split}"] = rauc(fault[order])
    return row


def main(
    study: Path = typer.Option(..., help="a study folder after `make repro`"),
    seed: int = typer.Option(0, help="params.yaml's seed (the tie-break and run seeds)"),
) -> None:
    cfg = yaml.safe_load((study / "params.yaml").read_text())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for subject in cfg["subjects"]:
            for run in cfg["runs"]:
                for size, options in SIZES.items():
                    r = run_effimap(study, subject, run, options, Path(tmp), seed)
                    rows.append({"subject": subject, "run": run, "size": size, **r})
                    print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    print("\n| subject | run | size | prepare s | RAUC-ALL clean | RAUC-ALL adv |")
    print("|---|---:|---|---:|---:|---:|")
    for r in df.itertuples():
        print(
            f"| {r.subject} | {r.run} | {r.size} | {r.prepare_s:.1f} | "
            f"{r.rauc_test:.3f} | {r.rauc_adv:.3f} |"
        )
    print("\n| subject | size | prepare s (mean) | clean mean ± sd | adv mean ± sd |")
    print("|---|---|---:|---:|---:|")
    for (subject, size), g in df.groupby(["subject", "size"], sort=False):
        print(
            f"| {subject} | {size} | {g.prepare_s.mean():.1f} | "
            f"{g.rauc_test.mean():.3f} ± {np.std(g.rauc_test, ddof=1):.3f} | "
            f"{g.rauc_adv.mean():.3f} ± {np.std(g.rauc_adv, ddof=1):.3f} |"
        )
    ratio = df[df["size"] == "now"].prepare_s.sum() / df[df["size"] == "before"].prepare_s.sum()
    print(f"\npreparation time now / before: {ratio:.2f}")


if __name__ == "__main__":
    typer.run(main)
