"""analyze-checkpoints: TVD against the number of checkpoints (Fig. 3), NCIP under weak neural
collapse (Fig. 9) and t-SNE of final vs NC-aggregated outputs (Fig. 1)."""

import time
from pathlib import Path

import numpy as np
import typer

from ncip.checkpoints import list_checkpoints
from ncip.figures import band_figure, line_figure, tsne_figure
from ncip.io import atomic_path, write_json
from ncip.predict import Predictions, softmax64
from ncip.stage import StageError, check_outputs, read_record, split_list, stage_main
from ncip.study import tvd_curve, weak_collapse_curve

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(...),
    predictions: Path = typer.Option(..., help="predict-probabilities output (every checkpoint "
                                     "on the test split)"),
    selection: Path = typer.Option(..., help="selection record (sigma_cos, NC-selected epochs)"),
    k: int = typer.Option(30, min=1),
    alpha: float = typer.Option(0.9),
    weak_steps: str = typer.Option("10,20,30,40,50,60", help="checkpoint counts for Fig. 9"),
    tsne_points: int = typer.Option(2000, min=100, help="t-SNE subsample of the test set"),
    seed: int = typer.Option(0),
    tvd_out: Path = typer.Option(..., help="Fig. 3 data (CSV)"),
    weak_out: Path = typer.Option(..., help="Fig. 9 data (CSV)"),
    figures: Path = typer.Option(..., help="directory for this subject's PNG figures"),
) -> None:
    try:
        steps = [int(s) for s in split_list(weak_steps)]
    except ValueError:
        raise StageError(f"--weak-steps must be comma-separated integers, got {weak_steps!r}") from None
    t0 = time.perf_counter()
    check_outputs(tvd_out, weak_out, dirs=[figures])
    plan = read_record(selection, "select-checkpoints", ["sigma_cos", "selected_epochs", "subject",
                                                         "run"])  # fmt: skip
    preds = Predictions(predictions)
    epochs, _ids, labels, logits = preds.logits("test")
    probs = softmax64(logits)  # [E, N, C], every checkpoint, ascending
    infos = list_checkpoints(checkpoints)
    if [c.epoch for c in infos] != epochs.tolist():
        raise StageError(f"{predictions} holds epochs {epochs.tolist()} but {checkpoints} holds "
                         f"{[c.epoch for c in infos]}; re-run predict-probabilities")
    sigma = np.array([plan["sigma_cos"][str(c.epoch)] for c in infos])
    name = f"{plan['subject']} run {plan['run']}"

    tv = tvd_curve(probs, labels)
    weak = weak_collapse_curve(probs, labels, sigma, k, alpha, steps + [len(infos)], seed)
    weak = weak.drop_duplicates("checkpoints")
    for df, out in ((tv, tvd_out), (weak, weak_out)):
        with atomic_path(out) as tmp:
            df.to_csv(tmp, index=False)
    figures.mkdir(parents=True, exist_ok=True)
    band_figure(tv, "checkpoints", {"correct": ("correct_mean", "correct_std"),
                                    "misclassified": ("misclassified_mean", "misclassified_std")},
                figures / "tvd_curve.png", f"TVD of {name} (paper Fig. 3)",
                "last n checkpoints", "mean TVD to the final checkpoint ± std")  # fmt: skip
    line_figure(weak[["checkpoints", "rauc_all", "accuracy"]], "checkpoints",
                figures / "weak_collapse.png", f"NCIP under weak collapse, {name} (paper Fig. 9)",
                "checkpoints available (first E')", "value", highlight="rauc_all",
                legend_title=None)  # fmt: skip
    rng = np.random.default_rng(seed)
    sub = np.sort(rng.choice(len(labels), min(tsne_points, len(labels)), replace=False))
    epochs = [c.epoch for c in infos]
    nc = [epochs.index(e) for e in plan["selected_epochs"]]
    wrong = probs[-1][sub].argmax(1) != labels[sub]
    tsne_figure(probs[-1][sub], probs[nc][:, sub].mean(0), wrong, figures / "tsne.png", name, seed)
    write_json(figures / "timing.json", {"seconds": time.perf_counter() - t0})


if __name__ == "__main__":
    app()
