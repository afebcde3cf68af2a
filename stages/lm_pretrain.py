"""lm-pretrain: pretrain the study's language model once (ncip.study.lm.training.pretrain)."""

from pathlib import Path

import typer

from ncip.core.io import atomic_dir, write_json
from ncip.study.lm.models import get_lm
from ncip.study.lm.training import pretrain
from ncip.study.stage import check_outputs, stage_main

app = typer.Typer(add_completion=False)
INFO = "pretraining.json"


@app.command()
@stage_main
def main(
    model: str = typer.Option(..., help="a language model of ncip.study.lm.models"),
    data: Path = typer.Option(..., help="lm-data's folder"),
    out: Path = typer.Option(..., help="output folder (save_pretrained)"),
    steps: int = typer.Option(2000, min=1),
    batch_size: int = typer.Option(32, min=1),
    lr: float = typer.Option(3e-3, min=0.0),
    seed: int = typer.Option(0),
) -> None:
    spec = get_lm(model)
    check_outputs(dirs=[out])
    with atomic_dir(out) as tmp:
        info = pretrain(data, tmp, spec, steps, batch_size, lr, seed)
        write_json(tmp / INFO, info)


if __name__ == "__main__":
    app()
