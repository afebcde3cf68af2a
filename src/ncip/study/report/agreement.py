"""The summary's agreement with the paper: gaps by dataset, the spread over runs, tied scores."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ncip.study import paper
from ncip.study.evaluation import ablation, baselines, display
from ncip.study.report.common import column_of


def agreement_paragraph(
    mean: pd.DataFrame, subjects: list[str], aliases: dict[str, str] | None = None
) -> str:
    """Plain statements computed from the numbers: where this run agrees with the paper."""
    clean = mean[mean["split"] == "test"]
    out = []
    for metric, ref, name in (
        ("rauc_all", paper.TABLE3, "RAUC-ALL"),
        ("rauc_500", paper.TABLE4, "RAUC-500"),
    ):
        wins, comparable, diffs, paper_wins, above = 0, 0, [], 0, []
        for s in subjects:
            part = clean[clean["subject"] == s].set_index("method")[metric]
            if "ncip" not in part or not any(m in part for m in baselines()):
                continue
            others = part[[m for m in baselines() if m in part.index]]
            wins += int(part["ncip"] > others.max())
            above += [
                f"{display(a)} on {s}"
                for a in ablation()
                if a != "ncip" and a in part.index and part[a] > part["ncip"]
            ]
            col = column_of(s, aliases)
            if col and "ncip" in ref and col in ref["ncip"]:
                comparable += 1
                diffs.append((s.split("-")[0], part["ncip"] - ref["ncip"][col]))
                pcol = {m: ref[m][col] for m in baselines() if m in ref and col in ref[m]}
                paper_wins += int(ref["ncip"][col] > max(pcol.values()))
        n = sum(1 for s in subjects if "ncip" in set(clean[clean["subject"] == s]["method"]))
        txt = (
            f"On clean data NCIP's mean {name} is above every baseline's in {wins} of {n} "
            "subjects" + (f" (its own ablation scores higher: {', '.join(above)})" if above else "")
        )
        if comparable:
            txt += (
                f"; on the {comparable} subjects the paper also reports, its {name} differs "
                f"from the paper's {gaps_by_dataset(diffs)}, and the paper has NCIP best in "
                f"{paper_wins} of them"
            )
        out.append(txt + ".")
    adv = mean[mean["split"] == "adv"]
    if not adv.empty:
        best = adv.groupby("method")["rauc_all"].mean()
        best = best[[m for m in best.index if m not in ablation() or m == "ncip"]]
        order = best.sort_values(ascending=False)
        rank = list(order.index).index("ncip") + 1 if "ncip" in order.index else None
        out.append(
            f"On adversarial data the best average RAUC-ALL is {display(order.index[0])}'s "
            f"({order.iloc[0]:.3f}); NCIP ranks {rank} of {len(order)} "
            f"({best.get('ncip', np.nan):.3f}). "
            "The paper reports TDPR first and NCIP second on its CIFAR and TinyImageNet "
            "models (Table 6)."
        )
    return " ".join(out)


def gaps_by_dataset(diffs: list[tuple[str, float]]) -> str:
    """NCIP's gaps to the paper, averaged per dataset (a stand-in's test set is not the
    paper's, so datasets are not pooled): 'by -0.001 on average on fmnist (largest gap ...)'."""
    by: dict[str, list[float]] = {}
    for dataset, d in diffs:
        by.setdefault(dataset, []).append(d)
    return "; ".join(
        f"by {np.mean(v):+.3f} on average on {dataset} ({len(v)} subject"
        f"{'s' if len(v) > 1 else ''}, largest gap {max(v, key=abs):+.3f})"
        for dataset, v in by.items()
    )


def spread_paragraph(
    mean: pd.DataFrame, sd: pd.DataFrame | None, subjects: list[str], n_runs: int
) -> str:
    clean = mean[mean["split"] == "test"].set_index(["method", "subject"])["rauc_all"]
    spread = (
        sd[sd["split"] == "test"].set_index(["method", "subject"])["rauc_all"]
        if (sd is not None)
        else None
    )
    parts = []
    for s in subjects:
        if ("ncip", s) not in clean.index:
            continue
        others = {m: clean[(m, s)] for m in baselines() if (m, s) in clean.index}
        best = max(others, key=others.get) if others else None
        txt = f"{s} {clean[('ncip', s)]:.3f}{_pm(spread, 'ncip', s)}"
        if best:
            txt += f" (best baseline {display(best)} {others[best]:.3f}{_pm(spread, best, s)})"
        parts.append(txt)
    runs = f"mean ± sd over {n_runs} training runs" if n_runs > 1 else "one training run"
    return f"NCIP's clean RAUC-ALL ({runs}): " + "; ".join(parts) + "."


def _pm(spread, method: str, subject: str) -> str:
    if spread is None or (method, subject) not in spread.index:
        return ""
    return f" ± {spread[(method, subject)]:.3f}"


def tie_markdown(
    mean: pd.DataFrame, subjects: list[str], methods: list[str], split: str = "test"
) -> str:
    """Share of tied scores (one split: the clean test set or the adversarial set; mean over
    runs) per method and subject, and the largest tied block, for the methods that have any."""
    part = mean[mean["split"] == split].set_index(["method", "subject"])
    lines = [
        "| Method | " + " | ".join(subjects) + " |",
        "|---|" + "---:|" * len(subjects),
    ]
    for m in methods:
        cells = []
        for s in subjects:
            if (m, s) not in part.index:
                cells.append("–")
                continue
            r = part.loc[(m, s)]
            cells.append(
                "0" if r["tied_share"] == 0 else f"{r['tied_share']:.1%} ({r['largest_tie']:.1%})"
            )
        if any(c not in ("0", "–") for c in cells):
            lines.append(f"| {display(m)} | " + " | ".join(cells) + " |")
    if len(lines) == 2:
        return "No method gave tied scores on any subject.\n"
    if any(line.startswith(f"| {display('effimap')} |") for line in lines):
        lines.append(
            "\nEffiMAP's score is its predicted kill rate times an entropy term, so an input "
            "with no predicted kills scores exactly 0 whatever its entropy: those inputs form "
            "one tied block."
        )
    return "\n".join(lines) + "\n"


def tie_paragraph(mean: pd.DataFrame, subjects: list[str]) -> str:
    part = mean[(mean["split"] == "test") & mean["subject"].isin(subjects)]
    worst = part.groupby("method")["tied_share"].max() if "tied_share" in part else pd.Series()
    worst = worst[worst > 0.01].sort_values(ascending=False)
    if worst.empty:
        return ""
    return (
        "Tied scores (share of clean test inputs, worst subject): "
        + ", ".join(f"{display(m)} {v:.1%}" for m, v in worst.items())
        + "; inside a tied block the order is the seeded random tie-break."
    )
