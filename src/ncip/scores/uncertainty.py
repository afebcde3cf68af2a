"""Single-checkpoint confidence baselines: Entropy, DeepGini, MSP, PCS (baselines.md §2.2-2.5).

All four are computed from logits in float64 with formulas that keep their resolution when the
softmax saturates (in float32, ``1 - max p`` is exactly 0 for thousands of confident inputs,
which turns the bottom of the ranking into one big tie). Larger score = tested earlier.
"""

from __future__ import annotations

import numpy as np

from ncip.scores.registry import ScoringContext, register_method


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim != 2 or z.shape[1] < 2:
        raise ValueError(f"logits must be [N, C] with C >= 2, got {z.shape}")
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


def deepgini(logits: np.ndarray) -> np.ndarray:
    """DeepGini ``1 - sum_c p_c^2`` (Feng et al. 2020), as ``sum_c p_c (1 - p_c)``.

    For the top class ``1 - p_top`` is taken as the sum of the other probabilities, which is
    exact where ``1 - p_top`` would round to 0.
    """
    logp = log_softmax64(logits)
    top, rest = _rest_mass(logp)
    p = np.exp(logp)
    one_minus = 1.0 - p
    one_minus[np.arange(len(p)), top] = rest
    return (p * one_minus).sum(axis=1)


def msp(logits: np.ndarray) -> np.ndarray:
    """Maximum softmax probability as a priority: ``-log max_c p_c`` (ranks as ``-max p``)."""
    return -log_softmax64(logits).max(axis=1)


def pcs(logits: np.ndarray) -> np.ndarray:
    """Prediction-confidence score as a priority: ``-(p_(1) - p_(2))`` (Zhang et al. 2020).

    Returned as ``(1 - p_(1)) + p_(2)``, which is ``-(p_(1) - p_(2)) + 1``: the same order,
    without the cancellation of ``1 - p`` near saturation.
    """
    logp = log_softmax64(logits)
    _, rest = _rest_mass(logp)
    second = np.partition(logp, logp.shape[1] - 2, axis=1)[:, -2]
    return rest + np.exp(second)


@register_method("entropy", display="Entropy", paper="Entropy")
def _entropy(ctx: ScoringContext, split: str) -> np.ndarray:
    return entropy(ctx.final_logits(split))


@register_method("deepgini", display="DeepGini", paper="DeepGini")
def _deepgini(ctx: ScoringContext, split: str) -> np.ndarray:
    return deepgini(ctx.final_logits(split))


@register_method("msp", display="MSP", paper="MSP")
def _msp(ctx: ScoringContext, split: str) -> np.ndarray:
    return msp(ctx.final_logits(split))


@register_method("pcs", display="PCS", paper="PCS")
def _pcs(ctx: ScoringContext, split: str) -> np.ndarray:
    return pcs(ctx.final_logits(split))
