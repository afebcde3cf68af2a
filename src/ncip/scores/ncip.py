"""NCIP's scores: cross-checkpoint total variation distance, final-model margin, and their sum."""

from __future__ import annotations

import numpy as np

from ncip.scores.registry import describe_method

# NCIP (Eq. 8) and the ablation variants of Tables 7-8, in the paper's row order.
describe_method(
    "ncip",
    display="NCIP",
    paper="NCIP",
    summary="zscore(TVD over the NC-selected checkpoints) + zscore(1 - margin)",
)
describe_method(
    "tvd",
    display="TVD",
    paper="TVD",
    summary="TVD over the last K checkpoints (no NC selection), no margin",
)
describe_method(
    "tvd+nc",
    display="TVD+NC",
    paper="TVD+NC",
    summary="TVD over the NC-selected checkpoints, no margin",
)
describe_method(
    "tvd+margin",
    display="TVD+Margin",
    paper="TVD+Margin",
    summary="zscore(TVD over the last K) + zscore(1 - margin)",
)


def _check_stack(probs: np.ndarray) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 3:
        raise ValueError(f"probs must be [K, N, C] (checkpoints, samples, classes), got {p.shape}")
    if p.shape[0] == 0:
        raise ValueError("probs holds no checkpoints")
    return p


def tvd(probs: np.ndarray, ref: int = -1) -> np.ndarray:
    """Mean total variation distance of each sample's predictions to the reference checkpoint's.

    NCIP Eq. 6: ``1/(2|S|) * sum_{m in S} sum_c |p_c^(m) - p_c^(T)|`` with ``probs`` shaped
    ``[K, N, C]`` (K = |S| checkpoints) and T = ``probs[ref]`` (default: the last, i.e. the final
    checkpoint). The reference's own zero term counts in |S|, as in Eq. 6; Algorithm 2 omits the
    1/|S| factor, which does not change the ranking. Returns ``[N]``.
    """
    p = _check_stack(probs)
    reference = p[ref]
    return np.abs(p - reference[None]).sum(axis=2).sum(axis=0) / (2.0 * p.shape[0])


def margin(probs: np.ndarray) -> np.ndarray:
    """Gap between the largest and second-largest class probability, ``[N, C] -> [N]`` (Eq. 7)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probs must be [N, C] with C >= 2, got {p.shape}")
    top2 = np.partition(p, p.shape[1] - 2, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def zscore(x: np.ndarray) -> np.ndarray:
    """Standardise with the population std; a constant vector standardises to all zeros.

    Non-finite values raise ValueError: they would otherwise turn every score into NaN or 0
    and the ranking into the tie-break's random order."""
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError(
            f"{int((~np.isfinite(x)).sum())} of {x.size} values to standardise are "
            "NaN or infinite: some input or checkpoint produced non-finite outputs"
        )
    sd = x.std()
    if sd == 0.0:
        return np.zeros_like(x)
    return (x - x.mean()) / sd


def ncip_score(probs: np.ndarray, ref: int = -1) -> np.ndarray:
    """NCIP Eq. 8: ``zscore(TVD) + zscore(1 - Margin(final))``; larger = tested earlier.

    ``probs`` is ``[K, N, C]`` over the selected checkpoints; ``probs[ref]`` is the final model.
    """
    p = _check_stack(probs)
    return zscore(tvd(p, ref)) + zscore(1.0 - margin(p[ref]))


def ablation_scores(stack, selected_epochs, last_k_epochs, final_epoch: int) -> dict:
    """NCIP and its ablations (paper Tables 7-8) from a :class:`ncip.predict.ProbStack`.

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
