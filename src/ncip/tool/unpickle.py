"""Safe loading of pickle-based checkpoint files (``.pt``, ``.pth``, ``.bin``, ``.ckpt``,
``.tar``): ``torch.load(..., weights_only=True)`` and nothing else. Only tensors, plain
containers, numbers and strings are unpickled, plus ``argparse.Namespace`` and numpy scalars
(timm and torchvision store their command-line ``args`` and metrics that way); a file that
needs any other object is refused with the name of what it holds and how to convert it."""

from __future__ import annotations

import argparse
import pickle
import re
import warnings
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ncip.core.checkpoints import CheckpointError
from ncip.tool.messages import reason

# Where dict-shaped checkpoints keep the weights, first match wins; the EMA twin of each.
CONTAINER_KEYS = ("state_dict", "model", "model_state_dict")
EMA_KEYS = {"state_dict": "state_dict_ema", "model": "model_ema", "model_state_dict": None}


@cache
def _allowed_globals() -> list:
    # Data-only classes: an attribute bag and numpy scalars; no constructor runs user code.
    dtypes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith("DType")]
    return [argparse.Namespace, np._core.multiarray.scalar, np.dtype, *dtypes]


def torch_load(path: Path | str) -> Any:
    """``torch.load`` with ``weights_only=True`` (memory-mapped where the format allows).

    Raises :class:`CheckpointError` naming the file for anything that needs arbitrary
    unpickling, and for truncated or corrupt files.
    """
    import torch

    path = Path(path)
    with torch.serialization.safe_globals(_allowed_globals()), warnings.catch_warnings():
        # torch warns before refusing a TorchScript archive; the refusal below says it all
        warnings.filterwarnings("ignore", message=".*TorchScript archive", category=UserWarning)
        try:
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:
                if "mmap can only be used" not in str(e):
                    raise
                # legacy (pre-1.6, non-zip) files cannot be memory-mapped
                return torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            needs = _global_in_message(str(e)) and (
                _unsafe_globals(path) or _global_in_message(str(e))
            )
            if not needs:  # not a refused object: the bytes are not a pickle at all
                raise CheckpointError(
                    f"{path} is not a readable PyTorch checkpoint (truncated or corrupt? "
                    f"{reason(e, 120)}); remove it from the folder or "
                    "write it again"
                ) from None
            safe = path.with_name(f"{path.stem}-weights.pt")
            raise CheckpointError(
                f"{path} needs arbitrary unpickling (it holds {', '.join(needs)}); ncip loads "
                "only tensors and plain containers. If you trust the file, load it once in a "
                "trusted session (torch.load with weights_only turned off), save just its state "
                f"dict (torch.save(model.state_dict(), '{safe}') or safetensors) and move the "
                "original out"
            ) from None
        except (RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError, TypeError) as e:
            if _is_torchscript(path):
                safe = path.with_name(f"{path.stem}-weights.pt")
                raise CheckpointError(
                    f"{path} is a TorchScript archive (torch.jit.save): its model is code that "
                    "ncip does not run. If you trust it, save its weights once in a trusted "
                    f"session (torch.save(torch.jit.load('{path}').state_dict(), '{safe}')), "
                    "move the archive out, and give --model"
                ) from None
            first = reason(e)
            link = f" (a link to {path.resolve()})" if path.is_symlink() else ""
            raise CheckpointError(
                f"{path}{link} is not a readable PyTorch checkpoint (truncated or corrupt? "
                f"{first}); "
                "remove it from the folder or write it again"
            ) from None


def _is_torchscript(path: Path) -> bool:
    """Whether a file is a TorchScript archive (a zip with the model's code and constants)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            return any(n.endswith("/constants.pkl") or "/code/" in n for n in z.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _unsafe_globals(path: Path) -> list[str]:
    import torch

    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001  (only used to word the message)
        return []
    allowed = {f"{g.__module__}.{g.__qualname__}" for g in _allowed_globals()}
    return [n for n in names if n not in allowed]


def _global_in_message(msg: str) -> list[str]:
    m = re.search(r"GLOBAL ([\w.]+)", msg)
    return [m.group(1)] if m else []


def _is_state_dict(obj: Any) -> bool:
    import torch

    return (
        isinstance(obj, Mapping)
        and len(obj) > 0
        and all(isinstance(k, str) for k in obj)
        and all(isinstance(v, torch.Tensor) for v in obj.values())
        and any(v.is_floating_point() for v in obj.values())
    )


def _is_ema_name(key: str) -> bool:
    """Whether a container key names EMA weights (``ema``, ``model_ema``, ``ema_state``)."""
    return re.search(r"(?:^|[^a-z])ema(?:$|[^a-z])", key.lower()) is not None


def _classify_pickle(
    obj: Any, ema: bool, state_key: str | None = None
) -> tuple[str | None, str | None, str]:
    """(format, container key, reason if skipped) of an unpickled object.

    A dict's weights are found under ``state_key`` when given; else under the keys the common
    tools use (:data:`CONTAINER_KEYS`, their EMA twins with ``ema``); else under the one key
    that holds a state dict (``model_state``, ``net``, ``weights``: whatever a training script
    chose), EMA-named keys counting only with ``ema``. Several such keys are refused, naming
    them: only the user knows which network is the classifier.
    """
    if state_key is not None:
        if isinstance(obj, Mapping) and _is_state_dict(obj.get(state_key)):
            return "container", state_key, ""
        held = _state_dict_keys(obj)
        where = f"state dicts under: {', '.join(held)}" if held else _no_weights(obj)
        return None, None, f"no state dict under {state_key!r} ({where})"
    if _is_state_dict(obj):
        return "state_dict", None, ""
    if not isinstance(obj, Mapping):
        return None, None, _no_weights(obj)
    if "module" in obj and obj["module"] is None and state_key is None:
        return (
            None,
            None,
            (
                "a DeepSpeed ZeRO-3 checkpoint: its weights are partitioned across the "
                "ranks' files, which ncip does not read; consolidate them with DeepSpeed's "
                "zero_to_fp32.py and rank the result"
            ),
        )
    held = _state_dict_keys(obj)
    twins = [k for k in held if _is_ema_name(k)]
    for key in CONTAINER_KEYS:
        if key in obj and _is_state_dict(obj[key]):
            if not ema:
                return "container", key, ""
            twin = EMA_KEYS.get(key)
            if twin and twin in obj and _is_state_dict(obj[twin]):
                return "container", twin, ""
            if len(twins) == 1:
                return "container", twins[0], ""
            return None, None, f"no EMA weights ({twin or 'none known'} for '{key}')"
    if {"state", "param_groups"} <= set(obj):
        return None, None, "optimizer state"
    plain = [k for k in held if k not in twins]
    pick = twins if ema else plain
    if len(pick) == 1:
        return "container", pick[0], ""
    if len(pick) > 1:
        several = f"holds several state dicts ({', '.join(pick)})"
        return None, None, f"{several}; name the classifier's with --state-key"
    if ema:
        found = f"state dicts under: {', '.join(plain)}" if plain else _no_weights(obj)
        return None, None, f"no EMA weights ({found})"
    if twins:
        return None, None, f"holds only EMA weights ({', '.join(twins)}); pass --ema"
    return None, None, _no_weights(obj)


def _state_dict_keys(obj: Any) -> list[str]:
    """The keys of a dict whose values are state dicts."""
    if not isinstance(obj, Mapping):
        return []
    return [k for k, v in obj.items() if isinstance(k, str) and _is_state_dict(v)]


def _no_weights(obj: Any) -> str:
    """Why an unpickled object is no checkpoint: its type, or the keys of a dict."""
    if not isinstance(obj, Mapping):
        return f"holds a {type(obj).__name__}, not a state dict"
    keys = ", ".join(list(map(str, obj))[:6])
    more = f" and {len(obj) - 6} more" if len(obj) > 6 else ""
    return f"holds no model weights (keys: {keys}{more})"
