"""Evaluation of score tables: metrics per ordering, averaged over repeats and runs, as tables.

Every (subject, run, split, method, repeat) group of a score table is one ordering of one test
set. Ties are broken by one seeded random permutation of the test set, the same for every method
on that set (:func:`ncip.core.metrics.order_from_scores`), so a block of tied scores is ranked at
random: ``tied_share`` (the share of inputs whose score another input shares) and
``largest_tie`` (the largest such block's share) in per_ordering.csv say how much of an order
that decides.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ncip.core.errors import InputError
from ncip.core.metrics import evaluate_order, order_from_scores

GROUP = ["subject", "run", "split", "method", "repeat"]


def _methods():
    from ncip.study import scores  # importing registers every method

    return scores


def display(method: str) -> str:
    """A method's table name, as registered (unregistered names are shown as they are)."""
    s = _methods()
    return s.method_info(method).display if method in s.list_methods(None) else method


def ablation() -> list[str]:
    """NCIP and its ablation variants (Tables 7-8), in Table 8's row order, the variants the
    paper has not (the selection control) before NCIP, which stays last."""
    from ncip.study.paper import ablation_rows

    s = _methods()
    by_paper = {s.method_info(m).paper: m for m in s.list_methods("ncip")}
    known = [by_paper[r] for r in ablation_rows() if r in by_paper and by_paper[r] != "ncip"]
    extra = sorted(set(s.list_methods("ncip")) - set(known) - {"ncip"})
    return known + extra + ["ncip"]


def baselines() -> list[str]:
    """Every registered baseline, in the paper's row order, then the others alphabetically."""
    return method_order(_methods().list_methods("baseline"))


def checkpoint_methods() -> list[str]:
    """The checkpoint scores (:mod:`ncip.core.dynamics`), in their registered order."""
    return _methods().list_methods("checkpoint")


def method_order(methods: Iterable[str]) -> list[str]:
    """The paper's row order for methods the paper has, then any others alphabetically."""
    from ncip.study.paper import row_order

    given = set(methods)
    s = _methods()
    pos = {name: i for i, name in enumerate(row_order())}
    paper_name = {m: s.method_info(m).paper for m in given if m in s.list_methods(None)}
    known = sorted((m for m in given if paper_name.get(m) in pos), key=lambda m: pos[paper_name[m]])
    return known + sorted(given - set(known))


def evaluate_table(
    table: pd.DataFrame,
    seed: int = 0,
    budgets: Sequence[int] = (100, 200, 500, 1000),
    fault_fractions: Sequence[int] = tuple(range(1, 11)),
) -> pd.DataFrame:
    """One row of metrics per (subject, run, split, method, repeat) ordering."""
    rows = []
    for key, g in table.groupby(GROUP, sort=True):
        if g["sample_id"].duplicated().any():
            raise InputError(f"duplicate sample ids in the score group {key}")
        order = order_from_scores(g["score"].to_numpy(), seed)
        m = evaluate_order(
            order, g["label"].to_numpy(), g["pred"].to_numpy(), budgets, fault_fractions
        )
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                "n": len(g),
                "faults": int((g["label"] != g["pred"]).sum()),
                **m,
                **tie_shares(g["score"].to_numpy()),
            }
        )
    return pd.DataFrame(rows)


def tie_shares(scores: np.ndarray) -> dict[str, float]:
    """``tied_share``: the share of inputs whose score equals another input's; ``largest_tie``:
    the share of the largest block of equal scores (a block of one counts as no tie)."""
    _, counts = np.unique(np.asarray(scores, dtype=np.float64), return_counts=True)
    n = max(1, int(counts.sum()))
    tied = counts[counts > 1]
    return {
        "tied_share": float(tied.sum() / n),
        "largest_tie": float(tied.max() / n) if tied.size else 0.0,
    }


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


def fault_curve(
    per_order: pd.DataFrame, subject: str, split: str, fractions: Sequence[int]
) -> pd.DataFrame:
    """Wide table: budget_pct, then one column per method (mean fault types over runs)."""
    part = per_order[(per_order["subject"] == subject) & (per_order["split"] == split)]
    cols = [f"fault_types_{p}pct" for p in fractions]
    means = part.groupby(["run", "method"])[cols].mean().groupby("method").mean()
    out = pd.DataFrame({"budget_pct": list(fractions)})
    for m in method_order(means.index):
        out[display(m)] = means.loc[m, cols].to_numpy()
    return out


def detection_curve(
    table: pd.DataFrame, subject: str, split: str, seed: int, points: int = 100
) -> pd.DataFrame:
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


def long_curve(wide: pd.DataFrame) -> pd.DataFrame:
    """A wide curve table (x, then one column per method) as rows of (x, series, value): DVC
    draws one line per series with the `series` template, so dvc.yaml names no methods."""
    x = wide.columns[0]
    return wide.melt(id_vars=[x], var_name="series", value_name="value")


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


FRACTIONS = tuple(range(1, 11))  # fault types at 1..10% budgets (Fig. 5; Table 7 reads 5%)


def study_scores(table: pd.DataFrame, subjects: list[str], runs: list[int]) -> pd.DataFrame:
    """The score rows of the study's subjects and runs; every (subject, run) must have some."""
    table = table[table["subject"].isin(subjects) & table["run"].isin(runs)]
    # (subject, run) pairs from the distinct rows: zipping the columns walks millions of rows
    have = set(table[["subject", "run"]].drop_duplicates().itertuples(index=False, name=None))
    missing = [f"{s}/run-{r}" for s in subjects for r in runs if (s, r) not in have]
    if missing:
        raise InputError(f"no scores for {', '.join(missing)}; run the scoring stages first")
    return table


def accuracy(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """split -> subject -> accuracy of the model under test (from any method's rows)."""
    acc = table.drop_duplicates(["subject", "run", "split", "sample_id"])
    acc = acc.assign(correct=acc["label"] == acc["pred"])
    by = acc.groupby(["split", "subject"])["correct"].mean()
    return {
        sp: {s: round(float(v), 6) for s, v in by[sp].items()}
        for sp in by.index.get_level_values(0).unique()
    }


def metric_names(budgets: Sequence[int]) -> list[str]:
    return [f"rauc_{n}" for n in budgets] + ["rauc_all", "apfd", "fault_types_5pct"]


def tables_markdown(
    mean: pd.DataFrame, std: pd.DataFrame, budgets: Sequence[int], n_runs: int, attacks: dict
) -> str:
    """metrics/tables.md: every metric's methods x subjects table, this run only."""
    from ncip.study.tables import render_table

    sd = std if n_runs > 1 else None
    note = f"mean ± std over {n_runs} training runs" if n_runs > 1 else "one training run"
    rows = method_order(m for m in mean["method"].unique() if m not in ablation() or m == "ncip")

    def table(split, metric, methods, **kw):
        return render_table(mean, split, metric, methods, std=sd, **kw)

    out = [
        f"# Prioritization results ({note})\n",
        "Generated by `evaluate-rauc`; best value per subject in bold.\n",
        "## RAUC-ALL on clean data (paper Table 3)\n",
        table("test", "rauc_all", rows),
    ]
    for n in budgets:
        ref = " (paper Table 4)" if n == 500 else ""
        out += [f"## RAUC-{n} on clean data{ref}\n", table("test", f"rauc_{n}", rows)]
    out += ["## APFD on clean data\n", table("test", "apfd", rows)]
    out += [
        "## Ablation: fault types at a 5% budget (paper Table 7)\n",
        table("test", "fault_types_5pct", ablation(), digits=0),
        "## Ablation: RAUC-ALL (paper Table 8)\n",
        table("test", "rauc_all", ablation()),
    ]
    out += [
        "TVD uses the last K checkpoints; +NC uses the NC-selected ones instead; +Margin adds "
        "zscore(1 - margin of the final model). NCIP = TVD+NC+Margin.\n"
    ]
    if (mean["split"] == "adv").any():
        out += [
            "## Adversarial data: RAUC-500 (paper Table 6, left)\n",
            "One combined set of FGSM, PGD, BIM and CW inputs per subject.\n",
            table("adv", "rauc_500", rows, avg=True),
            "## Adversarial data: RAUC-ALL (paper Table 6, right)\n",
            table("adv", "rauc_all", rows, avg=True),
            "## Adversarial data: ablation RAUC-ALL\n",
            table("adv", "rauc_all", ablation()),
        ]
    if attacks:
        out += ["## Attacks on the test split (paper Table 2 settings)\n", attack_table(attacks)]
    return "\n".join(out)


PAIRED_BUDGETS = (None, 500)  # RAUC-ALL and RAUC-500, the headline's two


def paired_intervals(
    table: pd.DataFrame,
    seed: int = 0,
    resamples: int = 1000,
    budgets: tuple[int | None, ...] = PAIRED_BUDGETS,
    reference: str = "ncip",
) -> pd.DataFrame:
    """``reference`` (NCIP) minus every other method of ``table`` (baselines, ablations,
    checkpoint scores) per subject and split, with the paired hierarchical bootstrap's 95%
    interval and standard error (:func:`ncip.study.statistics.paired_bootstrap`; runs, then test
    inputs). Orders are those of the metrics (the seeded tie-break); a method with several
    repeats (RS) enters with its first."""
    from ncip.study.statistics import paired_bootstrap

    jobs = []
    table = table[table["repeat"] == 0]
    for (subject, split), g in table.groupby(["subject", "split"], sort=True):
        runs = []
        position: pd.Index | None = None  # sample id -> one index for every run and method,
        # so one input resample is one for all runs (the bootstrap shares it across runs)
        for _, gr in g.groupby("run", sort=True):
            by_method = {}
            for method, gm in gr.groupby("method", sort=True):
                ids = gm["sample_id"]
                if position is None:
                    position = pd.Index(ids)
                    if not position.is_unique:
                        raise InputError(f"{subject} {split}: {method} scores an input twice")
                idx = position.get_indexer(ids)
                if len(ids) != len(position) or (idx < 0).any():
                    raise InputError(f"{subject} {split}: {method} scores other inputs")
                if not by_method:  # this run's faults, in the common index
                    fault = np.zeros(len(position), dtype=bool)
                    fault[idx] = (gm["label"] != gm["pred"]).to_numpy()
                # the metrics' own order (row order and seeded tie-break), in common indices
                order = idx[order_from_scores(gm["score"].to_numpy(), seed)]
                by_method[method] = (order, fault)
            runs.append(by_method)
        if reference in runs[0] and len(runs[0]) > 1:
            jobs.append((subject, split, runs))

    def one(job: tuple) -> pd.DataFrame:
        subject, split, runs = job
        part = paired_bootstrap(runs, reference, budgets, resamples, seed)
        return part.assign(subject=subject, split=split)

    # each (subject, split) seeds its own generator, so running them side by side (NumPy
    # releases the GIL in the resampling's array work) gives the serial loop's numbers
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        out = list(pool.map(one, jobs))
    cols = ["subject", "split", "budget", "method", "diff", "lo", "hi", "se", "t_lo", "t_hi"]
    cols += ["verdict", "resamples"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def primary_intervals(table: pd.DataFrame, seed: int = 0, resamples: int = 1000) -> pd.DataFrame:
    """Each co-primary question's difference (:data:`ncip.study.statistics.PRIMARY_QUESTIONS`,
    method minus against, clean RAUC-ALL) per subject, with the paired bootstrap's interval and
    standard error: the per-subject input of the random-effects analysis
    (docs/preregistration.md). Subjects lacking either method are left out."""
    from ncip.study.statistics import PRIMARY_QUESTIONS

    cols = ["subject", "method", "against", "diff", "lo", "hi", "se", "resamples"]
    parts = []
    clean = table[table["split"] == "test"]
    for method, against in PRIMARY_QUESTIONS:
        pair = clean[clean["method"].isin([method, against])]
        got = paired_intervals(pair, seed, resamples, (None,), reference=method)
        if not got.empty:
            parts.append(got.assign(against=got["method"], method=method))
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


# The chooser of `ncip rank --holdout` (ncip.core.choice) measured (issue 46 item 3): its
# candidates in the study's method names, simplest first as the tool orders them (the tool's
# Margin is the study's PCS, the same order); holdout sizes and draws per subject and run.
CHOOSER_SIZES = (100, 200, 500, 1000)
CHOOSER_DRAWS = 20
CHOOSER_DEFAULT = "ncip"  # what ranks when a holdout has too few faults (the tool's default)


def chooser_candidates() -> tuple[str, ...]:
    from ncip.core.dynamics import CHECKPOINT_SCORES

    by_reads = [
        n for r in ("ensemble", "trajectory") for n, i in CHECKPOINT_SCORES.items() if i.reads == r
    ]
    return ("msp", "entropy", "pcs", "deepgini", *by_reads, "tvd", "ncip")


def chooser_regret(
    table: pd.DataFrame,
    seed: int = 0,
    sizes: Sequence[int] = CHOOSER_SIZES,
    draws: int = CHOOSER_DRAWS,
    resamples: int | None = None,
) -> pd.DataFrame:
    """The holdout chooser's regret, per subject, run, holdout size and draw: a holdout of
    ``size`` clean test inputs drawn without replacement (seeded by subject, run, size and
    draw), the choice made on it (:func:`ncip.core.choice.choose`), and every candidate's
    RAUC-ALL on the rest of the test set, where the regret of an order is the best candidate's
    RAUC-ALL there minus its own. Beside the chooser's (``regret``; the default NCIP ranks
    when the holdout has too few faults, ``fallback``): always-NCIP's and always-Entropy's.
    Sizes above half the test set are not drawn (the rest must be the larger part)."""
    from ncip.core.choice import RESAMPLES, choose
    from ncip.core.metrics import rauc

    cands = chooser_candidates()
    clean = table[(table["split"] == "test") & (table["repeat"] == 0) & table["method"].isin(cands)]
    jobs = []
    for (subject, run), g in clean.groupby(["subject", "run"], sort=True):
        wide = g.pivot(index="sample_id", columns="method", values="score")
        if not set(cands) <= set(wide.columns):
            continue
        first = g.drop_duplicates("sample_id").set_index("sample_id").loc[wide.index]
        fault = (first["label"] != first["pred"]).to_numpy()
        scores = {c: wide[c].to_numpy(dtype=np.float64) for c in cands}
        jobs += [
            (subject, run, n, d, scores, fault)
            for n in sizes
            if 2 * n <= len(fault)
            for d in range(draws)
        ]

    def one(job: tuple) -> dict:
        subject, run, n, d, scores, fault = job
        key = [seed, run, n, d, *subject.encode()]
        pick = np.random.default_rng(key).permutation(len(fault))
        hold, rest = pick[:n], np.sort(pick[n:])
        rec = choose(
            {c: s[hold] for c, s in scores.items()},
            fault[hold],
            cands,
            seed,
            resamples or RESAMPLES,
        )
        on_rest = {
            c: float(rauc(fault[rest][order_from_scores(s[rest], seed)])) for c, s in scores.items()
        }
        best = max(on_rest.values())
        chosen = rec["chosen"] or CHOOSER_DEFAULT
        return {
            "subject": subject,
            "run": run,
            "size": n,
            "draw": d,
            "holdout_faults": rec["faults"],
            "fallback": rec["chosen"] is None,
            "chosen": chosen,
            "best": max(on_rest, key=on_rest.get),
            "rest": len(rest),
            "regret": best - on_rest[chosen],
            "regret_ncip": best - on_rest["ncip"],
            "regret_entropy": best - on_rest["entropy"],
        }

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        rows = list(pool.map(one, jobs))
    cols = ["subject", "run", "size", "draw", "holdout_faults", "fallback", "chosen", "best"]
    cols += ["rest", "regret", "regret_ncip", "regret_entropy"]
    return pd.DataFrame(rows, columns=cols)
