"""MC-Dropout: variation ratio over T stochastic passes, ties broken by predictive entropy (§2.6).

Only ``nn.Dropout*`` modules are put in train mode (BatchNorm stays in eval mode). The LeNets and
the CIFAR ResNets/DenseNets have no dropout; for them dropout (rate 0.5) is applied to the
penultimate features at inference only, option (b) of docs/baselines.md §2.6: untrained dropout, a
documented deviation. Since the backbone is then deterministic, it runs once and only the head
runs T times.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ncip.core.errors import InputError
from ncip.core.models import as_model_input
from ncip.study.scores.registry import ScoringContext, register_method


def variation_ratio(votes: np.ndarray, num_classes: int) -> np.ndarray:
    """``1 - (count of the plurality class) / T`` from predicted labels ``[N, T]``."""
    counts = np.stack([(votes == c).sum(axis=1) for c in range(num_classes)], axis=1)
    return 1.0 - counts.max(axis=1) / votes.shape[1]


def predictive_entropy(mean_probs: np.ndarray) -> np.ndarray:
    p = np.clip(mean_probs, 1e-300, 1.0)
    return -(mean_probs * np.log(p)).sum(axis=1)


def lexicographic(primary: np.ndarray, secondary: np.ndarray, step: float) -> np.ndarray:
    """One score ranking by ``primary`` (spaced at least ``step`` apart), then ``secondary``."""
    sec = np.asarray(secondary, dtype=np.float64)
    span = sec.max() - sec.min() if len(sec) else 0.0
    scaled = (sec - sec.min()) / span if span > 0 else np.zeros_like(sec)
    return np.asarray(primary, dtype=np.float64) + scaled * (0.5 * step)


def has_dropout(model: torch.nn.Module) -> bool:
    return any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in model.modules())


@torch.inference_mode()
def mc_dropout_probs(
    model: torch.nn.Module,
    x: np.ndarray,
    samples: int,
    rate: float,
    seed: int,
    batch_size: int = 512,
) -> tuple[np.ndarray, np.ndarray]:
    """(mean softmax ``[N, C]``, votes ``[N, T]``) over ``samples`` stochastic passes."""
    device = next(model.parameters()).device
    model.eval()
    native = has_dropout(model)
    if native:
        for m in model.modules():
            if isinstance(m, torch.nn.modules.dropout._DropoutNd):
                m.train()
    gen = torch.Generator(device=device).manual_seed(seed)
    torch.manual_seed(seed)
    means, votes = [], []
    try:
        for i in range(0, len(x), batch_size):
            xb = as_model_input(x[i : i + batch_size]).to(device)
            acc = 0.0
            vb = []
            feats = None if native else model.features(xb)
            for _ in range(samples):
                if native:
                    z = model(xb)
                else:
                    keep = torch.rand(feats.shape, generator=gen, device=device) >= rate
                    z = model.head(feats * keep / (1.0 - rate))
                p = F.softmax(z.double(), dim=1)
                acc = acc + p
                vb.append(p.argmax(dim=1))
            means.append((acc / samples).cpu().numpy())
            votes.append(torch.stack(vb, dim=1).cpu().numpy())
    finally:
        model.eval()
    return np.concatenate(means), np.concatenate(votes)


@register_method(
    "dropout", display="Dropout", paper="Dropout", options={"samples": 200, "rate": 0.5}
)
def _dropout(ctx: ScoringContext, split: str) -> np.ndarray:
    samples = int(ctx.option("dropout", "samples"))  # simple-tip's T (decision D7)
    rate = float(ctx.option("dropout", "rate"))
    if samples < 1 or not 0 < rate < 1:
        raise InputError(f"dropout needs samples >= 1 and 0 < rate < 1, got {samples}, {rate}")
    model = ctx.final_model()
    mean, votes = mc_dropout_probs(
        model, ctx.split(split).x, samples, rate, ctx.seed, ctx.batch_size
    )
    vr = variation_ratio(votes, mean.shape[1])
    return lexicographic(vr, predictive_entropy(mean), 1.0 / samples)
