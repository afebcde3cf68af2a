"""The prioritization-method registry and the context every method scores from.

Adding a baseline is a one-file change: write ``ncip/scores/<name>.py`` with a function
``(ctx, split) -> scores`` (or a class with ``prepare(ctx)`` and ``score(ctx, split)``)
decorated with ``@register_method("<name>")``, and import the module in
``ncip/scores/__init__.py``. A score array has one value per input of the split; larger means
tested earlier. A method that is itself random may return ``{repeat: scores}`` for several seeds;
the evaluation averages metrics over repeats.

Methods never see the labels of the split they rank: :class:`ScoringContext` hands them the
inputs with labels replaced by -1. Methods that learn from labelled data (TDPR, EffiMAP) use
``ctx.labelled_for(split)``, the held-out validation split of the same distribution.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ncip.data import Split

Scores = np.ndarray | dict[int, np.ndarray]


class Method(Protocol):
    name: str

    def prepare(self, ctx: ScoringContext) -> None: ...

    def score(self, ctx: ScoringContext, split: str) -> Scores: ...


class _FunctionMethod:
    def __init__(self, name: str, fn: Callable[[ScoringContext, str], Scores]):
        self.name = name
        self.fn = fn
        self.__doc__ = fn.__doc__

    def prepare(self, ctx: ScoringContext) -> None:
        return None

    def score(self, ctx: ScoringContext, split: str) -> Scores:
        return self.fn(ctx, split)


_METHODS: dict[str, Callable[[], Method]] = {}


def register_method(name: str):
    """Register a scoring function ``(ctx, split) -> scores`` or a Method class."""

    def wrap(obj):
        if name in _METHODS:
            raise ValueError(f"method {name!r} is registered twice")
        if inspect.isclass(obj):
            _METHODS[name] = lambda: _named(obj(), name)
        else:
            _METHODS[name] = lambda: _FunctionMethod(name, obj)
        return obj

    return wrap


def _named(m, name: str):
    m.name = name
    return m


def list_methods() -> list[str]:
    return sorted(_METHODS)


def get_method(name: str) -> Method:
    if name not in _METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(list_methods())}")
    return _METHODS[name]()


def hide_labels(split: Split) -> Split:
    return Split(split.x, np.full(len(split), -1, dtype=np.int64), split.ids)


@dataclass
class ScoringContext:
    """What a method may use: the final model, checkpoints, training and labelled data."""

    subject: str
    seed: int
    checkpoint_dir: Path
    eval_splits: dict[str, Split]  # the test sets to rank, labels hidden
    train: Split | None = None
    labelled: dict[str, Split] = field(default_factory=dict)  # eval split -> labelled twin
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    device: str = "cpu"
    batch_size: int = 1024
    costs: dict[str, dict[str, float]] = field(default_factory=dict)
    # predict-probabilities' output (ncip.predict.Predictions): the final model's logits and
    # features and every checkpoint's logits are read from it instead of running the models
    predictions: Any = None
    _cache: dict[Any, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.eval_splits = {k: hide_labels(v) for k, v in self.eval_splits.items()}

    def option(self, method: str, key: str, default: Any) -> Any:
        return self.options.get(method, {}).get(key, default)

    def split(self, name: str) -> Split:
        if name not in self.eval_splits:
            raise KeyError(f"no evaluation split {name!r}; have {sorted(self.eval_splits)}")
        return self.eval_splits[name]

    def labelled_for(self, split: str) -> Split:
        """The labelled split from the same distribution as ``split`` (never ``split`` itself)."""
        key = split if split in self.labelled else split.split("-")[0]
        if key not in self.labelled:
            raise ValueError(
                f"no labelled data for split {split!r}: this method learns from a labelled "
                f"validation split of the same distribution (have {sorted(self.labelled)})"
            )
        return self.labelled[key]

    def checkpoints(self):
        from ncip.checkpoints import list_checkpoints

        if "checkpoints" not in self._cache:
            self._cache["checkpoints"] = list_checkpoints(self.checkpoint_dir)
        return self._cache["checkpoints"]

    def final_model(self):
        from ncip.checkpoints import load_model

        if "final_model" not in self._cache:
            self._cache["final_model"] = load_model(self.checkpoints()[-1].path, self.device)
        return self._cache["final_model"]

    # which stored split holds the outputs of a cache key (final model; every checkpoint)
    _STORED_FINAL = {"eval:test": "test", "eval:adv": "adv", "train": "train"}
    _STORED_TRAJECTORY = {"eval:test": "test", "eval:adv": "adv", "labelled:test": "val",
                          "labelled:adv": "val-adv"}  # fmt: skip

    def _ids_of(self, x_key: str) -> np.ndarray:
        if x_key == "train":
            return self.train.ids
        kind, _, name = x_key.partition(":")
        return self.split(name).ids if kind == "eval" else self.labelled_for(name).ids

    def _aligned(self, stored_ids: np.ndarray, x_key: str) -> np.ndarray:
        want = np.asarray(self._ids_of(x_key)).astype(str)
        have = np.asarray(stored_ids).astype(str)
        if np.array_equal(have, want):
            return np.arange(len(want))
        pos = {v: i for i, v in enumerate(have)}
        missing = [v for v in want if v not in pos]
        if missing:
            raise KeyError(f"the stored predictions lack {len(missing)} inputs of {x_key} (e.g. "
                           f"{missing[0]!r}); re-run predict-probabilities")
        return np.array([pos[v] for v in want])

    def outputs(self, x_key: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Final-model (logits, penultimate features) of an input array, cached by key; read
        from the stored predictions when they hold it."""
        from ncip.predict import batched_outputs

        key = ("outputs", x_key)
        split = self._STORED_FINAL.get(x_key)
        if key not in self._cache and self.predictions is not None and (
            split in self.predictions.index.get("feature_splits", {})
        ):
            ids, z, f = self.predictions.final(split)
            order = self._aligned(ids, x_key)
            self._cache[key] = (z[order], f[order])
        if key not in self._cache:
            self._cache[key] = batched_outputs(
                self.final_model(), x, self.batch_size, features=True,
                source=str(self.checkpoints()[-1].path),
            )
        return self._cache[key]

    def checkpoint_logits(self, x_key: str, x: np.ndarray) -> list[np.ndarray]:
        """Logits of every per-epoch checkpoint (ascending epochs) on an input array, cached."""
        from ncip.checkpoints import load_weights
        from ncip.logs import progress
        from ncip.predict import batched_outputs

        key = ("trajectory", x_key)
        split = self._STORED_TRAJECTORY.get(x_key)
        if key not in self._cache and self.predictions is not None and (
            split in self.predictions.splits
        ):
            _, ids, _, z = self.predictions.logits(split)
            order = self._aligned(ids, x_key)
            self._cache[key] = [z[e][order] for e in range(len(z))]
        if key not in self._cache:
            model = self.final_model()
            final_state = {k: v.clone() for k, v in model.state_dict().items()}
            out = []
            for c in progress(self.checkpoints(), f"trajectory {x_key}", unit="ckpt"):
                load_weights(model, c.path)
                out.append(batched_outputs(model, x, self.batch_size))
            model.load_state_dict(final_state)
            self._cache[key] = out
        return self._cache[key]

    @contextmanager
    def timed(self, method: str, label: str):
        """Record the seconds of a block under ``costs[method][label]`` (e.g. a ranker's fit)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.costs.setdefault(method, {})[label] = time.perf_counter() - t0

    def final_logits(self, split: str) -> np.ndarray:
        return self.outputs(f"eval:{split}", self.split(split).x)[0]

    def final_features(self, split: str) -> np.ndarray:
        return self.outputs(f"eval:{split}", self.split(split).x)[1]
