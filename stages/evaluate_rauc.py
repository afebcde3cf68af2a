"""evaluate-rauc: RAUC-n, APFD and fault-type diversity of every method, all subjects (fan-in)."""

from pathlib import Path

import typer

from ncip.core.io import write_csv, write_json, write_text
from ncip.study import evaluation as ev
from ncip.study.figures import line_figure
from ncip.study.paths import run_key, run_tag
from ncip.study.scoretable import read_score_tables
from ncip.study.stage import StageError, read_records, split_list, stage_main
from ncip.study.subjects import load_study

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    params: Path = typer.Option(Path("params.yaml"), help="reads `subjects` and `runs` from it"),
    scores: Path = typer.Option(Path("scores"), help="root of the score tables"),
    seed: int = typer.Option(..., help="seed of the tie-break permutation"),
    budgets: str = typer.Option(..., help="RAUC-n budgets, comma-separated"),
    bootstrap: int = typer.Option(1000, min=100, help="resamples of the paired intervals"),
    attack_metrics: Path | None = typer.Option(None, help="generate-adversarial reports (JSON)"),
    metrics_dir: Path = typer.Option(Path("metrics")),
    plots_dir: Path = typer.Option(Path("plots")),
) -> None:
    _, subjects, runs = load_study(params)
    ns = tuple(int(b) for b in split_list(budgets))
    if any(b <= 0 for b in ns):
        raise StageError(f"budgets must be positive, got {budgets}")
    table = ev.study_scores(read_score_tables(scores), subjects, runs)
    per_order = ev.evaluate_table(table, seed, ns, ev.FRACTIONS)
    mean, std = ev.aggregate(per_order)
    keys = {run_key(s, r): f"{run_tag(s, r)}.json" for s in subjects for r in runs}
    attacks = read_records(attack_metrics, keys, "generate-adversarial") if attack_metrics else {}
    write_json(metrics_dir / "clean.json", ev.nested(mean, "test", ev.metric_names(ns)))
    write_json(metrics_dir / "adversarial.json", ev.nested(mean, "adv", ev.metric_names(ns)))
    write_json(metrics_dir / "accuracy.json", ev.accuracy(table))
    write_csv(metrics_dir / "per_ordering.csv", per_order)
    write_csv(metrics_dir / "paired.csv", ev.paired_intervals(table, seed, bootstrap))
    write_csv(metrics_dir / "primary.csv", ev.primary_intervals(table, seed, bootstrap))
    write_csv(metrics_dir / "chooser.csv", ev.chooser_regret(table, seed))
    write_text(metrics_dir / "tables.md", ev.tables_markdown(mean, std, ns, len(runs), attacks))
    for s in subjects:
        curves = {
            "fault_diversity": ev.fault_curve(per_order, s, "test", ev.FRACTIONS),
            "detection": ev.detection_curve(table, s, "test", seed),
        }
        for name, df in curves.items():  # long: one row per (x, method), for DVC's plots
            write_csv(plots_dir / name / f"{s}.csv", ev.long_curve(df))
        line_figure(
            curves["fault_diversity"],
            "budget_pct",
            plots_dir / "figures" / f"fault_diversity-{s}.png",
            f"Fault diversity on clean {s} (paper Fig. 5)",
            "budget (% of test set)",
            "distinct (true → predicted) faults",
        )
        line_figure(
            curves["detection"],
            "inspected",
            plots_dir / "figures" / f"detection-{s}.png",
            f"Faults found vs inputs inspected, clean {s}",
            "inputs inspected",
            "misclassified inputs found",
        )


if __name__ == "__main__":
    app()
