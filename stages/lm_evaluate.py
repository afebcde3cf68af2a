"""lm-evaluate: RAUC and PRR per method and seed, paired intervals, the repetition test, the
tables and every seed's per-prompt data of the language-model study (ncip.study.lm.evaluation)."""

import json
from pathlib import Path

import pandas as pd
import typer
import yaml

from ncip.core.io import write_csv, write_json, write_text
from ncip.study.lm.evaluation import evaluate, markdown, metrics_summary, prompt_table
from ncip.study.stage import check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    model: str = typer.Option(...),
    params: Path = typer.Option(Path("params.yaml"), help="lm.runs, lm.k, lm.alpha, epochs"),
    data: Path = typer.Option(..., help="lm-data's folder (info.json)"),
    pretrained: Path = typer.Option(..., help="lm-pretrain's folder (pretraining.json)"),
    scores: Path = typer.Option(..., help="folder of lm-score's run-<r>.parquet"),
    selection: Path = typer.Option(..., help="folder of lm-score's run-<r>.json"),
    seed: int = typer.Option(0),
    out: Path = typer.Option(..., help="all results (JSON)"),
    metrics_out: Path = typer.Option(..., help="mean RAUC-ALL per method (JSON, DVC metrics)"),
    md_out: Path = typer.Option(..., help="the tables (Markdown)"),
    prompts_out: Path = typer.Option(..., help="every seed's per-prompt data (CSV)"),
) -> None:
    check_outputs(out, metrics_out, md_out, prompts_out)
    lm = yaml.safe_load(params.read_text())["lm"]
    ids = [int(r) for r in lm["runs"]]
    tables = {r: pd.read_parquet(scores / f"run-{r}.parquet") for r in ids}
    selections = {r: json.loads((selection / f"run-{r}.json").read_text()) for r in ids}
    result = evaluate(tables, seed)
    pre = json.loads((pretrained / "pretraining.json").read_text())
    info = json.loads((data / "info.json").read_text()) | {
        "parameters": pre["parameters"],
        "pretrain_steps": pre["steps"],
        "epochs": lm["finetune"]["epochs"],
        "k": lm["k"],
        "alpha": lm["alpha"],
    }
    write_json(out, result | {"info": info})
    write_json(metrics_out, metrics_summary(result))
    write_text(md_out, markdown(result, info, model, selections))
    prompts = pd.read_json(data / "prompts.jsonl", lines=True, dtype=False)
    write_csv(prompts_out, prompt_table(tables, prompts))


if __name__ == "__main__":
    app()
