"""Inference through the engine, and the prediction files every later stage reads.

``predict-probabilities`` runs every checkpoint of a run once (:mod:`ncip.core.engine`) on
every split a later stage needs, and writes into its folder:

- ``epoch-XXX.parquet`` per checkpoint: ``subject``, ``epoch``, ``split``, ``sample_id``,
  ``label``, ``pred``, then ``logit_0..C-1`` (float32, as the model produced them). Readers
  take probabilities as ``softmax64`` of these (float64); scores that need precision beyond
  float64 probabilities (MSP, PCS, DeepGini on saturated outputs) use the logits;
- ``final-features.parquet``: the final checkpoint's penultimate features ``feat_0..d-1``
  (float32) beside its logits, on the splits whose features baselines use (LSA, DSA, SETS,
  NNS: the test sets and the training split);
- ``index.json``: the epochs in order with the file of each, the splits and their sizes, the
  engine path and the seconds taken.

:class:`Predictions` reads them; score-ncip, score-baselines (TDPR's trajectories, every
final-model score) and analyze-checkpoints use it instead of running a model again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ncip.core.checkpoints import checkpoint_name
from ncip.core.errors import InputError, MissingEntryError, MissingFileError
from ncip.core.io import read_parquet, write_json
from ncip.core.logs import progress, progress_bar
from ncip.core.scores import softmax64
from ncip.study.data import Split

if TYPE_CHECKING:
    import torch

    from ncip.core.engine import EngineConfig

META_COLUMNS = ["subject", "epoch", "split", "sample_id", "label", "pred"]
INDEX = "index.json"
FEATURES = "final-features.parquet"


@dataclass(frozen=True)
class PredictionIndex:
    """``index.json`` of a predict-probabilities folder: which file holds which checkpoint's
    predictions, the splits and their sizes, the engine, and the seconds (``timing`` splits
    them between all checkpoints and the final model's features, for the cost table)."""

    subject: str
    epochs: list[int]
    final_epoch: int
    files: dict[str, str]  # epoch (as text) -> Parquet file name
    splits: dict[str, int]  # split -> inputs, in the files' order
    feature_splits: dict[str, int]
    engine: dict[str, Any]
    checkpoints: int
    seconds: float
    timing: dict[str, Any]

    def write(self, path: Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def read(cls, path: Path) -> PredictionIndex:
        """StageError naming the file when it is missing, not JSON or lacks a field."""
        from ncip.study.stage import StageError, read_record

        names = [f.name for f in fields(cls)]
        record = read_record(path, "predict-probabilities", names)
        try:
            epochs = [int(e) for e in record["epochs"]]
            final = int(record["final_epoch"])
        except (TypeError, ValueError):
            raise StageError(
                f"{path}: epochs and final_epoch must be integers; re-run predict-probabilities"
            ) from None
        return cls(**{**{k: record[k] for k in names}, "epochs": epochs, "final_epoch": final})


def batched_outputs(
    model: torch.nn.Module,
    x: np.ndarray,
    batch_size: int = 256,
    features: bool = False,
    desc: str | None = None,
    source: str | None = None,
    config: EngineConfig | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Logits (and, with ``features``, penultimate features) of ``x`` in eval mode, as float32,
    through :class:`ncip.core.engine.Engine`. The model's train/eval mode and memory layout are
    restored afterwards (training calls this between epochs).

    With ``source`` (the checkpoint's name), non-finite logits raise ValueError naming it."""
    from ncip.core.engine import Engine, EngineConfig

    was_training = model.training
    layout = _layout(model)
    cfg = config or EngineConfig(batch_size=batch_size)
    engine = Engine(model, next(model.parameters()).device, cfg)
    logits, feats = [], []
    batches = engine.run(lambda _i: None, 1, x, features)
    if desc:
        batches = progress(batches, desc, total=-(-len(x) // engine.batch_size), unit="batch")
    for _i, _start, z, f in batches:
        logits.append(z)
        if f is not None:
            feats.append(f)
    model.to(memory_format=layout)
    model.train(was_training)
    z = np.concatenate(logits) if logits else np.zeros((0, 0), np.float32)
    if source is not None and not np.all(np.isfinite(z)):
        bad = int((~np.isfinite(z)).any(axis=1).sum())
        raise InputError(f"{source} produces NaN or infinite outputs on {bad} of {len(z)} inputs")
    if features:
        return z, (np.concatenate(feats) if feats else np.zeros((0, 0), np.float32))
    return z


def _layout(model: torch.nn.Module) -> torch.memory_format:
    import torch

    for p in model.parameters():
        if p.ndim == 4:
            if p.is_contiguous(memory_format=torch.channels_last) and not p.is_contiguous():
                return torch.channels_last
            break
    return torch.contiguous_format


def prediction_table(
    logits: np.ndarray, split: Split, subject: str, epoch: int, split_name: str
) -> pd.DataFrame:
    """One checkpoint's outputs on one split as a table (see the module docstring)."""
    c = logits.shape[1]
    df = pd.DataFrame(
        {
            "subject": subject,
            "epoch": np.int32(epoch),
            "split": split_name,
            "sample_id": split.ids.astype(str),
            "label": split.y.astype(np.int64),
            "pred": logits.argmax(axis=1).astype(np.int64),
        }
    )
    logit_cols = pd.DataFrame(logits.astype(np.float32), columns=[f"logit_{i}" for i in range(c)])
    return pd.concat([df, logit_cols], axis=1)


def predict_run(
    model: torch.nn.Module,
    load: Callable[[int], None],
    epochs: list[int],
    names: list[str],
    splits: Mapping[str, Split],
    feature_splits: Mapping[str, Split],
    out_dir: Path,
    subject: str,
    device: torch.device | str,
    config: EngineConfig | None = None,
) -> PredictionIndex:
    """Every checkpoint's logits on ``splits`` (and the final one's features on
    ``feature_splits``) into ``out_dir``, as the module docstring describes; returns the index.

    ``load(i)`` puts checkpoint i (of ``epochs``, ascending, final last) into ``model``."""
    from ncip.core.engine import Engine
    from ncip.core.io import write_parquet

    t0 = time.perf_counter()
    engine = Engine(model, device, config)
    from ncip.core.models import as_model_input

    order = list(splits)
    # each split as model input first (uint8 images / 255, as everywhere), then one array
    x = np.concatenate([as_model_input(splits[n].x).numpy() for n in order])
    bounds = np.cumsum([0] + [len(splits[n]) for n in order])
    files = {}
    bar = progress_bar(len(epochs), f"predict {subject}", unit="ckpt")
    for i, z, _ in engine.outputs(load, len(epochs), x):
        if not np.all(np.isfinite(z)):
            bad = int((~np.isfinite(z)).any(axis=1).sum())
            raise InputError(f"{names[i]} produces NaN or infinite outputs on {bad} inputs")
        parts = [
            prediction_table(z[bounds[j] : bounds[j + 1]], splits[n], subject, epochs[i], n)
            for j, n in enumerate(order)
        ]
        name = checkpoint_name(epochs[i], suffix=".parquet")
        write_parquet(out_dir / name, pd.concat(parts, ignore_index=True))
        files[str(epochs[i])] = name
        bar.update(1)
    bar.close()
    run_seconds = time.perf_counter() - t0
    feature_parts, feature_seconds = [], {}
    for n, s in feature_splits.items():
        t1 = time.perf_counter()
        z, f = batched_outputs(
            model, s.x, engine.batch_size, features=True, source=names[-1], config=engine.config
        )
        feature_seconds[n] = time.perf_counter() - t1
        table = prediction_table(z, s, subject, epochs[-1], n)
        feats = pd.DataFrame(f.astype(np.float32), columns=[f"feat_{k}" for k in range(f.shape[1])])
        feature_parts.append(pd.concat([table, feats], axis=1))
    if feature_parts:
        write_parquet(out_dir / FEATURES, pd.concat(feature_parts, ignore_index=True))
    index = PredictionIndex(
        subject=subject,
        epochs=list(map(int, epochs)),
        final_epoch=int(epochs[-1]),
        files=files,
        splits={n: len(splits[n]) for n in order},
        feature_splits={n: len(s) for n, s in feature_splits.items()},
        engine={
            "path": engine.path,
            "batch_size": engine.batch_size,
            "precision": engine.config.precision,
            "compile": engine.config.compile,
        },
        checkpoints=len(epochs),
        seconds=time.perf_counter() - t0,
        timing={"checkpoints_seconds": run_seconds, "feature_seconds": feature_seconds},
    )
    index.write(out_dir / INDEX)
    return index


@dataclass
class ProbStack:
    """Predictions of several checkpoints on one split, aligned by sample."""

    epochs: np.ndarray  # [K], ascending
    probs: np.ndarray  # [K, N, C] float64
    logits: np.ndarray  # [K, N, C] float32
    sample_id: np.ndarray  # [N]
    label: np.ndarray  # [N]

    def at(self, epochs: Sequence[int]) -> ProbStack:
        """The stack restricted to the given epochs (kept in ascending order)."""
        wanted = np.asarray(sorted(set(int(e) for e in epochs)))
        missing = set(wanted) - set(self.epochs.tolist())
        if missing:
            raise MissingEntryError(f"no predictions for epochs {sorted(missing)}")
        idx = np.searchsorted(self.epochs, wanted)
        return ProbStack(wanted, self.probs[idx], self.logits[idx], self.sample_id, self.label)


class Predictions:
    """The files of one predict-probabilities output folder (see the module docstring)."""

    def __init__(self, directory: Path | str):
        self.dir = Path(directory)
        self.index = PredictionIndex.read(self.dir / INDEX)

    @property
    def epochs(self) -> list[int]:
        return list(self.index.epochs)

    @property
    def final_epoch(self) -> int:
        return self.index.final_epoch

    @property
    def splits(self) -> list[str]:
        return list(self.index.splits)

    def _file(self, epoch: int) -> Path:
        name = self.index.files.get(str(int(epoch)))
        if name is None:
            raise MissingEntryError(
                f"{self.dir} has no predictions of epoch {epoch}; re-run predict-probabilities"
            )
        return self.dir / name

    def logits(
        self, split: str, epochs: Sequence[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(epochs, sample ids, labels, logits [E, N, C] float32) of one split, epochs ascending
        (all of them by default), rows in the split's stored order."""
        if split not in self.index.splits:
            raise MissingEntryError(f"no predictions for split {split!r}; have {self.splits}")
        wanted = sorted(set(map(int, epochs))) if epochs is not None else self.epochs
        ids = labels = None
        out = []
        for e in wanted:
            t = read_parquet(self._file(e), filters=[("split", "==", split)])
            cols = sorted(
                (c for c in t.columns if c.startswith("logit_")), key=lambda c: int(c[6:])
            )
            if ids is None:
                ids, labels = t["sample_id"].to_numpy(), t["label"].to_numpy(np.int64)
            elif not np.array_equal(ids, t["sample_id"].to_numpy()):
                t = t.set_index("sample_id").loc[ids].reset_index()
            out.append(t[cols].to_numpy(np.float32))
        return np.asarray(wanted), ids, labels, np.stack(out)

    def stack(self, split: str, epochs: Sequence[int] | None = None) -> ProbStack:
        e, ids, labels, z = self.logits(split, epochs)
        return ProbStack(e.astype(np.int64), softmax64(z), z, ids, labels)

    def final(self, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sample ids, final logits [N, C], final penultimate features [N, d]) of a split."""
        f = self.dir / FEATURES
        if not f.is_file():
            raise MissingFileError(f"{f} does not exist; re-run predict-probabilities")
        t = read_parquet(f, filters=[("split", "==", split)])
        if t.empty:
            raise MissingEntryError(f"{f} holds no features of split {split!r}")
        lc = sorted((c for c in t.columns if c.startswith("logit_")), key=lambda c: int(c[6:]))
        fc = sorted((c for c in t.columns if c.startswith("feat_")), key=lambda c: int(c[5:]))
        return t["sample_id"].to_numpy(), t[lc].to_numpy(np.float32), t[fc].to_numpy(np.float32)


def predict_folder(
    checkpoints: Path,
    data: Path,
    adversarial: Path | None,
    out_dir: Path,
    device: str = "auto",
    config: EngineConfig | None = None,
) -> PredictionIndex:
    """predict-probabilities for one training run: every checkpoint in ``checkpoints`` on the
    prepared test and val splits and, when ``adversarial`` holds them, on adv and val-adv; the
    final checkpoint's features on test, adv and train. Writes into ``out_dir``; returns the
    index."""
    from ncip.core.checkpoints import check_data_matches, list_checkpoints, load_model, load_weights
    from ncip.study.data import adversarial_sets, load_info, load_split

    infos = list_checkpoints(checkpoints)
    if not infos:
        raise InputError(f"{checkpoints} holds no checkpoints; run train-with-checkpoints")
    info = load_info(data)
    check_data_matches(info, infos[-1].meta, data, infos[-1].path)
    test, val = (load_split(Path(data) / f"{n}.npz", info) for n in ("test", "val"))
    splits = {"test": test, "val": val}
    features = {"test": test, "train": load_split(Path(data) / "train.npz", info)}
    for name, source in (("adv", "test"), ("val-adv", "val")):
        adv = adversarial_sets(adversarial, source, info)
        if adv:
            splits[name] = adv["adv"]
            if name == "adv":
                features["adv"] = adv["adv"]
    from ncip.core.engine import resolve_device

    dev = resolve_device(device)
    model = load_model(infos[-1].path, dev)
    return predict_run(
        model,
        lambda i: load_weights(model, infos[i].path),
        [c.epoch for c in infos],
        [str(c.path) for c in infos],
        splits,
        features,
        out_dir,
        infos[-1].meta.subject or "",
        dev,
        config,
    )
