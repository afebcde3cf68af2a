"""Collect the sweep-* experiments of `dvc exp show --json` into sensitivity tables and figures."""

import io
import json
import subprocess
from pathlib import Path

import pandas as pd
import typer
import yaml

from ncip.core.io import write_csv, write_text
from ncip.study.figures import line_figure
from ncip.study.stage import StageError, stage_main

app = typer.Typer(add_completion=False)
# swept parameter (also the experiments' name part) -> axis label
AXES = {"alpha": "alpha (candidate-pool ratio)", "k": "K (checkpoints selected)"}
# metric -> (label, the paper's figure, the mean's format, the spread's format)
METRICS = {
    "rauc_all": ("RAUC-ALL", "Fig. 8", "{:.3f}", "{:.3f}"),
    "fault_types_5pct": ("fault types at a 5% budget", "Fig. 7", "{:.0f}", "{:.1f}"),
}


def experiments(node, found=None):
    """Every (name, params, metrics) in DVC's nested experiment listing."""
    found = [] if found is None else found
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(node.get("name"), str) and isinstance(data, dict) and "params" in data:
            params = data["params"].get("params.yaml", {}).get("data", {})
            metrics = {f: v.get("data", {}) for f, v in (data.get("metrics") or {}).items()}
            found.append((node["name"], {**params, "_rev": node.get("rev")}, metrics))
        for v in node.values():
            experiments(v, found)
    elif isinstance(node, list):
        for v in node:
            experiments(v, found)
    return found


def run_spread(rev: str | None) -> pd.DataFrame | None:
    """NCIP's clean metrics per (subject, run) in an experiment's commit, from its
    metrics/per_ordering.csv (git-tracked, so `git show` reads it); None where the commit or
    the file is not there."""
    if not rev:
        return None
    r = subprocess.run(
        ["git", "show", f"{rev}:metrics/per_ordering.csv"], capture_output=True, text=True
    )
    if r.returncode != 0:
        return None
    df = pd.read_csv(io.StringIO(r.stdout))
    part = df[(df["method"] == "ncip") & (df["split"] == "test")]
    return part.groupby(["subject", "run"])[list(METRICS)].mean().reset_index()


@app.command()
@stage_main
def main(
    exps: Path = typer.Option(..., help="output of `dvc exp show --json`"),
    params: Path = typer.Option(Path("params.yaml")),
    metrics_out: Path = typer.Option(Path("metrics/sensitivity.md")),
    plots_dir: Path = typer.Option(Path("plots/sensitivity")),
) -> None:
    subjects = yaml.safe_load(params.read_text())["subjects"]
    rows = []
    for name, p, m in experiments(json.loads(exps.read_text())):
        if not name.startswith("sweep-"):
            continue
        clean = m.get("metrics/clean.json", {})
        per_run = run_spread(p.get("_rev"))
        for s in subjects:
            runs = None if per_run is None else per_run[per_run["subject"] == s]
            rows.append(
                {
                    "experiment": name,
                    "sweep": name.split("-")[1],
                    "alpha": p.get("alpha"),
                    "k": p.get("k"),
                    "subject": s,
                    "runs": 0 if runs is None else len(runs),
                    **{metric: clean.get(metric, {}).get("ncip", {}).get(s) for metric in METRICS},
                    # the spread over training runs, where the experiment has several
                    **{
                        f"{metric}_sd": runs[metric].std()
                        if runs is not None and len(runs) > 1
                        else None
                        for metric in METRICS
                    },
                }
            )
    df = pd.DataFrame(rows).drop_duplicates(["experiment", "subject"])
    if df.empty:
        raise StageError(f"no sweep-* experiments in {exps}; run scripts/sweep.sh")
    n_runs = int(df["runs"].max())
    lines = [
        "NCIP's RAUC-ALL and fault types at a 5% budget on clean data, from the `sweep-*` "
        "DVC experiments (`make sweep`)"
        + (
            f", mean ± sd over {n_runs} training runs per subject (each experiment's "
            "`metrics/per_ordering.csv`)"
            if n_runs > 1
            else ""
        )
        + ". alpha varies with K at its default and vice versa; where K is at least the pool "
        "size the whole pool is used.",
        "",
    ]
    for x in AXES:
        part = df[df["sweep"] == x].sort_values(x)
        if part.empty:
            continue
        for metric, (label, fig, value, spread) in METRICS.items():
            wide = part.pivot(index=x, columns="subject", values=metric).reset_index()
            write_csv(plots_dir / f"{x}-{metric}.csv", wide)
            line_figure(
                wide,
                x,
                plots_dir / f"{x}-{metric}.png",
                f"NCIP {label} against {x} (paper {fig})",
                AXES[x],
                label,
                highlight="",
                legend_title="subject",
            )
            lines += [
                f"### {label} against {x} (paper {fig})",
                "",
                "| " + x + " | " + " | ".join(wide.columns[1:]) + " |",
                "|---:|" + "---:|" * (len(wide.columns) - 1),
            ]
            sd = part.pivot(index=x, columns="subject", values=f"{metric}_sd")
            for r in wide.itertuples(index=False):
                cells = [f"{r[0]:g}"] + [
                    cell(v, sd.at[r[0], subject], value, spread)
                    for v, subject in zip(r[1:], wide.columns[1:], strict=True)
                ]
                lines.append("| " + " | ".join(cells) + " |")
            lines += ["", f"![{x} {metric}](../plots/sensitivity/{x}-{metric}.png)", ""]
    write_text(metrics_out, "\n".join(lines) + "\n")


def cell(mean, sd, fmt: str, sd_fmt: str) -> str:
    """'0.901 ± 0.002'; the mean alone without a spread, '–' without a mean."""
    if pd.isna(mean):
        return "–"
    text = fmt.format(mean)
    if sd is not None and not pd.isna(sd):
        text += " ± " + sd_fmt.format(sd)
    return text


if __name__ == "__main__":
    app()
