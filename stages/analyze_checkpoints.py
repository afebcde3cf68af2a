"""analyze-checkpoints: TVD against the number of checkpoints (Fig. 3), NCIP under weak neural
collapse (Fig. 9) and t-SNE of final vs NC-aggregated outputs (Fig. 1)."""

from pathlib import Path

import numpy as np
import typer

from ncip.checkpoints import check_data_matches, list_checkpoints, load_model
from ncip.data import load_info, load_split
from ncip.figures import band_figure, line_figure, tsne_figure
from ncip.io import atomic_path
from ncip.logs import progress
from ncip.predict import batched_outputs, resolve_device, softmax64
from ncip.stage import StageError, check_outputs, read_record, split_list, stage_main
from ncip.study import tvd_curve, weak_collapse_curve

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(...),
    data: Path = typer.Option(..., help="prepared data directory (its test split is analysed)"),
    selection: Path = typer.Option(..., help="selection record (sigma_cos, NC-selected epochs)"),
    k: int = typer.Option(30, min=1),
    alpha: float = typer.Option(0.9),
    weak_steps: str = typer.Option("10,20,30,40,50,60", help="checkpoint counts for Fig. 9"),
    tsne_points: int = typer.Option(2000, min=100, help="t-SNE subsample of the test set"),
    seed: int = typer.Option(0),
    tvd_out: Path = typer.Option(..., help="Fig. 3 data (CSV)"),
    weak_out: Path = typer.Option(..., help="Fig. 9 data (CSV)"),
    figures: Path = typer.Option(..., help="directory for this subject's PNG figures"),
    batch_size: int = typer.Option(1024, min=1),
    device: str = typer.Option("auto"),
) -> None:
    try:
        steps = [int(s) for s in split_list(weak_steps)]
    except ValueError:
        raise StageError(f"--weak-steps must be comma-separated integers, got {weak_steps!r}") from None
    check_outputs(tvd_out, weak_out, dirs=[figures])
    plan = read_record(selection, "select-checkpoints", ["sigma_cos", "selected_epochs", "subject",
                                                         "run"])  # fmt: skip
    info = load_info(data)
    test = load_split(data / "test.npz", info)
    infos = list_checkpoints(checkpoints)
    check_data_matches(info, infos[-1].meta, data, infos[-1].path)
    dev = resolve_device(device)
    probs = []
    for c in progress(infos, "trajectory test", unit="ckpt"):
        model = load_model(c.path, dev)
        probs.append(softmax64(batched_outputs(model, test.x, batch_size, source=str(c.path))))
    probs = np.stack(probs)
    sigma = np.array([plan["sigma_cos"][str(c.epoch)] for c in infos])
    name = f"{plan['subject']} run {plan['run']}"

    tv = tvd_curve(probs, test.y)
    weak = weak_collapse_curve(probs, test.y, sigma, k, alpha, steps + [len(infos)], seed)
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
    sub = np.sort(rng.choice(len(test), min(tsne_points, len(test)), replace=False))
    epochs = [c.epoch for c in infos]
    nc = [epochs.index(e) for e in plan["selected_epochs"]]
    wrong = probs[-1][sub].argmax(1) != test.y[sub]
    tsne_figure(probs[-1][sub], probs[nc][:, sub].mean(0), wrong, figures / "tsne.png", name, seed)


if __name__ == "__main__":
    app()
