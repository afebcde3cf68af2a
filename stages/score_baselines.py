"""score-baselines: every method in the `methods` list, on the same final model and test sets."""

import time
from pathlib import Path

import pandas as pd
import typer

from ncip.attacks import adversarial_sets
from ncip.checkpoints import check_data_matches, list_checkpoints
from ncip.data import load_info, load_split
from ncip.io import write_json, write_parquet
from ncip.logs import log
from ncip.predict import Predictions, resolve_device
from ncip.scores import ScoringContext, get_method
from ncip.scoretable import score_rows
from ncip.stage import check_outputs, split_list, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    subject: str = typer.Option(...),
    run: int = typer.Option(0, min=0),
    data: Path = typer.Option(..., help="prepared data directory"),
    checkpoints: Path = typer.Option(..., help="directory of epoch-XXX.safetensors"),
    predictions: Path | None = typer.Option(None, help="predict-probabilities output: stored "
                                            "outputs instead of running the models again"),
    methods: str = typer.Option("random,entropy,deepgini,msp,pcs", help="comma-separated"),
    adversarial: Path | None = typer.Option(None, help="generate-adversarial output (adv.npz, val-adv.npz)"),
    seed: int = typer.Option(0),
    random_repeats: int = typer.Option(10, min=1, help="seeds of the random baseline"),
    dropout_samples: int = typer.Option(200, min=1, help="MC-Dropout passes T"),
    dropout_rate: float = typer.Option(0.5, help="dropout rate where the model has none"),
    nns_k: int = typer.Option(10, min=1),
    nns_lambda: float = typer.Option(0.5),
    sets_budget: int = typer.Option(500, min=1, help="SETS selects this many, then by uncertainty"),
    sets_a: float = typer.Option(3.0, help="SETS pool = a x budget most uncertain inputs"),
    tdpr_rounds: int = typer.Option(10, min=1, help="xgboost boosting rounds"),
    effimap_size: str = typer.Option("reduced", help="reduced or full (see ncip.scores.effimap)"),
    out: Path = typer.Option(..., help="score table (Parquet)"),
    cost_out: Path = typer.Option(..., help="preparation and scoring seconds per method (JSON)"),
    batch_size: int = typer.Option(1024, min=1),
    device: str = typer.Option("auto"),
) -> None:
    chosen = [get_method(m) for m in split_list(methods)]  # unknown names fail here, first
    check_outputs(out, cost_out)
    info = load_info(data)
    final = list_checkpoints(checkpoints)[-1]
    check_data_matches(info, final.meta, data, final.path)
    test = load_split(data / "test.npz", info)
    sets = {"test": test, **adversarial_sets(adversarial, info=info)}
    labelled = {"test": load_split(data / "val.npz", info),
                **adversarial_sets(adversarial, "val", info)}
    ctx = ScoringContext(
        subject=subject,
        seed=seed * 1000 + run,
        checkpoint_dir=checkpoints,
        eval_splits=sets,
        train=load_split(data / "train.npz", info),
        labelled=labelled,
        options={
            "random": {"repeats": random_repeats},
            "dropout": {"samples": dropout_samples, "rate": dropout_rate},
            "nns": {"k": nns_k, "lambda": nns_lambda},
            "sets": {"budget": sets_budget, "a": sets_a},
            "tdpr": {"rounds": tdpr_rounds},
            "effimap": {"size": effimap_size},
        },
        device=str(resolve_device(device)),
        batch_size=batch_size,
        predictions=Predictions(predictions) if predictions is not None else None,
    )
    started = time.perf_counter()
    t0 = time.perf_counter()
    preds = {name: ctx.final_logits(name).argmax(axis=1) for name in sets}
    cost = {"final_model_inference": {"seconds": time.perf_counter() - t0}}
    parts = []
    # On a model trained elsewhere a baseline may not apply (e.g. EffiMAP without channels to
    # mutate): it is skipped with its reason, which the report lists. On the study's own
    # models every failure is a bug and stops the stage.
    external = final.meta.get("arch") == "external"
    for m in chosen:
        t0 = time.perf_counter()
        try:
            m.prepare(ctx)
            cost[m.name] = {"prepare": time.perf_counter() - t0, "score": {}}
            rows = []
            for name, split in sets.items():
                t0 = time.perf_counter()
                s = m.score(ctx, name)
                cost[m.name]["score"][name] = time.perf_counter() - t0
                rows.append(score_rows(subject, run, name, split.ids, split.y, preds[name],
                                       m.name, s))  # fmt: skip
        except Exception as e:  # noqa: BLE001  (recorded, for external models only)
            if not external:
                raise
            reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
            log.warning("%s cannot run on %s: %s", m.name, subject, reason)
            cost[m.name] = {"skipped": reason}
            continue
        parts += rows
        # Methods that train per distribution (TDPR, EffiMAP) time that part themselves as
        # "prepare[<split>]": it is preparation, so it leaves the scoring time.
        for label, seconds in ctx.costs.get(m.name, {}).items():
            cost[m.name][label] = seconds
            split_name = label[label.find("[") + 1 : -1] if "[" in label else None
            if split_name in cost[m.name]["score"]:
                cost[m.name]["score"][split_name] -= seconds
        total = cost[m.name]["prepare"] + sum(cost[m.name]["score"].values())
        log.info("%s: %.2fs", m.name, total + sum(ctx.costs.get(m.name, {}).values()))
    cost["seconds"] = time.perf_counter() - started
    write_parquet(out, pd.concat(parts, ignore_index=True))
    write_json(cost_out, cost)


if __name__ == "__main__":
    app()
