"""The method's scores on predicted distributions: NCIP's own (TVD, margin, NCIP; paper Eq. 6-8)
and the single-checkpoint confidence scores (Entropy, DeepGini, MSP, PCS; docs/baselines.md).

Pure functions of probabilities or logits in float64; larger score = tested earlier. Both faces
use them: the tool ranks with them, the study scores and compares with them.
"""

from __future__ import annotations

import numpy as np

from ncip.core.errors import InputError


def softmax64(logits: np.ndarray) -> np.ndarray:
    """Softmax in float64 (stable), along the last axis."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _check_stack(probs: np.ndarray) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 3:
        raise InputError(f"probs must be [K, N, C] (checkpoints, samples, classes), got {p.shape}")
    if p.shape[0] == 0:
        raise InputError("probs holds no checkpoints")
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
        raise InputError(f"probs must be [N, C] with C >= 2, got {p.shape}")
    top2 = np.partition(p, p.shape[1] - 2, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def zscore(x: np.ndarray) -> np.ndarray:
    """Standardise with the population std; a constant vector standardises to all zeros.

    Non-finite values raise ValueError: they would otherwise turn every score into NaN or 0
    and the ranking into the tie-break's random order."""
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise InputError(
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


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] < 2:
        raise InputError(f"logits must be [N, C] with C >= 2, got {z.shape}")
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _rest_mass(logp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the top class, total probability of all other classes), the latter precise."""
    top = logp.argmax(axis=1)
    p = np.exp(logp)
    p[np.arange(len(p)), top] = 0.0
    return top, p.sum(axis=1)


def entropy(logits: np.ndarray) -> np.ndarray:
    """Softmax entropy ``-sum_c p_c log p_c`` (natural log; the base does not change ranks)."""
    logp = log_softmax64(logits)
    return -(np.exp(logp) * logp).sum(axis=1)


def gini_impurity(probs: np.ndarray, rest: np.ndarray | None = None) -> np.ndarray:
    """Gini impurity ``1 - sum_c p_c^2`` of probability rows ``[N, C]``, as
    ``sum_c p_c (1 - p_c)``, the top class's ``1 - p_top`` taken as the others' total
    (``rest``, or summed here): exact where ``1 - p_top`` would round to 0, so near-one-hot rows
    whose other classes differ keep distinct values instead of tying at 0."""
    p = np.asarray(probs, dtype=np.float64)
    rows, top = np.arange(len(p)), p.argmax(axis=1)
    if rest is None:
        others = p.copy()
        others[rows, top] = 0.0
        rest = others.sum(axis=1)
    one_minus = 1.0 - p
    one_minus[rows, top] = rest
    return (p * one_minus).sum(axis=1)


def deepgini(logits: np.ndarray) -> np.ndarray:
    """DeepGini ``1 - sum_c p_c^2`` (Feng et al. 2020): :func:`gini_impurity` of the softmax,
    the other classes' total from log-probabilities (precise even where each is tiny)."""
    logp = log_softmax64(logits)
    return gini_impurity(np.exp(logp), _rest_mass(logp)[1])


def msp(logits: np.ndarray) -> np.ndarray:
    """Maximum softmax probability as a priority: ``-log max_c p_c`` (ranks as ``-max p``).

    Computed as ``-log1p(-rest)`` from the precise rest mass (the other classes' total
    probability), not as ``-max log_softmax``: the latter rounds to exactly 0 once the rest mass
    falls below ~1e-16, which tied a quarter of a confident model's inputs in one block."""
    _, rest = _rest_mass(log_softmax64(logits))
    return -np.log1p(-rest)


def pcs(logits: np.ndarray) -> np.ndarray:
    """Prediction-confidence score as a priority: ``-(p_(1) - p_(2))`` (Zhang et al. 2020).

    Returned as ``(1 - p_(1)) + p_(2)``, which is ``-(p_(1) - p_(2)) + 1``: the same order,
    without the cancellation of ``1 - p`` near saturation.
    """
    logp = log_softmax64(logits)
    _, rest = _rest_mass(logp)
    second = np.partition(logp, logp.shape[1] - 2, axis=1)[:, -2]
    return rest + np.exp(second)
