"""MC-Dropout: variation ratio over T stochastic passes, ties broken by predictive entropy (§2.6).

Every dropout the model was trained with is switched on, and nothing else: the ``nn.Dropout*``
modules, and the modules whose dropout is a rate rather than a module (``nn.MultiheadAttention``'s
attention dropout) or whose inference fast path skips dropout (``nn.TransformerEncoderLayer``
and ``nn.TransformerDecoderLayer`` run a fused kernel without dropout whenever the layer itself is
in eval mode, so switching only their ``nn.Dropout`` children on gives T identical passes).
BatchNorm and every other module stay in eval mode. The LeNets and the CIFAR ResNets/DenseNets have
no dropout; for them dropout (rate 0.5) is applied to the penultimate features at inference only,
option (b) of docs/baselines.md §2.6: untrained dropout, a documented deviation. Since the backbone
is then deterministic, it runs once and only the head runs T times. The same holds where the
model's only dropout is the last step of its features (the TextCNN): the part before it runs once,
and each pass draws that module's mask from the same generator in the same order, so the result is
the one T full passes give (tested).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ncip.core.errors import InputError
from ncip.core.models import Classifier, as_model_input
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


def _drops(m: torch.nn.Module) -> bool:
    """A dropout module with p > 0, or an attention layer with an attention-dropout rate > 0."""
    if isinstance(m, torch.nn.modules.dropout._DropoutNd):
        return m.p > 0
    return isinstance(m, torch.nn.MultiheadAttention) and m.dropout > 0


# layers whose fused inference kernel leaves their dropout out while the layer is in eval mode
_FAST_PATH = (torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer)


def _stochastic_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules MC-Dropout puts in train mode: those that drop, and the layers of
    ``_FAST_PATH`` that hold one."""
    return [
        m
        for m in model.modules()
        if _drops(m) or (isinstance(m, _FAST_PATH) and any(map(_drops, m.modules())))
    ]


def _last_step_dropout(
    model: torch.nn.Module, stochastic: list[torch.nn.Module], xb: torch.Tensor
) -> tuple[torch.nn.Module, torch.Tensor] | None:
    """``(dropout module, its input)`` where the model's only stochastic module is a dropout
    whose output is what ``model.features`` returns, unchanged (so ``model(x)`` is
    ``head(dropout(input))``); ``None`` otherwise. Checked on the batch in eval mode."""
    if not isinstance(model, Classifier) or type(model).forward is not Classifier.forward:
        return None
    if len(stochastic) != 1 or not isinstance(stochastic[0], torch.nn.modules.dropout._DropoutNd):
        return None
    drop = stochastic[0]
    seen: dict[str, torch.Tensor] = {}

    def hook(_m, inputs, output):
        seen["input"], seen["output"] = inputs[0].clone(), output

    handle = drop.register_forward_hook(hook)
    try:
        feats = model.features(xb)
    finally:
        handle.remove()
    # called once, and its output is the features themselves with the values it gave them
    if set(seen) != {"input", "output"} or seen["output"] is not feats:
        return None
    if not torch.equal(feats, seen["input"]):
        return None
    return drop, seen["input"]


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
    stochastic = _stochastic_modules(model)
    gen = torch.Generator(device=device).manual_seed(seed)
    torch.manual_seed(seed)
    means, votes = [], []
    try:
        for i in range(0, len(x), batch_size):
            xb = as_model_input(x[i : i + batch_size]).to(device)
            if stochastic:  # the model's own dropout; the part before a last-step one runs once
                last = _last_step_dropout(model, stochastic, xb)
                for m in stochastic:
                    m.train()
                if last is None:
                    passes = (model(xb) for _ in range(samples))
                else:
                    drop, h = last
                    passes = (model.head(drop(h)) for _ in range(samples))
            else:  # untrained dropout on the penultimate features (the backbone runs once)
                feats = model.features(xb)
                passes = (
                    model.head(
                        feats
                        * (torch.rand(feats.shape, generator=gen, device=device) >= rate)
                        / (1.0 - rate)
                    )
                    for _ in range(samples)
                )
            acc = 0.0
            vb = []
            for z in passes:
                p = F.softmax(z.double(), dim=1)
                acc = acc + p
                vb.append(p.argmax(dim=1))
            model.eval()
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
