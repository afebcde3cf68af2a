"""Adversarial test sets with torchattacks 3.5.1, configured as the paper's Table 2.

FGSM, PGD and BIM are L-inf attacks with eps = 8/255 (PGD and BIM: step 2/255, 10 steps; PGD
starts from a random point in the eps-ball); CW is the L2 attack with c = 1, kappa = 0, 50 steps
and learning rate 0.01. All untargeted. Inputs and outputs stay in [0, 1]: the models normalise
internally, so torchattacks' ``set_normalization_used`` is never needed.

Each adversarial input keeps its source's true label; its id is ``<source id>@<attack>`` (the
source id itself is stored beside it), so that the combined set of all attacks has unique ids.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ncip.core.errors import InputError
from ncip.core.logs import progress
from ncip.core.metrics import run_seed
from ncip.core.models import as_model_input
from ncip.study.data import Split

ATTACKS = ("fgsm", "pgd", "bim", "cw")


def parse_number(value: str | float) -> float:
    """Accept ``8/255`` as well as ``0.0313``: budgets read best as fractions of a pixel step."""
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(Fraction(str(value).strip()))
    except (ValueError, ZeroDivisionError) as e:
        raise InputError(f"{value!r} is not a number or fraction like 8/255") from e


@dataclass
class AttackConfig:
    eps: float = 8 / 255  # L-inf budget of FGSM, PGD and BIM
    step: float = 2 / 255  # PGD and BIM step size (torchattacks' alpha)
    steps: int = 10  # PGD and BIM iterations
    random_start: bool = True  # PGD only
    cw_c: float = 1.0
    cw_kappa: float = 0.0
    cw_steps: int = 50
    cw_lr: float = 0.01

    def validate(self) -> None:
        if not 0 < self.eps <= 1:
            raise InputError(
                f"attack eps must lie in (0, 1] (inputs are in [0, 1]), got {self.eps}"
            )
        if not 0 < self.step <= self.eps:
            raise InputError(f"attack step must lie in (0, eps], got {self.step}")
        if self.steps < 1 or self.cw_steps < 1:
            raise InputError("attack steps and cw_steps must be at least 1")
        if self.cw_c <= 0 or self.cw_lr <= 0:
            raise InputError("cw_c and cw_lr must be positive")
        if self.cw_kappa < 0:
            raise InputError(f"cw_kappa must be >= 0, got {self.cw_kappa}")


def attack_config(group: dict) -> AttackConfig:
    """An :class:`AttackConfig` from params.yaml's ``attack`` group: each key it names, parsed
    as its field's type ("8/255" for floats); the dataclass's defaults for the others."""
    kw = {}
    for f in dataclasses.fields(AttackConfig):
        if f.name in group:
            kind = type(f.default)
            v = group[f.name]
            kw[f.name] = parse_number(v) if kind is float else kind(v)
    return AttackConfig(**kw)


def check_attack_names(names: list[str]) -> list[str]:
    """Validate a list of attack names; the error lists the valid ones."""
    if not names:
        raise InputError(f"no attacks given; choose from {', '.join(ATTACKS)}")
    bad = [n for n in names if n not in ATTACKS]
    if bad:
        raise InputError(f"unknown attack(s) {bad}; choose from {', '.join(ATTACKS)}")
    if len(set(names)) != len(names):
        raise InputError(f"attack list {names} names an attack twice")
    return names


def make_attack(name: str, model: torch.nn.Module, cfg: AttackConfig) -> Any:
    import torchattacks

    if name == "fgsm":
        return torchattacks.FGSM(model, eps=cfg.eps)
    if name == "pgd":
        return torchattacks.PGD(
            model, eps=cfg.eps, alpha=cfg.step, steps=cfg.steps, random_start=cfg.random_start
        )
    if name == "bim":
        return torchattacks.BIM(model, eps=cfg.eps, alpha=cfg.step, steps=cfg.steps)
    if name == "cw":
        return torchattacks.CW(
            model, c=cfg.cw_c, kappa=cfg.cw_kappa, steps=cfg.cw_steps, lr=cfg.cw_lr
        )
    raise InputError(f"unknown attack {name!r}; choose from {', '.join(ATTACKS)}")


def attack_split(
    model: torch.nn.Module,
    split: Split,
    name: str,
    cfg: AttackConfig,
    seed: int = 0,
    batch_size: int = 500,
    desc: str | None = None,
) -> Split:
    """Adversarial versions of every input of ``split`` (float32 in [0, 1], same labels)."""
    cfg.validate()
    device = next(model.parameters()).device
    model.eval()
    attack = make_attack(name, model, cfg)
    # Random starts (PGD) draw from the global generator: seed it per attack for reproducibility.
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    out = np.empty(split.x.shape, dtype=np.float32)
    starts = range(0, len(split), batch_size)
    # Convolutions in channels-last layout run about twice as fast on a CPU (measured: CW
    # 13.7 s -> 6.3 s on 2,000 Fashion-MNIST images); the images differ only by rounding.
    fast = split.x.ndim == 4 and any(isinstance(m, torch.nn.Conv2d) for m in model.modules())
    layout = torch.channels_last if fast else torch.contiguous_format
    model.to(memory_format=layout)
    try:
        for i in progress(starts, desc or f"{name}", total=len(starts), unit="batch"):
            xb = as_model_input(split.x[i : i + batch_size]).to(device)
            xb = xb.contiguous(memory_format=layout)
            yb = torch.from_numpy(split.y[i : i + batch_size]).to(device)
            adv = attack(xb, yb).detach().clamp_(0.0, 1.0)
            out[i : i + len(xb)] = adv.cpu().numpy()
    finally:
        model.to(memory_format=torch.contiguous_format)
    ids = np.array([f"{s}@{name}" for s in split.ids.astype(str)])
    return Split(out, split.y.copy(), ids)


def combine(sets: dict[str, Split]) -> Split:
    """The combined adversarial set (all attacks together, as the paper evaluates)."""
    parts = list(sets.values())
    return Split(
        np.concatenate([p.x for p in parts]),
        np.concatenate([p.y for p in parts]),
        np.concatenate([p.ids for p in parts]),
    )


def source_ids(ids: np.ndarray) -> np.ndarray:
    return np.array([i.rsplit("@", 1)[0] for i in ids.astype(str)])


def subsample(sources: dict[str, Split], name: str, size: int, seed: int) -> dict[str, Split]:
    """Keep a stratified subset of ``size`` inputs of ``sources[name]`` (0 or more: all)."""
    from ncip.study.data import stratified_split

    if name not in sources or not 0 < size < len(sources[name]):
        return sources
    split = sources[name]
    _, keep = stratified_split(split.y, size / len(split), np.random.default_rng(seed))
    return {**sources, name: split.subset(keep)}


def attack_record(
    model: torch.nn.Module, src: Split, adv: Split, clean_pred: np.ndarray, seconds: float
) -> dict:
    """Accuracy before and after, success rate, perturbation size and seconds of one attack."""
    from ncip.study.predict import batched_outputs

    adv_pred = batched_outputs(model, adv.x).argmax(1)
    delta = adv.x.reshape(len(adv), -1) - src.x.reshape(len(src), -1) / 255.0
    correct = clean_pred == src.y
    return {
        "clean_accuracy": float(correct.mean()),
        "adversarial_accuracy": float((adv_pred == src.y).mean()),
        # success: a correctly classified input whose adversarial version is not
        "success_rate": float((adv_pred[correct] != src.y[correct]).mean()),
        "linf_max": float(np.abs(delta).max()),
        "l2_mean": float(np.linalg.norm(delta, axis=1).mean()),
        "seconds": seconds,
    }


def generate_sets(
    model: torch.nn.Module,
    sources: dict[str, Split],
    names: list[str],
    cfg: AttackConfig,
    seed: int,
    batch_size: int,
    folder: Path,
) -> dict:
    """Attack every source split with every attack; write ``<prefix>-<attack>.npz`` and the
    combined ``<prefix>.npz`` (prefix ``adv`` for test, ``<split>-adv`` otherwise) into
    ``folder``. Returns attack -> split -> :func:`attack_record`."""
    from ncip.study.data import save_split
    from ncip.study.predict import batched_outputs

    report: dict = {}
    for split_name, src in sources.items():
        prefix = "adv" if split_name == "test" else f"{split_name}-adv"
        clean_pred = batched_outputs(model, src.x).argmax(1)
        made = {}
        for i, name in enumerate(names):
            t0 = time.perf_counter()
            adv = attack_split(
                model,
                src,
                name,
                cfg,
                seed=seed + 7919 * i,
                batch_size=batch_size,
                desc=f"{name} {split_name}",
            )
            seconds = time.perf_counter() - t0
            report.setdefault(name, {})[split_name] = attack_record(
                model, src, adv, clean_pred, seconds
            )
            save_split(Path(folder) / f"{prefix}-{name}.npz", adv)
            made[name] = adv
        save_split(Path(folder) / f"{prefix}.npz", combine(made))
    return report


def attack_run(
    checkpoints: Path,
    data: Path,
    splits: list[str],
    val_size: int,
    names: list[str],
    cfg: AttackConfig,
    seed: int,
    run: int,
    batch_size: int,
    device: str,
    folder: Path,
) -> dict:
    """generate-adversarial for one training run: attack the final checkpoint on the prepared
    ``splits`` (val subsampled to ``val_size``, which only trains TDPR's and EffiMAP's
    predictors) into ``folder``; returns the record. Text models are not attacked (the paper
    attacks image models only): the record says so and ``folder`` stays empty."""
    from ncip.core.checkpoints import check_data_matches, list_checkpoints, load_model
    from ncip.core.engine import resolve_device
    from ncip.core.logs import log
    from ncip.study.data import load_info, load_split

    info = load_info(data)
    sources = {name: load_split(Path(data) / f"{name}.npz", info) for name in splits}
    sources = subsample(sources, "val", val_size, seed)
    final = list_checkpoints(checkpoints)[-1]
    check_data_matches(info, final.meta, data, final.path)
    if info.kind != "image":
        log.info("skipping adversarial generation: %s is not an image dataset", data)
        return {"epoch": final.epoch, "skipped": "not an image dataset"}
    model = load_model(final.path, resolve_device(device))
    made = generate_sets(model, sources, names, cfg, run_seed(seed, run), batch_size, folder)
    return {"epoch": final.epoch, "config": cfg.__dict__, "attacks": made}
