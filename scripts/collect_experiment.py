"""Write metrics/NAME.md from an experiment's report (`scripts/experiment.sh NAME`): the
sections that experiment keeps (its models, clean RAUC-ALL, Table 5, per-subject paired
intervals, ...), or the experiment's own result file (`make lm`), with the command that ran it
and its time."""

from pathlib import Path

import typer

from ncip.core.io import write_text
from ncip.study.presets import EXPERIMENTS
from ncip.study.report.significance import (
    EXPERIMENT_SECTIONS,
    OPTIONAL_SECTIONS,
    markdown_sections,
)
from ncip.study.stage import StageError, stage_main

app = typer.Typer(add_completion=False)


def stages_said(log: Path | None) -> str:
    """What DVC said it did, counted from its output: the stages it ran, and those it restored
    from its run-cache or found unchanged (a time means little without it)."""
    if log is None or not log.is_file():
        return ""
    lines = log.read_text(errors="replace").replace("\r", "\n").splitlines()
    ran = sum(ln.startswith("Running stage '") for ln in lines)
    restored = sum(ln.startswith("Stage '") and "is cached - skipping run" in ln for ln in lines)
    unchanged = sum(ln.startswith("Stage '") and "didn't change, skipping" in ln for ln in lines)
    said = f"; DVC ran {ran} stages"
    if restored or unchanged:
        said += f", restored {restored} from its run-cache and found {unchanged} unchanged"
    else:
        said += " and restored none from its run-cache"
    return said


@app.command()
@stage_main
def main(
    report: Path = typer.Option(..., help="the experiment's metrics/report.md"),
    seconds: int = typer.Option(..., min=0, help="wall-clock time of the experiment"),
    command: str = typer.Option(..., help="the command that ran it"),
    commit: str = typer.Option(..., help="the commit it ran at"),
    out: Path = typer.Option(..., help="metrics/NAME.md"),
    name: str = typer.Option("extended", help="the experiment (ncip preset lists them)"),
    log: Path | None = typer.Option(
        None, help="the experiment's output (`dvc exp run`'s), to say how many stages ran"
    ),
    figures: Path | None = typer.Option(
        None, help="where the experiment's report figures were copied (its links point there)"
    ),
) -> None:
    text = report.read_text()
    if figures is not None:  # the report links ../plots/report/X.png beside metrics/report.md
        text = text.replace("](../plots/report/", f"](../{figures.as_posix()}/")
    header = (
        f"Ran at commit {commit} with `make {name}` ({command} --temp -n {name}) in "
        f"{seconds // 60} min {seconds % 60} s on this machine{stages_said(log)}."
    )
    if EXPERIMENTS.get(name) and EXPERIMENTS[name].result:  # its own result file, as it is
        write_text(out, f"{header}\n\n{text.strip()}\n")
        return
    if name not in EXPERIMENT_SECTIONS:
        raise StageError(f"unknown experiment {name!r}; choose one of {list(EXPERIMENT_SECTIONS)}")
    keep = EXPERIMENT_SECTIONS[name]
    sections = markdown_sections(text)
    missing = [h for h in keep if not any(k.startswith(h) for k in sections)]
    if missing:
        raise StageError(f"{report} lacks the sections {missing}; did the experiment finish?")
    lines = [
        header,
        "",
        # the report's opening paragraph: subjects, runs, K, alpha, epochs, stand-ins
        text.split("\n## ", 1)[0].split("\n", 1)[-1].strip(),
        "",
    ]
    for h in (*keep, *(o for o in OPTIONAL_SECTIONS if o not in keep)):
        for title, body in sections.items():
            if title.startswith(h):
                lines += [f"### {title}", "", body.strip(), ""]
    write_text(out, "\n".join(lines))


if __name__ == "__main__":
    app()
