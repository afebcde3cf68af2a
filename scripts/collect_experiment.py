"""Write metrics/extended.md from the extended experiment's report: its models, clean RAUC-ALL,
Table 5 and per-subject paired intervals, with the command that ran it and its time."""

from pathlib import Path

import typer

from ncip.core.io import write_text
from ncip.study.report.significance import EXTENDED_SECTIONS, markdown_sections
from ncip.study.stage import StageError, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    report: Path = typer.Option(..., help="the extended experiment's metrics/report.md"),
    seconds: int = typer.Option(..., min=0, help="wall-clock time of the experiment"),
    command: str = typer.Option(..., help="the command that ran it"),
    commit: str = typer.Option(..., help="the commit it ran at"),
    out: Path = typer.Option(Path("metrics/extended.md")),
) -> None:
    sections = markdown_sections(report.read_text())
    missing = [h for h in EXTENDED_SECTIONS if not any(k.startswith(h) for k in sections)]
    if missing:
        raise StageError(f"{report} lacks the sections {missing}; did the experiment finish?")
    lines = [
        f"Ran at commit {commit} with `make extended` ({command} --temp -n extended) in "
        f"{seconds // 60} min {seconds % 60} s on this machine, re-using the default study's "
        "cached run 0 of its Fashion-MNIST subjects.",
        "",
    ]
    for h in EXTENDED_SECTIONS:
        for title, body in sections.items():
            if title.startswith(h):
                lines += [f"### {title}", "", body.strip(), ""]
    write_text(out, "\n".join(lines))


if __name__ == "__main__":
    app()
