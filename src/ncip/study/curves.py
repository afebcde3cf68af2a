"""Curves over checkpoints: NCIP under weak neural collapse (paper Fig. 9) and prediction
instability against the number of checkpoints (Fig. 3)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ncip.core.collapse import candidate_pool, select_checkpoints
from ncip.core.errors import InputError
from ncip.core.metrics import fault_types, order_from_scores, rauc
from ncip.core.scores import ncip_score, tvd
from ncip.study.stage import split_list

if TYPE_CHECKING:
    from ncip.study.stage import SelectionRecord

# analysis.tsne_runs unless params.yaml sets it: the runs whose t-SNE figure (Fig. 1) is drawn.
# One run per subject illustrates the figure; its two t-SNE fits are most of a run's analysis,
# which every K or alpha experiment re-runs.
TSNE_RUNS = "0"


def tsne_runs(value: str | int | None) -> list[int]:
    """analysis.tsne_runs, comma-separated run numbers as DVC passes them ("" for none)."""
    value = TSNE_RUNS if value is None else value
    try:
        out = [int(v) for v in split_list(str(value))]
    except ValueError:
        out = [-1]
    if any(r < 0 for r in out):
        raise InputError(
            'analysis.tsne_runs (--tsne-runs) must be comma-separated run numbers, or "" for '
            f"none, got {value!r}"
        )
    return out


def weak_collapse_curve(
    probs: np.ndarray,
    labels: np.ndarray,
    sigma: np.ndarray,
    k: int,
    alpha: float,
    steps: Sequence[int],
    seed: int = 0,
) -> pd.DataFrame:
    """NCIP when only the first E' checkpoints exist (paper Fig. 9), for each E' in ``steps``.

    ``probs`` is ``[E, N, C]`` for every epoch, ``sigma`` their sigma_cos. For each E', the
    model under test is checkpoint E' (faults are its errors), the candidate pool is the last
    alpha share of the first E', and Algorithm 1 picks k of them.
    """
    rows = []
    for e in steps:
        if e < 1 or e > len(probs):
            continue
        pool = candidate_pool(e, alpha)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # k >= pool size is expected for small E'
            chosen = pool[select_checkpoints(sigma[pool], k)]
        p = probs[chosen]
        pred = probs[e - 1].argmax(1)
        s = ncip_score(p)
        order = order_from_scores(s, seed)
        is_fault = (pred != labels)[order]
        n5 = int(round(0.05 * len(labels)))
        rows.append(
            {
                "checkpoints": e,
                "accuracy": float((pred == labels).mean()),
                "rauc_all": rauc(is_fault),
                "rauc_500": rauc(is_fault, 500),
                "fault_types_5pct": fault_types(labels, pred, order, n5),
                "selected": len(chosen),
            }
        )
    return pd.DataFrame(rows)


def tvd_curve(probs: np.ndarray, labels: np.ndarray, max_points: int = 60) -> pd.DataFrame:
    """Mean and std of TVD over the last n checkpoints, for correct and misclassified inputs of
    the final model, against n (paper Fig. 3)."""
    E = len(probs)
    wrong = probs[-1].argmax(1) != labels
    ns = np.unique(np.linspace(2, E, min(max_points, E - 1)).round().astype(int)) if E > 1 else []
    rows = []
    for n in ns:
        t = tvd(probs[E - n :])
        rows.append(
            {
                "checkpoints": int(n),
                "correct_mean": float(t[~wrong].mean()),
                "correct_std": float(t[~wrong].std()),
                "misclassified_mean": float(t[wrong].mean()) if wrong.any() else np.nan,
                "misclassified_std": float(t[wrong].std()) if wrong.any() else np.nan,
            }
        )
    return pd.DataFrame(rows)


@dataclass
class RunAnalysis:
    """One training run's Fig. 3 and Fig. 9 data and Fig. 1's t-SNE inputs."""

    name: str
    tvd: pd.DataFrame
    weak: pd.DataFrame
    final_probs: np.ndarray  # t-SNE subsample: the final model's probabilities
    nc_probs: np.ndarray  # ... and the mean over the NC-selected checkpoints
    wrong: np.ndarray  # ... and whether the final model misclassifies each


def analyze_run(
    predictions: str | Path,
    checkpoints: str | Path,
    rec: SelectionRecord,
    k: int,
    alpha: float,
    steps: list[int],
    tsne_points: int,
    seed: int,
) -> RunAnalysis:
    """Every checkpoint's stored test predictions (predict-probabilities) and the selection
    record -> the TVD curve, the weak-collapse curve (at ``steps`` and all checkpoints) and a
    seeded t-SNE subsample."""
    from ncip.core.checkpoints import list_checkpoints
    from ncip.core.scores import softmax64
    from ncip.study.predict import Predictions

    epochs, _ids, labels, logits = Predictions(predictions).logits("test")
    probs = softmax64(logits)  # [E, N, C], every checkpoint, ascending
    have = [c.epoch for c in list_checkpoints(checkpoints)]
    if have != epochs.tolist():
        raise InputError(
            f"{predictions} holds epochs {epochs.tolist()} but {checkpoints} holds "
            f"{have}; re-run predict-probabilities"
        )
    sel = rec.selection
    if list(sel.epochs) != have:
        raise InputError(
            f"the selection record covers epochs {list(sel.epochs)} but {checkpoints} holds "
            f"{have}; re-run select-checkpoints"
        )
    sigma = np.array(sel.sigma)
    tv = tvd_curve(probs, labels)
    weak = weak_collapse_curve(probs, labels, sigma, k, alpha, steps + [len(have)], seed)
    rng = np.random.default_rng(seed)
    sub = np.sort(rng.choice(len(labels), min(tsne_points, len(labels)), replace=False))
    return RunAnalysis(
        f"{rec.subject} run {rec.run}",
        tv,
        weak.drop_duplicates("checkpoints"),
        probs[-1][sub],
        probs[list(sel.chosen)][:, sub].mean(0),
        probs[-1][sub].argmax(1) != labels[sub],
    )
