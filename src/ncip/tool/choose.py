"""Which score ranks a model's inputs: chosen from a labelled holdout (issue 46).

Every label-free score one pass over the checkpoints gives is a candidate: the final model's
confidence scores (MSP, Entropy, Margin, DeepGini), the checkpoint scores
(:mod:`ncip.core.dynamics`), TVD and NCIP. On a labelled holdout (a validation split of the
same distribution, never the pool ranked) each is scored by RAUC-ALL against the final model's
faults there, with a paired bootstrap of the holdout inputs against the best.

The rule (:func:`ncip.core.choice.choose`, which the study's measure of its regret applies too),
fixed before any holdout is seen: the best candidate by holdout
RAUC-ALL, unless a simpler one (earlier in :data:`CANDIDATES`) ties it, its paired 95% interval
of the difference covering 0; then the simplest of those. A holdout with fewer than
:data:`MIN_FAULTS` faults separates nothing: the default (:data:`DEFAULT`) ranks, and the run
says so. Without a holdout the default ranks.
"""

from __future__ import annotations

import numpy as np

from ncip.core.choice import MIN_FAULTS, RESAMPLES
from ncip.core.choice import choose as core_choose
from ncip.core.dynamics import CHECKPOINT_SCORES, column
from ncip.core.errors import InputError
from ncip.core.scores import deepgini, entropy, margin, msp

# the candidates, simplest first (one checkpoint's confidence; then the checkpoints read as an
# ensemble, then as a trajectory; then NCIP's TVD and NCIP itself): the name is the ranking
# table's column, or the score's own name for those the table does not hold
CANDIDATES = (
    "msp",
    "entropy",
    "margin",
    "deepgini",
    *(column(n) for n, i in CHECKPOINT_SCORES.items() if i.reads == "ensemble"),
    *(column(n) for n, i in CHECKPOINT_SCORES.items() if i.reads == "trajectory"),
    "tvd",
    "ncip",
)
DISPLAY = {
    "msp": "MSP",
    "entropy": "Entropy",
    "margin": "Margin",
    "deepgini": "DeepGini",
    "tvd": "TVD",
    "ncip": "NCIP",
} | {column(n): i.display for n, i in CHECKPOINT_SCORES.items()}
# The score that ranks without a holdout: NCIP until the pre-registered study
# (docs/preregistration.md) supports another
DEFAULT = "ncip"
RULE = (
    "the best by holdout RAUC-ALL, unless a simpler score ties it (its paired 95% bootstrap "
    "interval of the difference covers 0), then the simplest of those; simpler = earlier in "
    + ", ".join(DISPLAY[c] for c in CANDIDATES)
)


def check_method(name: str) -> str:
    """A score's name as ``--method`` takes it (the table's column, any case; "-" for "_")."""
    key = name.strip().lower().replace("-", "_")
    if key not in CANDIDATES:
        raise InputError(
            f"--method {name!r} is not a score ncip computes; choose from " + ", ".join(CANDIDATES)
        )
    return key


def confidence_scores(final_probs: np.ndarray) -> dict[str, np.ndarray]:
    """The final model's confidence scores as priorities (larger = label first), from its
    probabilities: MSP, Entropy, 1 - Margin, DeepGini (the formulas of ncip.core.scores)."""
    p = np.asarray(final_probs, dtype=np.float64)
    logits = np.log(np.maximum(p, np.finfo(np.float64).tiny))
    return {
        "msp": msp(logits),
        "entropy": entropy(logits),
        "margin": 1.0 - margin(p),
        "deepgini": deepgini(logits),
    }


def candidate_scores(
    final_probs: np.ndarray,
    ncip_scores: np.ndarray,
    tvd: np.ndarray,
    checkpoint_scores: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Every candidate's scores (larger = label first) from one pass's results."""
    out = confidence_scores(final_probs) | {
        "tvd": np.asarray(tvd, dtype=np.float64),
        "ncip": np.asarray(ncip_scores, dtype=np.float64),
    }
    out |= {column(n): np.asarray(v, dtype=np.float64) for n, v in checkpoint_scores.items()}
    return {c: out[c] for c in CANDIDATES if c in out}


def choose(
    holdout: dict[str, np.ndarray], fault: np.ndarray, seed: int = 0, resamples: int = RESAMPLES
) -> dict:
    """The choice on a labelled holdout by :data:`RULE` (:func:`ncip.core.choice.choose` over
    :data:`CANDIDATES`): every candidate's RAUC-ALL there, its difference to the best with a
    paired bootstrap 95% interval, and the chosen one; with fewer than :data:`MIN_FAULTS`
    faults, no choice (``chosen`` None)."""
    record = core_choose(holdout, fault, CANDIDATES, seed, resamples, MIN_FAULTS)
    rows = [{"method": r["method"], "name": DISPLAY[r["method"]]} | r for r in record["candidates"]]
    return (
        {"inputs": record["inputs"], "faults": record["faults"], "rule": RULE}
        | {k: v for k, v in record.items() if k not in ("inputs", "faults")}
        | {"candidates": rows}
    )


def choice_paragraph(record: dict) -> str:
    """The run's one paragraph on the choice: which score, from how many holdout faults, with
    its interval, and what NCIP would have given."""
    if record.get("forced"):
        return f"ranked by {DISPLAY[record['chosen']]} (--method {record['chosen']})"
    if "holdout" not in record:
        return (
            f"ranked by {DISPLAY[DEFAULT]}, the default; to rank by the score that works for "
            "this model, give a labelled validation split: --holdout H --holdout-labels HY"
        )
    h = record["holdout"]
    if h["chosen"] is None:
        return (
            f"the holdout has {h['faults']} faults in {h['inputs']} inputs, fewer than "
            f"{h['min_faults']} (or every input a fault): too few to tell the scores apart; "
            f"ranked by {DISPLAY[DEFAULT]}, the default"
        )
    rows = {r["method"]: r for r in h["candidates"]}
    c, best = rows[h["chosen"]], rows[h["best"]]
    said = (
        f"ranked by {c['name']}, chosen on the holdout ({h['inputs']} inputs, {h['faults']} "
        f"faults of the final model): RAUC-ALL {c['rauc_all']:.3f}"
    )
    if h["chosen"] != h["best"]:
        said += (
            f", tying the best, {best['name']} ({best['rauc_all']:.3f}; difference "
            f"{c['minus_best']:+.3f}, 95% interval [{c['lo']:+.3f}, {c['hi']:+.3f}]), and simpler"
        )
    else:
        others = [r for r in h["candidates"] if r["method"] != c["method"]]
        runner = max(others, key=lambda r: r["rauc_all"], default=None)
        if runner is not None:
            said += (
                f", the best; next {runner['name']} ({runner['rauc_all']:.3f}, 95% interval of "
                f"the difference [{runner['lo']:+.3f}, {runner['hi']:+.3f}])"
            )
    if "ncip" in rows and h["chosen"] != "ncip":
        n = rows["ncip"]
        said += f"; NCIP would have given {n['rauc_all']:.3f} ({n['minus_best']:+.3f})"
    return said
