"""Subjects: dataset-model pairs named ``<dataset>-<model>[-<variant>]``, e.g. ``fmnist-lenet5``.

The optional variant selects a calibrated training recipe (paper Fig. 4a): ``mixup`` or ``ls``
(label smoothing), or a training length: ``e<N>`` trains for N epochs instead of
``train.epochs`` (``fmnist-lenet5-e200``: the paper's 200 epochs beside the default 60, one
subject's two lengths compared run by run; a table reaching the terminal phase later than the
images). A subject listed under ``external`` in params.yaml is a model trained
elsewhere (:mod:`ncip.study.external`); its name is free.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ncip.core.errors import InputError, MissingFileError
from ncip.core.models import list_models, model_kind
from ncip.study.data import dataset_kind, list_datasets

# Training variants (paper Fig. 4a) and their default strength: mixup's alpha, label smoothing
VARIANT_STRENGTH = {"mixup": 0.2, "ls": 0.1}
VARIANTS = tuple(VARIANT_STRENGTH)


@dataclass(frozen=True)
class Subject:
    name: str
    dataset: str
    model: str
    variant: str | None = None
    external: bool = False

    @property
    def epochs(self) -> int | None:
        """The epochs an ``e<N>`` variant trains for (None: ``train.epochs``)."""
        return epoch_variant(self.variant)


def epoch_variant(variant: str | None) -> int | None:
    if variant and variant[0] == "e" and variant[1:].isdigit() and int(variant[1:]) >= 2:
        return int(variant[1:])
    return None


def parse_subject(name: str, external: dict | None = None) -> Subject:
    """Split and validate a subject name; the error lists what is valid. Names in
    ``external`` (params.yaml's group) are models trained elsewhere."""
    if external and name in external:
        return Subject(name, name, "external", None, True)
    parts = name.split("-")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(
            f"subject {name!r} is not of the form <dataset>-<model>[-<variant>], "
            "e.g. fmnist-lenet5 or fmnist-lenet5-mixup"
        )
    dataset, model = parts[0], parts[1]
    variant = parts[2] if len(parts) == 3 else None
    if dataset not in list_datasets():
        raise InputError(
            f"subject {name!r}: unknown dataset {dataset!r}; choose one of "
            f"{', '.join(list_datasets())}"
        )
    if model not in list_models():
        raise InputError(
            f"subject {name!r}: unknown model {model!r}; choose one of {', '.join(list_models())}"
        )
    wanted = dataset_kind(dataset)
    if model_kind(model) != wanted:
        raise InputError(
            f"subject {name!r}: {dataset} is a {wanted} dataset but {model} is a "
            f"{model_kind(model)} model; choose one of {', '.join(list_models(wanted))}"
        )
    if variant is not None and variant not in VARIANTS and epoch_variant(variant) is None:
        raise InputError(
            f"subject {name!r}: unknown training variant {variant!r}; choose one of "
            f"{', '.join(VARIANTS)}, e<N> (N epochs, N >= 2) or none"
        )
    return Subject(name, dataset, model, variant)


def external_specs(params_path: Path | str) -> dict:
    """The external subjects described in a params.yaml (empty if it has none or is absent)."""
    from pathlib import Path

    import yaml

    from ncip.study.external import parse_external

    path = Path(params_path)
    if not path.is_file():
        return {}
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise InputError(f"{path} is not valid YAML: {str(e).splitlines()[0]}") from None
    return parse_external(cfg.get("external"), str(path))


def load_study(params_path: Path | str) -> tuple[dict, list[str], list[int]]:
    """(the parameters, the validated subject names, the run indices) of a params.yaml."""
    from pathlib import Path

    import yaml

    path = Path(params_path)
    if not path.exists():
        raise MissingFileError(f"{path} does not exist")
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise InputError(f"{path} is not valid YAML: {str(e).splitlines()[0]}") from None
    subjects = cfg.get("subjects")
    if not subjects:
        raise InputError(f"{path} lists no subjects; add e.g. `subjects: [fmnist-lenet5]`")
    if not isinstance(subjects, list) or not all(isinstance(s, str) for s in subjects):
        raise InputError(
            f"subjects in {path} must be a list of names, e.g. `subjects: "
            f"[fmnist-lenet5]`, got {subjects!r}"
        )
    runs = cfg.get("runs", [0])
    if not runs or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in runs):
        raise InputError(f"runs in {path} must be a non-empty list of integers >= 0, got {runs}")
    from ncip.study.external import parse_external

    external = parse_external(cfg.get("external"), str(path))
    return cfg, [parse_subject(s, external).name for s in cfg["subjects"]], list(runs)


def check_params(params_path: Path | str) -> tuple[list[str], list[int]]:
    """Validate a study's params.yaml with the stages' own checks, before DVC runs anything
    (DVC's own parser reports a non-list ``subjects`` as "'Value' object is not iterable").
    Returns (subjects, runs); raises ValueError naming the key and the fix."""
    import dataclasses

    from ncip.core.collapse import ALPHA, K, candidate_pool
    from ncip.study.attacks import attack_config, check_attack_names
    from ncip.study.retrain import RetrainConfig
    from ncip.study.scores.registry import baseline_config
    from ncip.study.training import TrainConfig

    cfg, subjects, runs = load_study(params_path)

    def group(name: str) -> dict:
        g = cfg.get(name) or {}
        if not isinstance(g, dict):
            raise InputError(f"{params_path}: `{name}` must be a group of keys, got {g!r}")
        return g

    def ints(key: str, value) -> list[int]:
        try:
            out = [int(v) for v in str(value).split(",") if v.strip()]
        except ValueError:
            raise InputError(
                f"{params_path}: {key} must be comma-separated integers, got {value!r}"
            ) from None
        if not out or min(out) <= 0:
            raise InputError(f"{params_path}: {key} must list positive integers, got {value!r}")
        return out

    def checked(key: str, fn) -> None:
        try:
            fn()
        except (ValueError, TypeError, KeyError) as e:
            msg = e.args[0] if e.args else type(e).__name__
            raise InputError(f"{params_path}: {key}: {msg}") from None

    k = cfg.get("k", K)
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise InputError(f"{params_path}: k must be a positive integer, got {k!r}")
    checked("alpha", lambda: candidate_pool(1, float(cfg.get("alpha", ALPHA))))
    t = group("train")
    keys = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("arch", "seed")]
    checked(
        "train", lambda: TrainConfig(arch="lenet5", **{k: t[k] for k in keys if k in t}).validate()
    )
    a = group("attack")
    checked(
        "attack.attacks",
        lambda: check_attack_names(
            [n.strip() for n in str(a.get("attacks", "")).split(",") if n.strip()]
        ),
    )
    checked(
        "attack",
        lambda: attack_config(a).validate(),
    )
    checked("baselines", lambda: baseline_config(group("baselines")))
    ints("evaluate.budgets", group("evaluate").get("budgets", "100"))
    ints("analysis.weak_steps", group("analysis").get("weak_steps", "10"))
    r = group("retrain")
    rkeys = [f.name for f in dataclasses.fields(RetrainConfig)]
    checked("retrain", lambda: RetrainConfig(**{k: r[k] for k in rkeys if k in r}).validate())
    retrain_runs = r.get("runs", runs)
    if not isinstance(retrain_runs, list):  # [] runs no retraining (RQ3), e.g. `make text`
        raise InputError(f"{params_path}: retrain.runs must be a list of runs, e.g. [0]")
    extra = [x for x in retrain_runs if x not in runs]
    if extra:
        raise InputError(f"{params_path}: retrain.runs {extra} are not among runs {runs}")
    return subjects, runs
