"""The one Markdown renderer of methods x subjects tables (metrics/tables.md and the report).

Without ``paper`` a table is this run's values (like the paper's Tables 3-4); with ``paper``
(method -> paper column -> value, from :mod:`ncip.study.paper`) every subject gets an "ours" and a
"paper" column. Bold marks the best value of each column.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ncip.study.evaluation import display, method_order


def fmt(v: float | None, digits: int = 3) -> str:
    """A number as the tables print it; missing values are an en dash."""
    if v is None or (isinstance(v, float | np.floating) and not np.isfinite(v)):
        return "–"
    return f"{v:.{digits}f}" if digits else f"{v:.0f}"


def render_table(
    mean: pd.DataFrame,
    split: str,
    metric: str,
    methods: list[str] | None = None,
    subjects: list[str] | None = None,
    *,
    paper: dict | None = None,
    column_of: Callable[[str], object] | None = None,
    digits: int = 3,
    std: pd.DataFrame | None = None,
    avg: bool = False,
) -> str:
    """Methods x subjects of one metric on one split.

    ``methods``: rows in this order (default: the paper's row order of those present);
    ``subjects``: columns (default: every subject of the split, sorted); ``paper`` with
    ``column_of`` (subject -> the paper's column or None) adds the paper's value beside each;
    ``std`` adds "± sd"; ``avg`` adds the mean over subjects (like Table 6).
    """
    part = mean[mean["split"] == split]
    if part.empty and paper is None:
        return "_no data_\n"
    pivot = part.pivot(index="method", columns="subject", values=metric)
    subjects = list(subjects) if subjects is not None else sorted(part["subject"].unique())
    methods = list(methods) if methods is not None else method_order(part["method"].unique())
    methods = [m for m in methods if m in pivot.index]
    sd = None
    if std is not None:
        sd = std[std["split"] == split].pivot(index="method", columns="subject", values=metric)
    if avg:
        pivot = pivot.assign(Avg=pivot[[s for s in subjects if s in pivot.columns]].mean(axis=1))
        subjects = subjects + ["Avg"]
    best = {s: pivot.loc[methods, s].max() for s in subjects if s in pivot.columns}
    ref_col = {s: (column_of(s) if paper is not None and column_of else None) for s in subjects}
    best_paper = {}
    for s in subjects:
        vals = [paper.get(m, {}).get(ref_col[s]) for m in methods] if ref_col[s] else []
        vals = [v for v in vals if v is not None]
        best_paper[s] = max(vals) if vals else None

    def ours(m: str, s: str) -> str:
        v = pivot.loc[m, s] if s in pivot.columns else np.nan
        txt = fmt(v, digits)
        if sd is not None and s in sd.columns and m in sd.index and np.isfinite(sd.loc[m, s]):
            txt += f" ± {fmt(sd.loc[m, s], digits)}"
        return f"**{txt}**" if np.isfinite(v) and np.isclose(v, best.get(s, np.nan)) else txt

    def theirs(m: str, s: str) -> str:
        pv = paper.get(m, {}).get(ref_col[s]) if ref_col[s] else None
        if pv is None:
            return "–"
        bold = best_paper[s] is not None and np.isclose(pv, best_paper[s])
        return f"**{fmt(pv, digits)}**" if bold else fmt(pv, digits)

    if paper is None:
        head = ["Method", *subjects]
    else:
        head = ["Method"] + [c for s in subjects for c in (f"{s} (ours)", "paper")]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for m in methods:
        cells = [display(m)]
        for s in subjects:
            cells += [ours(m, s)] if paper is None else [ours(m, s), theirs(m, s)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
