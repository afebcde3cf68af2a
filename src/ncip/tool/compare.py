"""With labels: NCIP's ranking against the other orders the same pass gives (the final model's
margin, DeepGini, Entropy and MSP, the checkpoint scores of :mod:`ncip.core.dynamics`, random
order), and the verdict printed after `ncip rank --labels`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ncip.core.dynamics import CHECKPOINT_SCORES
from ncip.core.metrics import apfd, order_from_scores, rauc, run_seed

RANDOM_REPEATS = 10


def compare_orders(
    final_probs: np.ndarray,
    ncip_scores: np.ndarray,
    labels: np.ndarray,
    seed: int = 0,
    checkpoint_scores: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """NCIP against the final model's margin, DeepGini, Entropy and MSP, the checkpoint scores
    (by name, shown by their table names) and random order, on labelled inputs:
    RAUC-100/500/ALL, APFD and the faults (misclassified inputs) in the top 10%."""
    from ncip.tool.choose import DISPLAY, confidence_scores

    p = np.asarray(final_probs, dtype=np.float64)
    conf = confidence_scores(p)
    methods = {"NCIP": ncip_scores}
    methods |= {DISPLAY[n]: conf[n] for n in ("margin", "deepgini", "entropy", "msp")}
    for name, s in (checkpoint_scores or {}).items():
        methods[CHECKPOINT_SCORES[name].display] = s
    return compare_scores(methods, p.argmax(axis=1) != np.asarray(labels), seed)


def compare_scores(
    methods: dict[str, np.ndarray], fault: np.ndarray, seed: int = 0, what: str | None = None
) -> pd.DataFrame:
    """Each method's order (larger score first; NCIP first in ``methods``) and random order
    (the mean of RANDOM_REPEATS seeded permutations) on known faults: RAUC-100/500/ALL, APFD,
    the faults in the top 10%. ``what`` says what the inputs and their faults are in the
    printed table (default: labelled inputs the final model misclassifies)."""
    fault = np.asarray(fault, dtype=bool)
    n = len(fault)
    top10 = max(1, math.ceil(0.1 * n))
    runs_of = {name: [s] for name, s in methods.items()}
    runs_of["Random"] = [
        np.random.default_rng(run_seed(seed, r)).permutation(n).astype(np.float64)
        for r in range(RANDOM_REPEATS)
    ]
    rows = []
    for name, runs in runs_of.items():
        vals = []
        for s in runs:
            f = fault[order_from_scores(s, seed)]
            vals.append([rauc(f, 100), rauc(f, 500), rauc(f), apfd(f), int(f[:top10].sum())])
        v = np.nanmean(np.array(vals, dtype=np.float64), axis=0) if fault.any() else [np.nan] * 5
        rows.append(
            {
                "method": name,
                "rauc_100": v[0],
                "rauc_500": v[1],
                "rauc_all": v[2],
                "apfd": v[3],
                "faults_top10pct": float(v[4]),
                "faults": int(fault.sum()),
                "inputs": n,
                "top10pct": top10,
            }
            | ({} if what is None else {"fault": what})
        )
    return pd.DataFrame(rows)


def verdict(ev: pd.DataFrame) -> str:
    """Two honest sentences: did NCIP beat the best other order here, and by how much does it
    differ from the final model's margin alone?"""
    r = ev.set_index("method")["rauc_all"]
    if ev["faults"].iloc[0] == 0:
        return "the model gets every labelled input right: there is nothing to rank"
    if ev["faults"].iloc[0] == ev["inputs"].iloc[0]:
        return "every input counts as a fault: every order scores the same; nothing to rank"
    best_other = r.drop("NCIP").idxmax()
    lead = r["NCIP"] - r[best_other]
    if abs(lead) < 0.0005:
        first = f"NCIP ties {best_other} on RAUC-ALL ({r['NCIP']:.3f})"
    elif lead > 0:
        first = f"NCIP is best on RAUC-ALL ({r['NCIP']:.3f}, {lead:+.3f} over {best_other})"
    else:
        first = (
            f"NCIP does not beat {best_other} on this model (RAUC-ALL {r['NCIP']:.3f} against "
            f"{r[best_other]:.3f})"
        )
    second = f"NCIP minus the final model's margin alone: {r['NCIP'] - r['Margin']:+.3f}"
    if "fault" in ev:  # a failure rule, not misclassification: random order's score says much
        second += f"; random order scores {r['Random']:.3f}"
    if lead <= 0.0005 and best_other != "Random":
        second += "; here the checkpoints add little beyond the final model's confidence"
    return f"{first}. {second}."


def _header(ev: pd.DataFrame, n: int, faults: int) -> str:
    if "fault" in ev:
        return str(ev["fault"].iloc[0]).format(n=n, faults=faults)
    return f"on your {n} labelled inputs ({faults} misclassified by the final model):"


def format_evaluation(ev: pd.DataFrame) -> str:
    width = max(9, max(len(m) for m in ev["method"]))
    n, faults, top = (
        int(ev["inputs"].iloc[0]),
        int(ev["faults"].iloc[0]),
        int(ev["top10pct"].iloc[0]),
    )
    lines = [
        _header(ev, n, faults),
        (
            f"{'method':<{width}} {'RAUC-100':>8} {'RAUC-500':>8} {'RAUC-ALL':>8} {'APFD':>6} "
            f"{'faults in top 10%':>18}"
        ),
    ]
    for r in ev.itertuples():
        share = (
            f"{r.faults_top10pct:.0f} of {top}"
            if r.method != "Random"
            else f"{r.faults_top10pct:.1f} of {top}"
        )
        lines.append(
            f"{r.method:<{width}} {r.rauc_100:>8.3f} {r.rauc_500:>8.3f} {r.rauc_all:>8.3f} "
            f"{r.apfd:>6.3f} {share:>18}"
        )
    lines.append(verdict(ev))
    return "\n".join(lines)
