"""Shared pieces of the report: subject columns, the paper-beside-run table, the cost table."""

from __future__ import annotations

import pandas as pd

from ncip.study import paper
from ncip.study.subjects import parse_subject
from ncip.study.tables import fmt as _fmt
from ncip.study.tables import render_table


def column_of(subject: str, aliases: dict[str, str] | None = None) -> str | None:
    """The paper's column for a subject (a dataset and model the paper has), else None.
    ``aliases`` maps subjects trained elsewhere to the paper's subject they stand for."""
    try:
        s = parse_subject((aliases or {}).get(subject, subject))
    except ValueError:  # a model trained elsewhere, standing for nothing of the paper's
        return None
    if s.variant:
        return None
    return paper.paper_column(s.dataset, s.model)


def not_run_markdown(costs: dict[str, dict]) -> str:
    """The baselines that could not run on a (subject, run), with the reason."""
    rows = [
        f"| {key} | {m} | {v['skipped']} |"
        for key, c in sorted(costs.items())
        for m, v in c.get("baselines", {}).items()
        if isinstance(v, dict) and "skipped" in v
    ]
    if not rows:
        return ""
    return "\n".join(["| subject/run | method | why it could not run |", "|---|---|---|", *rows])


def side_by_side(
    mean: pd.DataFrame,
    split: str,
    metric: str,
    ref: dict,
    methods: list[str],
    subjects: list[str],
    digits: int = 3,
    std: pd.DataFrame | None = None,
    aliases: dict[str, str] | None = None,
) -> str:
    """Methods x (subject: ours | paper), the paper's values from ``ref``."""
    return render_table(
        mean,
        split,
        metric,
        methods,
        subjects,
        paper=ref,
        column_of=lambda subject: column_of(subject, aliases),
        digits=digits,
        std=std,
    )


def cost_table(cost: dict, aliases: dict[str, str] | None = None) -> str:
    """Table 9: seconds per method group, from metrics/cost.json (:mod:`ncip.study.cost`)."""
    from ncip.study.cost import table9_rows

    cols = paper.COST_COLUMNS
    lines = ["| Subject | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for subject, row in table9_rows(cost).items():
        lines.append(f"| {subject} | " + " | ".join(_fmt(v, 2) for v in row) + " |")
        col = column_of(subject.split("/")[0], aliases)
        if col in paper.COST:
            lines.append("| ↳ paper | " + " | ".join(_fmt(v, 2) for v in paper.COST[col]) + " |")
    return "\n".join(lines) + "\n"
