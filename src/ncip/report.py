"""The study report: this run's tables beside the paper's, statistics, costs and figures."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ncip import paper
from ncip.evaluation import ABLATION, display, method_order
from ncip.subjects import parse_subject

BASELINES = ["random", "lsa", "dsa", "entropy", "deepgini", "msp", "pcs", "dropout", "effimap",
             "nns", "tdpr", "sets"]  # fmt: skip


def _fmt(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    return f"{v:.{digits}f}" if digits else f"{v:.0f}"


_ALIASES: dict[str, str] = {}


def alias_subjects(aliases: dict[str, str | None]) -> None:
    """Subjects trained elsewhere that stand for one of the paper's (their ``paper`` key)."""
    _ALIASES.clear()
    _ALIASES.update({k: v for k, v in aliases.items() if v})


def column_of(subject: str):
    """The paper's column for a subject (a dataset and model the paper has), else None."""
    try:
        s = parse_subject(_ALIASES.get(subject, subject))
    except ValueError:  # a model trained elsewhere, standing for nothing of the paper's
        return None
    if s.variant:
        return None
    return paper.paper_column(s.dataset, s.model)


def not_run_markdown(costs: dict[str, dict]) -> str:
    """The baselines that could not run on a (subject, run), with the reason."""
    rows = [f"| {key} | {m} | {v['skipped']} |" for key, c in sorted(costs.items())
            for m, v in c.get("baselines", {}).items() if isinstance(v, dict) and "skipped" in v]  # fmt: skip
    if not rows:
        return ""
    return "\n".join(["| subject/run | method | why it could not run |", "|---|---|---|", *rows])


def side_by_side(mean: pd.DataFrame, split: str, metric: str, ref: dict, methods: list[str],
                 subjects: list[str], digits: int = 3, std: pd.DataFrame | None = None) -> str:  # fmt: skip
    """Methods x (subject: ours | paper); bold marks the best of each column."""
    part = mean[mean["split"] == split].pivot(index="method", columns="subject", values=metric)
    sd = None
    if std is not None:
        sd = std[std["split"] == split].pivot(index="method", columns="subject", values=metric)
    methods = [m for m in methods if m in part.index]
    head, sep = ["Method"], ["---"]
    for s in subjects:
        head += [f"{s} (ours)", "paper"]
        sep += ["---:", "---:"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(sep) + "|"]
    best_ours = {s: part.loc[methods, s].max() for s in subjects if s in part.columns}
    best_paper = {}
    for s in subjects:
        col = column_of(s)
        vals = [ref.get(m, {}).get(col) for m in methods] if col else []
        vals = [v for v in vals if v is not None]
        best_paper[s] = max(vals) if vals else None
    for m in methods:
        cells = [display(m)]
        for s in subjects:
            v = part.loc[m, s] if s in part.columns else np.nan
            txt = _fmt(v, digits)
            if sd is not None and s in sd.columns and m in sd.index and np.isfinite(sd.loc[m, s]):
                txt += f" ± {_fmt(sd.loc[m, s], digits)}"
            if np.isfinite(v) and np.isclose(v, best_ours.get(s, np.nan)):
                txt = f"**{txt}**"
            col = column_of(s)
            pv = ref.get(m, {}).get(col) if col else None
            ptxt = _fmt(pv, digits) if pv is not None else "–"
            if pv is not None and best_paper[s] is not None and np.isclose(pv, best_paper[s]):
                ptxt = f"**{ptxt}**"
            cells += [txt, ptxt]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def significance_markdown(table: pd.DataFrame, unit: str) -> str:
    if table.empty:
        return "_no paired results_\n"
    lines = ["| Baseline | n | p (raw) | p (Holm) | effect size (RBC) |", "|---|---:|---:|---:|---:|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {display(r.baseline)} | {r.n} | {r.p_raw:.3g} | {r.p_holm:.3g} | "
                     f"{r.effect_size:.3f} |")  # fmt: skip
    min_p = 0.5 ** int(table["n"].max()) if len(table) else 1.0
    lines.append(f"\nPaired units: {unit}. With n pairs, the smallest possible one-sided p-value "
                 f"is 2^-n = {min_p:.3g}.")  # fmt: skip
    return "\n".join(lines) + "\n"


def cost_table(cost: dict) -> str:
    """Table 9: seconds per method group, from metrics/cost.json (:mod:`ncip.cost`)."""
    from ncip.cost import table9_rows

    cols = paper.COST_COLUMNS
    lines = ["| Subject | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for subject, row in table9_rows(cost).items():
        lines.append(f"| {subject} | " + " | ".join(_fmt(v, 2) for v in row) + " |")
        col = column_of(subject.split("/")[0])
        if col in paper.COST:
            lines.append("| ↳ paper | " + " | ".join(_fmt(v, 2) for v in paper.COST[col]) + " |")
    return "\n".join(lines) + "\n"


def agreement_paragraph(mean: pd.DataFrame, subjects: list[str]) -> str:
    """Plain statements computed from the numbers: where this run agrees with the paper."""
    clean = mean[mean["split"] == "test"]
    out = []
    for metric, ref, name in (("rauc_all", paper.TABLE3, "RAUC-ALL"),
                              ("rauc_500", paper.TABLE4, "RAUC-500")):  # fmt: skip
        wins, comparable, diffs, paper_wins = 0, 0, [], 0
        for s in subjects:
            part = clean[clean["subject"] == s].set_index("method")[metric]
            if "ncip" not in part or not any(m in part for m in BASELINES):
                continue
            others = part[[m for m in BASELINES if m in part.index]]
            wins += int(part["ncip"] > others.max())
            col = column_of(s)
            if col and "ncip" in ref and col in ref["ncip"]:
                comparable += 1
                diffs.append(part["ncip"] - ref["ncip"][col])
                pcol = {m: ref[m][col] for m in BASELINES if m in ref and col in ref[m]}
                paper_wins += int(ref["ncip"][col] > max(pcol.values()))
        n = sum(1 for s in subjects if "ncip" in set(clean[clean["subject"] == s]["method"]))
        txt = f"On clean data NCIP has the best {name} of all methods run in {wins} of {n} subjects"
        if comparable:
            txt += (f"; on the {comparable} subjects the paper also reports, its {name} differs "
                    f"from the paper's by {np.mean(diffs):+.3f} on average (largest gap "
                    f"{max(diffs, key=abs):+.3f}), and the paper has NCIP best in {paper_wins} "
                    f"of them")  # fmt: skip
        out.append(txt + ".")
    adv = mean[mean["split"] == "adv"]
    if not adv.empty:
        best = adv.groupby("method")["rauc_all"].mean()
        best = best[[m for m in best.index if m not in ABLATION or m == "ncip"]]
        order = best.sort_values(ascending=False)
        rank = list(order.index).index("ncip") + 1 if "ncip" in order.index else None
        out.append(f"On adversarial data the best average RAUC-ALL is {display(order.index[0])}'s "
                   f"({order.iloc[0]:.3f}); NCIP ranks {rank} of {len(order)} ({best.get('ncip', np.nan):.3f}). "
                   "The paper reports TDPR first and NCIP second on its CIFAR and TinyImageNet "
                   "models (Table 6).")  # fmt: skip
    return " ".join(out)


def retrain_by_subject(gains: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Mean accuracy gain in percentage points: subject -> method -> gain, over runs."""
    acc: dict[str, dict[str, list[float]]] = {}
    for key, g in gains.items():
        subject = key.split("/")[0]
        for m, r in g["methods"].items():
            if r.get("gain") is not None:
                acc.setdefault(subject, {}).setdefault(m, []).append(100 * r["gain"])
    return {s: {m: float(np.mean(v)) for m, v in ms.items()} for s, ms in acc.items()}


def retrain_markdown(gains: dict[str, dict]) -> str:
    """Accuracy gain (percentage points) per method and subject (Fig. 6's data)."""
    by_subject = retrain_by_subject(gains)
    subjects = sorted(by_subject)
    methods = method_order({m for g in by_subject.values() for m in g})
    lines = ["| Method | " + " | ".join(subjects) + " | Avg |", "|---|" + "---:|" * (len(subjects) + 1)]
    for m in methods:
        vals = [by_subject[s].get(m, np.nan) for s in subjects]
        lines.append(f"| {display(m)} | " + " | ".join(_fmt(v, 2) for v in vals) +
                     f" | {_fmt(np.nanmean(vals), 2)} |")  # fmt: skip
    return "\n".join(lines) + "\n"
