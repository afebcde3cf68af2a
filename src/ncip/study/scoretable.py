"""The per-sample score table every scoring stage writes and the evaluation reads.

Long format, one row per (split, sample, method, repeat): ``subject``, ``run``, ``split``,
``sample_id``, ``label``, ``pred`` (the final model's prediction), ``method``, ``repeat``,
``score`` (larger = tested earlier). Labels are attached here, after scoring, for evaluation
only; no method sees them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ncip.core.errors import InputError, MissingFileError
from ncip.core.io import read_parquet

COLUMNS = ["subject", "run", "split", "sample_id", "label", "pred", "method", "repeat", "score"]


def score_rows(
    subject: str,
    run: int,
    split: str,
    sample_id: np.ndarray,
    label: np.ndarray,
    pred: np.ndarray,
    method: str,
    scores: np.ndarray | dict[int, np.ndarray],
) -> pd.DataFrame:
    per_repeat = scores if isinstance(scores, dict) else {0: scores}
    parts = []
    for r, s in per_repeat.items():
        s = np.asarray(s, dtype=np.float64)
        if s.shape != (len(sample_id),):
            raise InputError(
                f"method {method!r} returned {s.shape} scores for {len(sample_id)} inputs of "
                f"split {split!r}"
            )
        parts.append(
            pd.DataFrame(
                {
                    "subject": subject,
                    "run": np.int32(run),
                    "split": split,
                    "sample_id": np.asarray(sample_id).astype(str),
                    "label": np.asarray(label, dtype=np.int64),
                    "pred": np.asarray(pred, dtype=np.int64),
                    "method": method,
                    "repeat": np.int32(r),
                    "score": s,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def read_score_tables(root: Path | str) -> pd.DataFrame:
    """The score tables under a folder (or one table's file), concatenated."""
    root = Path(root)
    files = [root] if root.is_file() else sorted(root.rglob("*.parquet"))
    if not files:
        raise MissingFileError(f"no score tables under {root}; run score-ncip/score-baselines")
    return pd.concat([read_parquet(f, columns=COLUMNS) for f in files], ignore_index=True)
