"""generate-adversarial: FGSM, PGD, BIM and CW versions of the test and validation splits."""

from pathlib import Path

import typer

from ncip.core.io import atomic_dir, write_json
from ncip.study.attacks import (
    ATTACKS,
    AttackConfig,
    attack_run,
    check_attack_names,
    parse_number,
)
from ncip.study.stage import check_outputs, default, split_list, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(
        ..., help="directory of epoch-XXX.safetensors; the last is attacked"
    ),
    data: Path = typer.Option(..., help="prepared data directory"),
    out: Path = typer.Option(..., help="output directory of adversarial sets (npz)"),
    metrics_out: Path = typer.Option(..., help="per-attack accuracy and success rate (JSON)"),
    attacks: str = typer.Option(",".join(ATTACKS), help="comma-separated"),
    eps: str = typer.Option(
        str(default(AttackConfig, "eps")), help="L-inf budget (FGSM, PGD, BIM)"
    ),
    step: str = typer.Option(str(default(AttackConfig, "step")), help="PGD/BIM step size"),
    steps: int = typer.Option(default(AttackConfig, "steps"), help="PGD/BIM iterations"),
    cw_c: float = typer.Option(default(AttackConfig, "cw_c")),
    cw_kappa: float = typer.Option(default(AttackConfig, "cw_kappa")),
    cw_steps: int = typer.Option(default(AttackConfig, "cw_steps")),
    cw_lr: float = typer.Option(default(AttackConfig, "cw_lr")),
    splits: str = typer.Option("test,val", help="prepared splits to attack"),
    val_size: int = typer.Option(
        0, min=0, help="attack a stratified subset of val this large (0: all)"
    ),
    seed: int = typer.Option(0),
    run: int = typer.Option(0, min=0),
    batch_size: int = typer.Option(500, min=1),
    device: str = typer.Option("auto"),
) -> None:
    names = check_attack_names(split_list(attacks))
    numbers = dict(steps=steps, cw_c=cw_c, cw_kappa=cw_kappa, cw_steps=cw_steps, cw_lr=cw_lr)
    cfg = AttackConfig(eps=parse_number(eps), step=parse_number(step), **numbers)
    cfg.validate()
    check_outputs(metrics_out, dirs=[out])
    with atomic_dir(out) as tmp:
        record = attack_run(
            checkpoints,
            data,
            split_list(splits),
            val_size,
            names,
            cfg,
            seed,
            run,
            batch_size,
            device,
            tmp,
        )
    write_json(metrics_out, record)


if __name__ == "__main__":
    app()
