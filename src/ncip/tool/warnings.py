"""What `ncip rank` warns about where the evidence is there (issue 47 item 6): labelled inputs
the final model gets far more wrong than its training run recorded, table features on a scale
no standardized training sees, and checkpoint folders holding different tokenizers.

Each check returns a line for the run's notes, or None; none refuses (the evidence says
"probably", not "certainly").
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

# a recorded accuracy this far above the measured one says the inputs are not what the model
# saw in training (scaling, tokenizer, column order), not that the test set is harder
ACCURACY_GAP = 0.25
# table features whose spread is this far beyond standardized features' (sd 1)
FEATURE_SD = 20.0


def recorded_accuracy(cs) -> tuple[float, str] | None:
    """The accuracy the final checkpoint's run recorded, and where: the last ``eval_accuracy``
    of a Trainer's trainer_state.json, else an ncip writer's metrics (the first key holding
    ``acc``, in [0, 1])."""
    final = cs.final
    if final.path.is_dir() and (final.path / "trainer_state.json").is_file():
        try:
            history = json.loads((final.path / "trainer_state.json").read_text())["log_history"]
        except (OSError, ValueError, KeyError, TypeError):
            history = []
        acc = [h["eval_accuracy"] for h in history if isinstance(h, dict) and "eval_accuracy" in h]
        if acc and isinstance(acc[-1], int | float):
            return float(acc[-1]), "eval_accuracy in its trainer_state.json"
    metrics = getattr(final.meta, "metrics", None) or {}
    for key, value in metrics.items():
        if "acc" in key.lower() and isinstance(value, int | float) and 0 <= value <= 1:
            return float(value), f"{key} in the checkpoint's ncip record"
    return None


def accuracy_gap(cs, final_probs: np.ndarray, labels: np.ndarray | None) -> str | None:
    """A warning when the final model's accuracy on the labelled inputs lies more than
    :data:`ACCURACY_GAP` below what its run recorded."""
    if labels is None:
        return None
    recorded = recorded_accuracy(cs)
    if recorded is None:
        return None
    acc = float((np.asarray(final_probs).argmax(axis=1) == np.asarray(labels)).mean())
    if recorded[0] - acc <= ACCURACY_GAP:
        return None
    return (
        f"warning: the final model gets {acc:.1%} of your labelled inputs right, where its run "
        f"recorded {recorded[0]:.1%} ({recorded[1]}): are the inputs what the model saw in "
        "training (scaling, normalisation, tokenizer, column order)?"
    )


def unscaled_features(x: Any, detail: str, normalised: bool) -> str | None:
    """A warning for table features (2-D floats) whose standard deviation, over a sample of
    up to 10,000 rows, exceeds :data:`FEATURE_SD` in some column, unless --mean/--std scale
    them: a model trained on standardized features (sd 1) sees them far off its range."""
    if normalised or "feature columns" not in detail:
        return None
    a = np.asarray(x[: min(len(x), 10_000)], dtype=np.float64)
    if a.ndim != 2 or not len(a):
        return None
    sd = a.std(axis=0)
    worst = int(np.argmax(sd))
    if sd[worst] <= FEATURE_SD:
        return None
    return (
        f"warning: feature column {worst} varies with standard deviation {sd[worst]:.3g} "
        f"(values up to {np.abs(a[:, worst]).max():.3g}); a model trained on standardized "
        "features (a StandardScaler) ranks these wrongly: give the features as the model saw "
        "them in training, or --mean/--std"
    )


def differing_tokenizers(cs, used: Path) -> str | None:
    """A warning when the checkpoint folders hold tokenizer.json files that differ: the texts
    were encoded with one of them (``used``) for every checkpoint."""
    digests = {}
    for c in cs:
        f = c.path / "tokenizer.json" if c.path.is_dir() else None
        if f is not None and f.is_file():
            digests.setdefault(hashlib.sha256(f.read_bytes()).hexdigest(), []).append(c.name)
    if len(digests) < 2:
        return None
    groups = "; ".join(", ".join(names[:3]) for names in digests.values())
    return (
        f"warning: the checkpoint folders hold {len(digests)} different tokenizer.json files "
        f"({groups}); the texts were encoded with {used} for every checkpoint"
    )
