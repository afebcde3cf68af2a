"""predict-probabilities: one Parquet table per checkpoint NCIP needs (selected and last K)."""

import time
from pathlib import Path

import typer

from ncip.attacks import adversarial_sets
from ncip.checkpoints import check_data_matches, list_checkpoints, load_model
from ncip.data import load_info, load_split
from ncip.io import atomic_dir, write_json, write_parquet
from ncip.logs import log, progress
from ncip.predict import predict_checkpoint, resolve_device
from ncip.stage import StageError, check_outputs, read_record, split_list, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    selection: Path = typer.Option(..., help="selection record from select-checkpoints"),
    data: Path = typer.Option(..., help="prepared data directory"),
    splits: str = typer.Option("test", help="comma-separated splits of the prepared data"),
    adversarial: Path | None = typer.Option(None, help="generate-adversarial output; its adv.npz is predicted as split 'adv'"),
    out: Path = typer.Option(..., help="output directory, one epoch-XXX.parquet per checkpoint"),
    batch_size: int = typer.Option(1024, min=1),
    device: str = typer.Option("auto"),
) -> None:
    check_outputs(dirs=[out])
    plan = read_record(selection, "select-checkpoints", ["selected_epochs", "last_k_epochs"])
    epochs = sorted(set(plan["selected_epochs"]) | set(plan["last_k_epochs"]))
    infos = list_checkpoints(checkpoints)
    by_epoch = {c.epoch: c for c in infos}
    missing = [e for e in epochs if e not in by_epoch]
    if missing:
        raise StageError(f"selection names epochs {missing} that {checkpoints} does not hold; "
                         "re-run select-checkpoints")  # fmt: skip
    info = load_info(data)
    check_data_matches(info, infos[-1].meta, data, infos[-1].path)
    sets = {name: load_split(data / f"{name}.npz", info) for name in split_list(splits)}
    sets.update(adversarial_sets(adversarial, info=info))
    dev = resolve_device(device)
    subject = plan.get("subject", "")
    t0 = time.perf_counter()
    with atomic_dir(out) as tmp:
        for e in progress(epochs, f"predict {subject}/run-{plan.get('run', 0)}", unit="ckpt"):
            model = load_model(by_epoch[e].path, dev)
            table = predict_checkpoint(model, sets, subject, e, batch_size, str(by_epoch[e].path))
            write_parquet(tmp / f"epoch-{e:03d}.parquet", table)
        write_json(tmp / "timing.json", {"checkpoints": len(epochs),
                                         "seconds": time.perf_counter() - t0})  # fmt: skip
    log.info("predicted %d checkpoints on %s", len(epochs), ", ".join(sets))


if __name__ == "__main__":
    app()
