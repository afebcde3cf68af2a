"""train-with-checkpoints: seeded training that writes a safetensors checkpoint every epoch."""

from pathlib import Path

import typer

from ncip.core.io import write_csv
from ncip.core.metrics import run_seed
from ncip.study import stage as st
from ncip.study.data import load_prepared
from ncip.study.external import adopt_imported
from ncip.study.subjects import VARIANT_STRENGTH, external_specs, parse_subject
from ncip.study.training import TrainConfig, train_with_checkpoints

app = typer.Typer(add_completion=False)


@app.command()
@st.stage_main
def main(
    subject: str = typer.Option(..., help="dataset-model pair, e.g. fmnist-lenet5"),
    data: Path = typer.Option(..., help="prepared data directory"),
    out: Path = typer.Option(..., help="checkpoint directory (epoch-XXX.safetensors)"),
    work: Path = typer.Option(..., help="resume state, kept until training completes"),
    history_out: Path = typer.Option(..., help="per-epoch table (CSV) for dvc plots"),
    epochs: int = typer.Option(st.default(TrainConfig, "epochs"), min=1),
    batch_size: int = typer.Option(st.default(TrainConfig, "batch_size"), min=1),
    optimizer: str = typer.Option(st.default(TrainConfig, "optimizer"), help="adam or sgd"),
    lr: float = typer.Option(st.default(TrainConfig, "lr")),
    momentum: float = typer.Option(st.default(TrainConfig, "momentum"), help="SGD momentum"),
    weight_decay: float = typer.Option(st.default(TrainConfig, "weight_decay")),
    schedule: str = typer.Option(st.default(TrainConfig, "schedule"), help="none or cosine"),
    mixup_alpha: float = typer.Option(VARIANT_STRENGTH["mixup"], help="used by the -mixup variant"),
    label_smoothing: float = typer.Option(VARIANT_STRENGTH["ls"], help="for the -ls variant"),
    seed: int = typer.Option(0),
    run: int = typer.Option(0, min=0, help="repetition; trains with seed*1000 + run"),
    device: str = typer.Option("auto", help="auto, cpu or cuda[:N]"),
    params: Path = typer.Option(Path("params.yaml"), help="read for `external` subjects"),
    nproc: int = typer.Option(1, min=1, help="processes: > 1 trains with DDP under torchrun"),
    precision: str = typer.Option(st.default(TrainConfig, "precision"), help="fp32, bf16 or fp16"),
    channels_last: str = typer.Option(str(st.default(TrainConfig, "channels_last")).lower()),
    deterministic: str = typer.Option(str(st.default(TrainConfig, "deterministic")).lower()),
) -> None:
    st.torchrun_if_asked(nproc)
    external = external_specs(params)
    s = parse_subject(subject, external)
    if s.external:  # trained elsewhere: copy its imported checkpoints instead of training
        st.check_outputs(history_out, dirs=[out])
        hist = adopt_imported(external[subject], run, out)
        write_csv(history_out, hist)
        return
    cfg = TrainConfig(
        arch=s.model,
        epochs=s.epochs or epochs,  # an e<N> variant's own length
        batch_size=batch_size,
        optimizer=optimizer,
        lr=lr,
        momentum=momentum,
        weight_decay=weight_decay,
        schedule=schedule,
        mixup_alpha=mixup_alpha if s.variant == "mixup" else 0.0,
        label_smoothing=label_smoothing if s.variant == "ls" else 0.0,
        seed=run_seed(seed, run),
        precision=precision,
        channels_last=st.flag(channels_last),
        deterministic=st.flag(deterministic),
    )
    cfg.validate()
    st.check_outputs(history_out, dirs=[out, work])
    info, splits = load_prepared(data, s.dataset)
    hist = train_with_checkpoints(
        cfg, info, splits, out, work, subject=subject, run=run, device=device
    )
    if st.is_rank_zero():
        write_csv(history_out, hist)


if __name__ == "__main__":
    app()
