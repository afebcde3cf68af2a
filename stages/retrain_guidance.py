"""retrain-guidance: fine-tune on each method's top 20% of a held-out pool (RQ3, paper Fig. 6)."""

import time
from pathlib import Path

import numpy as np
import typer

from ncip.checkpoints import list_checkpoints, load_model
from ncip.data import load_info, load_split
from ncip.evaluation import ABLATION
from ncip.io import write_json
from ncip.predict import resolve_device
from ncip.retrain import RetrainConfig, retrain_gains
from ncip.scoretable import read_score_tables
from ncip.stage import StageError, check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    data: Path = typer.Option(...),
    checkpoints: Path = typer.Option(...),
    scores: Path = typer.Option(..., help="this subject-run's score tables"),
    out: Path = typer.Option(..., help="gains per method (JSON)"),
    budget: float = typer.Option(0.2, help="share of the candidate pool used for fine-tuning"),
    pool_fraction: float = typer.Option(0.5, help="share of the test split in the pool"),
    epochs: int = typer.Option(5),
    lr: float = typer.Option(1e-4),
    batch_size: int = typer.Option(64),
    seeds: int = typer.Option(3, help="fine-tuning seeds to average over"),
    seed: int = typer.Option(0),
    device: str = typer.Option("auto"),
) -> None:
    t0 = time.perf_counter()
    cfg = RetrainConfig(budget, pool_fraction, epochs, lr, batch_size, seeds)
    cfg.validate()
    check_outputs(out)
    info = load_info(data)
    test = load_split(data / "test.npz", info)
    table = read_score_tables(scores)
    table = table[(table["split"] == "test") & (table["repeat"] == 0)
                  & ~table["method"].isin([m for m in ABLATION if m != "ncip"])]  # fmt: skip
    by_method = {}
    for method, g in table.groupby("method"):
        s = g.set_index("sample_id")["score"]
        missing = set(test.ids) - set(s.index)
        if missing:
            raise StageError(f"{method} has no score for {len(missing)} test inputs")
        by_method[method] = s.loc[test.ids].to_numpy(np.float64)
    model = load_model(list_checkpoints(checkpoints)[-1].path, resolve_device(device))
    rows = retrain_gains(model, load_split(data / "train.npz", info), test, by_method, cfg, seed)
    summary = rows.groupby("method").agg(gain=("gain", "mean"), gain_std=("gain", "std"),
                                         before=("before", "first"), after=("after", "mean"),
                                         faults_selected=("faults_selected", "first"),
                                         selected=("selected", "first"))  # fmt: skip
    write_json(out, {"config": cfg.__dict__, "seconds": time.perf_counter() - t0,
                     "methods": {m: {k: float(v) for k, v in r.items()}
                                 for m, r in summary.iterrows()}})  # fmt: skip


if __name__ == "__main__":
    app()
