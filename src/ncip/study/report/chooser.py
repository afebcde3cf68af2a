"""The report's measure of `ncip rank --holdout`'s chooser (issue 46 item 3): its regret on the
test inputs beside always-NCIP's and always-Entropy's, by holdout size, over data sets
(metrics/chooser.csv, :func:`ncip.study.evaluation.chooser_regret`)."""

from __future__ import annotations

import pandas as pd

from ncip.core.choice import MIN_FAULTS
from ncip.study.evaluation import CHOOSER_DEFAULT, display
from ncip.study.report.inputs import ReportInputs
from ncip.study.statistics import median_interval
from ncip.study.subjects import parse_subject

ORDERS = {"regret": "chooser", "regret_ncip": "always NCIP", "regret_entropy": "always Entropy"}
AIM = (500, 0.005)  # issue 46: median regret <= 0.005 at 500 labels


def _by_dataset(r: ReportInputs) -> pd.DataFrame:
    """Mean regrets per (data set, holdout size): over draws, runs, then the data set's
    independent subjects; with the share of draws that fell back to the default."""
    c = r.chooser
    if c.empty:
        return pd.DataFrame()
    c = c[c["subject"].isin(r.independent)]
    per_subject = c.groupby(["subject", "size"])[[*ORDERS, "fallback"]].mean().reset_index()
    per_subject["dataset"] = [parse_subject(s, r.external).dataset for s in per_subject["subject"]]
    return per_subject.groupby(["dataset", "size"])[[*ORDERS, "fallback"]].mean().reset_index()


def chooser_summary(r: ReportInputs) -> list[dict]:
    """Per holdout size: data sets, and for each order the median regret over data sets with its
    distribution-free interval (order statistics; coverage as attained)."""
    d = _by_dataset(r)
    if d.empty:
        return []
    out = []
    for size, g in d.groupby("size", sort=True):
        row: dict = {
            "size": int(size),
            "datasets": int(len(g)),
            "fallback": float(g["fallback"].mean()),
        }
        for col in ORDERS:
            lo, hi, cov = median_interval(g[col].to_numpy())
            row[col] = {"median": float(g[col].median()), "low": lo, "high": hi, "coverage": cov}
        out.append(row)
    return out


def chooser_curve(r: ReportInputs) -> pd.DataFrame:
    """The plot's data: the median regret over data sets per holdout size, one column per order."""
    rows = chooser_summary(r)
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(
        [{"size": s["size"]} | {ORDERS[c]: s[c]["median"] for c in ORDERS} for s in rows]
    )


def chooser_section(r: ReportInputs) -> list[str]:
    rows = chooser_summary(r)
    if not rows:
        return []
    draws = int(r.chooser["draw"].max()) + 1
    L = [
        "## Choosing the score from a labelled holdout (`ncip rank --holdout`)",
        "",
        "The chooser of `ncip rank --holdout` (ncip.core.choice: the best label-free score by "
        "holdout RAUC-ALL unless a simpler one ties it within its paired 95% bootstrap interval; "
        f"with fewer than {MIN_FAULTS} faults in the holdout, {display(CHOOSER_DEFAULT)} ranks) "
        f"measured on every subject: {draws} seeded holdouts of each size drawn from the clean "
        "test inputs, the choice made on the holdout, and every candidate's RAUC-ALL on the rest "
        "of the test inputs. Regret = the best candidate's RAUC-ALL there minus the chosen "
        "one's; beside it, the regret of always ranking by NCIP and by Entropy. Holdouts come "
        "from the test split, not the validation split: the tables' validation splits hold "
        "76-1,600 inputs, too few for the larger holdouts, and the rest is disjoint from the "
        "holdout. A size above half a test set is not drawn for it. Per data set the mean over "
        "draws (and its subjects); the median over data sets with its distribution-free "
        "interval.",
        "",
        "| holdout | data sets | falls back | "
        + " | ".join(f"{v}: median regret [interval]" for v in ORDERS.values())
        + " |",
        "|---:|---:|---:|" + "---:|" * len(ORDERS),
    ]
    for s in rows:
        cells = [
            f"{s[c]['median']:.4f} [{s[c]['low']:.4f}, {s[c]['high']:.4f}] ({s[c]['coverage']:.0%})"
            for c in ORDERS
        ]
        L.append(
            f"| {s['size']} | {s['datasets']} | {s['fallback']:.0%} | " + " | ".join(cells) + " |"
        )
    size, aim = AIM
    at = next((s for s in rows if s["size"] == size), None)
    if at:
        met = at["regret"]["median"] <= aim and all(
            at["regret"]["median"] <= at[c]["median"] for c in ("regret_ncip", "regret_entropy")
        )
        L += [
            "",
            f"The aim (issue 46): median regret <= {aim} at {size} labels, and no higher than "
            f"always-NCIP's and always-Entropy's. At {size}: chooser "
            f"{at['regret']['median']:.4f}, always NCIP {at['regret_ncip']['median']:.4f}, "
            "always Entropy "
            f"{at['regret_entropy']['median']:.4f} over {at['datasets']} data sets: "
            + ("met." if met else "not met."),
        ]
    L += ["", "![regret by holdout size](../plots/report/chooser.png)"]
    return L + [""]
