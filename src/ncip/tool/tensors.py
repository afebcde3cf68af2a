"""Reading the tensors of a checkpoint of any format :mod:`ncip.tool.formats` discovers
(safetensors, pickle-based state dicts, Hugging Face folders, sharded or not), and matching a
file's tensor names to a model's."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncip.core.checkpoints import CheckpointError, read_safetensors, safetensors_header
from ncip.core.io import safetensors_open
from ncip.tool.unpickle import _classify_pickle, _is_state_dict, torch_load

if TYPE_CHECKING:  # annotations only: formats (discovery) reads tensors through this module
    from ncip.tool.formats import Checkpoint

# The weight files of a Hugging Face checkpoint folder (one file, or a sharded index).
HF_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)

# Prefixes that wrappers add to every key: DDP/DataParallel, torch.compile, a LightningModule
# holding the network as an attribute. Tried (also combined) when the keys do not match.
KNOWN_PREFIXES = ("module.", "_orig_mod.", "model.", "net.", "network.")

# ---------------------------------------------------------------------------------------------
# Reading weights


def _hf_weight_map(d: Path) -> dict[str, Path] | Path:
    """Key -> shard file for a sharded HF folder, or the single weights file."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (d / index).is_file():
            try:
                wm = json.loads((d / index).read_text())["weight_map"]
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(
                    f"{d / index} is not a readable shard index ({type(e).__name__}: {e}); "
                    "restore it from the training run"
                ) from None
            return {k: _shard(d, index, v) for k, v in wm.items()}
    for single in ("model.safetensors", "pytorch_model.bin"):
        if (d / single).is_file():
            return d / single
    raise CheckpointError(f"{d} holds no model weights ({', '.join(HF_WEIGHT_FILES)})")


def _shard(d: Path, index: str, name: Any) -> Path:
    """A shard the index names: a regular file inside the checkpoint's own folder (a shard
    elsewhere would be another run's weights; a FIFO would block the read)."""
    p = d / str(name)
    if not p.resolve().is_relative_to(d.resolve()):
        raise CheckpointError(
            f"{d / index} names the shard {name!r} outside {d}; a checkpoint's shards are in "
            "its own folder: restore the index from the training run"
        )
    if not p.is_file():
        what = "does not exist" if not p.exists() else "is not a regular file"
        raise CheckpointError(
            f"the shard {p} that {index} names {what}; restore the folder from the training run"
        )
    return p


def _file_keys(path: Path) -> list[str]:
    if path.suffix == ".safetensors":
        safetensors_header(path)  # a clear error for unreadable files
        with safetensors_open(path) as f:
            return list(f.keys())
    return list(_pickled_state(path, None).keys())


def _pickled_state(path: Path, key: str | None) -> Mapping:
    obj = torch_load(path)
    if key is not None:
        return obj[key]
    if _is_state_dict(obj):
        return obj
    fmt, k, why = _classify_pickle(obj, False)
    if fmt is None:
        raise CheckpointError(f"{path}: {why}")
    return obj[k]


def tensor_keys(ck: Checkpoint) -> list[str]:
    """The names of the tensors a checkpoint holds, in the file's order."""
    if ck.fmt == "hf":
        wm = _hf_weight_map(ck.path)
        return list(wm) if isinstance(wm, dict) else _file_keys(wm)
    if ck.fmt in ("ncip", "safetensors"):
        return _file_keys(ck.path)
    return list(_pickled_state(ck.path, ck.container_key).keys())


def tensor_shapes(ck: Checkpoint) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in a checkpoint, from headers where the format allows."""
    files: list[Path]
    if ck.fmt == "hf":
        wm = _hf_weight_map(ck.path)
        files = sorted(set(wm.values())) if isinstance(wm, dict) else [wm]
    else:
        files = [ck.path]
    out: dict[str, tuple[int, ...]] = {}
    for f in files:
        if f.suffix == ".safetensors":
            safetensors_header(f)
            with safetensors_open(f) as h:
                out.update({k: tuple(h.get_slice(k).get_shape()) for k in h.keys()})  # noqa: SIM118  (safe_open is no dict)
        else:
            key = ck.container_key if f == ck.path else None
            out.update({k: tuple(v.shape) for k, v in _pickled_state(f, key).items()})
    return out


def read_tensors(ck: Checkpoint, keys: Iterable[str] | None = None) -> dict:
    """Tensors of a checkpoint by name (all of them with ``keys`` None), as stored (CPU)."""
    wanted = None if keys is None else list(keys)
    if ck.fmt == "hf":
        wm = _hf_weight_map(ck.path)
        if isinstance(wm, Path):
            return _read_file(wm, wanted, None)
        out = {}
        shards: dict[Path, list[str]] = {}
        for k in wanted if wanted is not None else list(wm):
            if k not in wm:
                raise CheckpointError(f"{ck.path} has no tensor {k!r}")
            shards.setdefault(wm[k], []).append(k)
        for shard, ks in shards.items():
            out.update(_read_file(shard, ks, None))
        return out
    return _read_file(ck.path, wanted, ck.container_key)


def _read_file(path: Path, keys: list[str] | None, container_key: str | None) -> dict:
    if path.suffix == ".safetensors":
        return read_safetensors(path, keys)
    state = _pickled_state(path, container_key)
    if keys is None:
        return dict(state)
    missing = [k for k in keys if k not in state]
    if missing:
        raise CheckpointError(f"{path} has no tensor {missing[0]!r}")
    return {k: state[k] for k in keys}


# ---------------------------------------------------------------------------------------------
# Matching a file's keys to a model's


def find_prefix(
    file_keys: Iterable[str], model_keys: Iterable[str], given: str | None = None
) -> str:
    """The prefix to strip from a file's keys so that they name the model's tensors.

    ``given`` (``--prefix``) is used as it is. Otherwise the empty prefix, then the wrappers'
    prefixes (``module.``, ``_orig_mod.``, a Lightning attribute like ``model.``) and any
    prefix under which every model key is found. Raises CheckpointError when none fits.
    """
    fk = set(file_keys)
    mk = list(model_keys)
    if not mk:
        raise CheckpointError("the model has no parameters to load")
    if given is not None:
        missing = [k for k in mk if given + k not in fk]
        if missing:
            raise CheckpointError(
                f"with --prefix {given!r} the checkpoint lacks "
                f"{len(missing)} of the model's tensors, e.g. {given + missing[0]!r}"
            )
        return given
    candidates = [""]
    for a in KNOWN_PREFIXES:
        candidates.append(a)
        candidates += [a + b for b in KNOWN_PREFIXES if b != a]
    anchor = max(mk, key=len)  # the longest key is the least ambiguous
    candidates += sorted({f[: -len(anchor)] for f in fk if f.endswith("." + anchor)}, key=len)
    for p in candidates:
        if all(p + k in fk for k in mk):
            return p
    best = min(candidates, key=lambda p: sum(p + k not in fk for k in mk))
    missing = [k for k in mk if best + k not in fk]
    example = next(iter(sorted(fk)), "")
    raise CheckpointError(
        f"the checkpoint's tensor names do not match the model: {len(missing)} of its "
        f"{len(mk)} tensors are missing (e.g. {missing[0]!r}; the file has e.g. {example!r}). "
        "Check --model, or name the prefix to strip with --prefix"
    )
