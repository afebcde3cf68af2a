"""Render the parts of docs/ that are facts of the data or of committed runs, between
``<!-- render:NAME -->`` and ``<!-- /render:NAME -->`` markers (``make docs``): a test fails when a
committed page differs from what this renders (tests/test_docs_render.py).

- ``tables`` (docs/datasets.md): every table of Debian's R data packages, read as the study reads
  it: rows, features, classes, test inputs, source and package.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

app = typer.Typer(add_completion=False)
ROOT = Path(__file__).resolve().parents[1]


def render_tables(raw_root: Path = ROOT / "data" / "raw") -> str:
    from ncip.study.datasets import uci

    lines = [
        "| data set | source | package: object | rows | features | classes | test inputs |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for name, t in uci.TABLES.items():
        raw = uci.load_table(name, raw_root)
        rows = len(raw.train.y) + len(raw.test.y)
        lines.append(
            f"| `{name}` | {t.source} | {t.deb}: {t.obj or t.rda} | {rows:,} | "
            f"{raw.train.x.shape[-1]} | {len(raw.classes)} | {len(raw.test.y):,} |"
        )
    return "\n".join(lines)


RENDERERS = {"tables": ("docs/datasets.md", render_tables)}


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- render:{name} -->\n)(?:.*?\n)?(<!-- /render:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"error: no <!-- render:{name} --> block to fill")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


@app.command()
def main(check: bool = typer.Option(False, help="exit 1 where a page differs; write nothing")):
    stale = []
    for name, (page, render) in RENDERERS.items():
        path = ROOT / page
        text = path.read_text()
        new = replace_block(text, name, render())
        if new != text:
            stale.append(page)
            if not check:
                path.write_text(new)
    if check and stale:
        raise SystemExit(
            f"error: {', '.join(stale)} differ from what scripts/render_docs.py renders"
        )


if __name__ == "__main__":
    app()
