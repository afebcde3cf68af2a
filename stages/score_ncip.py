"""score-ncip: TVD, margin and NCIP per test input, with the paper's ablations (Tables 7-8), the
selection control and the checkpoint scores."""

import time
from pathlib import Path

import pandas as pd
import typer

from ncip.core.io import write_json, write_parquet
from ncip.core.metrics import run_seed
from ncip.study.predict import Predictions
from ncip.study.scores.ncip import needed_epochs, score_ncip_split, selection_chooses
from ncip.study.scoretable import score_rows
from ncip.study.stage import SelectionRecord, check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    predictions: Path = typer.Option(..., help="directory from predict-probabilities"),
    selection: Path = typer.Option(..., help="selection record from select-checkpoints"),
    out: Path = typer.Option(..., help="score table (Parquet)"),
    cost_out: Path = typer.Option(..., help="NCIP's selection, prediction, scoring seconds"),
    seed: int = typer.Option(0, help="study seed: the selection control draws with (seed, run)"),
) -> None:
    t0 = time.perf_counter()
    check_outputs(out, cost_out)
    rec = SelectionRecord.read(selection)
    sel = rec.selection
    preds = Predictions(predictions)
    draw = run_seed(seed, rec.run)
    needed = needed_epochs(sel, draw)
    parts = []
    scored = [s for s in ("test", "adv") if s in preds.splits]  # val, val-adv train TDPR only
    for split in scored:
        stack = preds.stack(split, needed)
        final = stack.at([sel.final_epoch])
        pred = final.probs[0].argmax(axis=1)
        variants = score_ncip_split(stack, sel, draw)
        for method, s in variants.items():
            parts.append(
                score_rows(
                    rec.subject,
                    rec.run,
                    split,
                    stack.sample_id,
                    stack.label,
                    pred,
                    method,
                    s,
                )
            )
    write_parquet(out, pd.concat(parts, ignore_index=True))
    # NCIP's share of the shared prediction run: its checkpoints on the sets it ranks
    sizes = preds.index.splits
    share = (len(needed) / len(preds.epochs)) * (
        sum(sizes[s] for s in scored) / sum(sizes.values())
    )
    write_json(
        cost_out,
        {
            "select": rec.seconds,
            "predict": preds.index.seconds * share,
            "predicted_checkpoints": len(needed),
            "selection_control": None
            if selection_chooses(sel)
            else f"not computed: K = {sel.k} keeps the whole pool of {len(sel.pool)}",
            "score": time.perf_counter() - t0,
        },
    )


if __name__ == "__main__":
    app()
