"""NCIP rankings from predictions, streamed: no model needed, memory independent of K.

:func:`rank_probs` ranks from precomputed class probabilities or logits (a ``[K, N, C]`` array,
or a sequence of ``[N, C]`` arrays in checkpoint order, final last), so a TensorFlow or JAX user
can use NCIP on their own predictions (cleanlab's ``pred_probs`` convention). With the head
weights (or σ_cos) of each checkpoint it first selects checkpoints as NCIP does (Algorithm 1).

TVD is accumulated checkpoint by checkpoint against the final checkpoint's probabilities
(:class:`TVDAccumulator`), so memory is O(N × C) whatever K is; larger score = label first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ncip.core.collapse import ALPHA, K, Selection, check_k_alpha, plan, sigma_cos_series
from ncip.core.dynamics import CHECKPOINT_SCORES, CheckpointAccumulator, column
from ncip.core.errors import InputError
from ncip.core.metrics import order_from_scores
from ncip.core.scores import margin, softmax64, zscore
from ncip.tool.compare import compare_orders
from ncip.tool.output import Ranking

# the checkpoint scores (ncip.core.dynamics) follow the predicted class, each over the same
# checkpoints as NCIP's TVD
SCORE_COLUMNS = [column(n) for n in CHECKPOINT_SCORES]
# "score": the score the ranking is ordered by (NCIP by default; ncip.tool.choose)
TABLE_COLUMNS = ["rank", "sample_id", "score", "ncip", "tvd", "margin", "pred", *SCORE_COLUMNS]


class TVDAccumulator:
    """Eq. 6 streamed: ``sum_m sum_c |p_c^(m) - p_c^(T)|`` added batch by batch, then / (2|S|).

    Holds the final checkpoint's probabilities ``[N, C]`` (float64) and two running sums per
    input (the checkpoints done, and the one in progress, so a checkpoint found bad half-way
    can be dropped). The result equals :func:`ncip.study.scores.tvd` on the stacked array (the
    final's own zero term counts in |S|, as in Eq. 6).
    """

    def __init__(self, final_probs: np.ndarray):
        self.final = np.asarray(final_probs, dtype=np.float64)
        if self.final.ndim != 2 or self.final.shape[1] < 2:
            raise InputError(
                f"final probabilities must be [N, C] with C >= 2, got {self.final.shape}"
            )
        self.sums = np.zeros(len(self.final))
        self._current = np.zeros(len(self.final))
        self.checkpoints = 1  # the final checkpoint, whose distance to itself is 0

    def add(self, start: int, probs: np.ndarray) -> None:
        """Add one batch (rows ``start:start+len(probs)``) of the checkpoint in progress."""
        p = np.asarray(probs, dtype=np.float64)
        stop = start + len(p)
        self._current[start:stop] = np.abs(p - self.final[start:stop]).sum(axis=1)

    def checkpoint_done(self) -> None:
        self.sums += self._current
        self._current[:] = 0.0
        self.checkpoints += 1

    def discard(self) -> None:
        """Forget the checkpoint in progress."""
        self._current[:] = 0.0

    def tvd(self) -> np.ndarray:
        return self.sums / (2.0 * self.checkpoints)


class PassAccumulator:
    """What one pass over the checkpoints accumulates: NCIP's TVD (:class:`TVDAccumulator`) and,
    unless ``checkpoint_scores`` is False, the checkpoint scores
    (:class:`ncip.core.dynamics.CheckpointAccumulator`), fed the same batches: the final
    checkpoint's probabilities first, then the others in training order."""

    def __init__(self, final_probs: np.ndarray, checkpoint_scores: bool = True):
        self._tvd = TVDAccumulator(final_probs)
        self._scores = CheckpointAccumulator(self._tvd.final) if checkpoint_scores else None
        self._parts = [self._tvd] + ([self._scores] if self._scores is not None else [])

    def add(self, start: int, probs: np.ndarray) -> None:
        p = np.asarray(probs, dtype=np.float64)
        for a in self._parts:
            a.add(start, p)

    def checkpoint_done(self) -> None:
        for a in self._parts:
            a.checkpoint_done()

    def discard(self) -> None:
        for a in self._parts:
            a.discard()

    def tvd(self) -> np.ndarray:
        return self._tvd.tvd()

    def checkpoint_scores(self) -> dict[str, np.ndarray]:
        """The checkpoint scores by name (empty when not asked for)."""
        return {} if self._scores is None else self._scores.scores()


# ---------------------------------------------------------------------------------------------
# Selection


def selection_record(
    candidates: list[dict[str, Any]], sel: Selection, **extra: Any
) -> dict[str, Any]:
    """The JSON record of a selection: every candidate with σ_cos, the pool, the selected."""
    pool_set, chosen_set = set(sel.pool), set(sel.chosen)
    rows = []
    for i, (c, s) in enumerate(zip(candidates, sel.sigma, strict=True)):
        rows.append(
            {
                "position": i + 1,
                **c,
                "sigma_cos": float(s),
                "in_pool": i in pool_set,
                "selected": i in chosen_set,
            }
        )
    return {
        "k": sel.k,
        "alpha": sel.alpha,
        "num_checkpoints": len(rows),
        "pool_size": len(sel.pool),
        "selected_count": len(sel.chosen),
        "whole_pool": sel.note is not None,
        "note": sel.note,
        **extra,
        "checkpoints": rows,
    }


# ---------------------------------------------------------------------------------------------
# Table and evaluation


def ncip_scores(final_probs: np.ndarray, tvd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(NCIP's score, Eq. 8, and the final model's margin), per input."""
    # margin() partitions a copy of its input: in chunks, that copy stays small
    m = np.concatenate(
        [margin(final_probs[i : i + 8192]) for i in range(0, len(final_probs), 8192)]
    )
    return zscore(tvd) + zscore(1.0 - m), m


def ncip_table(
    final_probs: np.ndarray,
    tvd: np.ndarray,
    ids: np.ndarray,
    labels: np.ndarray | None = None,
    seed: int = 0,
    checkpoint_scores: dict[str, np.ndarray] | None = None,
    rank_by: np.ndarray | None = None,
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(the ranked table, the NCIP scores in input order, the order) from the final
    probabilities, TVD and the checkpoint scores (by name; a column each), ordered by
    ``rank_by`` (the chosen score, input order; default NCIP), written as ``score``."""
    score, m = ncip_scores(final_probs, tvd)
    by = score if rank_by is None else np.asarray(rank_by, dtype=np.float64)
    order = order_from_scores(by, seed)
    table = pd.DataFrame(
        {
            "rank": np.arange(1, len(order) + 1),
            "sample_id": np.asarray(ids).astype(str)[order],
            "score": by[order],
            "ncip": score[order],
            "tvd": np.asarray(tvd)[order],
            "margin": m[order],
            "pred": final_probs.argmax(axis=1)[order],
        }
        | {column(n): np.asarray(v)[order] for n, v in (checkpoint_scores or {}).items()}
    )
    if labels is not None:
        table["label"] = np.asarray(labels)[order]
    return table, score, order


# ---------------------------------------------------------------------------------------------
# Ranking from predictions


def class_probs(z: np.ndarray) -> np.ndarray:
    """Class probabilities from logits ``[N, C]``: softmax, or for one logit (a binary head
    trained with a sigmoid) ``[1 - p, p]`` with ``p = sigmoid(z)``."""
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 2 and z.shape[1] == 1:
        p = 0.5 * (1.0 + np.tanh(0.5 * z[:, 0]))  # sigmoid without overflow
        return np.stack([1.0 - p, p], axis=1)
    return softmax64(z)


def _tolerance(a: np.ndarray) -> float:
    """How far a row of probabilities may sum from 1: float16 stores ~3 significant digits."""
    return 5e-3 if np.asarray(a).dtype == np.float16 else 1e-4


def _as_2d(a: np.ndarray, what: str) -> np.ndarray:
    a = np.asarray(a)
    a = a[:, None] if a.ndim == 1 else a
    if a.ndim != 2 or a.shape[1] < 1:
        raise InputError(f"{what} must be [N, C] (or [N] for a binary model), got {list(a.shape)}")
    return a


def decide_kind(arrays: Sequence[np.ndarray], kind: str) -> tuple[str, str]:
    """Whether every checkpoint's array holds probabilities or logits, decided once for all of
    them, and why (in words). Refuses arrays that are neither consistently."""
    if kind not in ("auto", "probs", "logits"):
        raise InputError(f"kind must be 'auto', 'probs' or 'logits', got {kind!r}")
    if kind != "auto":
        return kind, "as given (kind=" + kind + ")"
    looks = []
    for i, a in enumerate(arrays):
        a2 = _as_2d(a, f"checkpoint {i}'s predictions")
        b = np.asarray(a2, dtype=np.float64)
        in_unit = bool(b.min() >= 0 and b.max() <= 1)
        sums = b.sum(axis=1) if b.shape[1] > 1 else None
        if in_unit and (sums is None or np.allclose(sums, 1, atol=_tolerance(a2))):
            looks.append("probs")
        elif in_unit and sums is not None and np.all(sums < 1):
            raise InputError(
                f"checkpoint {i}'s rows lie in [0, 1] but sum to {sums.min():.3g}..{sums.max():.3g}"
                ", not 1: truncated (top-k) probabilities? pass the full distribution, or "
                "logits with kind='logits'"
            )
        else:
            looks.append("logits")
    if len(set(looks)) > 1:
        odd = [i for i, v in enumerate(looks) if v != looks[0]]
        raise InputError(
            f"checkpoints {odd[:5]} look like {looks[odd[0]]} but checkpoint 0 like {looks[0]}; "
            "pass kind='probs' or kind='logits'"
        )
    why = (
        "probabilities: every row lies in [0, 1] and sums to 1"
        if looks[0] == "probs"
        else "logits: some values lie outside [0, 1] or rows do not sum to 1"
    )
    return looks[0], why


def as_probs(a: np.ndarray, kind: str, what: str) -> np.ndarray:
    a2 = _as_2d(a, what)
    b = np.asarray(a2, dtype=np.float64)
    if not np.all(np.isfinite(b)):
        bad = int((~np.isfinite(b)).any(axis=1).sum())
        raise InputError(
            f"{what} holds NaN or infinite values in {bad} rows; fix or drop that "
            "checkpoint's predictions"
        )
    if kind == "logits":
        return class_probs(b)
    if b.min() < 0 or b.max() > 1:
        raise InputError(f"{what} are not probabilities (values outside [0, 1])")
    if b.shape[1] == 1:  # one sigmoid probability per input
        return np.concatenate([1.0 - b, b], axis=1)
    if not np.allclose(b.sum(axis=1), 1, atol=_tolerance(a2)):
        raise InputError(
            f"{what} are not probabilities (rows must sum to 1); pass kind='logits' for logits"
        )
    return b / b.sum(axis=1, keepdims=True)


def rank_probs(
    probs: np.ndarray | Sequence[np.ndarray],
    *,
    ids: Sequence | np.ndarray | None = None,
    labels: Sequence | np.ndarray | None = None,
    heads: Sequence[np.ndarray] | None = None,
    sigma: Sequence[float] | None = None,
    k: int = K,
    alpha: float = ALPHA,
    kind: str = "auto",
    seed: int = 0,
) -> Ranking:
    """Rank inputs by NCIP from each checkpoint's predictions; larger score = label first.

    ``probs``: a ``[K, N, C]`` array or a sequence of ``[N, C]`` arrays (memory maps are read
    one at a time), one per checkpoint in training order, the final (model under test) last;
    probabilities or logits (``kind``: "auto" tells them apart by rows summing to 1).
    ``heads`` (each checkpoint's classifier weight ``[C, d]``) or ``sigma`` (their σ_cos) let
    NCIP select K of them first (Algorithm 1 over the last ``alpha`` share); without either,
    every given checkpoint is used. ``labels`` add a comparison with the final model's
    confidence scores, the checkpoint scores and random order. Returns a :class:`Ranking` whose
    ``table`` has the columns of :data:`TABLE_COLUMNS` (rank, sample_id, ncip, tvd, margin,
    pred, then the checkpoint scores over the same checkpoints as TVD).
    """
    seq = _checkpoint_list(probs)
    check_k_alpha(k, alpha)
    m = len(seq)
    kind, why = decide_kind(seq, kind)
    sel = _select(m, heads, sigma, k, alpha)
    final = as_probs(seq[sel.chosen[-1]], kind, f"checkpoint {sel.chosen[-1]}'s predictions")
    acc = PassAccumulator(final)
    for i in sel.chosen[:-1]:
        p = as_probs(seq[i], kind, f"checkpoint {int(i)}'s predictions")
        if p.shape != final.shape:
            raise InputError(
                f"checkpoint {int(i)}'s predictions have shape {list(p.shape)}, the "
                f"final's {list(final.shape)}"
            )
        acc.add(0, p)
        acc.checkpoint_done()
    ids_arr, y = _ids_labels(ids, labels, final.shape)
    scores = acc.checkpoint_scores()
    table, score, order = ncip_table(final, acc.tvd(), ids_arr, y, seed, scores)
    record = selection_record(
        [{"index": i} for i in range(m)],
        sel,
        selected_by="sigma_cos" if heads is not None or not np.isnan(sel.sigma[0]) else "all given",
    )
    record["treated_as"] = why
    ev = compare_orders(final, score, y, seed, scores) if y is not None else None
    notes = [f"predictions treated as {why}"] + ([sel.note] if sel.note else [])
    return Ranking(table, record, ev, notes, order)


def _checkpoint_list(probs: np.ndarray | Sequence[np.ndarray]) -> list[np.ndarray]:
    """The per-checkpoint ``[N, C]`` arrays (views of a ``[K, N, C]`` array), at least two."""
    if isinstance(probs, np.ndarray):
        if probs.ndim != 3:
            raise InputError(
                f"probs must be [K, N, C] (checkpoints, inputs, classes), got {list(probs.shape)}"
            )
        seq = [probs[i] for i in range(len(probs))]
    else:
        seq = list(probs)
    if len(seq) < 2:
        raise InputError(
            "NCIP needs the predictions of at least 2 checkpoints; with one it "
            "reduces to the final model's margin"
        )
    return seq


def _select(
    m: int,
    heads: Sequence[np.ndarray] | None,
    sigma: Sequence[float] | None,
    k: int,
    alpha: float,
) -> Selection:
    """The selection: Algorithm 1 when heads or sigma are given (the last K of the pool for a
    one-row binary head), else every checkpoint."""
    if heads is not None and sigma is not None:
        raise InputError("give heads or sigma, not both")
    binary_head = False
    if heads is not None:
        shapes = {np.asarray(h).shape for h in heads}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise InputError(f"heads must be matrices [C, d] of one shape, got {sorted(shapes)}")
        binary_head = next(iter(shapes))[0] == 1
        sigma = sigma_cos_series(heads)
    if sigma is None:
        return Selection.keep_all([float("nan")] * m, k, alpha)
    if len(sigma) != m:
        raise InputError(f"{len(sigma)} heads/sigma values for {m} checkpoints")
    return plan(sigma, k, alpha, binary=binary_head)


def _ids_labels(
    ids: Sequence | np.ndarray | None, labels: Sequence | np.ndarray | None, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray | None]:
    """Checked sample ids (default 0..N-1, as strings) and labels (None without them)."""
    n, c = shape
    ids_arr = np.arange(n).astype(str) if ids is None else np.asarray(ids).astype(str)
    if len(ids_arr) != n or len(set(ids_arr.tolist())) != n:
        raise InputError(f"ids must be {n} unique values, one per input")
    if labels is None:
        return ids_arr, None
    y = np.asarray(labels)
    if y.shape != (n,) or y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= c:
        raise InputError(f"labels must be {n} integer classes in 0..{c - 1}")
    return ids_arr, y
