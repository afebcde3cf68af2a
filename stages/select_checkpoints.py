"""select-checkpoints: sigma_cos of every checkpoint's head, then NCIP Algorithm 1."""

import time
import warnings
from pathlib import Path

import pandas as pd
import typer

from ncip.core.checkpoints import list_checkpoints, read_head
from ncip.core.collapse import ALPHA, K, candidate_pool, plan_selection, sigma_cos
from ncip.core.io import write_csv, write_json
from ncip.core.logs import log, progress
from ncip.study.stage import StageError, check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    k: int = typer.Option(K, help="number of checkpoints to select (paper: 30)"),
    alpha: float = typer.Option(ALPHA, help="candidate pool: the last round(alpha*m) checkpoints"),
    out: Path = typer.Option(..., help="selection record (JSON)"),
    plot_out: Path = typer.Option(..., help="sigma_cos per epoch (CSV) for dvc plots"),
) -> None:
    if k <= 0:
        raise StageError(f"k must be a positive integer, got {k}; set k in params.yaml")
    candidate_pool(1, alpha)  # validates alpha before any work
    check_outputs(out, plot_out)
    t0 = time.perf_counter()
    infos = list_checkpoints(checkpoints)
    if not infos:
        raise StageError(f"{checkpoints} holds no checkpoints; run train-with-checkpoints")
    # Only the head tensor of each file is read: no model is built or loaded.
    scores = []
    for c in progress(infos, "sigma_cos", unit="ckpt"):
        try:
            scores.append(sigma_cos(read_head(c.path)))
        except ValueError as e:
            raise StageError(f"{c.path}: {e}; retrain with a lower learning rate") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = plan_selection([c.epoch for c in infos], scores, k, alpha)
    for w in caught:
        log.warning("%s", w.message)
    plan["seconds"] = time.perf_counter() - t0
    plan["subject"] = infos[-1].meta.get("subject", "")
    plan["run"] = infos[-1].meta.get("run", 0)
    selected = set(plan["selected_epochs"])
    table = pd.DataFrame(
        {
            "epoch": [c.epoch for c in infos],
            "sigma_cos": scores,
            "selected": [int(c.epoch in selected) for c in infos],
        }
    )
    write_csv(plot_out, table)
    write_json(out, plan)
    log.info(
        "selected %d of %d checkpoints: %s", len(selected), len(infos), plan["selected_epochs"]
    )


if __name__ == "__main__":
    app()
