"""Render the parts of docs/ that are facts of the data or of committed runs, between
``<!-- render:NAME -->`` and ``<!-- /render:NAME -->`` markers (``make docs``): a test fails when a
committed page differs from what this renders (tests/test_docs_render.py).

- ``tables`` (docs/datasets.md): every table of Debian's R data packages, read as the study reads
  it: rows, features, classes, test inputs, source and package.
- ``findings`` (README.md): what the study finds, from the committed metrics: the extended
  study's two co-primary answers (metrics/extended.json), the holdout chooser's regret there,
  and the default run's clean RAUC-ALL of label-free AUM, NCIP and Entropy (metrics/clean.json).
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


VERDICT_WORDS = {  # ncip.study.statistics.re_verdicts' verdicts, said of the first score
    "better": "{a} ranks better",
    "worse": "{a} ranks worse",
    "better (within the margin)": "{a} ranks better, by less than the 0.01 margin",
    "worse (within the margin)": "{a} ranks worse, by less than the 0.01 margin",
    "equivalent": "equivalent within ±0.01",
    "inconclusive": "inconclusive (neither a difference nor equivalence within ±0.01 shown)",
    "too few": "no verdict (too few data sets)",
}
NAMES = {"ncip": "NCIP", "entropy": "Entropy", "ensemble-entropy": "Ensemble entropy"}


def render_findings(metrics: Path = ROOT / "metrics") -> str:
    import json

    from ncip.study.data import dataset_source

    ext = json.loads((metrics / "extended.json").read_text())
    clean = json.loads((metrics / "clean.json").read_text())["rauc_all"]
    answers = ext.get("primary")
    if not isinstance(answers, list):  # an earlier run's record, from before the two questions
        return (
            "The pre-registered run has not landed: `metrics/extended.json` holds the earlier "
            "13-data-set run, read by the median rule (docs/study.md)."
        )
    sets = sorted({d for a in answers for d in a.get("by_dataset", {})})
    sources = {dataset_source(d) for d in sets}
    parts = [
        f"Over {len(sets)} data sets from {len(sources)} sources (`make extended`, one run each, "
        "the questions and the estimator fixed before the run in "
        "[docs/preregistration.md](docs/preregistration.md); clean RAUC-ALL, random-effects "
        "estimate with its 95% interval, Holm over the two questions):"
    ]
    for a in answers:
        first = NAMES.get(a["method"], a["method"])
        q = f"{first} − {NAMES.get(a['against'], a['against'])}"
        said = VERDICT_WORDS.get(a["verdict"], a["verdict"]).format(a=first)
        if a["verdict"] == "too few":
            parts.append(f"- {q}: {said}.")
            continue
        parts.append(
            f"- {q}: {a['estimate']:+.4f} [{a['low']:+.4f}, {a['high']:+.4f}], prediction "
            f"interval for a new data set [{a['pred_low']:+.4f}, {a['pred_high']:+.4f}]: "
            f"**{said}**."
        )
    at500 = next((c for c in ext.get("chooser", []) if c["size"] == 500), None)
    if at500:
        parts.append(
            f"- Choosing the score on a labelled holdout of 500 inputs (`ncip rank --holdout`): "
            f"median regret {at500['regret']['median']:.4f} over {at500['datasets']} data sets, "
            f"against {at500['regret_ncip']['median']:.4f} for always NCIP and "
            f"{at500['regret_entropy']['median']:.4f} for always Entropy."
        )
    subjects = sorted(clean["ncip"])
    cells = "; ".join(
        f"{s}: AUM {clean['aum'][s]:.3f}, NCIP {clean['ncip'][s]:.3f}, Entropy "
        f"{clean['entropy'][s]:.3f}"
        for s in subjects
        if s in clean.get("aum", {})
    )
    if cells:
        parts.append(f"- The default run (`make repro`), clean RAUC-ALL: {cells}.")
    return "\n".join(parts)


RENDERERS = {
    "tables": ("docs/datasets.md", render_tables),
    "findings": ("README.md", render_findings),
}


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- render:{name} -->\n)(?:.*?\n)?(<!-- /render:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"error: no <!-- render:{name} --> block to fill")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


@app.command()
def main(
    check: bool = typer.Option(False, help="exit 1 where a page differs; write nothing"),
    only: str | None = typer.Option(None, help="one block: " + ", ".join(RENDERERS)),
):
    stale = []
    for name, (page, render) in RENDERERS.items():
        if only and name != only:
            continue
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
