"""The prioritization-method registry and the context every method scores from.

Adding a baseline is a one-file change: write ``ncip/study/scores/<name>.py`` with a function
``(ctx, split) -> scores`` (or a class with ``prepare(ctx)`` and ``score(ctx, split)``)
decorated with ``@register_method("<name>")``, and import the module in
``ncip/study/scores/__init__.py``. A score array has one value per input of the split; larger means
tested earlier. A method that is itself random may return ``{repeat: scores}`` for several seeds;
the evaluation averages metrics over repeats.

Methods never see the labels of the split they rank: :class:`ScoringContext` hands them the
inputs with labels replaced by -1. Methods that learn from labelled data (TDPR, EffiMAP) use
``ctx.labelled_for(split)``, the held-out validation split of the same distribution.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ncip.core.errors import InputError, MissingEntryError
from ncip.study.data import Split

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


# What a method may need beyond the final model's outputs on the split it ranks.
NEEDS = {
    "train": "the training split's inputs",
    "labelled": "a labelled validation split of the same distribution",
    "checkpoints": "the training checkpoints",
    "images": "image inputs (it transforms pixels)",
}
# score-baselines runs the first; score-ncip computes the other two from the stored predictions
FAMILIES = ("baseline", "ncip", "checkpoint")


@dataclass(frozen=True)
class MethodInfo:
    """A method's facts, registered once with it; tables, options and the report derive from it.

    ``options`` maps each option to its default (the only place it is written); ``paper`` is the
    method's row name in the paper's tables (None for a method the paper does not have).
    """

    name: str
    display: str
    paper: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    family: str = "baseline"
    summary: str = ""
    factory: Callable[[], Method] | None = field(default=None, repr=False, compare=False)


_METHODS: dict[str, MethodInfo] = {}
_MODULE: dict[str, str] = {}  # method name -> the module that registered it
_BUILTIN_LOADED = False


def _load_builtin() -> None:
    """Import every module of :mod:`ncip.study.scores` once (each registers its methods) the
    first time methods are listed or looked up, then order the registry by module file name
    (the built-in methods first), so the order does not depend on what was imported before."""
    global _BUILTIN_LOADED
    if _BUILTIN_LOADED:
        return
    _BUILTIN_LOADED = True
    import importlib
    import pkgutil

    import ncip.study.scores as package

    modules = [f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]
    for name in modules:
        importlib.import_module(name)
    rank = {m: i for i, m in enumerate(modules)}
    order = sorted(_METHODS, key=lambda n: rank.get(_MODULE.get(n, ""), len(rank)))  # stable
    items = [(n, _METHODS[n]) for n in order]
    _METHODS.clear()
    _METHODS.update(items)


def _summary(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def _register(info: MethodInfo, module: str) -> None:
    if info.name in _METHODS:
        raise InputError(f"method {info.name!r} is registered twice")
    bad = [n for n in info.needs if n not in NEEDS]
    if bad or info.family not in FAMILIES:
        raise InputError(
            f"method {info.name!r}: needs must be among {sorted(NEEDS)} and family "
            f"one of {FAMILIES}, got needs={list(info.needs)} family={info.family!r}"
        )
    _METHODS[info.name] = info
    _MODULE[info.name] = module


def register_method(
    name: str,
    *,
    display: str | None = None,
    paper: str | None = None,
    options: dict[str, Any] | None = None,
    needs: tuple[str, ...] = (),
) -> Callable[[Callable], Callable]:
    """Register a scoring function ``(ctx, split) -> scores`` or a Method class, with its facts:
    ``display`` (table name; default the name), ``paper`` (row name in the paper's tables),
    ``options`` (name -> default), ``needs`` (keys of :data:`NEEDS`)."""

    def wrap(obj):
        if inspect.isclass(obj):
            factory = lambda: _named(obj(), name)  # noqa: E731
        else:
            factory = lambda: _FunctionMethod(name, obj)  # noqa: E731
        _register(
            MethodInfo(
                name,
                display or name,
                paper,
                dict(options or {}),
                tuple(needs),
                "baseline",
                _summary(obj),
                factory,
            ),
            obj.__module__,
        )
        return obj

    return wrap


def describe_method(
    name: str,
    *,
    display: str,
    paper: str | None = None,
    module: str,
    summary: str = "",
    needs: tuple[str, ...] = ("checkpoints",),
    family: str = "ncip",
) -> None:
    """Register the facts of a score that score-ncip computes from the stored predictions
    (``family`` "ncip": NCIP and its ablations; "checkpoint": the checkpoint scores of
    :mod:`ncip.core.dynamics`); ``module`` is the describing module's ``__name__`` (it orders
    :func:`list_methods`)."""
    _register(MethodInfo(name, display, paper, {}, tuple(needs), family, summary), module)


def _named(m, name: str):
    m.name = name
    return m


def list_methods(family: str | None = "baseline") -> list[str]:
    """Registered method names in registration order (``family=None``: every family)."""
    _load_builtin()
    return [n for n, i in _METHODS.items() if family is None or i.family == family]


def method_info(name: str) -> MethodInfo:
    _load_builtin()
    if name not in _METHODS:
        raise InputError(f"unknown method {name!r}; choose from {', '.join(list_methods(None))}")
    return _METHODS[name]


def get_method(name: str) -> Method:
    info = method_info(name)
    if info.factory is None:
        raise InputError(
            f"{name!r} is computed by score-ncip, not run as a baseline; choose "
            f"from {', '.join(list_methods())}"
        )
    return info.factory()


def resolve_options(
    given: dict[str, Any] | None, methods: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Every option of ``methods`` (default: all baselines), its default overridden by
    ``given[method][option]``; unknown methods and options are refused with what exists."""
    given = dict(given or {})
    out = {}
    for name in methods if methods is not None else list_methods():
        out[name] = dict(method_info(name).options)
    for name, opts in given.items():
        info = method_info(name)
        if not isinstance(opts, dict):
            raise InputError(
                f"options of {name!r} must be a mapping of option: value, got {opts!r}"
            )
        for key, value in opts.items():
            if key not in info.options:
                have = ", ".join(info.options) or "none"
                raise InputError(f"{name!r} has no option {key!r}; its options: {have}")
            default = info.options[key]
            numeric = isinstance(default, int | float) and not isinstance(default, bool)
            if numeric and value is not None:
                try:
                    value = type(default)(value)
                except (TypeError, ValueError):
                    raise InputError(
                        f"option {key!r} of {name!r} must be a number like its default "
                        f"{default!r}, got {value!r}"
                    ) from None
            out.setdefault(name, dict(info.options))[key] = value
    return out


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
    # predict-probabilities' output (ncip.study.predict.Predictions): the final model's logits and
    # features and every checkpoint's logits are read from it instead of running the models
    predictions: Any = None
    _cache: dict[Any, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.eval_splits = {k: hide_labels(v) for k, v in self.eval_splits.items()}

    def option(self, method: str, key: str) -> Any:
        """A method's option: as given in ``options``, else its registered default."""
        defaults = method_info(method).options
        if key not in defaults:
            raise MissingEntryError(f"{method!r} has no registered option {key!r}")
        return self.options.get(method, {}).get(key, defaults[key])

    @property
    def images(self) -> bool:
        """The inputs are images ([N, C, H, W]), not token ids."""
        return next(iter(self.eval_splits.values())).x.ndim == 4

    def split(self, name: str) -> Split:
        if name not in self.eval_splits:
            have = sorted(self.eval_splits)
            raise MissingEntryError(f"no evaluation split {name!r}; have {have}")
        return self.eval_splits[name]

    def labelled_for(self, split: str) -> Split:
        """The labelled split from the same distribution as ``split`` (never ``split`` itself)."""
        key = split if split in self.labelled else split.split("-")[0]
        if key not in self.labelled:
            raise InputError(
                f"no labelled data for split {split!r}: this method learns from a labelled "
                f"validation split of the same distribution (have {sorted(self.labelled)})"
            )
        return self.labelled[key]

    def checkpoints(self) -> list:
        from ncip.core.checkpoints import list_checkpoints

        if "checkpoints" not in self._cache:
            self._cache["checkpoints"] = list_checkpoints(self.checkpoint_dir)
        return self._cache["checkpoints"]

    def final_model(self) -> Any:
        from ncip.core.checkpoints import load_model

        if "final_model" not in self._cache:
            self._cache["final_model"] = load_model(self.checkpoints()[-1].path, self.device)
        return self._cache["final_model"]

    # which stored split holds the outputs of a cache key (final model; every checkpoint)
    _STORED_FINAL = {"eval:test": "test", "eval:adv": "adv", "train": "train"}
    _STORED_TRAJECTORY = {
        "eval:test": "test",
        "eval:adv": "adv",
        "labelled:test": "val",
        "labelled:adv": "val-adv",
    }

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
            raise MissingEntryError(
                f"the stored predictions lack {len(missing)} inputs of {x_key} (e.g. "
                f"{missing[0]!r}); re-run predict-probabilities"
            )
        return np.array([pos[v] for v in want])

    def outputs(self, x_key: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Final-model (logits, penultimate features) of an input array, cached by key; read
        from the stored predictions when they hold it."""
        from ncip.study.predict import batched_outputs

        key = ("outputs", x_key)
        split = self._STORED_FINAL.get(x_key)
        if (
            key not in self._cache
            and self.predictions is not None
            and (split in self.predictions.index.feature_splits)
        ):
            ids, z, f = self.predictions.final(split)
            order = self._aligned(ids, x_key)
            self._cache[key] = (z[order], f[order])
        if key not in self._cache:
            self._cache[key] = batched_outputs(
                self.final_model(),
                x,
                self.batch_size,
                features=True,
                source=str(self.checkpoints()[-1].path),
            )
        return self._cache[key]

    def checkpoint_logits(self, x_key: str, x: np.ndarray) -> list[np.ndarray]:
        """Logits of every per-epoch checkpoint (ascending epochs) on an input array, cached."""
        from ncip.core.checkpoints import load_weights
        from ncip.core.logs import progress
        from ncip.study.predict import batched_outputs

        key = ("trajectory", x_key)
        split = self._STORED_TRAJECTORY.get(x_key)
        if (
            key not in self._cache
            and self.predictions is not None
            and (split in self.predictions.splits)
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
    def timed(self, method: str, label: str) -> Iterator[None]:
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


def baseline_config(group: dict | None) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The ``baselines`` group of params.yaml -> (methods to run, every option of each).

    ``methods`` is a comma-separated string or a list; any other key is a method's name mapping
    to the options it overrides (e.g. ``nns: {k: 5}``); the rest keep their registered defaults.
    """
    group = dict(group or {})
    listed = group.pop("methods", ",".join(list_methods()))
    names = [
        m.strip()
        for m in (listed.split(",") if isinstance(listed, str) else listed)
        if str(m).strip()
    ]
    for m in names:
        get_method(m)  # unknown or non-baseline names fail here, with the choices
    return names, resolve_options(group, names)
