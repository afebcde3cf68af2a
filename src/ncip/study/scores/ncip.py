"""NCIP's scores: cross-checkpoint total variation distance, final-model margin, and their sum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ncip.core.scores import margin, tvd, zscore
from ncip.study.scores.registry import describe_method

if TYPE_CHECKING:
    from ncip.study.predict import ProbStack

# NCIP (Eq. 8) and the ablation variants of Tables 7-8, in the paper's row order.
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


def ablation_scores(
    stack: ProbStack,
    selected_epochs: Sequence[int],
    last_k_epochs: Sequence[int],
    final_epoch: int,
) -> dict:
    """NCIP and its ablations (paper Tables 7-8) from a :class:`ncip.study.predict.ProbStack`.

    - ``tvd``: TVD over the last K checkpoints (no NC selection), no margin;
    - ``tvd+nc``: TVD over the NC-selected checkpoints, no margin;
    - ``tvd+margin``: zscore(TVD over the last K) + zscore(1 - margin);
    - ``ncip``: zscore(TVD over the NC-selected checkpoints) + zscore(1 - margin) (Eq. 8).
    The reference (and the margin's model) is always the final checkpoint.
    """
    final = set([int(final_epoch)])
    nc = stack.at(set(map(int, selected_epochs)) | final)
    last = stack.at(set(map(int, last_k_epochs)) | final)
    # stack.at keeps epochs ascending, so the final checkpoint is the last row of each.
    tvd_nc, tvd_last = tvd(nc.probs), tvd(last.probs)
    boundary = zscore(1.0 - margin(nc.probs[-1]))
    return {
        "tvd": tvd_last,
        "tvd+nc": tvd_nc,
        "tvd+margin": zscore(tvd_last) + boundary,
        "ncip": zscore(tvd_nc) + boundary,
    }
