"""The report's sections on training: how far each model went into the terminal phase, and
what longer training (an ``e<N>`` variant beside its subject) does to NCIP's gain."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ncip.study.report.inputs import ReportInputs
from ncip.study.subjects import parse_subject

TERMINAL_ACCURACY = 0.99  # training accuracy taken as the terminal phase (issue 40)


def terminal_subjects(r: ReportInputs) -> set[str]:
    """The subjects whose final training accuracy reaches TERMINAL_ACCURACY in every run."""
    h = r.training
    if h.empty:
        return set()
    last = h[h["epoch"] == h.groupby("subject")["epoch"].transform("max")]
    ok = last.groupby("subject")["train_acc"].apply(lambda a: bool((a >= TERMINAL_ACCURACY).all()))
    return {str(s) for s, v in ok.items() if v}


def training_section(r: ReportInputs) -> list[str]:
    """Every subject's final training accuracy and its sigma_cos over training (means over
    runs): how far each model is into the terminal phase, where neural collapse is defined."""
    h = r.training
    if h.empty:
        return []
    L = [
        "## Training: accuracy and sigma_cos",
        "",
        "Means over runs. sigma_cos is the spread of the cosines between the head's class "
        "vectors (Eq. 5; falling = collapsing towards equiangularity), at the first epoch, at "
        "50% and 90% of training and at the end; 'terminal' marks a final training accuracy "
        f"of at least {TERMINAL_ACCURACY:.0%} in every run, the terminal phase of training "
        "where neural collapse is defined.",
        "",
        "| Subject | epochs | train acc | test acc | sigma_cos: first | 50% | 90% | final | "
        "terminal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    terminal_set = terminal_subjects(r)
    for s in r.subjects:
        g = h[h["subject"] == s]
        if g.empty:
            continue
        m = int(g["epoch"].max())
        sigma = g.groupby("epoch")["sigma_cos"].mean()
        final = g[g["epoch"] == m]
        sig = [sigma.get(e, np.nan) for e in (1, max(1, round(0.5 * m)), max(1, round(0.9 * m)), m)]
        terminal = "yes" if s in terminal_set else "no"
        L.append(
            f"| {s} | {m} | {final['train_acc'].mean():.4f} | {final['test_acc'].mean():.4f} | "
            + " | ".join(f"{v:.4f}" for v in sig)
            + f" | {terminal} |"
        )
    return L + [""]


def _run_gain(per_order: pd.DataFrame, subject: str, against: str) -> pd.Series:
    """NCIP minus ``against`` in clean RAUC-ALL, per run."""
    t = per_order[(per_order["subject"] == subject) & (per_order["split"] == "test")]
    wide = t.groupby(["run", "method"])["rauc_all"].mean().unstack("method")
    return wide["ncip"] - wide[against]


def epochs_section(r: ReportInputs, against: str = "entropy") -> list[str]:
    """Each subject trained for longer (``<subject>-e<N>``) beside itself: does NCIP's gain over
    Entropy, the strongest confidence score, grow as training goes deeper into the terminal
    phase? Paired by run (the same seed trains both lengths)."""
    pairs = []
    for s in r.subjects:
        v = parse_subject(s, r.external)
        base = s.rsplit("-", 1)[0]
        if v.epochs and base in r.subjects:
            pairs.append((base, s))
    if not pairs or against not in set(r.per_order["method"]):
        return []
    L = [
        "## Longer training: NCIP's gain over Entropy (issue 40)",
        "",
        "Clean RAUC-ALL of NCIP minus Entropy, per subject at its two training lengths "
        "(mean over runs), and the change with longer training: the mean over runs of (long "
        "minus short), with a t-interval over runs (each run's seed trains both lengths).",
        "",
        "| Subject | epochs | train acc | NCIP - Entropy | longer: epochs | train acc | "
        "NCIP - Entropy | change [95% t-interval] |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for base, long in pairs:
        g0, g1 = _run_gain(r.per_order, base, against), _run_gain(r.per_order, long, against)
        d = (g1 - g0).dropna().to_numpy()
        if len(d) > 1 and np.std(d, ddof=1) > 0:
            half = stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / np.sqrt(len(d))
            ci = f"[{d.mean() - half:+.4f}, {d.mean() + half:+.4f}]"
        else:
            ci = "(one run: no interval)"
        cells = []
        for s in (base, long):
            h = r.training[r.training["subject"] == s]
            m = int(h["epoch"].max()) if not h.empty else 0
            acc = h[h["epoch"] == m]["train_acc"].mean() if not h.empty else float("nan")
            gain = (g0 if s == base else g1).mean()
            cells += [str(m), f"{acc:.4f}", f"{gain:+.4f}"]
        L.append(f"| {base} | " + " | ".join(cells) + f" | {d.mean():+.4f} {ci} |")
    return L + [""]
