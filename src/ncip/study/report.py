"""The study report: this run's tables beside the paper's, statistics, costs and figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ncip.core.errors import InputError
from ncip.core.metrics import run_seed
from ncip.study import paper
from ncip.study.evaluation import ablation, aggregate, baselines, display, method_order
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


def attainable_sentence(table: pd.DataFrame, unit: str) -> str:
    a = attainable(int(table["n"].max()), len(table))
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


CONTROL_NAMES = {"control:none": "Control: nothing added", "control:random": "Control: random"}


def arm_name(arm: str) -> str:
    return CONTROL_NAMES.get(arm, display(arm))


def retrain_by_subject(
    gains: dict[str, dict], averaged_only: bool = False
) -> dict[str, dict[str, float]]:
    """Mean accuracy gain in percentage points: subject -> arm -> gain, over runs; with
    ``averaged_only``, only subjects whose evaluation split is fine enough to average."""
    acc: dict[str, dict[str, list[float]]] = {}
    for key, g in gains.items():
        if averaged_only and not g.get("averaged", True):
            continue
        subject = key.split("/")[0]
        for m, r in g["methods"].items():
            if r.get("gain") is not None:
                acc.setdefault(subject, {}).setdefault(m, []).append(100 * r["gain"])
    return {s: {m: float(np.mean(v)) for m, v in ms.items()} for s, ms in acc.items()}


def _arms(gains: dict[str, dict]) -> list[str]:
    methods = method_order({m for g in gains.values() for m in g["methods"]} - set(CONTROL_NAMES))
    return [c for c in CONTROL_NAMES if any(c in g["methods"] for g in gains.values())] + methods


def arm_average(gains: dict[str, dict], arm: str, key: str = "gain") -> float:
    """An arm's ``key`` (gain or vs_none) in points, averaged over the subject-runs whose
    evaluation split is fine enough to average; NaN when there are none."""
    v = [
        100 * g["methods"][arm][key]
        for g in gains.values()
        if g.get("averaged", True) and arm in g["methods"]
    ]
    return float(np.mean(v)) if v else float("nan")


def retrain_markdown(gains: dict[str, dict]) -> str:
    """Per arm and subject/run: gain in points, mean over seeds ± the 95% interval half-width,
    and the paired difference to control:none; the average over the subjects fine enough to
    average, and which were left out and why."""
    keys = sorted(gains)
    lines = [
        "| Arm | " + " | ".join(keys) + " | Avg gain | Avg − none |",
        "|---|" + "---:|" * (len(keys) + 2),
    ]

    def cell(r: dict | None, arm: str) -> str:
        if r is None or r.get("gain") is None:
            return "–"
        pm = _half_width(r.get("gain_ci95"))
        vs = r.get("vs_none")
        show = arm != "control:none" and vs is not None and np.isfinite(vs)
        return f"{100 * r['gain']:+.2f}{pm}" + (f" ({100 * vs:+.2f})" if show else "")

    for arm in _arms(gains):
        rows = [gains[k]["methods"].get(arm) for k in keys]
        lines.append(
            f"| {arm_name(arm)} | "
            + " | ".join(cell(r, arm) for r in rows)
            + f" | {_fmt(arm_average(gains, arm), 2)} | "
            + f"{_fmt(arm_average(gains, arm, 'vs_none'), 2)} |"
        )
    left = [f"{k} ({gains[k]['reason']})" for k in keys if not gains[k].get("averaged", True)]
    if left:
        lines.append("\nLeft out of the averages: " + "; ".join(left) + ".")
    return "\n".join(lines) + "\n"


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


@dataclass
class ReportInputs:
    """Everything the report shows, read from the other stages' outputs."""

    cfg: dict
    subjects: list[str]
    runs: list[int]
    independent: list[str]
    external: dict
    per_order: pd.DataFrame
    mean: pd.DataFrame
    sd: pd.DataFrame | None
    methods: list[str]
    sig: pd.DataFrame
    sig_runs: pd.DataFrame
    costs: dict
    cost: dict
    retrain: dict
    weak: pd.DataFrame
    sensitivity: str | None
    paired: pd.DataFrame
    extended: str | None = None
    aliases: dict[str, str] = field(default_factory=dict)  # external subject -> paper's subject


def read_inputs(params: Path, metrics_dir: Path, scores: Path, plots_dir: Path) -> ReportInputs:
    """Read the study's results for the report; ValueError when evaluate-rauc has not run."""
    from ncip.study.cost import collect
    from ncip.study.stage import read_records
    from ncip.study.statistics import wilcoxon_table
    from ncip.study.subjects import external_specs, load_study

    cfg, subjects, runs = load_study(params)
    external = external_specs(params)
    per_order = pd.read_csv(metrics_dir / "per_ordering.csv")
    per_order = per_order[per_order["subject"].isin(subjects) & per_order["run"].isin(runs)]
    if per_order.empty:
        raise InputError(
            f"{metrics_dir / 'per_ordering.csv'} has no rows for these subjects; run evaluate-rauc"
        )
    mean, std = aggregate(per_order)
    methods = [m for m in baselines() + ["ncip"] if m in set(mean["method"])]
    # Table 5: NCIP vs each baseline, paired over the independent subjects (means over runs;
    # calibration variants of a subject are the same data and architecture, so they are left
    # out), and over their (subject, run) pairs as a descriptive check
    independent = [s for s in subjects if not parse_subject(s, external).variant]
    test_mean = mean[(mean["split"] == "test") & mean["subject"].isin(independent)]
    wide = test_mean.pivot(index="subject", columns="method", values="rauc_all")[methods]
    test_order = per_order[(per_order["split"] == "test") & per_order["subject"].isin(independent)]
    per_run = (
        test_order.groupby(["subject", "run", "method"])["rauc_all"]
        .mean()
        .unstack("method")[methods]
    )
    keys = [(s, r) for s in subjects for r in runs]
    costs = {
        f"{s}/run-{r}": read_records(
            scores / s / f"run-{r}",
            {"baselines": "baselines-cost.json", "ncip": "ncip-cost.json"},
            "the scoring stages",
        )
        for s, r in keys
    }
    retrain_runs = (cfg.get("retrain") or {}).get("runs", runs)
    retrain = read_records(
        metrics_dir / "retrain",
        {f"{s}/run-{r}": f"{s}-run-{r}.json" for s in subjects for r in retrain_runs},
        "the retrain-* stages",
    )
    weak = [
        pd.read_csv(f).assign(subject=s, run=r)
        for s, r in keys
        if (f := plots_dir / "weak_collapse" / f"{s}-run-{r}.csv").exists()
    ]
    sens = metrics_dir / "sensitivity.md"
    paired_file = metrics_dir / "paired.csv"
    paired = pd.read_csv(paired_file) if paired_file.exists() else pd.DataFrame()
    if not paired.empty:
        paired = paired[paired["subject"].isin(subjects)]
    return ReportInputs(
        cfg,
        subjects,
        runs,
        independent,
        external,
        per_order,
        mean,
        std if len(runs) > 1 else None,
        methods,
        wilcoxon_table(wide),
        wilcoxon_table(per_run) if len(runs) > 1 else pd.DataFrame(),
        costs,
        collect(subjects, runs),
        retrain,
        pd.concat(weak, ignore_index=True) if weak else pd.DataFrame(),
        sens.read_text() if sens.exists() else None,
        paired,
        ext.read_text() if (ext := metrics_dir / "extended.md").exists() else None,
        {name: spec.paper for name, spec in external.items() if spec.paper},
    )


def significance_record(r: ReportInputs) -> dict:
    m = len(r.sig)
    return {
        "subjects": r.independent,
        "attainable": attainable(len(r.independent), m) if m else {},
        "by_subject": r.sig.to_dict(orient="records"),
        "by_subject_and_run": r.sig_runs.to_dict(orient="records"),
    }


def retrain_table(r: ReportInputs) -> pd.DataFrame:
    """Fig. 6's data: arm x subject gains (percentage points) over the subjects fine enough to
    average, and their average."""
    by_subject = retrain_by_subject(r.retrain, averaged_only=True)
    rows = [
        {"method": arm_name(m), **{s: g.get(m, np.nan) for s, g in by_subject.items()}}
        for m in _arms(r.retrain)
        if any(m in g for g in by_subject.values())
    ]
    if not rows:  # no subject's evaluation split is fine enough to average
        return pd.DataFrame(columns=["method", "average"])
    df = pd.DataFrame(rows)
    df["average"] = df.drop(columns="method").mean(axis=1)
    return df


def weak_table(r: ReportInputs) -> pd.DataFrame:
    """Fig. 9's data: checkpoints x subject NCIP RAUC-ALL (mean over runs)."""
    w = r.weak.groupby(["subject", "checkpoints"])["rauc_all"].mean().unstack("subject")
    return w.reset_index()


def retrain_recipe(retrain: dict[str, dict]) -> str:
    g = next(iter(retrain.values()))
    c = g.get("config", {})
    seeds = c.get("seeds")
    return (
        f"Recipe, the same for every arm: the final model is fine-tuned on its whole training "
        f"set plus the arm's inputs ({100 * c.get('budget', 0):.0f}% of a candidate pool that "
        f"is {100 * c.get('pool_fraction', 0):.0f}% of the test set, with true labels), with "
        f"the training run's optimizer ({g.get('optimizer', 'adam')}) at learning rate "
        f"{c.get('lr')}, batch {c.get('batch_size')}, for {c.get('epochs')} pass(es), and "
        f"scored on the rest of the test set. Two controls get the same steps: nothing from "
        f"the pool (as many extra training inputs instead) and a random draw from the pool. "
        f"Cells: accuracy gain in points, mean over {seeds} fine-tuning seeds ± the 95% "
        f"t-interval half-width, and in brackets the paired difference to the nothing-added "
        f"control (same seeds, same shuffling). Peers' recipes: TDPR's artifact and SETS "
        f"also retrain on the training set plus the selected inputs; SETS trains 30 epochs "
        f"and scores on the rest of the test set; this one is shorter to fit a CPU. The paper "
        f"reports average gains of 1.52-5.94 points for NCIP, without a control."
    )


RECIPE_NAMES = {
    "union": "training set + selection",
    "selected": "selection alone (the paper's)",
}


def _recipe(g: dict, recipe: str) -> dict:
    return (g.get("recipes") or {}).get(recipe, g if recipe == "union" else {})


def _half_width(ci: float | None) -> str:
    """A gain's 95% half-width in points; a degenerate interval says what it is (one seed, or
    every seed giving the same accuracy) instead of printing ± 0.00."""
    if ci is None or not np.isfinite(ci):
        return " (one seed)"
    if ci == 0:
        return " (every seed equal)"
    return f" ± {100 * ci:.2f}"


def _pts(r: dict | None, key: str) -> str:
    if not r or r.get(key) is None or not np.isfinite(r[key]):
        return "–"
    return f"{100 * r[key]:+.2f}{_half_width(r.get(f'{key}_ci95'))}"


def recipes_markdown(retrain: dict[str, dict]) -> str:
    """Both recipes side by side per subject-run: each arm's gain and its paired differences
    to the two controls (points, mean over seeds ± 95% t-interval half-width)."""
    recipes = [r for r in RECIPE_NAMES if any(_recipe(g, r) for g in retrain.values())]
    head = ["Arm"] + [
        f"{RECIPE_NAMES[r]}: {what}" for r in recipes for what in ("gain", "− none", "− random")
    ]
    lines = []
    for key in sorted(retrain):
        g = retrain[key]
        lines += [
            f"{key}:",
            "",
            "| " + " | ".join(head) + " |",
            "|---|" + "---:|" * (len(head) - 1),
        ]
        arms = _arms({r: _recipe(g, r) for r in recipes if _recipe(g, r)})
        for arm in arms:
            cells = []
            for r in recipes:
                row = _recipe(g, r).get("methods", {}).get(arm)
                cells += [
                    _pts(row, "gain"),
                    "" if arm == "control:none" else _pts(row, "vs_none"),
                    "" if arm == "control:random" else _pts(row, "vs_random"),
                ]
            lines.append(f"| {arm_name(arm)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def rq3_verdict(retrain: dict[str, dict]) -> str:
    """One sentence: under which recipe, if either, NCIP's selection gains over a random one,
    by how much, with the interval (per subject-run, where the split is fine enough)."""
    parts, any_gain = [], False
    for r in RECIPE_NAMES:
        cells = []
        for key in sorted(retrain):
            g = retrain[key]
            row = _recipe(g, r).get("methods", {}).get("ncip")
            if not row or not g.get("averaged", True) or row.get("vs_random") is None:
                continue
            d, ci = 100 * row["vs_random"], 100 * (row.get("vs_random_ci95") or float("nan"))
            above = np.isfinite(ci) and d - ci > 0
            any_gain |= bool(above)
            cells.append(f"{key} {d:+.2f} ± {ci:.2f}{' (above 0)' if above else ''}")
        if cells:
            parts.append(f"{RECIPE_NAMES[r]}: {', '.join(cells)}")
    if not parts:
        return ""
    head = (
        "RQ3 verdict: NCIP's top 20% gains over a random 20% with a 95% interval above 0 "
        "only where marked"
        if any_gain
        else "RQ3 verdict: neither recipe reproduces a gain of NCIP's top 20% over a random 20% "
        "(every 95% interval covers 0 or lies below it)"
    )
    return (
        head
        + ". NCIP − random, in points, mean ± 95% half-width over the fine-tuning seeds: "
        + "; ".join(parts)
        + "."
    )


def retrain_paragraph(retrain: dict[str, dict]) -> str:
    ok = [k for k, g in retrain.items() if g.get("averaged", True)]
    if not ok:
        return (
            "Retraining: no subject has an evaluation split fine enough to average "
            f"({'; '.join(g['reason'] for g in retrain.values())})."
        )

    def avg(arm: str, key: str = "gain") -> float:
        return arm_average(retrain, arm, key)

    arms = [a for a in _arms(retrain) if a not in CONTROL_NAMES]
    best = max(arms, key=lambda a: avg(a)) if arms else None
    return (
        f"Retraining ({', '.join(ok)}): fine-tuning on the training set plus NCIP's top 20% "
        f"changes accuracy by {avg('ncip'):+.2f} points on average, against "
        f"{avg('control:random'):+.2f} for a random draw and {avg('control:none'):+.2f} with "
        f"nothing added (NCIP − nothing added: {avg('ncip', 'vs_none'):+.2f}); the largest "
        f"average gain is {arm_name(best)}'s ({avg(best):+.2f}). "
        + retrain_by_subject_sentence({k: retrain[k] for k in ok})
    )


def retrain_by_subject_sentence(retrain: dict[str, dict]) -> str:
    """The per-subject picture behind the average: per subject-run, how many methods' arms
    end above the nothing-added control, and how many with their 95% interval (over the
    fine-tuning seeds) wholly above or below 0."""
    parts = []
    for key, g in retrain.items():
        arms = {m: r for m, r in g["methods"].items() if m not in CONTROL_NAMES}
        if not arms:
            continue
        ci = [(r.get("vs_none", 0), r.get("vs_none_ci95") or 0.0) for r in arms.values()]
        above = sum(1 for d, _ in ci if d > 0)
        up = sum(1 for d, h in ci if d - h > 0)
        down = sum(1 for d, h in ci if d + h < 0)
        parts.append(
            f"{key}: {above} of {len(arms)} methods above it ({up} with the interval above 0, "
            f"{down} below 0)"
        )
    if not parts:
        return ""
    return (
        "Against the nothing-added control, per subject (training set + selection; the section "
        "below has every interval): " + "; ".join(parts) + "."
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


def significance_paragraph(sig: pd.DataFrame, independent: list[str]) -> str:
    if sig.empty:
        return ""
    a = attainable(len(independent), len(sig))
    below = int((sig["p_holm"] < 0.05).sum())
    return (
        f"Table 5 pairs {a['n']} independent subjects: the smallest attainable Holm-corrected "
        f"p is {a['min_p_holm']:.3g}, and {below} of {len(sig)} comparisons fall below 0.05 "
        f"(significance needs at least {a['pairs_needed']} independent subjects)."
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


SPLIT_NAMES = {"test": "clean", "adv": "adversarial"}


def _budget_name(b) -> str:
    return "RAUC-ALL" if str(b) == "all" else f"RAUC-{b}"


def _names(methods: list[str], of: int) -> str:
    if len(methods) == of:
        return f"all {of}"
    return f"{len(methods)} ({', '.join(map(display, methods))})"


VERDICT_WORDS = (
    ("win", "better than"),
    ("loss", "worse than"),
    ("tie", "no clear difference from"),
)


def paired_paragraph(paired: pd.DataFrame) -> str:
    """What the per-subject paired intervals support, in words: "better" and "worse" only
    where an interval lies wholly above or below 0."""
    rs = int(paired["resamples"].iloc[0])
    parts = []
    for (split, budget), g in paired.groupby(["split", "budget"], sort=False):
        g = g[g["method"].isin(baselines())]
        per_subject = []
        for s, rows in g.groupby("subject", sort=False):
            verdict = rows.groupby("verdict")["method"].apply(list)
            said = [
                f"{word} {_names(verdict[v], len(rows))}"
                for v, word in VERDICT_WORDS
                if v in verdict.index
            ]
            per_subject.append(f"{s}: " + ", ".join(said))
        parts.append(
            f"{_budget_name(budget)} on {SPLIT_NAMES.get(split, split)} data: "
            + "; ".join(per_subject)
        )
    return (
        "Per subject, NCIP minus each of the twelve baselines with a 95% interval from a paired "
        f"hierarchical bootstrap ({rs} resamples of the runs, then of the test inputs, the same "
        'for both methods; the section "Paired intervals" has every value, ablations too). '
        "NCIP is called better or worse than a baseline only where the interval excludes 0. "
        + ". ".join(parts)
        + "."
    )


def paired_section(paired: pd.DataFrame, subjects: list[str]) -> list[str]:
    """NCIP minus each method per subject with its 95% interval, and win/tie/loss counts."""
    from ncip.study.statistics import win_tie_loss

    rs = int(paired["resamples"].iloc[0])
    L = [
        "## Paired intervals: NCIP minus each method, per subject",
        "",
        f"Mean over runs of NCIP's value minus the method's, and a 95% interval from a paired "
        f"hierarchical bootstrap: {rs} resamples, each drawing the runs with replacement and "
        "then, within each run drawn, the test inputs with replacement; both methods are "
        "evaluated on the same resample. The orders are the metrics' own (the seeded "
        "tie-break); RS enters with its first seed. Above 0: NCIP better. **win**: the interval "
        "lies above 0, **loss**: below 0, tie: it covers 0. With three runs the run level of "
        "the resampling is coarse; the interval is a description of this study's spread, not "
        "a test over subjects.",
        "",
    ]
    order = method_order(set(paired["method"]))
    for (split, budget), g in paired.groupby(["split", "budget"], sort=False):
        L += [f"{_budget_name(budget)}, {SPLIT_NAMES.get(split, split)} data:", ""]
        subs = [s for s in subjects if s in set(g["subject"])]
        L += ["| Method | " + " | ".join(subs) + " |", "|---|" + "---:|" * len(subs)]
        cell = g.set_index(["method", "subject"])
        for m in order:
            row = []
            for s in subs:
                if (m, s) not in cell.index:
                    row.append("–")
                    continue
                c = cell.loc[(m, s)]
                mark = {"win": " **win**", "loss": " **loss**"}.get(c["verdict"], "")
                row.append(f"{c['diff']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]{mark}")
            L.append(f"| {display(m)} | " + " | ".join(row) + " |")
        L.append("")
    wtl = win_tie_loss(paired)
    L += [
        "Wins, ties and losses of NCIP across the subjects:",
        "",
        "| Method | "
        + " | ".join(
            f"{_budget_name(b)} {SPLIT_NAMES.get(sp, sp)}"
            for sp, b in wtl[["split", "budget"]].drop_duplicates().itertuples(index=False)
        )
        + " |",
    ]
    cols = wtl[["split", "budget"]].drop_duplicates().itertuples(index=False)
    cols = list(cols)
    L.append("|---|" + "---:|" * len(cols))
    cell = wtl.set_index(["method", "split", "budget"])
    for m in order:
        vals = []
        for sp, b in cols:
            if (m, sp, b) in cell.index:
                c = cell.loc[(m, sp, b)]
                vals.append(f"{c['win']}/{c['tie']}/{c['loss']}")
            else:
                vals.append("–")
        L.append(f"| {display(m)} | " + " | ".join(vals) + " |")
    return L + [""]


# The extended study's sections that metrics/extended.md keeps (headings' beginnings)
EXTENDED_SECTIONS = (
    "Models under test",
    "RAUC-ALL on clean data",
    "Significance:",
    "Paired intervals:",
)


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


def header_section(r: ReportInputs) -> list[str]:
    cfg = r.cfg
    seeds = ", ".join(str(run_seed(cfg.get("seed", 0), run)) for run in r.runs)
    return [
        "# NCIP reproduction report",
        "",
        f"Generated by the `report` stage from this run: {len(r.subjects)} subjects x "
        f"{len(r.runs)} training run(s) (seeds {seeds}), "
        f"K = {cfg.get('k')}, alpha = {cfg.get('alpha')}, {cfg['train']['epochs']} epochs "
        f"{'for the subjects trained here ' if r.external else ''}"
        f"(the paper trains {paper.EPOCHS['mnist']} epochs on MNIST and "
        f"{paper.EPOCHS['fmnist']} on Fashion-MNIST). Each table sets this run's value beside "
        "the paper's for the same dataset and model"
        + (
            "; `mnist5k` (5,000 real MNIST digits, a 1,000-image test set) stands in for the "
            "paper's MNIST columns, so those comparisons are looser"
            if any(s.startswith("mnist5k") for s in r.subjects)
            else ""
        )
        + ". Bold marks the best value of each column.",
        "",
    ]


def summary_section(r: ReportInputs) -> list[str]:
    """The summary: every paragraph computed from the tables below it."""
    L = [
        "## Summary",
        "",
        agreement_paragraph(r.mean, r.subjects, r.aliases),
        "",
        spread_paragraph(r.mean, r.sd, r.subjects, len(r.runs)),
        "",
        (
            significance_paragraph(r.sig, r.independent)
            + extended_significance_sentence(r.extended)
        ).strip(),
        "",
    ]
    if not r.paired.empty:
        L += [paired_paragraph(r.paired), ""]
    if r.retrain:
        L += [retrain_paragraph(r.retrain), ""]
        verdict = rq3_verdict(r.retrain)
        if verdict:
            L += [verdict, ""]
    ties = tie_paragraph(r.mean, r.subjects)
    if ties:
        L += [ties, ""]
    return L


def table1_section(r: ReportInputs) -> list[str]:
    """Paper Table 1: the models under test and their test accuracy."""
    mean = r.mean
    acc = mean[(mean["split"] == "test") & (mean["method"] == "ncip")].set_index("subject")
    L = [
        "## Models under test (paper Table 1)",
        "",
        "| Subject | test accuracy | paper |",
        "|---|---:|---:|",
    ]
    for s in r.subjects:
        col = column_of(s, r.aliases)
        a = 1 - acc.loc[s, "faults"] / acc.loc[s, "n"] if s in acc.index else np.nan
        L.append(
            f"| {s} | {a:.4f} | {paper.ACCURACY[col]:.4f} |" if col else f"| {s} | {a:.4f} | – |"
        )
    return L + [""]


def _side(r: ReportInputs, split: str, metric: str, ref: dict, methods, subjects=None, digits=3):
    subjects = r.subjects if subjects is None else subjects
    return side_by_side(r.mean, split, metric, ref, methods, subjects, digits, r.sd, r.aliases)


def table3_4_section(r: ReportInputs) -> list[str]:
    """Paper Tables 3 and 4: RAUC-ALL and RAUC-500 on clean data."""
    return [
        "## RAUC-ALL on clean data (paper Table 3)",
        "",
        _side(r, "test", "rauc_all", paper.TABLE3, r.methods),
        "## RAUC-500 on clean data (paper Table 4)",
        "",
        _side(r, "test", "rauc_500", paper.TABLE4, r.methods),
    ]


def table5_section(r: ReportInputs) -> list[str]:
    """Paper Table 5: Wilcoxon signed-rank tests over the independent subjects."""
    L = [
        "## Significance: NCIP vs each baseline on RAUC-ALL (paper Table 5)",
        "",
        "One-sided Wilcoxon signed-rank tests (NCIP greater), Holm-corrected over the "
        "baselines; effect size = matched-pairs rank-biserial correlation. The paper pairs its "
        "14 subjects (10 for EffiMAP). Here the pairs are the independent subjects only ("
        + ", ".join(r.independent)
        + "): a calibration variant (mixup, label smoothing) is the same data and architecture "
        "as its plain subject, so it is reported in its own section below, not paired here.",
        "",
        significance_markdown(r.sig, "independent subjects (RAUC-ALL averaged over runs)"),
    ]
    if not r.sig_runs.empty:
        L += [
            "Paired over every (subject, run) of those subjects, a descriptive check only: "
            "runs of one subject share its data and architecture, so they are not independent "
            "samples of subjects.",
            "",
            significance_markdown(r.sig_runs, "(subject, run) pairs"),
        ]
    return L


def table6_section(r: ReportInputs) -> list[str]:
    """Paper Table 6: RAUC-500 and RAUC-ALL on the adversarial test sets."""
    if not (r.mean["split"] == "adv").any():
        return []
    return [
        "## Adversarial data (paper Table 6)",
        "",
        "One combined FGSM + PGD + BIM + CW test set per subject. The paper reports Table 6 "
        "for CIFAR and TinyImageNet models only, so its column stays empty unless those "
        "subjects are run.",
        "",
        "RAUC-500:",
        "",
        _side(r, "adv", "rauc_500", paper.TABLE6_RAUC500, r.methods),
        "RAUC-ALL:",
        "",
        _side(r, "adv", "rauc_all", paper.TABLE6_RAUCALL, r.methods),
    ]


def paired_intervals_section(r: ReportInputs) -> list[str]:
    return [] if r.paired.empty else paired_section(r.paired, r.subjects)


def table7_8_section(r: ReportInputs) -> list[str]:
    """Paper Tables 7 and 8: the ablation's fault types at 5% and RAUC-ALL."""
    return [
        "## Ablation: fault types at a 5% budget (paper Table 7)",
        "",
        _side(r, "test", "fault_types_5pct", paper.TABLE7, ablation(), digits=0),
        "## Ablation: RAUC-ALL (paper Table 8)",
        "",
        _side(r, "test", "rauc_all", paper.TABLE8, ablation()),
        "TVD: the last K checkpoints; +NC: the NC-selected checkpoints instead; +Margin: adds "
        "zscore(1 - margin of the final model). NCIP = TVD + NC + Margin.",
        "",
    ]


def ties_section(r: ReportInputs) -> list[str]:
    methods = r.methods + [m for m in ablation() if m != "ncip"]
    return [
        "## Tied scores",
        "",
        "Share of the clean test inputs whose score another input shares (mean over runs), and "
        "in brackets the largest block of equal scores; methods without ties are not listed. "
        "Ties are broken by one seeded random permutation of the test set, the same for every "
        "method, so inside a tied block the order is random and the detection curve rises at "
        "the block's base rate.",
        "",
        tie_markdown(r.mean, r.subjects, methods),
    ] + (
        [
            "On the adversarial sets (the same measure over each subject's combined FGSM, PGD, "
            "BIM and CW inputs):",
            "",
            tie_markdown(r.mean, r.subjects, methods, split="adv"),
        ]
        if (r.mean["split"] == "adv").any()
        else []
    )


def calibration_section(r: ReportInputs) -> list[str]:
    """Paper Fig. 4a: plain, mixup and label-smoothing variants of one subject."""
    variants = [s for s in r.subjects if parse_subject(s, r.external).variant]
    if not variants:
        return []
    bases = sorted({s.rsplit("-", 1)[0] for s in variants} & set(r.subjects))
    group = [s for b in bases for s in r.subjects if s == b or s.startswith(b + "-")]
    train = r.cfg["train"]
    return [
        "## Calibration: mixup and label smoothing (paper Fig. 4a)",
        "",
        "RAUC-ALL on clean data of models trained plainly, with mixup (alpha "
        f"{train['mixup_alpha']}) and with label smoothing ({train['label_smoothing']}).",
        "",
        _side(r, "test", "rauc_all", {}, r.methods, group),
    ]


def retraining_section(r: ReportInputs) -> list[str]:
    """Paper RQ3 / Fig. 6: both fine-tuning recipes and the verdict."""
    retrain = r.retrain
    if not retrain:
        return []
    passes = next(iter(retrain.values())).get("config", {}).get("selected_epochs")
    L = [
        "## Retraining guidance (paper RQ3, Fig. 6)",
        "",
        retrain_recipe(retrain),
        "",
        retrain_markdown(retrain),
        "### Both recipes",
        "",
        'The paper fine-tunes "the original models using the top 20% of samples '
        'prioritized by each method"; the recipe above adds them to the whole training set '
        "(TDPR's and SETS' recipe). The second recipe fine-tunes on the selected inputs "
        f"alone for {passes} "
        "passes, same learning rate, seeds and controls (nothing new: as many training "
        "inputs drawn again).",
        "",
        recipes_markdown(retrain),
        rq3_verdict(retrain),
        "",
    ]
    if any(g.get("averaged", True) for g in retrain.values()):
        L += ["![retraining](../plots/report/retrain.png)"]
    return L + [""]


def weak_collapse_section(r: ReportInputs) -> list[str]:
    """Paper Fig. 9: NCIP with only the first E' checkpoints."""
    if r.weak.empty:
        return []
    w = r.weak.groupby(["checkpoints", "subject"])["rauc_all"].mean().unstack("subject")
    L = [
        "## Weak neural collapse (paper Fig. 9)",
        "",
        "NCIP's RAUC-ALL when only the first E' checkpoints exist (the model under test is "
        "then checkpoint E'). The paper sees RAUC-ALL grow as collapse strengthens.",
        "",
        "| checkpoints | " + " | ".join(w.columns) + " |",
        "|---:|" + "---:|" * len(w.columns),
    ]
    for e, row in w.iterrows():
        L.append(f"| {e} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    return L + ["", "![weak collapse](../plots/report/weak_collapse.png)", ""]


def table9_section(r: ReportInputs) -> list[str]:
    """Paper Table 9: seconds per method group."""
    return [
        "## Cost in seconds (paper Table 9)",
        "",
        "Measured by the stages themselves on this machine (`metrics/cost.json`). "
        "predict-probabilities runs every checkpoint once for every consumer, and each "
        "method is charged the share it reads: SA = LSA + DSA + the final model's "
        "training-set features; Uncert = the four confidence scores + the final model on the "
        "test sets; TDPR = its ranker + every checkpoint (Train: on the validation sets, "
        "Predict: on the test sets, by inputs); NCIP-Predict = the selected and last-K "
        "checkpoints on the test sets. Train columns are preparation on the labelled "
        "split(s), Predict the scoring of the clean and adversarial test sets. The paper "
        "used an RTX 4090.",
        "",
        cost_table(r.cost, r.aliases),
    ]


def external_section(r: ReportInputs) -> list[str]:
    if not r.external:
        return []
    L = [
        "## Models trained elsewhere",
        "",
        "These subjects were not trained here: their checkpoints were imported (training "
        "skipped) and every later stage ran on them as on the others.",
        "",
        "| subject | checkpoints | model | compared with the paper's |",
        "|---|---|---|---|",
    ]
    for name, spec in r.external.items():
        L.append(
            f"| {name} | `{spec.checkpoints}` | `{spec.model or 'from the checkpoints'}` "
            f"| {spec.paper or '–'} |"
        )
    return L + [""]


def not_run_section(r: ReportInputs) -> list[str]:
    not_run = not_run_markdown(r.costs)
    return ["## What could not run", "", not_run, ""] if not_run else []


def sensitivity_section(r: ReportInputs) -> list[str]:
    """Paper Figs. 7-8, from metrics/sensitivity.md (`make sweep`)."""
    body = r.sensitivity
    if body is None:
        body = (
            "Not in this run: `make sweep` queues the alpha and K experiments, writes "
            "`metrics/sensitivity.md` and re-renders this report with it."
        )
    return ["## Sensitivity to alpha and K (paper Figs. 7-8)", "", body, ""]


def extended_section(r: ReportInputs) -> list[str]:
    """Table 5 over the extended study's subjects, from metrics/extended.md (`make extended`)."""
    return [
        "## Extended CPU study: Table 5 over independent subjects (issue 22)",
        "",
        r.extended or "Not in this run: `make extended` runs it and writes `metrics/extended.md`.",
        "",
    ]


def figures_section(r: ReportInputs) -> list[str]:
    L = ["## Figures", ""]
    for s in r.subjects:
        links = [
            f"[fault diversity (Fig. 5)](../plots/figures/fault_diversity-{s}.png)",
            f"[detection curve](../plots/figures/detection-{s}.png)",
        ]
        for run in r.runs:
            a = f"../plots/analysis/{s}-run-{run}"
            links += [
                f"run {run}: [TVD vs checkpoints (Fig. 3)]({a}/tvd_curve.png)",
                f"[weak collapse (Fig. 9)]({a}/weak_collapse.png)",
                f"[t-SNE (Fig. 1)]({a}/tsne.png)",
            ]
        L.append(f"- {s}: " + ", ".join(links))
    return L


# The report's sections in order; each reads only the ReportInputs
SECTIONS = (
    header_section,
    summary_section,
    table1_section,
    table3_4_section,
    table5_section,
    table6_section,
    paired_intervals_section,
    table7_8_section,
    ties_section,
    calibration_section,
    retraining_section,
    weak_collapse_section,
    table9_section,
    external_section,
    not_run_section,
    sensitivity_section,
    extended_section,
    figures_section,
)


def render_report(r: ReportInputs) -> str:
    """metrics/report.md from the study's results: every section in order."""
    return "\n".join(line for section in SECTIONS for line in section(r)) + "\n"
