"""report: this run's Tables 3-9 beside the paper's, Table 5 statistics and the figures."""

from pathlib import Path

import typer

from ncip.core.io import write_csv, write_json, write_text
from ncip.study import report
from ncip.study.figures import bar_figure, forest_figure, line_figure
from ncip.study.stage import stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    params: Path = typer.Option(Path("params.yaml")),
    metrics_dir: Path = typer.Option(Path("metrics")),
    scores: Path = typer.Option(Path("scores")),
    plots_dir: Path = typer.Option(Path("plots")),
    out: Path = typer.Option(Path("metrics/report.md")),
) -> None:
    inputs = report.read_inputs(params, metrics_dir, scores, plots_dir)
    write_json(metrics_dir / "significance.json", report.significance_record(inputs))
    write_json(metrics_dir / "cost.json", inputs.cost)
    write_text(out, report.render_report(inputs))
    forest = report.forest_rows(inputs)
    if forest:
        forest_figure(forest, plots_dir / "report" / "forest.png", "difference in clean RAUC-ALL")
    curve = report.chooser_curve(inputs)
    if not curve.empty:
        line_figure(
            curve,
            "size",
            plots_dir / "report" / "chooser.png",
            "Regret of the holdout chooser and of always one score (median over data sets)",
            "labelled holdout inputs",
            "regret in clean RAUC-ALL",
            highlight="chooser",
            legend_title="order",
        )
    # no rows when nothing was fine-tuned or no subject is fine enough to average
    df = report.retrain_table(inputs)
    if not df.empty:
        bar_figure(
            df,
            "method",
            "average",
            plots_dir / "report" / "retrain.png",
            "Accuracy gain after fine-tuning on the training set plus each arm (Fig. 6)",
            "mean gain over subjects (percentage points)",
        )
    write_csv(plots_dir / "retrain.csv", df)
    if not inputs.weak.empty:
        line_figure(
            report.weak_table(inputs),
            "checkpoints",
            plots_dir / "report" / "weak_collapse.png",
            "NCIP RAUC-ALL with only the first E' checkpoints (paper Fig. 9)",
            "checkpoints available",
            "RAUC-ALL",
            highlight="",
            legend_title="subject",
        )


if __name__ == "__main__":
    app()
