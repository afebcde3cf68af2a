"""score-baselines: the methods of params.yaml's `baselines` group, on the final model."""

from pathlib import Path

import typer
import yaml

from ncip.core.checkpoints import check_data_matches, list_checkpoints
from ncip.core.engine import resolve_device
from ncip.core.io import write_json, write_parquet
from ncip.core.metrics import run_seed
from ncip.study.data import adversarial_sets, load_info, load_split
from ncip.study.predict import Predictions
from ncip.study.scores import ScoringContext
from ncip.study.scores.registry import baseline_config
from ncip.study.scoring import run_baselines
from ncip.study.stage import check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    subject: str = typer.Option(...),
    run: int = typer.Option(0, min=0),
    data: Path = typer.Option(..., help="prepared data directory"),
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    predictions: Path | None = typer.Option(
        None,
        help="predict-probabilities output: stored outputs instead of running the models again",
    ),
    params: Path = typer.Option(
        Path("params.yaml"),
        help="its `baselines` group: `methods` "
        "and any method's options (`ncip methods` lists them)",
    ),
    adversarial: Path | None = typer.Option(
        None, help="generate-adversarial output (adv.npz, val-adv.npz)"
    ),
    seed: int = typer.Option(...),
    out: Path = typer.Option(..., help="score table (Parquet)"),
    cost_out: Path = typer.Option(..., help="preparation and scoring seconds per method (JSON)"),
    batch_size: int = typer.Option(..., min=1),
    device: str = typer.Option("auto"),
) -> None:
    methods, options = baseline_config(yaml.safe_load(params.read_text()).get("baselines"))
    check_outputs(out, cost_out)
    info = load_info(data)
    final = list_checkpoints(checkpoints)[-1]
    check_data_matches(info, final.meta, data, final.path)
    sets = {"test": load_split(data / "test.npz", info), **adversarial_sets(adversarial, info=info)}
    ctx = ScoringContext(
        subject=subject,
        seed=run_seed(seed, run),
        checkpoint_dir=checkpoints,
        eval_splits=sets,
        train=load_split(data / "train.npz", info),
        labelled={
            "test": load_split(data / "val.npz", info),
            **adversarial_sets(adversarial, "val", info),
        },
        options=options,
        device=str(resolve_device(device)),
        batch_size=batch_size,
        predictions=Predictions(predictions) if predictions is not None else None,
    )
    # On a model trained elsewhere a baseline may not apply (e.g. EffiMAP without channels to
    # mutate): it is skipped with its reason, which the report lists. On the study's own
    # models every failure is a bug and stops the stage.
    table, cost = run_baselines(
        ctx, methods, run, sets, skip_failures=final.meta.arch == "external"
    )
    write_parquet(out, table)
    write_json(cost_out, cost)


if __name__ == "__main__":
    app()
