"""NCIP for generative language models: a prompt is ranked by how much the next-token
distributions along its continuation move across checkpoints (the paper's Fig. 4b scenario).

A prompt's continuation is the final checkpoint's greedy one (``new_tokens`` tokens, no early
stop). Every checkpoint is then run teacher-forced on prompt + continuation, which gives its
next-token distribution at each of the continuation's positions; per token:

- TVD (Eq. 6) between a checkpoint's distribution and the final checkpoint's, averaged over the
  selected checkpoints as in Eq. 6 (the final's own zero term counts);
- the final model's margin (Eq. 7), entropy, 1 - max probability (MSP), DeepGini and
  -log p(token) (the continuation's log-perplexity, whose tokens are the final model's argmax).

A prompt's score is the **mean over its continuation's tokens** of each; NCIP is Eq. 8 on those
means: ``zscore(mean TVD) + zscore(1 - mean margin)``. Larger = tested earlier, for every method
in :data:`METHODS`. A failure is a continuation whose BLEU-2 against the reference falls at or
below a threshold (:func:`failures`); BLEU-2 is NLTK's ``sentence_bleu`` with weights (1/2, 1/2)
and smoothing method 1 over whitespace-split lower-cased words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.core.scores import zscore

# method -> what its per-prompt score is (larger = tested earlier); NCIP first, the rest are the
# token-level confidence baselines computed from the final checkpoint alone
METHODS: dict[str, str] = {
    "ncip": "zscore(mean TVD to the final checkpoint) + zscore(1 - mean margin) (Eq. 8)",
    "entropy": "mean entropy of the final model's next-token distributions",
    "msp": "1 - mean max probability",
    "deepgini": "mean 1 - sum of squared probabilities",
    "margin": "1 - mean margin (top-1 minus top-2 probability)",
    "logppl": "the continuation's log-perplexity, mean -log p(token)",
}
BLEU_WEIGHTS = (0.5, 0.5)  # BLEU-2
FAILURE_RULES = ("median",)  # or a number: BLEU-2 at or below it


class TokenStats:
    """Per-token statistics of N prompts' continuations of L tokens, filled batch by batch.

    ``set_final`` stores the final model's own statistics for some rows; ``add`` stores another
    selected checkpoint's TVD to the final's distributions for them. Memory O(K x N x L), never
    the vocabulary: the caller holds the final's distributions for the rows in progress only.
    A checkpoint found bad part-way is dropped whole (``drop``)."""

    def __init__(self, n: int, length: int, others: int):
        self.tvd = np.zeros((others, n, length))  # one slice per non-final selected checkpoint
        self.ok = np.ones(others, dtype=bool)
        self.final_stats: dict[str, np.ndarray] = {
            m: np.zeros((n, length)) for m in ("margin", "entropy", "msp", "deepgini", "logppl")
        }

    def set_final(self, rows: np.ndarray, probs: torch.Tensor, tokens: torch.Tensor) -> None:
        """Final-model statistics for ``rows`` from its distributions ``[B, L, V]`` and the
        continuation ``tokens`` ``[B, L]``."""
        p = probs.double()
        top2 = torch.topk(p, 2, dim=-1).values
        logp = torch.log(p.clamp_min(1e-300))
        stats = {
            "margin": top2[..., 0] - top2[..., 1],
            "entropy": -(p * logp).sum(-1),
            "msp": 1.0 - top2[..., 0],
            "deepgini": 1.0 - (p * p).sum(-1),
            "logppl": -logp.gather(-1, tokens[..., None].long())[..., 0],
        }
        for name, value in stats.items():
            self.final_stats[name][rows] = value.cpu().numpy()

    def add(self, j: int, rows: np.ndarray, probs: torch.Tensor, final: torch.Tensor) -> None:
        """Checkpoint ``j``'s TVD to the final's distributions, for ``rows``."""
        d = 0.5 * (probs.double() - final.double()).abs().sum(-1)
        self.tvd[j, rows] = d.cpu().numpy()

    def drop(self, j: int) -> None:
        self.ok[j] = False

    def token_tvd(self, subset: Sequence[int] | None = None) -> np.ndarray:
        """Eq. 6 per token, ``[N, L]``: the sum over the kept checkpoints / (kept + 1), the
        final's own zero term counted in |S|. ``subset``: only these of the non-final
        checkpoints (indices; a selection drawn from a larger set that was scored once)."""
        keep = self.ok.copy()
        if subset is not None:
            keep &= np.isin(np.arange(len(keep)), np.asarray(subset, dtype=np.int64))
        return self.tvd[keep].sum(axis=0) / (int(keep.sum()) + 1)


def prompt_scores(stats: TokenStats, subset: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Every method's per-prompt score (mean over the continuation's tokens), larger = first;
    NCIP's TVD over ``subset`` of the non-final checkpoints (default: all kept)."""
    tvd = stats.token_tvd(subset).mean(axis=1)
    margin = stats.final_stats["margin"].mean(axis=1)
    out = {"ncip": zscore(tvd) + zscore(1.0 - margin), "tvd": tvd}
    out["entropy"] = stats.final_stats["entropy"].mean(axis=1)
    out["msp"] = stats.final_stats["msp"].mean(axis=1)
    out["deepgini"] = stats.final_stats["deepgini"].mean(axis=1)
    out["margin"] = 1.0 - margin
    out["logppl"] = stats.final_stats["logppl"].mean(axis=1)
    return out


def _words(text: str) -> list[str]:
    return text.lower().split()


def bleu2(hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Sentence-level BLEU-2 of each continuation against its reference (NLTK, smoothing
    method 1, whitespace-split lower-cased words); an empty continuation scores 0."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    if len(hypotheses) != len(references):
        raise InputError(
            f"{len(hypotheses)} continuations but {len(references)} references; one each"
        )
    smooth = SmoothingFunction().method1
    out = np.zeros(len(hypotheses))
    for i, (h, r) in enumerate(zip(hypotheses, references, strict=True)):
        hw, rw = _words(h), _words(r)
        if hw and rw:
            out[i] = sentence_bleu([rw], hw, weights=BLEU_WEIGHTS, smoothing_function=smooth)
    return out


def failures(bleu: np.ndarray, rule: str | float = "median") -> tuple[np.ndarray, float]:
    """Which continuations fail: BLEU-2 at or below the threshold (ties at it fail), where the
    threshold is the test set's median (``"median"``) or a given number. Returns the boolean
    array and the threshold used."""
    b = np.asarray(bleu, dtype=np.float64)
    if rule == "median":
        threshold = float(np.median(b))
    elif isinstance(rule, int | float) and not isinstance(rule, bool) and 0 <= rule <= 1:
        threshold = float(rule)
    else:
        raise InputError(f"a failure threshold is 'median' or a BLEU-2 in [0, 1], got {rule!r}")
    return b <= threshold, threshold
