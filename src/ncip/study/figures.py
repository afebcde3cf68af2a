"""Seaborn figures for people (dvc plots gets the same data as CSV)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # headless: figures are files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ncip.core.io import save_figure  # noqa: E402

if TYPE_CHECKING:
    from ncip.study.curves import RunAnalysis

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
    save_figure(fig, path)


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
    save_figure(fig, path)


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
    save_figure(fig, path)


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
    save_figure(fig, path)


def analysis_figures(a: RunAnalysis, folder: Path, seed: int, tsne: bool = True) -> None:
    """tvd_curve.png (Fig. 3), weak_collapse.png (Fig. 9) and, with ``tsne``, tsne.png (Fig. 1;
    its two t-SNE fits are most of the stage's time) of one run
    (:class:`ncip.study.curves.RunAnalysis`)."""
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
    if tsne:
        tsne_figure(a.final_probs, a.nc_probs, a.wrong, folder / "tsne.png", a.name, seed)


def forest_figure(rows: list[dict], path: Path, xlabel: str) -> None:
    """A forest plot per question (side by side): each data set's difference with its 95%
    interval, the pooled estimate as a diamond with its interval, and the prediction interval
    for a new data set as a thin bar below it; 0 dashed."""
    sns.set_theme(style="whitegrid")
    questions = list(dict.fromkeys(r["question"] for r in rows))
    height = max(3.0, 0.32 * max(sum(r["question"] == q for r in rows) for q in questions) + 1.6)
    fig, axes = plt.subplots(1, len(questions), figsize=(5.5 * len(questions), height))
    for ax, q in zip(np.atleast_1d(axes), questions, strict=True):
        part = [r for r in rows if r["question"] == q]
        sets = sorted((r for r in part if r["kind"] == "data set"), key=lambda r: r["est"])
        y = np.arange(len(sets), 0, -1, dtype=float)
        for yi, r in zip(y, sets, strict=True):
            ax.plot([r["lo"], r["hi"]], [yi, yi], color="0.35", linewidth=1.2)
            ax.plot(r["est"], yi, "s", color="0.15", markersize=4)
        labels = [r["row"] for r in sets]
        ticks = list(y)
        for r in (r for r in part if r["kind"] == "pooled"):
            ax.fill([r["lo"], r["est"], r["hi"], r["est"]], [0, 0.3, 0, -0.3], color="tab:blue")
            ax.plot([r["pred_lo"], r["pred_hi"]], [-0.7, -0.7], color="tab:blue", linewidth=1)
            ticks += [0, -0.7]
            labels += ["pooled (95% CI)", "prediction interval"]
        ax.axvline(0, color="0.5", linestyle="--", linewidth=1)
        ax.set_yticks(ticks, labels, fontsize=8)
        ax.xaxis.set_major_locator(plt.MaxNLocator(5))
        ax.set(title=q, xlabel=xlabel)
    save_figure(fig, path)
