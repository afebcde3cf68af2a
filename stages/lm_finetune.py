"""lm-finetune: fine-tune the pretrained model with a Hugging Face Trainer, a checkpoint per
epoch (ncip.study.lm.training.finetune); run r fine-tunes with seed * 1000 + r."""

from pathlib import Path

import typer

from ncip.core.io import atomic_dir, write_json
from ncip.core.metrics import run_seed
from ncip.study.lm.training import finetune
from ncip.study.stage import check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    pretrained: Path = typer.Option(..., help="lm-pretrain's folder"),
    data: Path = typer.Option(..., help="lm-data's folder"),
    out: Path = typer.Option(..., help="output folder (checkpoint-<step>/ per epoch)"),
    history_out: Path = typer.Option(..., help="training loss per epoch (JSON)"),
    epochs: int = typer.Option(30, min=2),
    batch_size: int = typer.Option(16, min=1),
    lr: float = typer.Option(1e-3, min=0.0),
    seed: int = typer.Option(0),
    run: int = typer.Option(0, min=0),
) -> None:
    check_outputs(history_out, dirs=[out])
    with atomic_dir(out) as tmp:
        history = finetune(pretrained, data, tmp, epochs, batch_size, lr, run_seed(seed, run))
    write_json(history_out, history)


if __name__ == "__main__":
    app()
