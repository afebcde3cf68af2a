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
    evaluation, pool = stratified_split(test.y, cfg.pool_fraction,
                                        np.random.default_rng(cfg.split_seed))  # fmt: skip
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


def retrain_gains(model, train: Split, test: Split, scores: dict[str, np.ndarray],
                  cfg: RetrainConfig, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """One row per (method, fine-tuning seed): accuracy before, after and the gain.

    ``scores[method]`` holds one score per test input, in the test split's order.
    """
    cfg.validate()
    pool, evaluation = split_pool(test, cfg)
    ev = test.subset(evaluation)
    before = accuracy(model, ev)
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
            data = Split(np.concatenate([chosen.x, replay.x]), np.concatenate([chosen.y, replay.y]),
                         np.concatenate([chosen.ids, replay.ids]))  # fmt: skip
            after = accuracy(fine_tune(model, data, cfg, seed * 1000 + r), ev)
            rows.append({"method": method, "seed": r, "selected": n,
                         "faults_selected": int((batched_outputs(model, chosen.x).argmax(1)
                                                 != chosen.y).sum()),
                         "before": before, "after": after, "gain": after - before})  # fmt: skip
    return pd.DataFrame(rows)
