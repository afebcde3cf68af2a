"""Seaborn figures for people (dvc plots gets the same data as CSV)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: figures are files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ncip.io import atomic_path  # noqa: E402


def _save(fig, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


DASHED = {"TVD", "TVD+NC", "TVD+Margin", "Ideal"}


def line_figure(
    wide: pd.DataFrame,
    x: str,
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    highlight: str = "NCIP",
    legend_title: str | None = "method",
) -> None:
    """One line per column of a wide table against ``x``: ``highlight`` thick and black, the
    ablation variants dashed, the legend outside the axes so many methods stay readable."""
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    cmap = plt.get_cmap("tab20")
    cols = [c for c in wide.columns if c != x]
    marker = "o" if len(wide) <= 20 else None
    for i, c in enumerate(cols):
        style = {"color": cmap(i % 20), "linewidth": 1.5, "marker": marker, "markersize": 3}
        if c == highlight:
            style.update(color="black", linewidth=3, zorder=5)
        elif c in DASHED:
            style.update(linestyle="--")
        ax.plot(wide[x], wide[c], label=c, **style)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(title=legend_title, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    _save(fig, path)


def training_figure(history: pd.DataFrame, selected: list[int], path: Path, title: str) -> None:
    """Accuracy and sigma_cos per epoch, with the NC-selected checkpoints marked."""
    sns.set_theme(style="whitegrid")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for col in ("train_acc", "val_acc", "test_acc"):
        a1.plot(history["epoch"], history[col], label=col.replace("_acc", ""))
    a1.set(title=f"{title}: accuracy", xlabel="epoch", ylabel="accuracy")
    a1.legend()
    a2.plot(history["epoch"], history["sigma_cos"], color="gray", label="all checkpoints")
    sel = history[history["epoch"].isin(selected)]
    a2.scatter(sel["epoch"], sel["sigma_cos"], color="C3", zorder=3, s=14, label="NC-selected")
    a2.set(title=f"{title}: head equiangularity", xlabel="epoch", ylabel="σ_cos (Eq. 5)")
    a2.legend()
    _save(fig, path)


def tsne_figure(
    final: np.ndarray,
    aggregated: np.ndarray,
    wrong: np.ndarray,
    path: Path,
    title: str,
    seed: int = 0,
) -> None:
    """t-SNE of final vs NC-aggregated output vectors, misclassified inputs in red (Fig. 1)."""
    from sklearn.manifold import TSNE

    sns.set_theme(style="white")
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, data, name in (
        (axes[0], final, "final checkpoint"),
        (axes[1], aggregated, "mean over NC-selected checkpoints"),
    ):
        emb = TSNE(n_components=2, init="pca", random_state=seed, perplexity=30).fit_transform(data)
        ax.scatter(emb[~wrong, 0], emb[~wrong, 1], s=4, c="lightgray", label="correct")
        ax.scatter(emb[wrong, 0], emb[wrong, 1], s=6, c="crimson", label="misclassified")
        ax.set(title=f"{title}: {name}", xticks=[], yticks=[])
        ax.legend(loc="lower right", markerscale=3)
    _save(fig, path)


def band_figure(
    df: pd.DataFrame,
    x: str,
    series: dict[str, tuple[str, str]],
    path: Path,
    title: str,
    xlabel: str,
    ylabel: str,
) -> None:
    """Lines with a ±std band: series = {label: (mean column, std column)} (Fig. 3)."""
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (mean, std) in series.items():
        ax.plot(df[x], df[mean], label=label)
        ax.fill_between(df[x], df[mean] - df[std], df[mean] + df[std], alpha=0.2)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend()
    _save(fig, path)


def bar_figure(
    df: pd.DataFrame, label: str, value: str, path: Path, title: str, xlabel: str
) -> None:
    """Horizontal bars of ``value`` per ``label``, NCIP highlighted (Fig. 6)."""
    sns.set_theme(style="whitegrid")
    d = df.sort_values(value)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(d) + 1.5))
    colors = ["crimson" if m == "NCIP" else "steelblue" for m in d[label]]
    ax.barh(d[label], d[value], color=colors)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set(title=title, xlabel=xlabel, ylabel="method")
    _save(fig, path)


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


def preview_grid(table: pd.DataFrame, images, path: Path, class_names=None, n: int = 32) -> None:
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
    sns.set_theme(style="whitegrid")
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
    _save(fig, path)


def analysis_figures(a, folder: Path, seed: int) -> None:
    """tvd_curve.png (Fig. 3), weak_collapse.png (Fig. 9) and tsne.png (Fig. 1) of one run
    (:class:`ncip.curves.RunAnalysis`)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bands = {
        "correct": ("correct_mean", "correct_std"),
        "misclassified": ("misclassified_mean", "misclassified_std"),
    }
    band_figure(
        a.tvd,
        "checkpoints",
        bands,
        folder / "tvd_curve.png",
        f"TVD of {a.name} (paper Fig. 3)",
        "last n checkpoints",
        "mean TVD to the final checkpoint ± std",
    )
    line_figure(
        a.weak[["checkpoints", "rauc_all", "accuracy"]],
        "checkpoints",
        folder / "weak_collapse.png",
        f"NCIP under weak collapse, {a.name} (paper Fig. 9)",
        "checkpoints available (first E')",
        "value",
        highlight="rauc_all",
        legend_title=None,
    )
    tsne_figure(a.final_probs, a.nc_probs, a.wrong, folder / "tsne.png", a.name, seed)
