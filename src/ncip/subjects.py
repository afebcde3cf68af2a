"""Subjects: dataset-model pairs named ``<dataset>-<model>[-<variant>]``, e.g. ``fmnist-lenet5``.

The optional variant selects a calibrated training recipe (paper Fig. 4a): ``mixup`` or ``ls``
(label smoothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from ncip.data import list_datasets
from ncip.models import list_models, model_kind

VARIANTS = ("mixup", "ls")
_TEXT_DATASETS = ("imdb", "agnews")


@dataclass(frozen=True)
class Subject:
    name: str
    dataset: str
    model: str
    variant: str | None = None


def parse_subject(name: str) -> Subject:
    """Split and validate a subject name; the error lists what is valid."""
    parts = name.split("-")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(
            f"subject {name!r} is not of the form <dataset>-<model>[-<variant>], "
            "e.g. fmnist-lenet5 or fmnist-lenet5-mixup"
        )
    dataset, model = parts[0], parts[1]
    variant = parts[2] if len(parts) == 3 else None
    if dataset not in list_datasets():
        raise ValueError(
            f"subject {name!r}: unknown dataset {dataset!r}; choose one of "
            f"{', '.join(list_datasets())}"
        )
    if model not in list_models():
        raise ValueError(
            f"subject {name!r}: unknown model {model!r}; choose one of {', '.join(list_models())}"
        )
    wanted = "text" if dataset in _TEXT_DATASETS else "image"
    if model_kind(model) != wanted:
        raise ValueError(
            f"subject {name!r}: {dataset} is a {wanted} dataset but {model} is a "
            f"{model_kind(model)} model; choose one of {', '.join(list_models(wanted))}"
        )
    if variant is not None and variant not in VARIANTS:
        raise ValueError(
            f"subject {name!r}: unknown training variant {variant!r}; choose one of "
            f"{', '.join(VARIANTS)} or none"
        )
    return Subject(name, dataset, model, variant)


def load_study(params_path) -> tuple[dict, list[str], list[int]]:
    """(the parameters, the validated subject names, the run indices) of a params.yaml."""
    from pathlib import Path

    import yaml

    path = Path(params_path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    cfg = yaml.safe_load(path.read_text()) or {}
    if not cfg.get("subjects"):
        raise ValueError(f"{path} lists no subjects; add e.g. `subjects: [fmnist-lenet5]`")
    runs = cfg.get("runs", [0])
    if not runs or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in runs):
        raise ValueError(f"runs in {path} must be a non-empty list of integers >= 0, got {runs}")
    return cfg, [parse_subject(s).name for s in cfg["subjects"]], list(runs)
