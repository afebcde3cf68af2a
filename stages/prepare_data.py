"""prepare-data: load a subject's dataset, hold out a fixed validation split, write npz files."""

from pathlib import Path

import typer

from ncip.core.io import atomic_dir, write_json
from ncip.core.logs import log
from ncip.study.data import prepare_dataset, save_prepared
from ncip.study.external import MANIFEST, load_external, manifest
from ncip.study.stage import check_outputs, stage_main
from ncip.study.subjects import external_specs, parse_subject

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    subject: str = typer.Option(..., help="dataset-model pair, e.g. fmnist-lenet5"),
    out: Path = typer.Option(..., help="output directory (train/val/test.npz, info.json)"),
    raw_root: Path = typer.Option(Path("data/raw"), help="where raw dataset files are looked for"),
    val_fraction: float = typer.Option(0.1, help="stratified share of training data held out"),
    split_seed: int = typer.Option(0, help="seed of the validation split"),
    params: Path = typer.Option(Path("params.yaml"), help="read for `external` subjects"),
) -> None:
    external = external_specs(params)
    s = parse_subject(subject, external)
    check_outputs(dirs=[out])
    if s.external:  # trained elsewhere: its own splits, and a manifest of its checkpoints
        info, splits = load_external(external[subject])
        record = manifest(external[subject])
    else:
        info, splits = prepare_dataset(s.dataset, raw_root, val_fraction, split_seed)
    with atomic_dir(out) as tmp:
        save_prepared(tmp, info, splits)
        if s.external:
            write_json(tmp / MANIFEST, record)
    log.info("prepared %s: %s", info.name, ", ".join(f"{k} {v}" for k, v in info.sizes.items()))


if __name__ == "__main__":
    app()
