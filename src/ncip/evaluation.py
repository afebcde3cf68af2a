"""Evaluation of score tables: metrics per ordering, averaged over repeats and runs, as tables.

Every (subject, run, split, method, repeat) group of a score table is one ordering of one test
set. All methods on the same test set share the same seeded tie-break permutation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ncip.metrics import evaluate_order, order_from_scores

# Display names and the paper's row order (Tables 3, 4, 6), then the ablation variants.
DISPLAY = {
    "random": "RS",
    "lsa": "LSA",
    "dsa": "DSA",
    "entropy": "Entropy",
    "deepgini": "DeepGini",
    "msp": "MSP",
    "pcs": "PCS",
    "dropout": "Dropout",
    "effimap": "EffiMAP",
    "nns": "NNS",
    "tdpr": "TDPR",
    "sets": "SETS",
    "ncip": "NCIP",
    "tvd": "TVD",
    "tvd+nc": "TVD+NC",
    "tvd+margin": "TVD+Margin",
}
ABLATION = ["tvd", "tvd+nc", "tvd+margin", "ncip"]
GROUP = ["subject", "run", "split", "method", "repeat"]


def display(method: str) -> str:
    return DISPLAY.get(method, method)


def method_order(methods) -> list[str]:
    """The paper's row order for known methods, then any others alphabetically."""
    given = set(methods)
    known = [m for m in DISPLAY if m in given]
    return known + sorted(given - set(known))


def evaluate_table(
    table: pd.DataFrame,
    seed: int = 0,
    budgets=(100, 200, 500, 1000),
    fault_fractions=tuple(range(1, 11)),
) -> pd.DataFrame:
    """One row of metrics per (subject, run, split, method, repeat) ordering."""
    rows = []
    for key, g in table.groupby(GROUP, sort=True):
        if g["sample_id"].duplicated().any():
            raise ValueError(f"duplicate sample ids in the score group {key}")
        order = order_from_scores(g["score"].to_numpy(), seed)
        m = evaluate_order(order, g["label"].to_numpy(), g["pred"].to_numpy(), budgets,
                           fault_fractions)  # fmt: skip
        rows.append({**dict(zip(GROUP, key, strict=True)), "n": len(g),
                     "faults": int((g["label"] != g["pred"]).sum()), **m})  # fmt: skip
    return pd.DataFrame(rows)


def aggregate(per_order: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean over repeats within a run, then (mean, std) over runs per subject, split, method."""
    metric_cols = [c for c in per_order.columns if c not in GROUP]
    per_run = per_order.groupby(["subject", "run", "split", "method"])[metric_cols].mean()
    by = per_run.groupby(["subject", "split", "method"])
    return by.mean().reset_index(), by.std(ddof=1).reset_index()


def nested(mean: pd.DataFrame, split: str, metrics: list[str]) -> dict:
    """metric -> method -> subject -> value, for one split (the metrics JSON layout)."""
    part = mean[mean["split"] == split]
    out: dict = {}
    for metric in metrics:
        out[metric] = {}
        for method in method_order(part["method"].unique()):
            rows = part[part["method"] == method]
            out[metric][method] = {
                r.subject: _num(getattr(r, metric)) for r in rows.itertuples(index=False)
            }
    return out


def _num(v: float) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), 6)


def markdown_table(
    mean: pd.DataFrame,
    split: str,
    metric: str,
    methods: list[str] | None = None,
    digits: int = 3,
    std: pd.DataFrame | None = None,
    avg: bool = False,
) -> str:
    """Methods x subjects, best value per subject in bold (like the paper's Tables 3-4);
    ``avg`` adds the mean over subjects (like Table 6)."""
    part = mean[mean["split"] == split]
    if part.empty:
        return "_no data_\n"
    subjects = sorted(part["subject"].unique())
    # explicit lists keep their order (the ablation's); otherwise the paper's row order
    methods = list(methods) if methods is not None else method_order(part["method"].unique())
    methods = [m for m in methods if m in set(part["method"])]
    pivot = part.pivot(index="method", columns="subject", values=metric)
    sd = None
    if std is not None:
        s = std[std["split"] == split]
        sd = s.pivot(index="method", columns="subject", values=metric)
    if avg:
        pivot = pivot.assign(Avg=pivot[subjects].mean(axis=1))
        subjects = subjects + ["Avg"]
    best = {s: pivot.loc[methods, s].max() for s in subjects}
    head = "| Method | " + " | ".join(subjects) + " |\n"
    head += "|---|" + "---:|" * len(subjects) + "\n"
    lines = []
    for m in methods:
        cells = []
        for s in subjects:
            v = pivot.loc[m, s] if s in pivot.columns else np.nan
            if not np.isfinite(v):
                cells.append("–")
                continue
            txt = f"{v:.{digits}f}" if digits else f"{v:.0f}"
            if sd is not None and s in sd.columns and m in sd.index and np.isfinite(sd.loc[m, s]):
                txt += f" ± {sd.loc[m, s]:.{digits}f}" if digits else f" ± {sd.loc[m, s]:.0f}"
            cells.append(f"**{txt}**" if np.isclose(v, best[s]) else txt)
        lines.append(f"| {display(m)} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def fault_curve(per_order: pd.DataFrame, subject: str, split: str, fractions) -> pd.DataFrame:
    """Wide table: budget_pct, then one column per method (mean fault types over runs)."""
    part = per_order[(per_order["subject"] == subject) & (per_order["split"] == split)]
    cols = [f"fault_types_{p}pct" for p in fractions]
    means = part.groupby(["run", "method"])[cols].mean().groupby("method").mean()
    out = pd.DataFrame({"budget_pct": list(fractions)})
    for m in method_order(means.index):
        out[display(m)] = means.loc[m, cols].to_numpy()
    return out


def detection_curve(table: pd.DataFrame, subject: str, split: str, seed: int, points: int = 100):
    """Wide table: inspected inputs, the ideal curve, then faults found per method (mean)."""
    part = table[(table["subject"] == subject) & (table["split"] == split)]
    curves: dict[str, list[np.ndarray]] = {}
    n_ref = None
    ideal = None
    for (_run, method, _rep), g in part.groupby(["run", "method", "repeat"], sort=True):
        is_fault = (g["label"] != g["pred"]).to_numpy()
        order = order_from_scores(g["score"].to_numpy(), seed)
        curves.setdefault(method, []).append(np.cumsum(is_fault[order]))
        if n_ref is None:
            n_ref = len(g)
            ideal = np.minimum(np.arange(1, n_ref + 1), is_fault.sum())
    if n_ref is None:
        return pd.DataFrame()
    xs = np.unique(np.linspace(1, n_ref, min(points, n_ref)).round().astype(int))
    out = pd.DataFrame({"inspected": xs, "Ideal": ideal[xs - 1]})
    for m in method_order(curves):
        out[display(m)] = np.mean([c[xs - 1] for c in curves[m]], axis=0)
    return out


def attack_table(reports: dict[str, dict]) -> str:
    """Per subject and attack: clean and adversarial accuracy, success rate, perturbation size."""
    lines = [
        "| Subject | Attack | Clean acc. | Adv. acc. | Success rate | max L∞ | mean L2 | seconds |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for subject, rep in sorted(reports.items()):
        if "skipped" in rep:
            lines.append(f"| {subject} | – | {rep['skipped']} | | | | | |")
            continue
        for attack, by_split in rep["attacks"].items():
            r = by_split.get("test")
            if r is None:
                continue
            lines.append(
                f"| {subject} | {attack.upper()} | {r['clean_accuracy']:.4f} | "
                f"{r['adversarial_accuracy']:.4f} | {r['success_rate']:.4f} | "
                f"{r['linf_max']:.4f} | {r['l2_mean']:.3f} | {r['seconds']:.1f} |"
            )
    return "\n".join(lines) + "\n"
