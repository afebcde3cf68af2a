"""select-checkpoints: sigma_cos of every checkpoint's head, then NCIP Algorithm 1."""

import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import typer

from ncip.core.checkpoints import list_checkpoints, read_head
from ncip.core.collapse import ALPHA, K, check_k_alpha, plan, sigma_cos_series
from ncip.core.errors import InputError
from ncip.core.io import write_csv
from ncip.core.logs import log, progress
from ncip.study.stage import SelectionRecord, StageError, check_outputs, stage_main

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
    check_k_alpha(k, alpha)  # before any work
    check_outputs(out, plot_out)
    t0 = time.perf_counter()
    infos = list_checkpoints(checkpoints)
    if not infos:
        raise StageError(f"{checkpoints} holds no checkpoints; run train-with-checkpoints")
    # Only the head tensor of each file is read: no model is built or loaded.
    heads = [read_head(c.path) for c in progress(infos, "read heads", unit="ckpt")]
    try:
        scores = sigma_cos_series(heads, [str(c.path) for c in infos])
    except InputError as e:
        raise StageError(f"{e}; retrain with a lower learning rate") from None
    sel = plan(scores, k, alpha, epochs=[c.epoch for c in infos])
    if sel.note:
        log.warning("%s", sel.note)
    meta = infos[-1].meta
    record = SelectionRecord(sel, meta.subject or "", meta.run or 0, 0.0)
    selected = set(sel.selected_epochs)
    table = pd.DataFrame(
        {
            "epoch": [c.epoch for c in infos],
            "sigma_cos": scores,
            "selected": [int(c.epoch in selected) for c in infos],
        }
    )
    write_csv(plot_out, table)
    replace(record, seconds=time.perf_counter() - t0).write(out)
    log.info("selected %d of %d checkpoints: %s", len(selected), len(infos), sel.selected_epochs)


if __name__ == "__main__":
    app()
