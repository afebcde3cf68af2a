"""lm-score: every method's score per test prompt for one fine-tuning run, with the selection
controls (ncip.study.lm.scoring.score_run)."""

from pathlib import Path

import typer

from ncip.core.collapse import ALPHA, K, check_k_alpha
from ncip.core.io import write_json, write_parquet
from ncip.study.lm.scoring import score_run
from ncip.study.stage import check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(..., help="lm-finetune's folder of one run"),
    prompts: Path = typer.Option(..., help="lm-data's prompts.jsonl"),
    k: int = typer.Option(K),
    alpha: float = typer.Option(ALPHA),
    seed: int = typer.Option(0, help="seeds the random-K control with seed * 1000 + run"),
    run: int = typer.Option(0, min=0),
    out: Path = typer.Option(..., help="per-prompt scores (Parquet)"),
    selection_out: Path = typer.Option(..., help="the selection and the controls (JSON)"),
) -> None:
    check_k_alpha(k, alpha)
    check_outputs(out, selection_out)
    table, record = score_run(checkpoints, prompts, k, alpha, seed, run)
    write_parquet(out, table)
    write_json(selection_out, record)


if __name__ == "__main__":
    app()
