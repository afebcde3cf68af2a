"""predict-probabilities: every checkpoint's logits on every split a later stage reads, once."""

from pathlib import Path

import typer

from ncip.attacks import adversarial_sets
from ncip.checkpoints import check_data_matches, list_checkpoints, load_model, load_weights
from ncip.data import load_info, load_split
from ncip.engine import PATHS, PRECISIONS, EngineConfig
from ncip.io import atomic_dir
from ncip.logs import log
from ncip.predict import predict_run, resolve_device
from ncip.stage import StageError, check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    data: Path = typer.Option(..., help="prepared data (test and val are predicted; train's "
                              "features by the final checkpoint)"),
    adversarial: Path | None = typer.Option(None, help="generate-adversarial output: its adv.npz "
                                            "and val-adv.npz are predicted as 'adv', 'val-adv'"),
    out: Path = typer.Option(..., help="output folder: epoch-XXX.parquet, final-features.parquet, "
                             "index.json"),
    batch_size: int = typer.Option(256, min=1),
    device: str = typer.Option("auto"),
    engine: str = typer.Option("auto", help=f"inference path: {', '.join(PATHS)}"),
    precision: str = typer.Option("fp32", help=f"{', '.join(PRECISIONS)}"),
    compile: bool = typer.Option(False, "--compile/--no-compile", help="torch.compile the model"),
) -> None:
    config = EngineConfig(path=engine, batch_size=batch_size, precision=precision, compile=compile)
    config.validate()
    check_outputs(dirs=[out])
    infos = list_checkpoints(checkpoints)
    if not infos:
        raise StageError(f"{checkpoints} holds no checkpoints; run train-with-checkpoints")
    info = load_info(data)
    check_data_matches(info, infos[-1].meta, data, infos[-1].path)
    test, val = (load_split(data / f"{n}.npz", info) for n in ("test", "val"))
    splits = {"test": test, "val": val}
    adv = adversarial_sets(adversarial, "test", info)
    if adv:
        splits["adv"] = adv["adv"]
    val_adv = adversarial_sets(adversarial, "val", info)
    if val_adv:
        splits["val-adv"] = val_adv["adv"]
    feature_splits = {"test": test, "train": load_split(data / "train.npz", info)}
    if adv:
        feature_splits["adv"] = adv["adv"]
    dev = resolve_device(device)
    model = load_model(infos[-1].path, dev)
    subject = infos[-1].meta.get("subject", "")

    def load(i: int) -> None:
        load_weights(model, infos[i].path)

    with atomic_dir(out) as tmp:
        index = predict_run(model, load, [c.epoch for c in infos], [str(c.path) for c in infos],
                            splits, feature_splits, tmp, subject, dev, config)  # fmt: skip
    log.info("predicted %d checkpoints on %s in %.1f s (%s path)", len(infos),
             ", ".join(splits), index["seconds"], index["engine"]["path"])  # fmt: skip


if __name__ == "__main__":
    app()
