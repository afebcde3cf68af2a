"""The shape and types of a params.yaml, checked by `ncip check-params` before the values.

:func:`ncip.study.subjects.check_params` checks the values through the config dataclasses
(training, attacks, retraining, baselines); this checks first what would otherwise crash it or
pass it and fail later in `dvc repro`: a file that is not a mapping, lists that are not lists
of unique entries, words where numbers belong, an integer given as a float, a device that does
not exist, negative sizes. Only the CLI imports it, so no stage of the study depends on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ncip.core.errors import InputError


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _device(v: Any) -> bool:
    return isinstance(v, str) and (v in ("auto", "cpu") or v.split(":")[0] == "cuda")


# (group or None for the top level, key) -> (test, what it must be)
RULES: dict[tuple[str | None, str], tuple[Callable[[Any], bool], str]] = {
    (None, "seed"): (_int, "an integer"),
    # with one checkpoint NCIP's TVD is 0 and it reduces to the margin
    (None, "k"): (
        lambda v: _int(v) and v >= 2,
        "an integer of at least 2 (NCIP compares checkpoints)",
    ),
    ("train", "epochs"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("train", "batch_size"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("train", "lr"): (lambda v: _number(v) and v > 0, "a positive number"),
    ("train", "momentum"): (_number, "a number"),
    ("train", "weight_decay"): (lambda v: _number(v) and v >= 0, "a number >= 0"),
    ("train", "mixup_alpha"): (lambda v: _number(v) and v >= 0, "a number >= 0"),
    ("train", "label_smoothing"): (_number, "a number"),
    ("train", "nproc"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("train", "device"): (_device, "auto, cpu or cuda[:N]"),
    ("attack", "val_size"): (lambda v: _int(v) and v >= 0, "an integer >= 0 (0: all)"),
    ("attack", "batch_size"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("attack", "device"): (_device, "auto, cpu or cuda[:N]"),
    ("predict", "batch_size"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("predict", "device"): (_device, "auto, cpu or cuda[:N]"),
    ("analysis", "tsne_points"): (lambda v: _int(v) and v >= 2, "an integer of at least 2"),
    ("retrain", "epochs"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("retrain", "selected_epochs"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("retrain", "seeds"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    ("retrain", "batch_size"): (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
}


def _unique_list(cfg: dict, key: str, item: Callable[[Any], bool], what: str, where: str):
    v = cfg.get(key)
    if v is None:
        return
    if not isinstance(v, list) or not v or not all(item(x) for x in v):
        raise InputError(f"{where}: {key} must be a non-empty list of {what}, got {v!r}")
    dup = sorted({str(x) for x in v if v.count(x) > 1})
    if dup:
        raise InputError(f"{where}: {key} lists {', '.join(dup)} more than once")


def _tsne_runs(cfg: dict, where: str) -> None:
    """analysis.tsne_runs: run numbers, each among ``runs`` (else no run would draw Fig. 1)."""
    from ncip.study.curves import tsne_runs

    analysis = cfg.get("analysis")
    if not isinstance(analysis, dict) or "tsne_runs" not in analysis:
        return
    try:
        tsne = tsne_runs(analysis["tsne_runs"])
    except InputError as e:
        raise InputError(f"{where}: {e}") from None
    runs = cfg.get("runs")
    if isinstance(runs, list) and any(r not in runs for r in tsne):
        raise InputError(f"{where}: analysis.tsne_runs {tsne} are not all among runs {runs}")


def check_shape(path: Path | str) -> None:
    """Refuse, naming the key, a params file of the wrong shape or types (see the module
    docstring); the values are checked next by ``subjects.check_params``."""
    where = str(path)
    p = Path(path)
    if not p.is_file():
        return  # check_params says so
    try:
        cfg = yaml.safe_load(p.read_text())
    except yaml.YAMLError:
        return  # check_params says so, with the line
    if not isinstance(cfg, dict):
        raise InputError(
            f"{where} holds a {type(cfg).__name__}, not a mapping of parameters (k: 30, ...)"
        )
    _unique_list(cfg, "runs", lambda x: _int(x) and x >= 0, "run indices >= 0", where)
    _unique_list(cfg, "subjects", lambda x: isinstance(x, str), "subject names", where)
    _tsne_runs(cfg, where)
    for (group, key), (test, what) in RULES.items():
        part = cfg if group is None else cfg.get(group)
        if not isinstance(part, dict) or key not in part:
            continue
        if not test(part[key]):
            name = key if group is None else f"{group}.{key}"
            raise InputError(f"{where}: {name} must be {what}, got {part[key]!r}")
