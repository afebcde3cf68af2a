"""publish-records: the heavy stages' small records, copied to git-tracked files.

train-with-checkpoints, generate-adversarial and retrain-guidance write their history, attack
results and fine-tuning gains (one file per group of arms, merged here) under ``records/`` as
DVC-cached outputs only, so DVC's run-cache
can restore those stages on another machine (a stage with any ``cache: false`` output is never
run-cached). This cheap stage copies the records to where git, `dvc plots` and `dvc metrics`
read them.
"""

from pathlib import Path

import typer

from ncip.core.io import mirror_files
from ncip.core.logs import log
from ncip.study.retrain import publish as publish_retrain
from ncip.study.stage import StageError, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    records: Path = typer.Option(Path("records"), help="records/<kind>/ of the heavy stages"),
    to: list[str] = typer.Option(
        ..., help="KIND=FOLDER[:SUFFIX], e.g. training=plots/training:.csv"
    ),
    retrain_to: Path = typer.Option(
        Path("metrics/retrain"), help="records/retrain/<subject>-run-<r>/ merged, one JSON each"
    ),
) -> None:
    for spec in to:
        kind, _, target = spec.partition("=")
        folder, _, suffix = target.partition(":")
        if not kind or not folder or not suffix:
            raise StageError(f"--to {spec!r}: expected KIND=FOLDER:SUFFIX")
        names = mirror_files(records / kind, folder, suffix)
        log.info("published %d %s record(s) to %s", len(names), kind, folder)
    names = publish_retrain(records / "retrain", retrain_to)
    log.info("published %d merged retraining record(s) to %s", len(names), retrain_to)


if __name__ == "__main__":
    app()
