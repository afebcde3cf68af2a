"""The label-free checkpoint scores: what a run's checkpoints say about each input beyond NCIP's
total variation distance (docs/methods.md, "Checkpoint scores").

Every score reads a stack of predicted distributions over checkpoints in training order, the
final checkpoint (the model under test) last, and gives one value per input; larger = tested
earlier. The *ensemble* scores treat the checkpoints as a snapshot ensemble; the *trajectory*
scores read the order of the checkpoints (prediction flips, the settle point, the margin and
probability of the final model's class along training):

- ``ensemble-entropy``: entropy of the mean distribution (snapshot ensembles, Huang et al. 2017);
- ``mutual-information``: that entropy minus the mean of each checkpoint's entropy, the mutual
  information between the prediction and the checkpoint (BALD; Houlsby et al. 2011, Gal et al.
  2017);
- ``variation-ratio``: the share of checkpoints not voting for the modal class (Freeman 1965);
- ``flips``: how often the predicted class changes between consecutive checkpoints (the
  label-free form of forgetting events, Toneva et al. 2019);
- ``settle-epoch``: the position (1..K-1) of the last checkpoint whose predicted class differs
  from the one before it, 0 when it never changes;
- ``aum``: minus the mean over checkpoints of the margin of the final model's predicted class
  ``p[y^] - max_{c != y^} p[c]`` (label-free area under the margin, Pleiss et al. 2020, on
  probabilities, with the final prediction in place of the label);
- ``variability``: the standard deviation over checkpoints of the probability of the final
  model's predicted class (Dataset Cartography's variability, Swayamdipta et al. 2020, on the
  predicted class instead of the label; population sd, as theirs).

:class:`CheckpointAccumulator` is their one implementation: it takes the final checkpoint's
probabilities first, then the other checkpoints one at a time in training order (each in
batches, so memory is O(N x C) whatever K is, and a checkpoint found bad half-way can be
dropped). :func:`checkpoint_scores` runs it over a stacked ``[K, N, C]`` array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncip.core.errors import InputError


@dataclass(frozen=True)
class ScoreInfo:
    """A checkpoint score's facts: its table name, what it computes, where it comes from, and
    whether it reads the checkpoints as an ensemble or as a trajectory (their order)."""

    display: str
    summary: str
    reference: str
    reads: str  # "ensemble" | "trajectory"


# Each checkpoint score's name (a study method's name; the tool's column is the name with "_"
# for "-") and facts, in the order tables show them.
CHECKPOINT_SCORES: dict[str, ScoreInfo] = {
    "ensemble-entropy": ScoreInfo(
        "Ens-Entropy",
        "entropy of the checkpoints' mean distribution",
        "Huang et al. 2017, Snapshot Ensembles (ICLR)",
        "ensemble",
    ),
    "mutual-information": ScoreInfo(
        "MI",
        "ensemble entropy minus the mean checkpoint entropy (BALD)",
        "Houlsby et al. 2011 (BALD); Gal, Islam & Ghahramani 2017 (ICML)",
        "ensemble",
    ),
    "variation-ratio": ScoreInfo(
        "VarRatio",
        "share of checkpoints not voting for the modal class",
        "Freeman 1965; Gal, Islam & Ghahramani 2017 (ICML)",
        "ensemble",
    ),
    "flips": ScoreInfo(
        "Flips",
        "predicted-class changes between consecutive checkpoints",
        "Toneva et al. 2019, forgetting events (ICLR), label-free",
        "trajectory",
    ),
    "settle-epoch": ScoreInfo(
        "Settle",
        "position of the last checkpoint whose prediction changed (0: never)",
        "Toneva et al. 2019 (ICLR); the learned-epoch of Baldock et al. 2021 (NeurIPS)",
        "trajectory",
    ),
    "aum": ScoreInfo(
        "AUM",
        "minus the mean margin of the final predicted class over checkpoints",
        "Pleiss et al. 2020, Area Under the Margin (NeurIPS), label-free",
        "trajectory",
    ),
    "variability": ScoreInfo(
        "Variability",
        "sd over checkpoints of the final predicted class's probability",
        "Swayamdipta et al. 2020, Dataset Cartography (EMNLP), on the predicted class",
        "trajectory",
    ),
}


def column(name: str) -> str:
    """The ranking table's column of a checkpoint score (``ensemble-entropy`` ->
    ``ensemble_entropy``)."""
    return name.replace("-", "_")


def _entropy(p: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Row entropy ``-sum p log p`` (natural log) with ``0 log 0 = 0`` (a probability below
    1e-300 counts as 1e-300 inside the log: its term stays below 1e-297), in ``scratch``."""
    np.maximum(p, 1e-300, out=scratch)
    np.log(scratch, out=scratch)
    np.multiply(scratch, p, out=scratch)
    return -scratch.sum(axis=1)


def _argmax_rows(p: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``p.argmax(axis=1)`` (the first of equal maxima) given the row maxima ``top``: column by
    column for up to 64 classes, where that is several times faster on a column-major array."""
    if p.shape[1] > 64:
        return p.argmax(axis=1)
    out = np.zeros(len(p), dtype=np.int64)
    for c in range(p.shape[1] - 1, -1, -1):
        out[p[:, c] == top] = c
    return out


class CheckpointAccumulator:
    """The checkpoint scores streamed: the final checkpoint's probabilities ``[N, C]`` first,
    then every other checkpoint in training order, each added in batches
    (:meth:`add`) and then folded in (:meth:`checkpoint_done`) or dropped (:meth:`discard`).

    Holds the final probabilities, one checkpoint in progress and the running sums (the mean
    distribution, class votes, entropies, flips, and a Welford mean and variance of the final
    class's probability): about 3 x N x C floats. :meth:`scores` counts the final checkpoint
    as the last of the trajectory.
    """

    def __init__(self, final_probs: np.ndarray):
        self.final = np.asarray(final_probs, dtype=np.float64)
        if self.final.ndim != 2 or self.final.shape[1] < 2:
            raise InputError(
                f"final probabilities must be [N, C] with C >= 2, got {list(self.final.shape)}"
            )
        n, c = self.final.shape
        self.target = self.final.argmax(axis=1)  # the final model's predicted class
        # column-major: the per-input reductions over a few classes run several times faster
        self._current = np.zeros((n, c), order="F")
        self._scratch = np.zeros((n, c), order="F")
        self.done = 0  # checkpoints folded in, the final not counted
        self.sum_p = np.zeros((n, c), order="F")
        self.votes = np.zeros((n, c), dtype=np.int32, order="F")
        self.sum_entropy = np.zeros(n)
        self.sum_margin = np.zeros(n)
        self.mean_own = np.zeros(n)  # Welford: running mean and sum of squared deviations
        self.m2_own = np.zeros(n)
        self.previous: np.ndarray | None = None  # the last folded checkpoint's predictions
        self.flips = np.zeros(n, dtype=np.int64)
        self.settle = np.zeros(n, dtype=np.int64)
        self._result: dict[str, np.ndarray] | None = None

    def add(self, start: int, probs: np.ndarray) -> None:
        """Add one batch (rows ``start:start+len(probs)``) of the checkpoint in progress."""
        p = np.asarray(probs, dtype=np.float64)
        self._current[start : start + len(p)] = p

    def discard(self) -> None:
        """Forget the checkpoint in progress (its rows are overwritten by the next one)."""

    def checkpoint_done(self) -> None:
        if self._result is not None:
            raise InputError("the checkpoint scores were already computed: no more checkpoints")
        self._fold(self._current, self.done)
        self.done += 1

    def _fold(self, p: np.ndarray, position: int) -> None:
        """Fold one checkpoint's probabilities ``p`` (column-major ``[N, C]``, overwritten)."""
        rows = np.arange(len(p))
        pred = _argmax_rows(p, p.max(axis=1))
        self.sum_p += p
        if p.shape[1] <= 64:  # column by column: twice as fast as the scatter on few classes
            for c in range(p.shape[1]):
                self.votes[:, c] += pred == c
        else:
            self.votes[rows, pred] += 1
        self.sum_entropy += _entropy(p, self._scratch)
        # the final class's probability and its margin over the largest other class
        own = p[rows, self.target]
        p[rows, self.target] = -np.inf
        self.sum_margin += own - p.max(axis=1)
        delta = own - self.mean_own
        self.mean_own += delta / (position + 1)
        self.m2_own += delta * (own - self.mean_own)
        if self.previous is not None:
            changed = pred != self.previous
            self.flips += changed
            self.settle[changed] = position
        self.previous = pred

    def scores(self) -> dict[str, np.ndarray]:
        """Every checkpoint score (:data:`CHECKPOINT_SCORES`), the final checkpoint folded in
        as the last of the trajectory; after this call the accumulator takes no more
        checkpoints."""
        if self._result is None:
            self._fold(np.asfortranarray(self.final).copy(order="F"), self.done)
            k = self.done + 1
            h_mean = _entropy(self.sum_p / k, self._scratch)
            self._result = {
                "ensemble-entropy": h_mean,
                "mutual-information": np.maximum(h_mean - self.sum_entropy / k, 0.0),
                "variation-ratio": 1.0 - self.votes.max(axis=1) / k,
                "flips": self.flips.astype(np.float64),
                "settle-epoch": self.settle.astype(np.float64),
                "aum": -self.sum_margin / k,
                "variability": np.sqrt(np.maximum(self.m2_own / k, 0.0)),
            }
            self._current = self._scratch = np.zeros((0, 0))  # buffers no longer needed
        return self._result


def checkpoint_scores(probs: np.ndarray, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """The checkpoint scores (default: all of :data:`CHECKPOINT_SCORES`) of a ``[K, N, C]``
    stack of probabilities, checkpoints in training order, the final one last."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 3 or p.shape[0] == 0:
        raise InputError(
            f"probs must be [K, N, C] (checkpoints, inputs, classes), got {list(p.shape)}"
        )
    unknown = sorted(set(names or ()) - set(CHECKPOINT_SCORES))
    if unknown:
        raise InputError(
            f"unknown checkpoint scores {unknown}; choose from {list(CHECKPOINT_SCORES)}"
        )
    acc = CheckpointAccumulator(p[-1])
    for k in range(len(p) - 1):
        acc.add(0, p[k])
        acc.checkpoint_done()
    out = acc.scores()
    return {n: out[n] for n in (names or CHECKPOINT_SCORES)}
