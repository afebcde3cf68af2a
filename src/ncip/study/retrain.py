"""Retraining guidance (paper RQ3, Fig. 6): does fine-tuning on a method's top-ranked inputs help?

The test split is divided once (stratified, fixed seed) into a candidate pool and a disjoint
evaluation split. Each method ranks the pool with its own scores; its top ``budget`` share of
the pool, with true labels, is added to the whole training set, and a copy of the final model
is fine-tuned on that union with the training optimizer at a small learning rate (a tenth of
the study's) for ``epochs`` passes. Every arm gets the same recipe, the same number of steps
and, per fine-tuning seed, the same shuffling seed (a paired design), including two controls:

- ``control:none``: nothing from the pool; as many extra training inputs instead, so the
  steps match. Its gain is what fine-tuning alone does.
- ``control:random``: a uniform random draw from the pool (a new draw per seed).

The reported gain is evaluation accuracy after minus before, with its mean over seeds, a 95%
t-interval, and the paired difference to ``control:none``. This follows the peers' recipe of
retraining on the training set plus the selected inputs (TDPR's artifact; SETS, which retrains
for 30 epochs and scores on the rest of the test set), shortened to fit a CPU.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ncip.core.errors import InputError
from ncip.core.metrics import order_from_scores, run_seed
from ncip.core.models import as_model_input
from ncip.study.data import Split, stratified_split
from ncip.study.predict import batched_outputs

CONTROLS = ("control:none", "control:random")
# How an arm fine-tunes: "union", the training set plus its selection (TDPR's and SETS'
# recipe); "selected", its selection alone (the paper's: "fine-tune the original models using
# the top 20% of samples prioritized by each method"). control:none adds, or is, the same
# number of training inputs drawn again.
RECIPES = ("union", "selected")
MAX_POINTS_PER_INPUT = 0.05  # an evaluation split coarser than this is left out of averages


@dataclass
class RetrainConfig:
    budget: float = 0.2  # share of the candidate pool that is labelled and used
    pool_fraction: float = 0.5  # share of the test split that forms the candidate pool
    epochs: int = 2  # passes over the training set plus the selection
    lr: float = 1e-4  # a tenth of the study's Adam learning rate
    batch_size: int = 128  # the study's training batch size
    seeds: int = 3
    split_seed: int = 0
    # the paper's recipe ("fine-tune the original models using the top 20% of samples"): passes
    # over the selected inputs alone; the paper states none, 10 passes of 1,000 inputs at batch
    # 128 are 80 steps (the union recipe's 2 passes over 55,000 inputs are about 860)
    selected_epochs: int = 10

    def validate(self) -> None:
        if not 0 < self.budget <= 1:
            raise InputError(f"retrain budget must lie in (0, 1], got {self.budget}")
        if not 0 < self.pool_fraction < 1:
            raise InputError(f"pool_fraction must lie in (0, 1), got {self.pool_fraction}")
        if self.epochs < 1 or self.seeds < 1 or self.lr <= 0 or self.batch_size < 1:
            raise InputError("retrain epochs, seeds, batch_size must be >= 1 and lr > 0")
        if self.selected_epochs < 1:
            raise InputError(f"retrain selected_epochs must be >= 1, got {self.selected_epochs}")


def split_pool(test: Split, cfg: RetrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """(candidate pool indices, evaluation indices) into the test split."""
    evaluation, pool = stratified_split(
        test.y, cfg.pool_fraction, np.random.default_rng(cfg.split_seed)
    )
    return pool, evaluation


def accuracy(model: torch.nn.Module, split: Split) -> float:
    return float((batched_outputs(model, split.x).argmax(1) == split.y).mean())


def make_optimizer(
    params: Iterable[torch.nn.Parameter], cfg: RetrainConfig, training: dict | None = None
) -> torch.optim.Optimizer:
    """The training run's optimizer (its recorded name, momentum, weight decay; Adam when the
    checkpoints do not say) at the fine-tuning learning rate."""
    training = training or {}
    wd = float(training.get("weight_decay", 0.0))
    if training.get("optimizer", "adam") == "sgd":
        momentum = float(training.get("momentum", 0.9))
        return torch.optim.SGD(params, lr=cfg.lr, momentum=momentum, weight_decay=wd)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=wd)


def fine_tune(
    model: torch.nn.Module,
    data: Split,
    cfg: RetrainConfig,
    seed: int,
    training: dict | None = None,
    epochs: int | None = None,
) -> torch.nn.Module:
    """A copy of ``model`` fine-tuned on ``data`` (``epochs``, default cfg.epochs; seeded
    shuffling)."""
    m = copy.deepcopy(model)
    device = next(m.parameters()).device
    opt = make_optimizer(m.parameters(), cfg, training)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    x, y = as_model_input(data.x), torch.from_numpy(data.y)
    for _ in range(cfg.epochs if epochs is None else epochs):
        m.train()
        perm = torch.randperm(len(data), generator=gen)
        for i in range(0, len(data), cfg.batch_size):
            b = perm[i : i + cfg.batch_size]
            loss = F.cross_entropy(m(x[b].to(device)), y[b].to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return m.eval()


def _union(*parts: Split) -> Split:
    return Split(
        np.concatenate([p.x for p in parts]),
        np.concatenate([p.y for p in parts]),
        np.concatenate([p.ids for p in parts]),
    )


def retrain_gains(
    model: torch.nn.Module,
    train: Split,
    test: Split,
    scores: dict[str, np.ndarray],
    cfg: RetrainConfig,
    seed: int = 0,
    test_pred: np.ndarray | None = None,
    training: dict | None = None,
    controls: bool = True,
    recipe: str = "union",
) -> pd.DataFrame:
    """One row per (arm, fine-tuning seed): accuracy before, after and the gain; the arms are
    the methods of ``scores`` and, with ``controls``, the two :data:`CONTROLS`. Each arm's
    result depends only on its own selection and the seed, so arms run apart (one group of arms
    per stage) give the same rows as run together.

    ``scores[method]`` holds one score per test input, in the test split's order;
    ``test_pred``, the final model's predicted classes in that order (predict-probabilities
    stored them), saves running it again; ``training``, the training run's recorded config
    (its optimizer).
    """
    cfg.validate()
    if recipe not in RECIPES:
        raise InputError(f"retrain recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    epochs = cfg.epochs if recipe == "union" else cfg.selected_epochs
    pool, evaluation = split_pool(test, cfg)
    ev = test.subset(evaluation)
    if test_pred is None:
        test_pred = batched_outputs(model, test.x).argmax(1)
    test_pred = np.asarray(test_pred)
    before = float((test_pred[evaluation] == ev.y).mean())
    n = max(1, int(round(cfg.budget * len(pool))))
    chosen = {}
    for method, s in scores.items():
        s = np.asarray(s, dtype=np.float64)
        if s.shape != (len(test),):
            raise InputError(f"{method}: {s.shape} scores for {len(test)} test inputs")
        chosen[method] = pool[order_from_scores(s[pool], seed)[:n]]
    rows = []
    for r in range(cfg.seeds):
        run_seed_r = run_seed(seed, r)
        rng = np.random.default_rng(run_seed_r)
        none = train.subset(rng.choice(len(train), n, replace=len(train) < n))
        picks = {"control:random": rng.choice(pool, n, replace=False), **chosen}  # test indices
        if not controls:
            picks.pop("control:random")
        arms = {m: test.subset(idx) for m, idx in picks.items()}
        if controls:
            arms = {"control:none": none, **arms}
        for arm, extra in arms.items():
            data = _union(train, extra) if recipe == "union" else extra
            after = accuracy(fine_tune(model, data, cfg, run_seed_r, training, epochs), ev)
            idx = picks.get(arm)
            faults = None if idx is None else int((test_pred[idx] != test.y[idx]).sum())
            rows.append(
                {
                    "method": arm,
                    "seed": r,
                    "selected": n,
                    "faults_selected": faults,
                    "before": before,
                    "after": after,
                    "gain": after - before,
                    "evaluation_inputs": len(ev),
                }
            )
    return pd.DataFrame(rows)


def method_scores(scores: Path, test: Split) -> dict[str, np.ndarray]:
    """Each method's scores on the test split, in ``test``'s order, from a run's score tables
    (NCIP without its ablation variants or the checkpoint scores, which the retraining study
    does not cover; not the random baseline, whose place the ``control:random`` arm takes with a
    fresh draw per seed)."""
    from ncip.study.scores import list_methods
    from ncip.study.scoretable import read_score_tables

    table = read_score_tables(scores)
    variants = [m for m in list_methods("ncip") if m != "ncip"] + list_methods("checkpoint")
    variants += ["random"]
    table = table[
        (table["split"] == "test") & (table["repeat"] == 0) & ~table["method"].isin(variants)
    ]
    out = {}
    for method, g in table.groupby("method"):
        s = g.set_index("sample_id")["score"]
        missing = set(test.ids) - set(s.index)
        if missing:
            raise InputError(f"{method} has no score for {len(missing)} test inputs")
        out[method] = s.loc[test.ids].to_numpy(np.float64)
    return out


def stored_predictions(predictions: Path, test: Split) -> np.ndarray:
    """The final model's predicted class of every test input, in ``test``'s order, from
    predict-probabilities' output."""
    from ncip.study.predict import Predictions

    ids, logits, _ = Predictions(predictions).final("test")
    pos = {v: i for i, v in enumerate(np.asarray(ids).astype(str))}
    missing = [v for v in test.ids.astype(str) if v not in pos]
    if missing:
        raise InputError(
            f"{predictions} lacks {len(missing)} test inputs (e.g. {missing[0]!r}); "
            "re-run predict-probabilities"
        )
    return logits[[pos[v] for v in test.ids.astype(str)]].argmax(1)


def summarize(rows: pd.DataFrame) -> dict[str, dict]:
    """arm -> mean gain over fine-tuning seeds, its 95% t-interval half-width, the paired
    difference to ``control:none`` (same seeds) with its interval, the per-seed gains,
    accuracy before/after and the selection."""
    from scipy import stats

    def interval(v: np.ndarray) -> float:
        if len(v) < 2:
            return float("nan")
        return float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))

    none = rows[rows["method"] == "control:none"].set_index("seed")["gain"]
    random = rows[rows["method"] == "control:random"].set_index("seed")["gain"]
    out = {}
    for method, g in rows.groupby("method", sort=False):
        gains = g.set_index("seed")["gain"]
        diff = (gains - none.reindex(gains.index)).to_numpy()
        vs_random = (gains - random.reindex(gains.index)).to_numpy()
        faults = g["faults_selected"].iloc[0]
        out[method] = {
            "gain": float(gains.mean()),
            "gain_ci95": interval(gains.to_numpy()),
            "gain_std": float(gains.std(ddof=1)) if len(gains) > 1 else float("nan"),
            "vs_none": float(np.mean(diff)),
            "vs_none_ci95": interval(diff),
            "vs_random": float(np.mean(vs_random)),
            "vs_random_ci95": interval(vs_random),
            "gains": [float(v) for v in gains],
            "before": float(g["before"].iloc[0]),
            "after": float(g["after"].mean()),
            "selected": int(g["selected"].iloc[0]),
            "faults_selected": None if faults is None or pd.isna(faults) else int(faults),
        }
    return out


def resolution(rows: pd.DataFrame) -> dict:
    """How fine the evaluation split is, and whether the subject enters averages."""
    n = int(rows["evaluation_inputs"].iloc[0])
    points = 100.0 / n
    ok = points <= MAX_POINTS_PER_INPUT
    reason = (
        ""
        if ok
        else f"{n} evaluation inputs: one input is {points:.2f} points of accuracy, coarser "
        f"than {MAX_POINTS_PER_INPUT} (needs at least {int(np.ceil(100 / MAX_POINTS_PER_INPUT))})"
    )
    return {"evaluation_inputs": n, "points_per_input": points, "averaged": ok, "reason": reason}


def training_config(checkpoint: Path) -> dict:
    """The training run's recorded config (optimizer, momentum, weight decay) from an ncip
    checkpoint; empty for checkpoints that record none (fine-tuning then uses Adam)."""
    from ncip.core.checkpoints import read_meta

    try:
        return dict(read_meta(checkpoint).config or {})
    except (ValueError, OSError):  # CheckpointError is a ValueError
        return {}


# The arms of retrain-guidance, in groups that re-run apart: NCIP and its ablations when K or
# alpha change, the baselines when a baseline's options change, the controls almost never.
ARM_GROUPS = ("ncip", "baselines", "controls")


def group_scores(group: str, scores: Path | None, test: Split) -> dict[str, np.ndarray]:
    """The arms' scores of one group: from its score table (ncip.parquet or baselines.parquet),
    none for the controls."""
    if group not in ARM_GROUPS:
        raise InputError(f"retrain group must be one of {', '.join(ARM_GROUPS)}, got {group!r}")
    if group == "controls":
        return {}
    if scores is None:
        raise InputError(f"the {group} arms need --scores (their score table)")
    return method_scores(scores, test)


def merge_groups(records: list[dict]) -> dict:
    """One subject-run's retraining result from its groups' records: every arm's summary (the
    paired difference to ``control:none`` uses the controls group's rows of the same seeds)."""
    rows = pd.DataFrame([row for rec in records for row in rec["rows"]])
    first = records[0]
    keep = {k: v for k, v in first.items() if k not in ("rows", "seconds", "group")}
    return {
        **keep,
        "seconds": float(sum(rec["seconds"] for rec in records)),
        "methods": summarize(rows),
    }


def publish(records: Path, out: Path) -> list[str]:
    """``records/<subject>-run-<r>/<group>-<recipe>.json`` -> ``out/<subject>-run-<r>.json``:
    the union recipe's groups merged at the top (what the report's retraining section reads),
    every recipe's under ``recipes``; the folder replaced as a whole. Returns the names."""
    from ncip.core.io import atomic_dir, write_json

    folders = sorted(p for p in Path(records).glob("*") if p.is_dir())
    names = []
    with atomic_dir(out) as tmp:
        for folder in folders:
            by_recipe: dict[str, list[dict]] = {}
            for f in sorted(folder.glob("*.json")):
                rec = json.loads(f.read_text())
                by_recipe.setdefault(rec.get("recipe", "union"), []).append(rec)
            if "union" not in by_recipe:
                continue
            merged = merge_groups(by_recipe["union"])
            merged["recipes"] = {r: merge_groups(recs) for r, recs in by_recipe.items()}
            write_json(tmp / f"{folder.name}.json", merged)
            names.append(f"{folder.name}.json")
    return names
