"""Collect the sweep-* experiments of `dvc exp show --json` into sensitivity tables and figures."""

import json
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
# metric -> (label, the paper's figure, cell format)
METRICS = {
    "rauc_all": ("RAUC-ALL", "Fig. 8", "{:.3f}"),
    "fault_types_5pct": ("fault types at a 5% budget", "Fig. 7", "{:.0f}"),
}


def experiments(node, found=None):
    """Every (name, params, metrics) in DVC's nested experiment listing."""
    found = [] if found is None else found
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(node.get("name"), str) and isinstance(data, dict) and "params" in data:
            params = data["params"].get("params.yaml", {}).get("data", {})
            metrics = {f: v.get("data", {}) for f, v in (data.get("metrics") or {}).items()}
            found.append((node["name"], params, metrics))
        for v in node.values():
            experiments(v, found)
    elif isinstance(node, list):
        for v in node:
            experiments(v, found)
    return found


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
        for s in subjects:
            rows.append(
                {
                    "experiment": name,
                    "sweep": name.split("-")[1],
                    "alpha": p.get("alpha"),
                    "k": p.get("k"),
                    "subject": s,
                    "rauc_all": clean.get("rauc_all", {}).get("ncip", {}).get(s),
                    "fault_types_5pct": clean.get("fault_types_5pct", {}).get("ncip", {}).get(s),
                }
            )
    df = pd.DataFrame(rows).drop_duplicates(["experiment", "subject"])
    if df.empty:
        raise StageError(f"no sweep-* experiments in {exps}; run scripts/sweep.sh")
    lines = [
        "NCIP's RAUC-ALL and fault types at a 5% budget on clean data, from the `sweep-*` "
        "DVC experiments (`make sweep`). alpha varies with K at its default and vice versa; "
        "where K is at least the pool size the whole pool is used.",
        "",
    ]
    for x in AXES:
        part = df[df["sweep"] == x].sort_values(x)
        if part.empty:
            continue
        for metric, (label, fig, value) in METRICS.items():
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
            for r in wide.itertuples(index=False):
                cells = [f"{r[0]:g}"] + ["–" if pd.isna(v) else value.format(v) for v in r[1:]]
                lines.append("| " + " | ".join(cells) + " |")
            lines += ["", f"![{x} {metric}](../plots/sensitivity/{x}-{metric}.png)", ""]
    write_text(metrics_out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    app()
