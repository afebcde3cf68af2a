"""retrain-guidance: fine-tune on the training set plus each method's top 20% of a held-out pool,
beside two controls (nothing added, random selection); RQ3, paper Fig. 6. One group of arms per
run (NCIP's, the baselines', the controls'), so a K experiment re-runs NCIP's arms alone;
publish-records merges the groups."""

import time
from pathlib import Path

import typer

from ncip.core.checkpoints import list_checkpoints, load_model
from ncip.core.engine import resolve_device
from ncip.core.io import write_json
from ncip.study.data import load_info, load_split
from ncip.study.retrain import (
    RetrainConfig,
    group_scores,
    resolution,
    retrain_gains,
    stored_predictions,
    training_config,
)
from ncip.study.stage import check_outputs, default, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    data: Path = typer.Option(...),
    checkpoints: Path = typer.Option(...),
    group: str = typer.Option(..., help="the arms: ncip, baselines or controls"),
    recipe: str = typer.Option("union", help="union (training set + selection) or selected"),
    scores: Path | None = typer.Option(None, help="the group's score table (not for controls)"),
    predictions: Path | None = typer.Option(
        None, help="predict-probabilities output: the final model's stored test predictions"
    ),
    out: Path = typer.Option(..., help="per-seed gains of the group's arms (JSON)"),
    budget: float = typer.Option(
        default(RetrainConfig, "budget"), help="share of the candidate pool used for fine-tuning"
    ),
    pool_fraction: float = typer.Option(
        default(RetrainConfig, "pool_fraction"), help="share of the test split in the pool"
    ),
    epochs: int = typer.Option(default(RetrainConfig, "epochs")),
    lr: float = typer.Option(default(RetrainConfig, "lr")),
    batch_size: int = typer.Option(default(RetrainConfig, "batch_size")),
    seeds: int = typer.Option(
        default(RetrainConfig, "seeds"), help="fine-tuning seeds to average over"
    ),
    selected_epochs: int = typer.Option(default(RetrainConfig, "selected_epochs")),
    seed: int = typer.Option(0),
    device: str = typer.Option("auto"),
) -> None:
    t0 = time.perf_counter()
    cfg = RetrainConfig(budget, pool_fraction, epochs, lr, batch_size, seeds, 0, selected_epochs)
    cfg.validate()
    check_outputs(out)
    info = load_info(data)
    test = load_split(data / "test.npz", info)
    by_method = group_scores(group, scores, test)
    final = list_checkpoints(checkpoints)[-1].path
    model = load_model(final, resolve_device(device))
    pred = stored_predictions(predictions, test) if predictions is not None else None
    training = training_config(final)
    train = load_split(data / "train.npz", info)
    controls = group == "controls"
    rows = retrain_gains(model, train, test, by_method, cfg, seed, pred, training, controls, recipe)
    record = {"group": group, "recipe": recipe, "config": cfg.__dict__}
    record["optimizer"] = training.get("optimizer", "adam")
    record.update(resolution(rows), training_inputs=len(train))
    record["seconds"] = time.perf_counter() - t0
    write_json(out, {**record, "rows": rows.to_dict("records")})


if __name__ == "__main__":
    app()
