"""The ``ncip`` command: list what is registered, and rank your own test inputs with NCIP."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import typer

from ncip.stage import StageError, stage_main

app = typer.Typer(add_completion=False, help=__doc__, no_args_is_help=True)


@app.command()
def datasets() -> None:
    """List the registered datasets."""
    from ncip.data import list_datasets

    typer.echo("\n".join(list_datasets()))


@app.command()
def models() -> None:
    """List the registered models."""
    from ncip.models import list_models, model_kind

    typer.echo("\n".join(f"{m}\t{model_kind(m)}" for m in list_models()))


@app.command()
def methods() -> None:
    """List the registered baseline prioritization methods."""
    from ncip.scores import list_methods

    typer.echo("\n".join(list_methods()))


@app.command()
@stage_main
def rank(
    checkpoints: Path = typer.Option(..., help="directory of ncip epoch-XXX.safetensors files"),
    inputs: Path = typer.Option(..., help="npz with `x` (uint8 images or token ids), optional `ids`"),
    out: Path = typer.Option(..., help="CSV: rank, sample_id, ncip, tvd, margin, pred"),
    k: int = typer.Option(30, help="checkpoints to select"),
    alpha: float = typer.Option(0.9, help="candidate pool: the last round(alpha*m) checkpoints"),
    batch_size: int = typer.Option(1024, min=1),
    device: str = typer.Option("auto"),
) -> None:
    """Rank unlabelled inputs, most likely misclassified first, with NCIP."""
    from ncip.checkpoints import list_checkpoints, load_model, read_head
    from ncip.collapse import plan_selection, sigma_cos
    from ncip.io import atomic_path
    from ncip.metrics import order_from_scores
    from ncip.predict import batched_outputs, resolve_device, softmax64
    from ncip.scores import margin, ncip_score, tvd

    if not inputs.exists():
        raise StageError(f"{inputs} does not exist")
    with np.load(inputs, allow_pickle=False) as z:
        if "x" not in z:
            raise StageError(f"{inputs} has no array named 'x'")
        x = z["x"]
        ids = z["ids"].astype(str) if "ids" in z else np.arange(len(x)).astype(str)
    infos = list_checkpoints(checkpoints)
    plan = plan_selection([c.epoch for c in infos], [sigma_cos(read_head(c.path)) for c in infos],
                          k, alpha)  # fmt: skip
    by_epoch = {c.epoch: c for c in infos}
    dev = resolve_device(device)
    probs = np.stack([
        softmax64(batched_outputs(load_model(by_epoch[e].path, dev), x, batch_size))
        for e in plan["selected_epochs"]
    ])  # fmt: skip
    score = ncip_score(probs)
    order = order_from_scores(score)
    table = pd.DataFrame({
        "rank": np.arange(1, len(x) + 1),
        "sample_id": ids[order],
        "ncip": score[order],
        "tvd": tvd(probs)[order],
        "margin": margin(probs[-1])[order],
        "pred": probs[-1].argmax(axis=1)[order],
    })  # fmt: skip
    with atomic_path(out) as tmp:
        table.to_csv(tmp, index=False)
    typer.echo(f"ranked {len(x)} inputs with {len(plan['selected_epochs'])} checkpoints -> {out}")
