"""Table 5: the attainable p, the significance tables and sentences, the extended study."""

from __future__ import annotations

import pandas as pd

from ncip.study.evaluation import display
from ncip.study.report.inputs import ReportInputs


def attainable(n: int, m: int, alpha: float = 0.05) -> dict:
    """For an exact one-sided Wilcoxon signed-rank test on ``n`` pairs and Holm's correction
    over ``m`` comparisons: the smallest attainable raw p (2^-n, every pair favouring NCIP),
    the smallest Holm-corrected one (m * 2^-n), and the fewest pairs that could reach
    ``alpha`` after the correction."""
    need = 1
    while m * 0.5**need >= alpha:
        need += 1
    return {
        "n": n,
        "comparisons": m,
        "min_p": 0.5**n,
        "min_p_holm": min(1.0, m * 0.5**n),
        "pairs_needed": need,
    }


def _baselines_only(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the paper's baselines, the family Holm corrects over as the paper does (the
    checkpoint scores are corrected among themselves)."""
    from ncip.study.evaluation import baselines

    part = table[table["baseline"].isin(baselines())]
    return part if len(part) else table


def attainable_sentence(table: pd.DataFrame, unit: str) -> str:
    a = attainable(int(table["n"].max()), len(_baselines_only(table)))
    verdict = (
        "so no result here can be significant, whatever the data"
        if a["min_p_holm"] >= 0.05
        else "so significance is attainable"
    )
    return (
        f"Paired units: {unit}, n = {a['n']}. With n pairs the smallest attainable one-sided "
        f"p is 2^-n = {a['min_p']:.3g}, and {a['min_p_holm']:.3g} after Holm's correction over "
        f"{a['comparisons']} baselines, {verdict}. Reaching p < 0.05 after the correction "
        f"needs at least {a['pairs_needed']} independent pairs, every one favouring NCIP "
        f"({a['comparisons']} × 2^-{a['pairs_needed']} = "
        f"{a['comparisons'] * 0.5 ** a['pairs_needed']:.3g})."
    )


def significance_markdown(table: pd.DataFrame, unit: str) -> str:
    if table.empty:
        return "_no paired results_\n"
    lines = [
        "| Baseline | n | p (raw) | p (Holm) | effect size (RBC) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {display(r.baseline)} | {r.n} | {r.p_raw:.3g} | {r.p_holm:.3g} | "
            f"{r.effect_size:.3f} |"
        )
    lines.append("\n" + attainable_sentence(table, unit))
    return "\n".join(lines) + "\n"


def significance_record(r: ReportInputs) -> dict:
    from ncip.study.report.chooser import chooser_summary
    from ncip.study.report.primary import primary_results

    m = len(_baselines_only(r.sig)) if len(r.sig) else 0
    return {
        "primary": primary_results(r),
        "chooser": chooser_summary(r),
        "subjects": r.independent,
        "attainable": attainable(len(r.independent), m) if m else {},
        "by_subject": r.sig.to_dict(orient="records"),
        "by_subject_and_run": r.sig_runs.to_dict(orient="records"),
    }


def significance_paragraph(sig: pd.DataFrame, independent: list[str]) -> str:
    if sig.empty:
        return ""
    base = _baselines_only(sig)
    a = attainable(len(independent), len(base))
    below = int((base["p_holm"] < 0.05).sum())
    return (
        f"Table 5 pairs {a['n']} independent subjects: the smallest attainable Holm-corrected "
        f"p is {a['min_p_holm']:.3g}, and {below} of {len(base)} comparisons with the paper's "
        "baselines fall below 0.05 (significance needs at least "
        f"{a['pairs_needed']} independent subjects)."
    )


def first_table_after(text: str, heading: str) -> pd.DataFrame:
    """The first markdown table after the first line that starts with ``heading`` (empty if
    none): its header row's names as columns, its cells as text."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        return pd.DataFrame()
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows or line.startswith("#"):
            break
    if len(rows) < 3:
        return pd.DataFrame()
    return pd.DataFrame(rows[2:], columns=rows[0])


def extended_significance_sentence(extended: str | None) -> str:
    """What the extended study's Table 5 (metrics/extended.md) says, in one sentence: how
    many Holm-corrected p fall below 0.05 over its independent subjects, and for which
    baselines; empty when it has not been run."""
    if not extended:
        return ""
    table = first_table_after(extended, "### Significance")
    if table.empty or "p (Holm)" not in table:
        return ""
    holm = pd.to_numeric(table["p (Holm)"], errors="coerce")
    n = int(pd.to_numeric(table["n"], errors="coerce").max())
    names = table.loc[holm < 0.05, "Baseline"].tolist()
    rest = len(table) - len(names)
    below = ", ".join(names) if names else "none"
    return (
        f" The extended CPU study (its own section below, `make extended`) pairs {n} "
        f"independent subjects: {len(names)} of {len(table)} one-sided comparisons fall below "
        f"0.05 after Holm's correction ({below}); for the other {rest} the data do not show "
        "NCIP ahead across subjects."
    )


# The sections of an experiment's report that metrics/NAME.md keeps (headings' beginnings)
EXTENDED_SECTIONS = (
    "Primary comparison",
    "Models under test",
    "RAUC-ALL on clean data",
    "Significance:",
    "Paired intervals:",
)
EXPERIMENT_SECTIONS = {
    "extended": EXTENDED_SECTIONS,
    "epochs": ("Models under test", "Training: accuracy and sigma_cos", "Longer training"),
    "text": (
        *EXTENDED_SECTIONS,
        "Ablation: RAUC-ALL",
        "Selection control",
        "Training: accuracy and sigma_cos",
    ),
}
OPTIONAL_SECTIONS = (
    "Checkpoint scores",
    "Choosing the score from a labelled holdout",
    "What could not run",
    "Training: accuracy and sigma_cos",
    "Longer training",
    "Selection control",
)  # kept where the experiment's report has them


def markdown_sections(text: str) -> dict[str, str]:
    """A markdown document's level-2 sections: heading text -> body."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {k: "\n".join(v) for k, v in sections.items()}
