"""analyze-checkpoints: TVD against the number of checkpoints (Fig. 3), NCIP under weak neural
collapse (Fig. 9) and, for the runs in --tsne-runs, t-SNE of final vs NC-aggregated outputs
(Fig. 1)."""

import time
from pathlib import Path

import typer

from ncip.core.collapse import ALPHA, K
from ncip.core.io import write_csv, write_json
from ncip.study.curves import TSNE_RUNS, analyze_run
from ncip.study.curves import tsne_runs as parse_tsne_runs
from ncip.study.figures import analysis_figures
from ncip.study.stage import SelectionRecord, StageError, check_outputs, split_list, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    checkpoints: Path = typer.Option(...),
    predictions: Path = typer.Option(
        ..., help="predict-probabilities output (every checkpoint on the test split)"
    ),
    selection: Path = typer.Option(..., help="selection record (sigma_cos, NC-selected epochs)"),
    k: int = typer.Option(K, min=1),
    alpha: float = typer.Option(ALPHA),
    weak_steps: str = typer.Option(..., help="checkpoint counts for Fig. 9"),
    tsne_points: int = typer.Option(2000, min=100, help="t-SNE subsample of the test set"),
    tsne_runs: str = typer.Option(
        TSNE_RUNS, help="comma-separated runs that draw the t-SNE figure (Fig. 1); empty: none"
    ),
    seed: int = typer.Option(0),
    tvd_out: Path = typer.Option(..., help="Fig. 3 data (CSV)"),
    weak_out: Path = typer.Option(..., help="Fig. 9 data (CSV)"),
    figures: Path = typer.Option(..., help="directory for this subject's PNG figures"),
) -> None:
    try:
        steps = [int(s) for s in split_list(weak_steps)]
    except ValueError:
        raise StageError(
            f"--weak-steps must be comma-separated integers, got {weak_steps!r}"
        ) from None
    tsne = parse_tsne_runs(tsne_runs)
    t0 = time.perf_counter()
    check_outputs(tvd_out, weak_out, dirs=[figures])
    rec = SelectionRecord.read(selection)
    a = analyze_run(predictions, checkpoints, rec, k, alpha, steps, tsne_points, seed)
    write_csv(tvd_out, a.tvd)
    write_csv(weak_out, a.weak)
    analysis_figures(a, figures, seed, tsne=rec.run in tsne)
    write_json(figures / "timing.json", {"seconds": time.perf_counter() - t0})


if __name__ == "__main__":
    app()
