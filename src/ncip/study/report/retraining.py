"""Retraining guidance (paper RQ3, Fig. 6): both recipes, their controls and the verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ncip.study.evaluation import display, method_order
from ncip.study.report.inputs import ReportInputs
from ncip.study.tables import fmt as _fmt

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


def retrain_table(r: ReportInputs) -> pd.DataFrame:
    """Fig. 6's data: arm x subject gains (percentage points) over the subjects fine enough to
    average, and their average; no rows when nothing was fine-tuned (``retrain.runs: []``)."""
    if not r.retrain:
        return pd.DataFrame(columns=["method", "average"])
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
