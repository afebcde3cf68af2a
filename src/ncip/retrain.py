"""Retraining guidance (paper RQ3, Fig. 6): does fine-tuning on a method's top-ranked inputs help?

The test split is divided once (stratified, fixed seed) into a candidate pool and a disjoint
evaluation split. Each method ranks the pool with its own scores; the top ``budget`` share of
the pool, with true labels, plus as many randomly drawn training inputs (replay, the same draw
for every method, so fine-tuning on hard inputs alone does not simply erase what the model
knew) fine-tune a copy of the final model with one recipe for every method. The reported gain
is evaluation accuracy after minus before, averaged over fine-tuning seeds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ncip.data import Split, as_model_input, stratified_split
from ncip.metrics import order_from_scores
from ncip.predict import batched_outputs


@dataclass
class RetrainConfig:
    budget: float = 0.2  # share of the candidate pool that is labelled and used
    pool_fraction: float = 0.5  # share of the test split that forms the candidate pool
    epochs: int = 5
    lr: float = 1e-4
    batch_size: int = 64
    seeds: int = 3
    split_seed: int = 0

    def validate(self) -> None:
        if not 0 < self.budget <= 1:
            raise ValueError(f"retrain budget must lie in (0, 1], got {self.budget}")
        if not 0 < self.pool_fraction < 1:
            raise ValueError(f"pool_fraction must lie in (0, 1), got {self.pool_fraction}")
        if self.epochs < 1 or self.seeds < 1 or self.lr <= 0 or self.batch_size < 1:
            raise ValueError("retrain epochs, seeds, batch_size must be >= 1 and lr > 0")


def split_pool(test: Split, cfg: RetrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """(candidate pool indices, evaluation indices) into the test split."""
    evaluation, pool = stratified_split(
        test.y, cfg.pool_fraction, np.random.default_rng(cfg.split_seed)
    )
    return pool, evaluation


def accuracy(model, split: Split) -> float:
    return float((batched_outputs(model, split.x).argmax(1) == split.y).mean())


def fine_tune(model, data: Split, cfg: RetrainConfig, seed: int):
    """A copy of ``model`` fine-tuned on ``data`` (Adam, cfg.epochs, seeded shuffling)."""
    m = copy.deepcopy(model)
    device = next(m.parameters()).device
    opt = torch.optim.Adam(m.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    x, y = as_model_input(data.x), torch.from_numpy(data.y)
    for _ in range(cfg.epochs):
        m.train()
        perm = torch.randperm(len(data), generator=gen)
        for i in range(0, len(data), cfg.batch_size):
            b = perm[i : i + cfg.batch_size]
            loss = F.cross_entropy(m(x[b].to(device)), y[b].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return m.eval()


def retrain_gains(
    model,
    train: Split,
    test: Split,
    scores: dict[str, np.ndarray],
    cfg: RetrainConfig,
    seed: int = 0,
    test_pred: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per (method, fine-tuning seed): accuracy before, after and the gain.

    ``scores[method]`` holds one score per test input, in the test split's order;
    ``test_pred``, the final model's predicted classes in that order (predict-probabilities
    stored them), saves running it again.
    """
    cfg.validate()
    pool, evaluation = split_pool(test, cfg)
    ev = test.subset(evaluation)
    if test_pred is None:
        test_pred = batched_outputs(model, test.x).argmax(1)
    test_pred = np.asarray(test_pred)
    before = float((test_pred[evaluation] == ev.y).mean())
    n = max(1, int(round(cfg.budget * len(pool))))
    rows = []
    for r in range(cfg.seeds):
        rng = np.random.default_rng(seed * 1000 + r)
        replay = train.subset(rng.choice(len(train), min(n, len(train)), replace=False))
        for method, s in scores.items():
            s = np.asarray(s, dtype=np.float64)
            if s.shape != (len(test),):
                raise ValueError(f"{method}: {s.shape} scores for {len(test)} test inputs")
            top = pool[order_from_scores(s[pool], seed)[:n]]
            chosen = test.subset(top)  # same dataset as the replay, so the same dtype
            data = Split(
                np.concatenate([chosen.x, replay.x]),
                np.concatenate([chosen.y, replay.y]),
                np.concatenate([chosen.ids, replay.ids]),
            )
            after = accuracy(fine_tune(model, data, cfg, seed * 1000 + r), ev)
            rows.append(
                {
                    "method": method,
                    "seed": r,
                    "selected": n,
                    "faults_selected": int((test_pred[top] != chosen.y).sum()),
                    "before": before,
                    "after": after,
                    "gain": after - before,
                }
            )
    return pd.DataFrame(rows)


def method_scores(scores: Path, test) -> dict[str, np.ndarray]:
    """Each method's scores on the test split, in ``test``'s order, from a run's score tables
    (the random baseline's first seed; NCIP without its ablation variants)."""
    from ncip.evaluation import ablation
    from ncip.scoretable import read_score_tables

    table = read_score_tables(scores)
    variants = [m for m in ablation() if m != "ncip"]
    table = table[
        (table["split"] == "test") & (table["repeat"] == 0) & ~table["method"].isin(variants)
    ]
    out = {}
    for method, g in table.groupby("method"):
        s = g.set_index("sample_id")["score"]
        missing = set(test.ids) - set(s.index)
        if missing:
            raise ValueError(f"{method} has no score for {len(missing)} test inputs")
        out[method] = s.loc[test.ids].to_numpy(np.float64)
    return out


def stored_predictions(predictions: Path, test: Split) -> np.ndarray:
    """The final model's predicted class of every test input, in ``test``'s order, from
    predict-probabilities' output."""
    from ncip.predict import Predictions

    ids, logits, _ = Predictions(predictions).final("test")
    pos = {v: i for i, v in enumerate(np.asarray(ids).astype(str))}
    missing = [v for v in test.ids.astype(str) if v not in pos]
    if missing:
        raise ValueError(
            f"{predictions} lacks {len(missing)} test inputs (e.g. {missing[0]!r}); "
            "re-run predict-probabilities"
        )
    return logits[[pos[v] for v in test.ids.astype(str)]].argmax(1)


def summarize(rows: pd.DataFrame) -> dict[str, dict[str, float]]:
    """method -> mean gain over fine-tuning seeds, its std, accuracy before/after, selection."""
    summary = rows.groupby("method").agg(
        gain=("gain", "mean"),
        gain_std=("gain", "std"),
        before=("before", "first"),
        after=("after", "mean"),
        faults_selected=("faults_selected", "first"),
        selected=("selected", "first"),
    )
    return {m: {k: float(v) for k, v in r.items()} for m, r in summary.iterrows()}
