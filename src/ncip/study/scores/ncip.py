"""NCIP's scores: cross-checkpoint total variation distance, final-model margin, and their sum."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ncip.core.scores import margin, tvd, zscore
from ncip.study.scores.registry import describe_method

if TYPE_CHECKING:
    from ncip.core.collapse import Selection
    from ncip.study.predict import ProbStack

# NCIP (Eq. 8), the ablation variants of Tables 7-8 in the paper's row order, and the selection
# control.
describe_method(
    "ncip",
    display="NCIP",
    paper="NCIP",
    module=__name__,
    summary="zscore(TVD over the NC-selected checkpoints) + zscore(1 - margin)",
)
describe_method(
    "tvd",
    display="TVD",
    paper="TVD",
    module=__name__,
    summary="TVD over the last K checkpoints (no NC selection), no margin",
)
describe_method(
    "tvd+nc",
    display="TVD+NC",
    paper="TVD+NC",
    module=__name__,
    summary="TVD over the NC-selected checkpoints, no margin",
)
describe_method(
    "tvd+margin",
    display="TVD+Margin",
    paper="TVD+Margin",
    module=__name__,
    summary="zscore(TVD over the last K) + zscore(1 - margin)",
)
describe_method(  # the selection control (not in the paper): is it Algorithm 1's checkpoints?
    "tvd+random+margin",
    display="TVD(random K)+Margin",
    module=__name__,
    summary="zscore(TVD over K checkpoints drawn at random from the pool, seeded) + "
    "zscore(1 - margin): the selection control",
)


def selection_chooses(selection: Selection) -> bool:
    """Whether Algorithm 1 left any checkpoint of the pool out. When K is not smaller than the
    pool it keeps every checkpoint, and the selection control would compare a selection with
    itself (K random checkpoints of the pool are then the pool): it is not computed."""
    return set(selection.pool_epochs) - set(selection.selected_epochs) != set()


def random_epochs(selection: Selection, seed: int) -> list[int]:
    """The selection control's checkpoints: the final one and as many others as Algorithm 1
    chose, drawn uniformly from the rest of the candidate pool (``seed``: one draw per run)."""
    others = [e for e in selection.pool_epochs if e != selection.final_epoch]
    n = min(len(selection.selected_epochs) - 1, len(others))
    drawn = np.random.default_rng(seed).choice(others, n, replace=False)
    return sorted(int(e) for e in drawn) + [selection.final_epoch]


def needed_epochs(selection: Selection, seed: int) -> list[int]:
    """Every checkpoint :func:`ablation_scores` reads (the final one among them)."""
    from ncip.study.scores.dynamics import checkpoint_epochs

    drawn = random_epochs(selection, seed) if selection_chooses(selection) else []
    every = set(selection.selected_epochs) | set(selection.last_k_epochs) | set(drawn)
    for epochs in checkpoint_epochs(selection).values():
        every |= set(epochs)
    return sorted(every)


def ablation_scores(stack: ProbStack, selection: Selection, seed: int) -> dict:
    """NCIP, its ablations (paper Tables 7-8) and the selection control, from a
    :class:`ncip.study.predict.ProbStack` holding :func:`needed_epochs`.

    - ``tvd``: TVD over the last K checkpoints (no NC selection), no margin;
    - ``tvd+nc``: TVD over the NC-selected checkpoints, no margin;
    - ``tvd+margin``: zscore(TVD over the last K) + zscore(1 - margin);
    - ``tvd+random+margin``: zscore(TVD over K checkpoints drawn from the pool) + zscore(1 -
      margin) (:func:`random_epochs`; not in the paper);
    - ``ncip``: zscore(TVD over the NC-selected checkpoints) + zscore(1 - margin) (Eq. 8).
    The reference (and the margin's model) is always the final checkpoint. The selection
    control is left out where Algorithm 1 kept the whole pool (:func:`selection_chooses`).
    """
    final = {selection.final_epoch}
    nc = stack.at(set(selection.selected_epochs) | final)
    last = stack.at(set(selection.last_k_epochs) | final)
    # stack.at keeps epochs ascending, so the final checkpoint is the last row of each.
    tvd_nc, tvd_last = tvd(nc.probs), tvd(last.probs)
    boundary = zscore(1.0 - margin(nc.probs[-1]))
    out = {"tvd": tvd_last, "tvd+nc": tvd_nc, "tvd+margin": zscore(tvd_last) + boundary}
    if selection_chooses(selection):
        drawn = stack.at(set(random_epochs(selection, seed)))
        out["tvd+random+margin"] = zscore(tvd(drawn.probs)) + boundary
    return out | {"ncip": zscore(tvd_nc) + boundary}


def score_ncip_split(stack: ProbStack, selection: Selection, seed: int) -> dict:
    """What score-ncip writes for one split: NCIP, its ablations and the selection control
    (:func:`ablation_scores`), then the checkpoint scores
    (:func:`ncip.study.scores.dynamics.study_checkpoint_scores`)."""
    from ncip.study.scores.dynamics import study_checkpoint_scores

    return ablation_scores(stack, selection, seed) | study_checkpoint_scores(stack, selection)
