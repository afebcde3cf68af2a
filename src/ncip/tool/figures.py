"""The tool's figures: the top-ranked inputs as a grid, and sigma_cos per checkpoint."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: figures are files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ncip.core.io import save_figure  # noqa: E402


def displayable(image: np.ndarray) -> np.ndarray:
    """A stored input as an image in [0, 1], height x width (x 3): channel-first moved last."""
    a = np.asarray(image)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[-1] not in (1, 3):
        a = np.moveaxis(a, 0, -1)
    if a.ndim == 3 and a.shape[-1] == 1:
        a = a[..., 0]
    a = a.astype(np.float64)
    if np.asarray(image).dtype == np.uint8 or a.max() > 1.5:
        a = a / 255.0
    return np.clip(a, 0.0, 1.0)


def preview_grid(
    table: pd.DataFrame,
    images: Callable[[int], np.ndarray],
    path: Path,
    class_names: Sequence[str] | None = None,
    n: int = 32,
) -> None:
    """The top-``n`` ranked inputs as a grid, each titled with rank, predicted class and score.

    ``images(i)`` returns the stored input of the i-th table row (rank order)."""
    n = min(n, len(table))
    cols = min(8, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(1.6 * cols, 1.9 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for i, r in enumerate(table.head(n).itertuples()):
        img = displayable(images(i))
        ax = axes.flat[i]
        ax.imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
        pred = class_names[r.pred] if class_names and r.pred < len(class_names) else r.pred
        ax.set_title(f"#{r.rank} pred {pred}\nNCIP {r.ncip:.2f}", fontsize=7)
    fig.suptitle("Top-ranked inputs (label these first)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def sigma_figure(hist: pd.DataFrame, x: str, path: Path) -> None:
    """σ_cos of the head per checkpoint: falling = class vectors becoming equiangular (NC)."""
    plt.style.use("seaborn-v0_8-whitegrid")  # matplotlib's copy of the style: no seaborn needed
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(
        hist[x],
        hist["sigma_cos"],
        marker="o" if len(hist) <= 60 else None,
        markersize=3,
        color="black",
    )
    ax.set_xlabel(x)
    ax.set_ylabel("sigma_cos of the head")
    ax.set_title(
        "Head equiangularity per checkpoint (NCIP Eq. 5; lower = closer to collapse)", fontsize=9
    )
    save_figure(fig, path)
