"""Paired intervals: NCIP minus each method per subject, and the sentences that read them."""

from __future__ import annotations

import pandas as pd

from ncip.study.evaluation import baselines, display, method_order

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


def _interval_cells(cell: pd.DataFrame, method: str, subjects: list[str]) -> list[str]:
    """One table row's cells: NCIP minus ``method`` per subject with its interval and verdict
    (``cell``: the paired rows indexed by method and subject)."""
    out = []
    for s in subjects:
        if (method, s) not in cell.index:
            out.append("–")
            continue
        c = cell.loc[(method, s)]
        mark = {"win": " **win**", "loss": " **loss**"}.get(c["verdict"], "")
        out.append(f"{c['diff']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}]{mark}")
    return out


def runs_sentence(runs: int) -> str:
    """What the intervals hold, for this many training runs (issue 40)."""
    from ncip.study.statistics import T_RUNS_BELOW

    if runs == 1:
        return (
            "With one run per subject the intervals hold the test inputs' variance only, no "
            "training-seed variance: a win says NCIP ranked this model's inputs better, not that "
            "it would on another training of the same subject."
        )
    rule = (
        f"With {runs} runs (fewer than {T_RUNS_BELOW}) a win or loss also needs the run-level "
        "t-interval (the per-run differences) to exclude 0, since the bootstrap's run level "
        "then has few values to draw from."
        if runs < T_RUNS_BELOW
        else ""
    )
    return rule


def paired_section(paired: pd.DataFrame, subjects: list[str], runs: int = 3) -> list[str]:
    """NCIP minus each method per subject with its 95% interval, and win/tie/loss counts."""
    from ncip.study.statistics import win_tie_loss

    rs = int(paired["resamples"].iloc[0])
    L = [
        "## Paired intervals: NCIP minus each method, per subject",
        "",
        f"Mean over runs of NCIP's value minus the method's, and a 95% interval from a paired "
        f"hierarchical bootstrap: {rs} resamples, each drawing the runs with replacement and "
        "one resample of the test inputs, shared by every run drawn (the runs rank the same "
        "inputs) and by both methods. The orders are the metrics' own (the seeded "
        "tie-break); RS enters with its first seed. Above 0: NCIP better. **win**: the interval "
        "lies above 0, **loss**: below 0, tie: it covers 0. "
        + runs_sentence(runs)
        + " The interval describes this study's subjects; it is no test over subjects.",
        "",
    ]
    order = method_order(set(paired["method"]))
    for (split, budget), g in paired.groupby(["split", "budget"], sort=False):
        L += [f"{_budget_name(budget)}, {SPLIT_NAMES.get(split, split)} data:", ""]
        subs = [s for s in subjects if s in set(g["subject"])]
        L += ["| Method | " + " | ".join(subs) + " |", "|---|" + "---:|" * len(subs)]
        cell = g.set_index(["method", "subject"])
        for m in order:
            L.append(f"| {display(m)} | " + " | ".join(_interval_cells(cell, m, subs)) + " |")
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


# The selection control: NCIP against the same score over other checkpoints of the run.
SELECTION_CONTROLS = {"tvd+margin": "the last K", "tvd+random+margin": "K drawn at random"}


def selection_control_section(paired: pd.DataFrame, subjects: list[str]) -> list[str]:
    """Does Algorithm 1's choice of checkpoints help? NCIP minus the same score (TVD + margin)
    over the last K or K random checkpoints of the pool, per subject, RAUC-ALL clean."""
    g = paired[
        paired["method"].isin(list(SELECTION_CONTROLS))
        & (paired["split"] == "test")
        & (paired["budget"].astype(str) == "all")
    ]
    if g.empty:
        return []
    # score-ncip leaves the random-K control out where Algorithm 1 kept the whole pool (K not
    # smaller than the pool): there every control would compare a selection with itself
    drawn = set(g[g["method"] == "tvd+random+margin"]["subject"])
    subs = [s for s in subjects if s in drawn]
    whole = [s for s in subjects if s in set(g["subject"]) and s not in drawn]
    g = g[g["subject"].isin(subs)]
    cell = g.set_index(["method", "subject"])
    title = "## Selection control: Algorithm 1's checkpoints against the last K and random K"
    not_compared = (
        f"Not compared: {', '.join(whole)}, where K is not smaller than the candidate pool, so "
        "Algorithm 1 keeps every checkpoint of the pool and there is no selection to control."
    )
    if not subs:
        return [title, "", not_compared, ""]
    L = [
        title,
        "",
        "NCIP's score (zscore(TVD) + zscore(1 - margin)) over the checkpoints Algorithm 1 "
        "chose, minus the same score over the last K checkpoints of the run (Table 8's "
        "TVD+Margin) and over the final checkpoint and K - 1 others drawn uniformly from the "
        "candidate pool (seeded per run; not in the paper). RAUC-ALL on clean data, 95% "
        "paired intervals as in the section above. Above 0: Algorithm 1's checkpoints rank "
        "better.",
        "",
        "| Control | " + " | ".join(subs) + " |",
        "|---|" + "---:|" * len(subs),
    ]
    counts = []
    for m, words in SELECTION_CONTROLS.items():
        L.append(f"| NCIP − {words} | " + " | ".join(_interval_cells(cell, m, subs)) + " |")
        v = g[g["method"] == m]["verdict"].value_counts()
        counts.append(
            f"against {words}, Algorithm 1's checkpoints are better on {v.get('win', 0)}, "
            f"worse on {v.get('loss', 0)} and not clearly different on {v.get('tie', 0)} of "
            f"{int(v.sum())} subjects"
        )
    said = "; ".join(counts)
    L += ["", said[0].upper() + said[1:] + "."]
    return L + (["", not_compared] if whole else []) + [""]
