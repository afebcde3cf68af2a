"""generate-adversarial: FGSM, PGD, BIM and CW versions of the test and validation splits."""

import time
from pathlib import Path

import numpy as np
import typer

from ncip.attacks import AttackConfig, attack_split, check_attack_names, combine, parse_number
from ncip.checkpoints import check_data_matches, list_checkpoints, load_model
from ncip.data import load_info, load_split, save_split, stratified_split
from ncip.io import atomic_dir, write_json
from ncip.logs import log
from ncip.predict import batched_outputs, resolve_device
from ncip.stage import check_outputs, split_list, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors; the last is attacked"),
    data: Path = typer.Option(..., help="prepared data directory"),
    out: Path = typer.Option(..., help="output directory of adversarial sets (npz)"),
    metrics_out: Path = typer.Option(..., help="per-attack accuracy and success rate (JSON)"),
    attacks: str = typer.Option("fgsm,pgd,bim,cw", help="comma-separated"),
    eps: str = typer.Option("8/255", help="L-inf budget (FGSM, PGD, BIM)"),
    step: str = typer.Option("2/255", help="PGD/BIM step size"),
    steps: int = typer.Option(10, help="PGD/BIM iterations"),
    cw_c: float = typer.Option(1.0),
    cw_kappa: float = typer.Option(0.0),
    cw_steps: int = typer.Option(50),
    cw_lr: float = typer.Option(0.01),
    splits: str = typer.Option("test,val", help="prepared splits to attack"),
    val_size: int = typer.Option(0, min=0, help="attack a stratified subset of val this large (0: all)"),
    seed: int = typer.Option(0),
    run: int = typer.Option(0, min=0),
    batch_size: int = typer.Option(500, min=1),
    device: str = typer.Option("auto"),
) -> None:
    names = check_attack_names(split_list(attacks))
    cfg = AttackConfig(eps=parse_number(eps), step=parse_number(step), steps=steps, cw_c=cw_c,
                       cw_kappa=cw_kappa, cw_steps=cw_steps, cw_lr=cw_lr)  # fmt: skip
    cfg.validate()
    check_outputs(metrics_out, dirs=[out])
    info = load_info(data)
    sources = {name: load_split(data / f"{name}.npz", info) for name in split_list(splits)}
    if "val" in sources and 0 < val_size < len(sources["val"]):
        # The attacked val split only trains TDPR's and EffiMAP's predictors; a subset suffices.
        val = sources["val"]
        _, keep = stratified_split(val.y, val_size / len(val), np.random.default_rng(seed))
        sources["val"] = val.subset(keep)
    final = list_checkpoints(checkpoints)[-1]
    check_data_matches(info, final.meta, data, final.path)
    if info.kind != "image":
        with atomic_dir(out):
            pass  # the paper attacks image models only; downstream stages find no adv.npz
        write_json(metrics_out, {"epoch": final.epoch, "skipped": "not an image dataset"})
        log.info("skipping adversarial generation: %s is not an image dataset", data)
        return
    model = load_model(final.path, resolve_device(device))
    report = {"epoch": final.epoch, "config": cfg.__dict__, "attacks": {}}
    with atomic_dir(out) as tmp:
        for split_name, src in sources.items():
            prefix = "adv" if split_name == "test" else f"{split_name}-adv"
            clean_pred = batched_outputs(model, src.x).argmax(1)
            made = {}
            for i, name in enumerate(names):
                t0 = time.perf_counter()
                adv = attack_split(model, src, name, cfg, seed=seed * 1000 + run + 7919 * i,
                                   batch_size=batch_size, desc=f"{name} {split_name}")  # fmt: skip
                seconds = time.perf_counter() - t0
                adv_pred = batched_outputs(model, adv.x).argmax(1)
                delta = adv.x.reshape(len(adv), -1) - src.x.reshape(len(src), -1) / 255.0
                correct = clean_pred == src.y
                report["attacks"].setdefault(name, {})[split_name] = {
                    "clean_accuracy": float(correct.mean()),
                    "adversarial_accuracy": float((adv_pred == src.y).mean()),
                    # success: a correctly classified input whose adversarial version is not
                    "success_rate": float((adv_pred[correct] != src.y[correct]).mean()),
                    "linf_max": float(np.abs(delta).max()),
                    "l2_mean": float(np.linalg.norm(delta, axis=1).mean()),
                    "seconds": seconds,
                }
                save_split(tmp / f"{prefix}-{name}.npz", adv)
                made[name] = adv
            save_split(tmp / f"{prefix}.npz", combine(made))
    write_json(metrics_out, report)


if __name__ == "__main__":
    app()
