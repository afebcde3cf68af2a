"""Single-checkpoint confidence baselines: Entropy, DeepGini, MSP, PCS (docs/baselines.md §2.2-2.5).

All four are computed from logits in float64 with formulas that keep their resolution when the
softmax saturates (in float32, ``1 - max p`` is exactly 0 for thousands of confident inputs,
which turns the bottom of the ranking into one big tie). Larger score = tested earlier.
"""

from __future__ import annotations

import numpy as np

from ncip.core.scores import deepgini, entropy, msp, pcs
from ncip.study.scores.registry import ScoringContext, register_method


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
