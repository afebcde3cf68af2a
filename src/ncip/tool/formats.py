"""Checkpoints written by any training tool: discovery (their training order is
:mod:`ncip.tool.order`, safe loading :mod:`ncip.tool.unpickle`, reading tensors
:mod:`ncip.tool.tensors`).

Formats, detected automatically:

- ``ncip``: safetensors with an ``ncip`` metadata record (this project's training, or
  :class:`ncip.tool.writer.CheckpointWriter`);
- ``safetensors``: a plain safetensors state dict;
- ``state_dict``: ``torch.save(model.state_dict())`` (``.pt``, ``.pth``, ``.bin``);
- a dict holding the state dict under ``state_dict`` (PyTorch Lightning ``.ckpt``, timm
  ``.pth.tar``), ``model`` (torchvision's reference scripts) or ``model_state_dict`` (PyTorch's
  own tutorial), else under the one key that holds a state dict (``model_state``, ``net``,
  DeepSpeed's ``module``; ``state_key`` names it where there are several); with ``ema``,
  ``state_dict_ema`` / ``model_ema`` (or the one EMA-named key) instead;
- ``hf``: a Hugging Face Trainer ``checkpoint-<step>/`` folder (``model.safetensors``, a sharded
  index, or ``pytorch_model.bin``), ordered by its ``trainer_state.json``.

Pickle-based files are read with ``torch.load(..., weights_only=True)`` and nothing else: only
tensors, plain containers, numbers and strings are unpickled, plus ``argparse.Namespace`` and
numpy scalars (timm and torchvision store their command-line ``args`` and metrics that way).
A file that needs any other object is refused with the name of what it holds and how to
convert it. Files that are not model weights (optimizer, scheduler, RNG state,
``training_args.bin``, logs) are skipped and listed.
"""

from __future__ import annotations

import glob as globlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncip.core.checkpoints import (
    CheckpointError,
    CheckpointMeta,
    check_metas,
    safetensors_header,
)
from ncip.tool.order import ORDERS, list_order, natural_key, training_order, warn_if_contradicted
from ncip.tool.tensors import HF_WEIGHT_FILES, read_tensors
from ncip.tool.unpickle import _classify_pickle, _is_ema_name, _is_state_dict, torch_load

# The names a Hugging Face Trainer (and similar tools) give to files that hold no model
# weights; they are skipped without being opened (training_args.bin needs arbitrary unpickling).
NOT_WEIGHTS = {
    "optimizer.pt": "optimizer state",
    "optimizer.bin": "optimizer state",
    "scheduler.pt": "scheduler state",
    "scaler.pt": "gradient-scaler state",
    "rng_state.pth": "RNG state",
    "training_args.bin": "Trainer arguments",
}
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt", ".tar")
DEEPSPEED_MODEL = "mp_rank_00_model_states.pt"  # beside zero_pp_rank_*_optim_states.pt
# Checkpoints of other frameworks: named, with the way to rank them (their predictions)
OTHER_FRAMEWORKS = {
    ".h5": "Keras",
    ".keras": "Keras",
    ".index": "TensorFlow",
    ".onnx": "ONNX",
    ".msgpack": "Flax",
    ".joblib": "scikit-learn",
}


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint: where its weights are, in which format, and its place in training."""

    path: Path  # a file, or a Hugging Face checkpoint folder
    fmt: str  # ncip | safetensors | state_dict | container | hf
    epoch: int | None = None
    step: int | None = None
    container_key: str | None = None  # the dict key holding the state dict
    has_ema: bool = False  # a dict that also holds EMA weights (not read without --ema)
    meta: CheckpointMeta | None = field(default=None, compare=False)  # ncip files only
    label: str | None = field(default=None, compare=False)  # where file names repeat

    @property
    def name(self) -> str:
        """The file name, or its path below the run's folder where names repeat (DeepSpeed's
        ``global_step<N>/mp_rank_00_model_states.pt``)."""
        return self.label or self.path.name

    def describe(self) -> dict[str, Any]:
        """A JSON-able record: file, format, epoch, step."""
        d = {"file": str(self.path), "format": self.fmt, "epoch": self.epoch, "step": self.step}
        return d | ({"key": self.container_key} if self.container_key else {})


@dataclass
class CheckpointSet:
    """The checkpoints of one training run in training order, and what was left out."""

    checkpoints: list[Checkpoint]
    order: str  # how the order was determined, in words
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    ema: bool = False

    def __len__(self) -> int:
        return len(self.checkpoints)

    def __getitem__(self, i):
        return self.checkpoints[i]

    def __iter__(self):
        return iter(self.checkpoints)

    @property
    def final(self) -> Checkpoint:
        return self.checkpoints[-1]


# ---------------------------------------------------------------------------------------------
# Discovery and order


def expand_source(source: str | Path | Sequence[str | Path]) -> tuple[list[Path], str]:
    """The candidate paths of a checkpoint source (folder, glob, file or list), and its label."""
    if isinstance(source, str | Path):
        s = str(source)
        if _is_pattern(s):
            paths = [Path(p) for p in sorted(globlib.glob(s))] or _literal_folder_glob(s)
            if not paths:
                raise CheckpointError(f"the pattern {s!r} matches no files")
            return paths, s
        p = Path(s)
        if not p.exists():
            raise CheckpointError(
                f"{p} does not exist; give a folder of checkpoints, a glob "
                "such as 'ckpt/epoch_*.pt', or a list of files"
            )
        if p.is_dir() and not _is_hf_folder(p):
            return sorted(p.iterdir()), str(p)
        inner = trainer_checkpoints(p)
        if inner:  # a Trainer output folder (save_model) holding its checkpoint-* history
            return inner, str(p)
        return [p], str(p)
    paths = [Path(p) for p in source]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise CheckpointError(f"checkpoint files do not exist: {', '.join(missing[:5])}")
    if any(p.is_dir() and not _is_hf_folder(p) for p in paths):  # e.g. a run resumed into
        # version_0/checkpoints and version_1/checkpoints: the folders' files, in one history
        paths = [
            f
            for p in paths
            for f in (sorted(p.iterdir()) if p.is_dir() and not _is_hf_folder(p) else [p])
        ]
        return paths, f"{len(source)} folders and files"
    return paths, f"{len(paths)} files"


def trainer_checkpoints(p: Path) -> list[Path]:
    """The ``checkpoint-*`` folders inside a Hugging Face folder that holds a model of its own:
    a Trainer's output folder, where ``trainer.save_model(out)`` wrote the deployed model
    beside the history; [] for any other path."""
    if not (p.is_dir() and _is_hf_folder(p)):
        return []
    return sorted(
        (f for f in p.glob("checkpoint-*") if _is_hf_folder(f)), key=lambda f: natural_key(f.name)
    )


def best_checkpoint(cs: CheckpointSet) -> str | None:
    """The checkpoint a Trainer run names as its best (``best_model_checkpoint`` in the last
    checkpoint's trainer_state.json), by folder name, where it is one of ``cs`` other than the
    last; None otherwise. With ``load_best_model_at_end`` that is the deployed model."""
    state = cs.final.path / "trainer_state.json" if cs.final.path.is_dir() else None
    if state is None or not state.is_file():
        return None
    try:
        best = json.loads(state.read_text()).get("best_model_checkpoint")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(best, str):
        return None
    name = Path(best).name
    names = [c.path.name for c in cs]
    return name if name in names[:-1] else None


def _literal_folder_glob(s: str) -> list[Path]:
    """A glob inside a folder whose own name holds ``[``, ``*`` or ``?`` (``runs/[v2]/*.pt``):
    the longest leading part that exists as a folder is taken literally."""
    parts = Path(s).parts
    for i in range(len(parts) - 1, 0, -1):
        head = Path(*parts[:i])
        if head.is_dir():
            rest = str(Path(*parts[i:]))
            return [
                Path(p) for p in sorted(globlib.glob(str(Path(globlib.escape(str(head)), rest))))
            ]
    return []


def _is_pattern(s: str) -> bool:
    return any(ch in s for ch in "*?[") and not Path(s).exists()


def _is_hf_folder(d: Path) -> bool:
    return d.is_dir() and any((d / f).is_file() for f in HF_WEIGHT_FILES)


def _hf_step(d: Path) -> tuple[int | None, float | None]:
    state = d / "trainer_state.json"
    if state.is_file():
        try:
            s = json.loads(state.read_text())
            return int(s["global_step"]), s.get("epoch")
        except (ValueError, KeyError, TypeError):
            pass
    return None, None


def inspect_file(
    p: Path, ema: bool = False, state_key: str | None = None
) -> tuple[Checkpoint | None, str]:
    """The checkpoint a path holds, or (None, why it is skipped)."""
    if p.name.startswith("."):
        return None, "hidden or temporary file"
    if p.is_dir():
        if not _is_hf_folder(p):
            inside = sorted(f.name for f in p.iterdir() if f.name.endswith(WEIGHT_SUFFIXES))
            model_file = DEEPSPEED_MODEL if DEEPSPEED_MODEL in inside else None
            if model_file or len(inside) == 1:  # DeepSpeed's global_step<N>/: one file each
                return None, (
                    f"a folder holding {model_file or inside[0]}; give the files inside with a "
                    f"quoted glob, e.g. '{p.parent}/*/{model_file or inside[0]}'"
                )
            if inside:  # a run's folder one level down (lightning_logs/version_0/checkpoints)
                return None, f"a folder of {len(inside)} checkpoint files: give {p} itself"
            return None, "folder without model weights"
        step, epoch = _hf_step(p)
        return Checkpoint(
            p,
            "hf",
            epoch=None if epoch is None else round(epoch),
            step=step,  # without trainer_state.json (Accelerate's save_state): the name orders
        ), ""
    if not p.is_file():  # a FIFO, socket or device: reading it could block or never end
        return None, "not a regular file (a FIFO, socket or device); not read"
    if p.name in NOT_WEIGHTS:
        return None, NOT_WEIGHTS[p.name]
    if not p.name.endswith(WEIGHT_SUFFIXES):
        other = OTHER_FRAMEWORKS.get(p.suffix.lower())
        if other is None and ".data-" in p.name:
            other = "TensorFlow"
        if other:
            return None, (
                f"a {other} file: ncip reads PyTorch checkpoints; rank {other} checkpoints by "
                "their predictions with ncip.rank_probs (docs/tool.md, 'From Python')"
            )
        return None, "not a checkpoint format"
    if p.suffix == ".safetensors":
        return _inspect_safetensors(p, ema)
    obj = torch_load(p)
    fmt, key, why = _classify_pickle(obj, ema, state_key)
    if fmt is None:
        return None, why
    epoch = step = None
    if isinstance(obj, Mapping):
        epoch = _int_or_none(obj.get("epoch"))
        # Lightning's global_step, DeepSpeed's global_steps, a plain loop's step
        step = _int_or_none(obj.get("global_step", obj.get("global_steps", obj.get("step"))))
    has_ema = (
        not ema
        and isinstance(obj, Mapping)
        and any(_is_ema_name(k) and _is_state_dict(obj[k]) for k in obj if isinstance(k, str))
    )
    return Checkpoint(p, fmt, epoch=epoch, step=step, container_key=key, has_ema=has_ema), ""


def _int_or_none(v: Any) -> int | None:
    try:
        return None if v is None or isinstance(v, bool) else int(v)
    except (TypeError, ValueError):
        return None


def _inspect_safetensors(p: Path, ema: bool) -> tuple[Checkpoint | None, str]:
    header = safetensors_header(p)
    if "ncip" in header:
        meta = CheckpointMeta.from_header(header, p)
        return Checkpoint(p, "ncip", epoch=meta.epoch, step=meta.step, meta=meta), ""
    return Checkpoint(
        p,
        "safetensors",
        epoch=_int_or_none(header.get("epoch")),
        step=_int_or_none(header.get("step")),
    ), ""


def discover(
    source: str | Path | Sequence[str | Path],
    ema: bool = False,
    order: str = "auto",
    state_key: str | None = None,
) -> CheckpointSet:
    """Find the checkpoints of one run in ``source`` and put them in training order.

    Files whose weights equal another checkpoint's (a ``best``/``final``/``last`` copy) are
    skipped and listed as copies. The order is then the step recorded in the files where every
    file records one, else the epoch, else the number in each file name that varies and orders
    them one-to-one (the epoch in ``model-e07-acc0.93.pt``; natural order). Files given as a
    list, or with ``order="given"``, keep the order given (a warning says where it contradicts
    what the files record). ``state_key`` names the key of dict-shaped files that holds the
    weights (see :func:`ncip.tool.unpickle._classify_pickle`).
    """
    if order not in ORDERS:
        raise CheckpointError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if ema and state_key is not None:
        raise CheckpointError(
            "--ema and --state-key both choose the weights; give one (--state-key names the "
            "EMA weights' key as well)"
        )
    listed = not isinstance(source, str | Path)
    if order == "given" and not listed and (Path(source).is_dir() or _is_pattern(str(source))):
        raise CheckpointError(
            f"--order given keeps the order files are listed in, and {source} is a "
            f"{'folder' if Path(source).is_dir() else 'glob'}, which has none (its files are "
            "sorted by name); drop --order given, or list the files in training order"
        )
    paths, label = expand_source(source)
    found: list[Checkpoint] = []
    skipped: list[tuple[str, str]] = []
    for p in paths:
        ck, why = inspect_file(p, ema, state_key)
        if ck is None:
            skipped.append((p.name, why))
        else:
            found.append(ck)
    if not found:
        deeper = _deeper_checkpoints(source)
        raise CheckpointError(f"{label} holds no model checkpoints: {_why_none(skipped)}{deeper}")
    plain = [c for c in found if c.container_key is None]
    if ema and plain:  # EMA weights live under a dict key of a pickled checkpoint; nowhere else
        raise CheckpointError(
            f"--ema: {plain[0].name} ({plain[0].fmt}) holds one set of weights, no EMA "
            "copy beside them; drop --ema (if these are the EMA weights, they are ranked "
            "as they are)"
        )
    if state_key is not None and plain:
        raise CheckpointError(
            f"--state-key {state_key}: {plain[0].name} ({plain[0].fmt}) is one set of weights, "
            "not a dict of them; drop --state-key"
        )
    formats = {c.fmt for c in found}
    if len(formats & {"ncip", "hf"}) == 1 and len(formats) > 1:
        raise CheckpointError(
            f"{label} mixes checkpoint formats ({', '.join(sorted(formats))}); "
            "keep one run's checkpoints in one folder"
        )
    found = _label_repeated_names(found)
    found, dropped = _drop_copies(found)
    skipped += dropped
    if order == "given":
        warn_if_contradicted(found)
        return CheckpointSet(found, "the order given", skipped, ema)
    if listed:
        return CheckpointSet(*list_order(found, label), skipped, ema)
    ordered, how = training_order(found, label)
    return CheckpointSet(ordered, how, skipped, ema)


def _label_repeated_names(found: list[Checkpoint]) -> list[Checkpoint]:
    """Where two checkpoints share a file name (one per folder), name each by its path below
    the folders' common parent."""
    names = [c.path.name for c in found]
    if len(set(names)) == len(names):
        return found
    import os
    from dataclasses import replace

    root = Path(os.path.commonpath([c.path.parent.resolve() for c in found]))
    return [replace(c, label=str(c.path.resolve().relative_to(root))) for c in found]


def _deeper_checkpoints(source) -> str:
    """Where a folder holds checkpoints further down (Lightning's default_root_dir or
    lightning_logs/: <root>/lightning_logs/version_N/checkpoints/*.ckpt), the glob that gives
    them all as one history; else ''."""
    if not isinstance(source, str | Path) or not Path(source).is_dir():
        return ""
    root = Path(source)
    hits = sorted(
        {
            f.parent
            for f in root.glob("**/*")
            if f.is_file()
            and f.name.endswith(WEIGHT_SUFFIXES)
            and f.name not in NOT_WEIGHTS
            and f.parent != root  # the folder's own files were read (and skipped) already
        }
    )[:20]
    if not hits:
        return ""
    rel = [h.relative_to(root).parts for h in hits]
    depth = len(rel[0])
    parts = [
        "*" if len({r[i] if len(r) > i else "" for r in rel}) > 1 else rel[0][i]
        for i in range(depth)
    ]
    pattern = "/".join(parts)
    rel = ["/".join(r) for r in rel]
    return (
        f"; checkpoints are further down, in {', '.join(rel[:3])}{' ...' if len(rel) > 3 else ''}: "
        f"give them as one history with a quoted glob, '{root / pattern}/*'"
    )


def _why_none(skipped: list[tuple[str, str]]) -> str:
    """The skipped files grouped by reason (20 files with the same reason make one line)."""
    if not skipped:
        return "it is empty"
    by_why: dict[str, list[str]] = {}
    for name, why in skipped:
        by_why.setdefault(why, []).append(name)
    parts = []
    for why, names in list(by_why.items())[:6]:
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{shown} ({why})")
    more = f"; {len(by_why) - 6} other reasons" if len(by_why) > 6 else ""
    return "; ".join(parts) + more


def _content_key(c: Checkpoint) -> str | None:
    """A digest of a checkpoint file's bytes (None for Hugging Face folders)."""
    import hashlib

    if c.path.is_dir():
        return None
    h = hashlib.sha256()
    with open(c.path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _same_weights(a: Checkpoint, b: Checkpoint) -> bool:
    import torch

    wa, wb = read_tensors(a), read_tensors(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def _original_first(group: list[Checkpoint]) -> list[Checkpoint]:
    """The checkpoint to keep first: one whose name carries a number (epoch_7.pt before
    best.pt), then a Lightning ``last.ckpt`` last, then by name."""
    return sorted(
        group,
        key=lambda c: (
            re.search(r"\d", c.path.stem) is None,
            re.fullmatch(r"last(-v\d+)?\.ckpt", c.name) is not None,
            natural_key(c.name),
        ),
    )


def _drop_copies(found: list[Checkpoint]) -> tuple[list[Checkpoint], list[tuple[str, str]]]:
    """Skip checkpoints whose weights equal another's: byte-identical files, and files that
    record the same epoch or step with equal tensors (a best/final/last copy)."""
    by_size: dict[int, list[Checkpoint]] = {}
    for c in found:
        if not c.path.is_dir():
            by_size.setdefault(c.path.stat().st_size, []).append(c)
    groups: dict[str, list[Checkpoint]] = {}
    for same in by_size.values():
        if len(same) > 1:
            for c in same:
                groups.setdefault(_content_key(c), []).append(c)
    for attr in ("step", "epoch"):
        seen: dict[int, list[Checkpoint]] = {}
        for c in found:
            if getattr(c, attr) is not None:
                seen.setdefault(getattr(c, attr), []).append(c)
        for v, same in seen.items():
            if len(same) > 1:
                keep = _original_first(same)[0]
                for c in same:
                    if c is not keep and _same_weights(keep, c):
                        groups.setdefault(f"{attr}{v}", [keep]).append(c)
    dropped: dict[Path, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        keep, *copies = _original_first(list(dict.fromkeys(group)))
        for c in copies:
            dropped.setdefault(c.path, keep.name)
    kept = [c for c in found if c.path not in dropped]
    listed = [(p.name, f"a copy of {orig} (same weights)") for p, orig in dropped.items()]
    return kept, listed


RUN_META = ("run_id", "factory", "hf_architecture")  # one training run records one of each


def check_consistent(cs: CheckpointSet) -> None:
    """Refuse a folder whose ncip checkpoints disagree on what model and data they belong to
    (e.g. a checkpoint of another subject dropped in, which would become the 'final' one), or
    on the training run and model class they record (two writers' runs in one folder)."""
    items = [(c.path, c.meta) for c in cs if c.meta is not None]
    check_metas(items)
    _check_architectures(cs)
    for key in RUN_META:
        values = {p: getattr(m, key) for p, m in items if getattr(m, key) is not None}
        if len(set(values.values())) < 2:
            continue
        groups: dict[Any, list[str]] = {}
        for p, v in values.items():
            groups.setdefault(v, []).append(Path(p).name)
        said = _groups_said(groups, f"record {key}", repr)
        raise CheckpointError(
            f"{cs.final.path.parent}: the folder mixes checkpoints of different training runs "
            f"({said}); keep one run's checkpoints in it"
        )


def _check_architectures(cs: CheckpointSet) -> None:
    """Refuse Hugging Face checkpoint folders whose config.json names different models (a BERT
    folder among GPT-2 ones): the model is built from the final one's config, and loading the
    others would blame good files. A config that cannot be read is left to the loader."""
    groups: dict[str, list[str]] = {}
    for c in cs:
        cfg = c.path / "config.json" if c.fmt == "hf" else None
        try:
            d = json.loads(cfg.read_text()) if cfg is not None and cfg.is_file() else None
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict):
            continue
        archs = d.get("architectures")
        name = archs[0] if isinstance(archs, list) and archs else d.get("model_type")
        if isinstance(name, str):
            groups.setdefault(name, []).append(c.name)
    if len(groups) < 2:
        return
    said = _groups_said(dict(sorted(groups.items(), key=lambda kv: -len(kv[1]))), "name", str)
    raise CheckpointError(
        f"{cs.final.path.parent}: the checkpoints' config.json files name different models "
        f"({said}); keep one model's checkpoints in the folder"
    )


def _groups_said(groups: Mapping[Any, list[str]], verb: str, show: Callable[[Any], str]) -> str:
    """Which checkpoints say what: ``3 <verb> <value> (first ... last); 1 <verb> <value> (x)``."""
    return "; ".join(
        f"{len(n)} {verb} {show(v)} ({n[0]}{' ... ' + n[-1] if len(n) > 1 else ''})"
        for v, n in groups.items()
    )
