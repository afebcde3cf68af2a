"""The paper's subjects at full scale, as named sets of params overrides (``ncip preset``).

Each preset is the study's params.yaml with a few keys changed: the dataset's two subjects
(paper Table 1), its epochs (Table 1), five runs (paper Section 4), and a training recipe. The
paper gives epochs only; the optimizer, learning rate, weight decay and schedule below are
this project's choices (the usual recipes for these models) and are marked as such. GPU
presets train in bf16 with channels-last convolutions; predictions stay fp32, because bf16
changes NCIP's rankings (README "Performance").

A preset is applied as DVC overrides, ``dvc exp run -S key=value ...`` (what ``ncip preset
NAME`` prints), so it never rewrites params.yaml and every preset run is a DVC experiment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ncip.core.errors import InputError
from ncip.study import paper

PAPER_RUNS = 5  # "we repeat each experiment five times"

_SGD = {  # not in the paper: the common CIFAR-style recipe
    "train.optimizer": "sgd",
    "train.lr": 0.1,
    "train.momentum": 0.9,
    "train.weight_decay": 5e-4,
    "train.schedule": "cosine",
    "train.batch_size": 128,
}
_ADAM = {"train.optimizer": "adam", "train.lr": 1e-3, "train.schedule": "none"}  # this study's
_GPU = {"train.precision": "bf16", "train.channels_last": True}


@dataclass(frozen=True)
class Preset:
    name: str  # a dataset of the paper
    recipe: dict[str, Any]  # not in the paper (see the module docstring)
    gpu: bool = True

    @property
    def subjects(self) -> tuple[str, ...]:
        """The dataset's two subjects (paper Table 1)."""
        return tuple(f"{d}-{m}" for d, m in paper.COLUMNS if d == self.name)

    @property
    def epochs(self) -> int:
        return paper.EPOCHS[self.name]  # paper Table 1

    @property
    def paper_accuracy(self) -> tuple[float, ...]:
        return tuple(paper.ACCURACY[(d, m)] for d, m in paper.COLUMNS if d == self.name)

    def overrides(self, runs: int = PAPER_RUNS) -> dict[str, Any]:
        """Dotted params keys and values, in the order they are printed."""
        return {
            "subjects": list(self.subjects),
            "runs": list(range(runs)),
            "train.epochs": self.epochs,
            **self.recipe,
            **(_GPU if self.gpu else {}),
        }


_RECIPES: dict[str, tuple[dict[str, Any], bool]] = {  # dataset -> (recipe, GPU preset)
    "mnist": (_ADAM, False),
    "fmnist": (_ADAM, False),
    "cifar10": (_SGD, True),
    "cifar100": (_SGD, True),
    "tinyimagenet": ({**_SGD, "train.batch_size": 256}, True),
    "imdb": (_ADAM, True),
    "agnews": (_ADAM, True),
}
PRESETS: dict[str, Preset] = {
    name: Preset(name, *_RECIPES[name]) for name in dict.fromkeys(d for d, _ in paper.COLUMNS)
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return "[" + ",".join(_value(x) for x in v) + "]"
    return str(v)


def set_args(name: str, runs: int = PAPER_RUNS) -> list[str]:
    """``-S key=value`` arguments for `dvc exp run` (Hydra override syntax, DVC's own)."""
    out = []
    for k, v in get_preset(name).overrides(runs).items():
        out += ["-S", f"{k}={_value(v)}"]
    return out
