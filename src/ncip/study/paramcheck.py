"""The shape and types of a params.yaml, checked by `ncip check-params` before the values.

:func:`ncip.study.subjects.check_params` checks the values through the config dataclasses
(training, attacks, retraining, baselines); this checks first what would otherwise crash it or
pass it and fail later in `dvc repro`: a file that is not a mapping, lists that are not lists
of unique entries, words where numbers belong, an integer given as a float, a device that does
not exist, negative sizes. Only the CLI imports it, so no stage of the study depends on it.
"""

from __future__ import annotations

import re
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
SEED_LIMIT = 2**32 // 1000  # every run seed (seed * 1000 + run) fits in 32 bits
SUBJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a folder name under data/, models/
SYSTEM_FOLDERS = (
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var",
    "/home",
)

RULES: dict[tuple[str | None, str], tuple[Callable[[Any], bool], str]] = {
    (None, "seed"): (
        lambda v: _int(v) and 0 <= v < SEED_LIMIT,
        f"an integer from 0 to {SEED_LIMIT - 1} (run seeds, seed * 1000 + run, are 32-bit)",
    ),
    ("data", "val_fraction"): (
        lambda v: _number(v) and 0 < v < 1,
        "a number between 0 and 1 (the share of training data held out)",
    ),
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


def _pool(cfg: dict, where: str) -> None:
    """k and alpha must leave NCIP two checkpoints to compare after train.epochs epochs."""
    from ncip.core.collapse import checked_pool

    train = cfg.get("train")
    epochs = train.get("epochs") if isinstance(train, dict) else None
    k, alpha = cfg.get("k"), cfg.get("alpha")
    if _int(epochs) and epochs >= 1 and _int(k) and k >= 2 and _number(alpha):
        try:
            checked_pool(epochs, k, alpha)
        except InputError as e:
            raise InputError(f"{where}: with train.epochs {epochs}, {e}") from None


# The language-model study's keys (params.yaml `lm`, read by the lm-* stages): key -> (test,
# what it must be); a group maps to its own keys.
LM_RULES: dict[str, Any] = {
    "models": (
        lambda v: isinstance(v, list) and all(isinstance(m, str) for m in v),
        "a list of language-model names ([] for none)",
    ),
    "runs": (
        lambda v: isinstance(v, list) and v and all(_int(r) and r >= 0 for r in v),
        "a non-empty list of run indices >= 0",
    ),
    "k": (lambda v: _int(v) and v >= 2, "an integer of at least 2 (NCIP compares checkpoints)"),
    "alpha": (lambda v: _number(v) and 0 < v <= 1, "a number in (0, 1]"),
    "prompts": (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    "pretrain": {
        "steps": (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
        "batch_size": (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
        "lr": (lambda v: _number(v) and v > 0, "a positive number"),
    },
    "finetune": {
        "epochs": (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
        "batch_size": (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
        "lr": (lambda v: _number(v) and v > 0, "a positive number"),
        "paragraphs": (lambda v: _int(v) and v >= 1, "an integer of at least 1"),
    },
}


def _lm(cfg: dict, where: str) -> None:
    """Every key of ``lm`` against :data:`LM_RULES` (unknown keys refused), each model name
    known to the study (:func:`ncip.study.lm.models.get_lm`), runs unique, and K and alpha
    leaving two checkpoints of finetune.epochs to compare (the rule lm-score selects by)."""
    lm = cfg.get("lm")
    if lm is None:
        return
    if not isinstance(lm, dict):
        raise InputError(f"{where}: lm must be a mapping (models: [], runs: [0], ...)")

    def walk(part: dict, rules: dict, prefix: str) -> None:
        for key, value in part.items():
            name = f"{prefix}.{key}"
            if key not in rules:
                raise InputError(
                    f"{where}: {name} is not a key of the language-model study; known: "
                    f"{', '.join(rules)}"
                )
            rule = rules[key]
            if isinstance(rule, dict):
                if not isinstance(value, dict):
                    raise InputError(f"{where}: {name} must be a mapping of {', '.join(rule)}")
                walk(value, rule, name)
            elif not rule[0](value):
                raise InputError(f"{where}: {name} must be {rule[1]}, got {value!r}")

    walk(lm, LM_RULES, "lm")
    from ncip.study.lm.models import get_lm

    for name in lm.get("models") or []:
        try:
            get_lm(name)
        except InputError as e:
            raise InputError(f"{where}: lm.models: {e}") from None
    _unique_list(lm, "runs", lambda x: _int(x) and x >= 0, "run indices >= 0", f"{where}: lm")
    epochs = (lm.get("finetune") or {}).get("epochs")
    if _int(epochs) and "k" in lm and "alpha" in lm:
        from ncip.core.collapse import checked_pool

        try:
            checked_pool(epochs, lm["k"], lm["alpha"])
        except InputError as e:
            raise InputError(f"{where}: lm, with finetune.epochs {epochs}: {e}") from None


def _external_folders(cfg: dict, where: str) -> None:
    """An external subject's folders must exist, and its data folder (which `ncip
    import-external` writes into) must not be a system folder."""
    external = cfg.get("external")
    if not isinstance(external, dict):
        return
    for name, spec in external.items():
        if not isinstance(spec, dict):
            continue  # check_params says so
        for key in ("checkpoints", "data"):
            value = spec.get(key)
            if not isinstance(value, str):
                continue
            folder = Path(value).expanduser()
            if str(folder.resolve()) in SYSTEM_FOLDERS or folder.resolve() == Path.home():
                raise InputError(
                    f"{where}: external.{name}.{key} is {value}, a system folder; "
                    "`ncip import-external` writes into the data folder: give the subject's own"
                )
            if not folder.is_dir():
                raise InputError(
                    f"{where}: external.{name}.{key} {value} is not a folder (docs/study.md, "
                    '"Study a model trained elsewhere")'
                )


class _UniqueKeys(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (PyYAML keeps the last)."""


def _no_duplicates(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise InputError(
                f"line {key_node.start_mark.line + 1}: {key!r} is given twice (line "
                f"{seen[key] + 1} too); YAML would keep the last silently: keep one"
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def check_shape(path: Path | str) -> None:
    """Refuse, naming the key, a params file of the wrong shape or types (see the module
    docstring); the values are checked next by ``subjects.check_params``."""
    where = str(path)
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{where} is a folder; give the params file (params.yaml) itself")
    if not p.is_file():
        return  # check_params says so
    try:
        cfg = yaml.load(p.read_text(), Loader=_UniqueKeys)  # noqa: S506  (a SafeLoader)
    except yaml.YAMLError:
        return  # check_params says so, with the line
    except InputError as e:
        raise InputError(f"{where}, {e}") from None
    if not isinstance(cfg, dict):
        raise InputError(
            f"{where} holds a {type(cfg).__name__}, not a mapping of parameters (k: 30, ...)"
        )
    _unique_list(cfg, "runs", lambda x: _int(x) and x >= 0, "run indices >= 0", where)
    _unique_list(
        cfg,
        "subjects",
        lambda x: isinstance(x, str) and SUBJECT_NAME.fullmatch(x) and ".." not in x,
        "subject names (letters, digits, '-', '_', '.'; they name folders)",
        where,
    )
    _tsne_runs(cfg, where)
    _pool(cfg, where)
    _external_folders(cfg, where)
    _lm(cfg, where)
    for (group, key), (test, what) in RULES.items():
        part = cfg if group is None else cfg.get(group)
        if not isinstance(part, dict) or key not in part:
            continue
        if not test(part[key]):
            name = key if group is None else f"{group}.{key}"
            raise InputError(f"{where}: {name} must be {what}, got {part[key]!r}")
