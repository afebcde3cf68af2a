"""The report's opening result: the pre-registered co-primary questions
(:data:`ncip.study.statistics.PRIMARY_QUESTIONS`, docs/preregistration.md), NCIP against
Entropy and the checkpoint ensemble's entropy against Entropy, over data sets: a random-effects
meta-analysis of one difference per data set, its prediction interval and TOST equivalence,
Holm over the two; the median rule of issue 40 as a sensitivity analysis; a forest plot."""

from __future__ import annotations

import pandas as pd

from ncip.core.errors import InputError
from ncip.study.data import dataset_source
from ncip.study.evaluation import display
from ncip.study.report.collapse import TERMINAL_ACCURACY, terminal_subjects
from ncip.study.report.inputs import ReportInputs
from ncip.study.statistics import (
    PRIMARY,
    PRIMARY_QUESTIONS,
    RE_MIN_DATASETS,
    primary_comparison,
    random_effects,
    re_verdicts,
)
from ncip.study.subjects import parse_subject

VERDICTS = {
    "better": "NCIP is better",
    "worse": "NCIP is worse",
    "equivalent": "equivalent within the margin",
    "inconclusive": "inconclusive: the interval covers 0 and reaches past the margin",
    "too few": "no verdict: too few data sets for a 95% interval (6 are needed)",
}
RE_WORDS = {
    "inconclusive": "inconclusive (no difference shown, no equivalence shown)",
    "too few": f"no verdict: fewer than {RE_MIN_DATASETS} data sets",
}


def _question(method: str, against: str) -> str:
    return f"{display(method)} - {display(against)}"


def dataset_effects(
    r: ReportInputs,
    method: str,
    against: str,
    subjects: set[str] | None = None,
    by: str = "dataset",
) -> pd.DataFrame:
    """One row per data set (``by="source"``: per source, the data sets drawn from one
    collection averaged the same way): ``diff`` (the mean over the data set's independent
    subjects of method minus against, clean RAUC-ALL, mean over runs), ``se`` (the mean of those
    subjects' paired-bootstrap standard errors: exact with one subject, an upper bound for
    several, which share their test inputs) and ``subjects``. ``subjects``: only these."""
    p = r.primary
    if p.empty:
        return pd.DataFrame(columns=["diff", "se", "subjects"])
    keep = set(r.independent) if subjects is None else set(r.independent) & subjects
    rows = p[(p["method"] == method) & (p["against"] == against) & p["subject"].isin(keep)]
    rows = rows.assign(dataset=[parse_subject(s, r.external).dataset for s in rows["subject"]])
    per_set = rows.groupby("dataset").agg(
        diff=("diff", "mean"), se=("se", "mean"), subjects=("subject", "count")
    )
    if by == "dataset":
        return per_set
    per_set = per_set.assign(source=[_source(d) for d in per_set.index])
    return per_set.groupby("source").agg(
        diff=("diff", "mean"), se=("se", "mean"), subjects=("subjects", "sum")
    )


def _source(dataset: str) -> str:
    try:
        return dataset_source(dataset)
    except InputError:  # an external subject's free name: its own source
        return dataset


def _meta(eff: pd.DataFrame) -> dict:
    if not len(eff):
        return {"datasets": 0, "verdict": "too few"}
    return random_effects(eff["diff"].to_numpy(), eff["se"].to_numpy())


def primary_results(r: ReportInputs) -> list[dict]:
    """Each co-primary question's random-effects result with its Holm-corrected verdict, and
    the median rule's result on the same differences (``median_rule``)."""
    out = []
    for method, against in PRIMARY_QUESTIONS:
        eff = dataset_effects(r, method, against)
        res = _meta(eff) | {"method": method, "against": against}
        res["by_dataset"] = {
            str(k): {"diff": float(v["diff"]), "se": float(v["se"])} for k, v in eff.iterrows()
        }
        res["median_rule"] = primary_comparison(eff["diff"]) if len(eff) else None
        res["by_source"] = _meta(dataset_effects(r, method, against, by="source"))
        res["terminal"] = _meta(dataset_effects(r, method, against, terminal_subjects(r)))
        out.append(res)
    return re_verdicts(out)


def _sensitivity_line(res: dict, key: str, what: str) -> str:
    """A sensitivity analysis's random-effects result, uncorrected (not decisive)."""
    s = res[key]
    q = _question(res["method"], res["against"])
    k = s["datasets"]
    if s.get("verdict") == "too few":
        return f"- {q}, {what}: {k} unit{'' if k == 1 else 's'}, too few for an interval."
    return (
        f"- {q}, {what} ({k} units): {s['estimate']:+.4f} [{s['low']:+.4f}, {s['high']:+.4f}], "
        f"prediction interval [{s['pred_low']:+.4f}, {s['pred_high']:+.4f}], tau = "
        f"{s['tau']:.4f}; p = {s['p_two_sided']:.3g}, TOST p = {s['p_tost']:.3g} (no Holm)."
    )


def _re_line(res: dict) -> str:
    q = _question(res["method"], res["against"])
    k = res["datasets"]
    sets = f"{k} data set{'' if k == 1 else 's'}"
    if res["verdict"] == "too few":
        return f"**{q} over {sets}: {RE_WORDS['too few']}.**"
    return (
        f"**{q} over {sets}: {res['estimate']:+.4f} [{res['low']:+.4f}, "
        f"{res['high']:+.4f}] (Hartung-Knapp 95% interval); prediction interval for a new data "
        f"set [{res['pred_low']:+.4f}, {res['pred_high']:+.4f}]; tau = {res['tau']:.4f}, I^2 = "
        f"{res['i2']:.0%}; p = {res['p_two_sided']:.3g} (Holm {res['p_holm']:.3g}), TOST within "
        f"+-{res['margin']:g} p = {res['p_tost']:.3g} (Holm {res['p_tost_holm']:.3g}): "
        f"{RE_WORDS.get(res['verdict'], res['verdict'])}.**"
    )


def _median_line(res: dict) -> str:
    m = res["median_rule"]
    if not m:
        return ""
    verdict = VERDICTS[m["verdict"]]
    if res["method"] != "ncip":
        verdict = verdict.replace("NCIP", display(res["method"]))
    return (
        f"- {_question(res['method'], res['against'])}: median {m['median']:+.4f} "
        f"[{m['low']:+.4f}, {m['high']:+.4f}] (coverage {m['coverage']:.1%}), Wilcoxon p = "
        f"{m['p_two_sided']:.3g}: {verdict}."
    )


def primary_section(r: ReportInputs) -> list[str]:
    results = primary_results(r)
    if not any(res["datasets"] for res in results):
        return []
    metric = PRIMARY["metric"].upper().replace("_", "-")
    L = [
        "## Primary comparisons (fixed before the run)",
        "",
        f"Two co-primary questions on clean {metric}, fixed in docs/preregistration.md before "
        "the run that answers them: "
        + " and ".join(_question(m, a) for m, a in PRIMARY_QUESTIONS)
        + " (the checkpoint ensemble's entropy over the last K checkpoints). One difference per "
        "data set (the mean over its subjects of their mean over runs; subjects on one data set "
        "share their test inputs, so a data set is one unit) with its standard error from the "
        "paired bootstrap of the test inputs; a random-effects meta-analysis over data sets "
        "(DerSimonian-Laird tau^2, Hartung-Knapp interval on k - 1 degrees of freedom), the 95% "
        "prediction interval for a new data set, and TOST equivalence within "
        f"+-{PRIMARY['margin']:g}; Holm over the two questions for each test. Every other "
        "score is secondary (Table 5, the checkpoint-score section).",
        "",
    ]
    for res in results:
        L += [_re_line(res), ""]
    L += [
        "Sensitivity, the median rule fixed before the previous extended run (median over data "
        "sets, distribution-free interval, Wilcoxon):",
        "",
    ]
    L += [line for res in results if (line := _median_line(res))]
    L += [
        "",
        "Sensitivity, the same random-effects analysis on other units (reported, not decisive): "
        "one unit per source (data sets drawn from one collection, such as the WordNet-gloss "
        "tasks or the MNIST-like digit sets, averaged into one), and the data sets' subjects "
        f"that reached the terminal phase alone (training accuracy >= {TERMINAL_ACCURACY:.0%} "
        "in every run; the training section lists them):",
        "",
    ]
    for key, what in (
        ("by_source", "one unit per source"),
        ("terminal", "terminal-phase subjects"),
    ):
        L += [_sensitivity_line(res, key, what) for res in results]
    L += [
        "",
        "![forest plot](../plots/report/forest.png)",
        "",
        "Per data set, grouped by source (difference ± standard error):",
        "",
        "| source | data set | " + " | ".join(_question(m, a) for m, a in PRIMARY_QUESTIONS) + " |",
        "|---|---|" + "---:|" * len(results),
    ]
    sets = sorted({k for res in results for k in res["by_dataset"]}, key=lambda d: (_source(d), d))
    for ds in sets:
        cells = []
        for res in results:
            v = res["by_dataset"].get(ds)
            cells.append(f"{v['diff']:+.4f} ± {v['se']:.4f}" if v else "–")
        L.append(f"| {_source(ds)} | {ds} | " + " | ".join(cells) + " |")
    sources = {_source(d) for d in sets}
    L += ["", f"{len(sets)} data sets from {len(sources)} sources."]
    n = max(res["datasets"] for res in results)
    if n < 6:
        L += [
            "",
            f"With {n} data sets the intervals are as wide as the data allow; they say little "
            "(`make extended` adds data sets).",
        ]
    return L + [""]


def forest_rows(r: ReportInputs) -> list[dict]:
    """The forest plot's data: per question, each data set's difference with a 95% interval
    (+-1.96 se), then the pooled estimate with its interval and the prediction interval."""
    out = []
    for res in primary_results(r):
        q = _question(res["method"], res["against"])
        for ds, v in res["by_dataset"].items():
            half = 1.96 * v["se"]
            est = v["diff"]
            out.append(
                dict(question=q, row=ds, est=est, lo=est - half, hi=est + half, kind="data set")
            )
        if res["verdict"] != "too few":
            pooled = dict(question=q, row="pooled", est=res["estimate"], kind="pooled")
            pooled |= dict(lo=res["low"], hi=res["high"])
            out.append(pooled | dict(pred_lo=res["pred_low"], pred_hi=res["pred_high"]))
    return out


def _by_dataset(r: ReportInputs, method: str, against: str) -> pd.Series:
    """Method minus against per data set (clean RAUC-ALL, means over runs, then over the data
    set's independent subjects), from the metrics alone."""
    m = r.mean[(r.mean["split"] == "test") & r.mean["subject"].isin(r.independent)]
    wide = m.pivot(index="subject", columns="method", values=PRIMARY["metric"])
    if method not in wide or against not in wide:
        return pd.Series(dtype=float)
    diff = (wide[method] - wide[against]).dropna()
    return diff.groupby({s: parse_subject(s, r.external).dataset for s in diff.index}).mean()


def checkpoint_scores_section(r: ReportInputs) -> list[str]:
    """Each checkpoint score (ncip.core.dynamics) against Entropy and against NCIP over the
    data sets (the median rule, descriptive: these comparisons are secondary), and NCIP's
    per-subject paired verdicts against it."""
    from ncip.core.dynamics import CHECKPOINT_SCORES
    from ncip.study.scores.dynamics import READS

    have = [n for n in CHECKPOINT_SCORES if n in set(r.mean["method"])]
    if not have:
        return []
    metric = PRIMARY["metric"].upper().replace("_", "-")
    L = [
        "## Checkpoint scores against Entropy and NCIP (secondary)",
        "",
        "The label-free scores the same stored predictions give (docs/methods.md): the "
        f"ensemble scores over {READS['ensemble']}, the trajectory scores over "
        f"{READS['trajectory']}. Per data set, clean {metric} of the score minus Entropy's and "
        "minus NCIP's (means over runs and the data set's subjects); the median over data sets "
        "with its distribution-free interval (coverage as attained) and how many data sets are "
        "above 0. The last column counts the subjects whose paired interval puts NCIP above, "
        "level with or below the score (NCIP better / unclear / worse). The ensemble entropy's "
        "comparison with Entropy is co-primary and answered above; the rest is secondary.",
        "",
        "| score | reads | − Entropy: median [interval] | above 0 | − NCIP: median [interval] "
        "| above 0 | NCIP better / unclear / worse |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    paired = r.paired
    if not paired.empty:
        paired = paired[
            (paired["split"] == "test")
            & (paired["budget"].astype(str) == "all")
            & paired["subject"].isin(r.independent)
        ]
    for name in have:
        cells = []
        for against in ("entropy", "ncip"):
            d = _by_dataset(r, name, against)
            if d.empty:
                cells += ["–", "–"]
                continue
            m = primary_comparison(d)
            cells += [
                f"{m['median']:+.4f} [{m['low']:+.4f}, {m['high']:+.4f}] ({m['coverage']:.0%})",
                f"{int((d > 0).sum())} of {len(d)}",
            ]
        v = paired[paired["method"] == name]["verdict"].value_counts() if len(paired) else {}
        counts = "/".join(str(int(v.get(k, 0))) for k in ("win", "tie", "loss")) if len(v) else "–"
        reads = CHECKPOINT_SCORES[name].reads
        L.append(f"| {display(name)} | {reads} | " + " | ".join(cells) + f" | {counts} |")
    return L + [""]
