"""prepare-data: load a subject's dataset, hold out a fixed validation split, write npz files."""

from pathlib import Path

import typer

from ncip.data import prepare_dataset, save_prepared
from ncip.io import atomic_dir
from ncip.logs import log
from ncip.stage import check_outputs, stage_main
from ncip.subjects import parse_subject

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    subject: str = typer.Option(..., help="dataset-model pair, e.g. fmnist-lenet5"),
    out: Path = typer.Option(..., help="output directory (train/val/test.npz, info.json)"),
    raw_root: Path = typer.Option(Path("data/raw"), help="where raw dataset files are looked for"),
    val_fraction: float = typer.Option(0.1, help="stratified share of training data held out"),
    split_seed: int = typer.Option(0, help="seed of the validation split"),
) -> None:
    ds = parse_subject(subject).dataset
    check_outputs(dirs=[out])
    info, splits = prepare_dataset(ds, raw_root, val_fraction, split_seed)
    with atomic_dir(out) as tmp:
        save_prepared(tmp, info, splits)
    log.info("prepared %s: %s", ds, ", ".join(f"{k} {v}" for k, v in info.sizes.items()))


if __name__ == "__main__":
    app()
