"""predict-probabilities: every checkpoint's logits on every split a later stage reads, once."""

from pathlib import Path

import typer

from ncip.core.engine import PATHS, PRECISIONS, EngineConfig
from ncip.core.io import atomic_dir
from ncip.core.logs import log
from ncip.study.predict import predict_folder
from ncip.study.stage import check_outputs, default, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    data: Path = typer.Option(
        ...,
        help="prepared data (test and val are predicted; train's features by the final checkpoint)",
    ),
    adversarial: Path | None = typer.Option(
        None,
        help="generate-adversarial output: its adv.npz "
        "and val-adv.npz are predicted as 'adv', 'val-adv'",
    ),
    out: Path = typer.Option(
        ..., help="output folder: epoch-XXX.parquet, final-features.parquet, index.json"
    ),
    batch_size: int | None = typer.Option(None, min=1, help="default: the engine's for the device"),
    device: str = typer.Option("auto"),
    engine: str = typer.Option(
        default(EngineConfig, "path"), help=f"inference path: {', '.join(PATHS)}"
    ),
    precision: str = typer.Option(
        default(EngineConfig, "precision"), help=f"{', '.join(PRECISIONS)}"
    ),
    compile: bool = typer.Option(False, "--compile/--no-compile", help="torch.compile the model"),
) -> None:
    config = EngineConfig(path=engine, batch_size=batch_size, precision=precision, compile=compile)
    config.validate()
    check_outputs(dirs=[out])
    with atomic_dir(out) as tmp:
        index = predict_folder(checkpoints, data, adversarial, tmp, device, config)
    log.info(
        "predicted %d checkpoints on %s in %.1f s (%s path)",
        len(index.epochs),
        ", ".join(index.splits),
        index.seconds,
        index.engine["path"],
    )


if __name__ == "__main__":
    app()
