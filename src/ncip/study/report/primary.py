"""The report's opening result: the pre-registered primary comparison
(:data:`ncip.study.statistics.PRIMARY`), NCIP against Entropy over data sets."""

from __future__ import annotations

import pandas as pd

from ncip.study.evaluation import display
from ncip.study.report.inputs import ReportInputs
from ncip.study.statistics import PRIMARY, primary_comparison
from ncip.study.subjects import parse_subject

VERDICTS = {
    "better": "NCIP is better",
    "worse": "NCIP is worse",
    "equivalent": "equivalent within the margin",
    "inconclusive": "inconclusive: the interval covers 0 and reaches past the margin",
    "too few": "no verdict: too few data sets for a 95% interval (6 are needed)",
}


def by_dataset(r: ReportInputs) -> pd.Series:
    """NCIP minus the primary baseline per data set: the mean over that data set's independent
    subjects of their mean over runs (clean test inputs)."""
    metric, method, against = PRIMARY["metric"], PRIMARY["method"], PRIMARY["against"]
    m = r.mean[(r.mean["split"] == "test") & r.mean["subject"].isin(r.independent)]
    wide = m.pivot(index="subject", columns="method", values=metric)
    if method not in wide or against not in wide:
        return pd.Series(dtype=float)
    diff = wide[method] - wide[against]
    datasets = {s: parse_subject(s, r.external).dataset for s in diff.index}
    return diff.groupby(datasets).mean()


def primary_result(r: ReportInputs) -> dict | None:
    d = by_dataset(r)
    return primary_comparison(d) if len(d) else None


def primary_section(r: ReportInputs) -> list[str]:
    res = primary_result(r)
    if res is None:
        return []
    against = display(PRIMARY["against"])
    n = res["datasets"]
    L = [
        "## Primary comparison (fixed before the run)",
        "",
        f"NCIP against {against}, the strongest confidence score, on clean "
        f"{PRIMARY['metric'].upper().replace('_', '-')}: one difference per data set (the mean "
        "over the data set's subjects of their mean over runs; subjects on one data set share "
        "their test inputs, so a data set is one unit), two-sided, the median difference with a "
        f"distribution-free interval (order statistics; coverage {res['coverage']:.1%} with "
        f"{n} data sets), and equivalence within +-{res['margin']:g}. The other eleven "
        "baselines are secondary (Table 5, Holm).",
        "",
        f"**Over {n} independent data set{'s' if n != 1 else ''}: median NCIP - {against} "
        f"{res['median']:+.4f} [{res['low']:+.4f}, {res['high']:+.4f}] (two-sided Wilcoxon p "
        f"= {res['p_two_sided']:.3g}): {VERDICTS[res['verdict']]}.**",
        "",
        "| data set | NCIP - " + against + " |",
        "|---|---:|",
    ]
    L += [f"| {k} | {v:+.4f} |" for k, v in sorted(res["by_dataset"].items())]
    if n < 6:
        L += [
            "",
            f"With {n} data sets the interval is as wide as the data allow; it says little "
            "(`make extended` adds data sets).",
        ]
    return L + [""]
