"""lm-data: the language-model study's texts, tokenizer and test prompts (ncip.study.lm.corpus)."""

from pathlib import Path

import typer

from ncip.core.io import atomic_dir
from ncip.core.logs import log
from ncip.study.lm.corpus import prepare
from ncip.study.lm.models import get_lm
from ncip.study.stage import check_outputs, stage_main

app = typer.Typer(add_completion=False)


@app.command()
@stage_main
def main(
    model: str = typer.Option(..., help="a language model of ncip.study.lm.models"),
    out: Path = typer.Option(..., help="output folder"),
    raw_root: Path = typer.Option(Path("data/raw"), help="where raw files are looked for first"),
    finetune_paragraphs: int = typer.Option(400, min=1, help="documentation paragraphs"),
    prompts: int = typer.Option(500, min=10, help="test prompts"),
) -> None:
    spec = get_lm(model)
    check_outputs(dirs=[out])
    with atomic_dir(out) as tmp:
        info = prepare(tmp, raw_root, spec, finetune_paragraphs, prompts)
    log.info("lm data for %s: %s", model, {k: v for k, v in info.items() if k != "packages"})


if __name__ == "__main__":
    app()
