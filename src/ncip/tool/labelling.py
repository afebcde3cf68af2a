"""The ranking handed to the tools people label with (issue 46): Label Studio's task import
JSON, a plain CSV of the first N for a spreadsheet, and a picture of the detection curves.

Label Studio (its documented "basic Label Studio JSON format" for tasks with pre-annotations):
a list of tasks, each ``{"data": {...}, "predictions": [{"model_version", "score",
"result": [...]}]}``. ``data`` holds what the labelling view shows (``text`` for raw texts,
``image`` for an image file's path) beside ``sample_id``, ``ncip_rank`` and ``ncip_priority``;
one prediction per task: the predicted class as a ``choices`` result (``from_name`` "label",
``to_name`` "text" or "image", the names a labelling config then uses). Label Studio sorts
by and samples on the prediction ``score`` lowest first ("uncertainty sampling"), so ``score``
is minus the ranking's priority: Label Studio's order is then the ranking's. The tasks follow
the ranking's order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

LS_FROM = "label"


def _class_name(pred: int, class_names: list[str] | None) -> str:
    if class_names and 0 <= int(pred) < len(class_names):
        return str(class_names[int(pred)])
    return str(int(pred))


def label_studio_tasks(
    table: pd.DataFrame,
    order: np.ndarray,
    inputs: Any,
    method: str,
    class_names: list[str] | None = None,
) -> list[dict]:
    """One Label Studio task per ranked input, in rank order (see the module docstring)."""
    texts = getattr(inputs, "raw_texts", None)
    files = getattr(getattr(inputs, "x", None), "paths", None)
    to_name = "text" if texts is not None else "image" if files is not None else "item"
    tasks = []
    for row, i in zip(table.itertuples(index=False), order, strict=True):
        data: dict[str, Any] = {
            "sample_id": str(row.sample_id),
            "ncip_rank": int(row.rank),
            "ncip_priority": float(row.score),
        }
        if texts is not None:
            data["text"] = str(texts[int(i)])
        elif files is not None:
            data["image"] = str(files[int(i)])
        result = {
            "from_name": LS_FROM,
            "to_name": to_name,
            "type": "choices",
            "value": {"choices": [_class_name(row.pred, class_names)]},
        }
        tasks.append(
            {
                "data": data,
                "predictions": [
                    {
                        "model_version": f"ncip-{method}",
                        "score": -float(row.score),
                        "result": [result],
                    }
                ],
            }
        )
    return tasks


def top_table(table: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n`` ranked inputs: rank, id, the score ranked by, the predicted class."""
    cols = [c for c in ("rank", "sample_id", "score", "pred", "label") if c in table]
    return table.head(n)[cols]


def detection_plot(curves: dict[str, np.ndarray], fault: np.ndarray, path: Path, what: str) -> None:
    """Faults found against inputs inspected for each named score (larger first) and random
    order (its expectation, a straight line), on labelled inputs ``what``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ncip.core.io import save_figure
    from ncip.core.metrics import order_from_scores

    f = np.asarray(fault, dtype=bool)
    n, k = len(f), int(f.sum())
    x = np.arange(n + 1)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(x, np.minimum(x, k), color="0.75", linestyle=":", label="ideal")
    for name, s in curves.items():
        found = np.concatenate([[0], np.cumsum(f[order_from_scores(s, 0)])])
        ax.plot(x, found, linewidth=2 if name == next(iter(curves)) else 1.2, label=name)
    ax.plot([0, n], [0, k], color="0.4", linestyle="--", label="random order (expected)")
    ax.set(
        title=f"Faults found vs inputs inspected ({what})",
        xlabel="inputs inspected, in ranked order",
        ylabel="misclassified inputs found",
    )
    ax.legend(fontsize=8)
    save_figure(fig, path)
