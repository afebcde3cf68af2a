"""Multi-checkpoint inference for causal language models (NCIP for sequences): the final
checkpoint's greedy continuation of each prompt, then every checkpoint teacher-forced on prompt
+ continuation, its next-token distributions compared with the final's token by token
(:class:`ncip.core.sequences.TokenStats`).

Prompts are batched by token length, so nothing is padded and any causal LM works (token ids
``[B, T]`` in, logits ``[B, T, V]`` out: a tensor, ``.logits`` or the first of a tuple). The
final checkpoint's distributions ``[n, L, V]`` are held for one chunk of prompts at a time, sized
by ``memory_mb``, so memory is bounded whatever the vocabulary, N and K; each checkpoint is
loaded once per chunk. Both faces use it: ``ncip rank --prompts`` and the study's lm-score.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.core.logs import progress_bar
from ncip.core.models import logits_of
from ncip.core.sequences import TokenStats

MEMORY_MB = 1024  # the final checkpoint's distributions held at once


def batches_by_length(ids: list[list[int]], batch_size: int) -> list[np.ndarray]:
    """Index arrays of prompts of one token length, at most ``batch_size`` each."""
    lengths = np.array([len(t) for t in ids])
    out = []
    for n in np.unique(lengths):
        idx = np.flatnonzero(lengths == n)
        out += [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]
    return out


def _takes_mask(model) -> bool:
    try:
        return "attention_mask" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


@torch.no_grad()
def _logits(model, x: torch.Tensor) -> torch.Tensor:
    # prompts of one length: nothing is padded, and the mask says so (a Hugging Face model
    # warns without one when its padding token is also its end-of-text token)
    z = logits_of(model(x, attention_mask=torch.ones_like(x)) if _takes_mask(model) else model(x))
    if z.ndim != 3 or z.shape[:2] != x.shape:
        raise InputError(
            f"the model returned outputs of shape {tuple(z.shape)} for token ids "
            f"{tuple(x.shape)}; a causal language model returns [batch, tokens, vocabulary]"
        )
    return z.float()


@torch.no_grad()
def greedy(model, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """The greedy continuation ``[B, new_tokens]`` (no cache, no early stop)."""
    x = prompt
    for _ in range(new_tokens):
        x = torch.cat([x, _logits(model, x)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return x[:, prompt.shape[1] :]


def continuation_probs(model, prompt: torch.Tensor, cont: torch.Tensor) -> torch.Tensor:
    """The next-token distributions at the continuation's positions, ``[B, L, V]``."""
    x = torch.cat([prompt, cont[:, :-1]], dim=1)
    z = _logits(model, x)[:, prompt.shape[1] - 1 :]
    return torch.softmax(z, dim=-1)


def _nonfinite_weight(model: torch.nn.Module) -> str | None:
    for k, v in model.state_dict().items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            return k
    return None


def _chunks(batches: list[np.ndarray], rows: int) -> list[list[np.ndarray]]:
    chunks: list[list[np.ndarray]] = [[]]
    size = 0
    for b in batches:
        if size and size + len(b) > rows:
            chunks.append([])
            size = 0
        chunks[-1].append(b)
        size += len(b)
    return chunks


def sequence_stats(
    load: Callable[[Any], torch.nn.Module],
    checkpoints: Sequence[Any],
    ids: list[list[int]],
    new_tokens: int,
    vocab: int,
    device: torch.device | str,
    on_bad: Callable[[Any, str, bool], None],
    batch_size: int = 32,
    memory_mb: int = MEMORY_MB,
    show_progress: bool = True,
) -> tuple[TokenStats, np.ndarray]:
    """Every checkpoint's per-token TVD to the last one (the final) along the final's greedy
    continuation of each prompt, and the final's own statistics; returns them and the
    continuations ``[N, new_tokens]``. ``load(ck)`` returns the model with ``ck``'s weights;
    ``on_bad(ck, why, is_final)`` raises for a checkpoint with non-finite weights or outputs,
    or returns to drop it (never the final: it must raise)."""
    batches = batches_by_length(ids, batch_size)
    stats = TokenStats(len(ids), new_tokens, len(checkpoints) - 1)
    cont = np.zeros((len(ids), new_tokens), dtype=np.int64)
    per_prompt = new_tokens * vocab * 4  # float32 distributions of one prompt
    chunks = _chunks(batches, max(1, memory_mb * 2**20 // per_prompt))
    bar = progress_bar(
        len(batches) * (len(checkpoints) + 1), "NCIP", enabled=show_progress, unit="batch"
    )
    final = checkpoints[-1]
    for chunk in chunks:
        model = load(final)
        bad = _nonfinite_weight(model)
        if bad:
            on_bad(final, f"holds NaN or infinite weights (in {bad!r})", True)
        held = []
        for b in chunk:
            x = torch.as_tensor(np.array([ids[i] for i in b]), device=device)
            c = greedy(model, x, new_tokens)
            cont[b] = c.cpu().numpy()
            probs = continuation_probs(model, x, c)
            if not torch.isfinite(probs).all():
                on_bad(final, "produces NaN or infinite outputs", True)
            stats.set_final(b, probs, c)
            held.append((x, c, probs))
            bar.update(2)
        for j, ck in enumerate(checkpoints[:-1]):
            if not stats.ok[j]:  # dropped in an earlier chunk
                bar.update(len(chunk))
                continue
            model = load(ck)
            bad = _nonfinite_weight(model)
            why = f"holds NaN or infinite weights (in {bad!r})" if bad else None
            for b, (x, c, fprobs) in zip(chunk, held, strict=True):
                if why is None:
                    probs = continuation_probs(model, x, c)
                    if not torch.isfinite(probs).all():
                        why = "produces NaN or infinite outputs"
                    else:
                        stats.add(j, b, probs, fprobs)
                bar.update(1)
            if why:
                on_bad(ck, why, False)  # raises, or returns to drop the checkpoint
                stats.drop(j)
    bar.close()
    if int(stats.ok.sum()) < 1:
        raise InputError(
            "fewer than 2 checkpoints gave finite outputs: NCIP would reduce to the final "
            "model's margin"
        )
    return stats, cont
