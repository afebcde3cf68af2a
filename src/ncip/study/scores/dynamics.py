"""The checkpoint scores in the study (:mod:`ncip.core.dynamics`), computed by score-ncip from
predict-probabilities' output, with no new inference.

Which checkpoints each reads:

- the *ensemble* scores (ensemble entropy, mutual information, variation ratio) read the last K
  checkpoints of the run, the final one among them: a snapshot ensemble is built from late
  snapshots, and the last K is the set NCIP's own ablation (Table 8's TVD) reads, so the
  pre-registered comparison of the ensemble entropy with Entropy costs no more checkpoints than
  NCIP;
- the *trajectory* scores (flips, settle epoch, AUM, variability) are defined on the training
  trajectory (forgetting events, AUM and Dataset Cartography average over every epoch), and
  read NCIP's candidate pool, the last ``alpha`` share of the run: every checkpoint but the
  first epochs, whose predictions change on nearly every input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncip.core.dynamics import CHECKPOINT_SCORES, checkpoint_scores
from ncip.study.scores.registry import describe_method

if TYPE_CHECKING:
    from ncip.core.collapse import Selection
    from ncip.study.predict import ProbStack

READS = {"ensemble": "the last K checkpoints", "trajectory": "the candidate pool"}

for _name, _info in CHECKPOINT_SCORES.items():
    describe_method(
        _name,
        display=_info.display,
        module=__name__,
        summary=f"{_info.summary}, over {READS[_info.reads]} ({_info.reference})",
        family="checkpoint",
    )


def checkpoint_epochs(selection: Selection) -> dict[str, list[int]]:
    """The checkpoints each kind of checkpoint score reads (epochs, ascending, final last)."""
    final = {selection.final_epoch}
    return {
        "ensemble": sorted(set(selection.last_k_epochs) | final),
        "trajectory": sorted(set(selection.pool_epochs) | final),
    }


def study_checkpoint_scores(stack: ProbStack, selection: Selection) -> dict:
    """Every checkpoint score of one split, each over the checkpoints :data:`READS` says, from
    a :class:`ncip.study.predict.ProbStack` holding :func:`checkpoint_epochs`."""
    out = {}
    for reads, epochs in checkpoint_epochs(selection).items():
        names = [n for n, i in CHECKPOINT_SCORES.items() if i.reads == reads]
        out |= checkpoint_scores(stack.at(epochs).probs, names)
    return {n: out[n] for n in CHECKPOINT_SCORES}
