"""Building a model from a factory the user named: ``package.module:function`` or
``path/to/file.py:function`` (imported only because the user or the study's params.yaml named
it), or a Hugging Face architecture with its recorded config (built locally, nothing is
downloaded). The study rebuilds the models it imported from elsewhere with :func:`build_external`;
the tool's ``--model`` goes through the same functions.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.nn as nn

from ncip.core.errors import NcipError

if TYPE_CHECKING:
    from ncip.core.checkpoints import CheckpointMeta


class ModelSourceError(NcipError, ValueError):
    """The model cannot be built or its weights do not fit; the message says what to change."""


@dataclass
class Factory:
    build: Callable[[int | None], nn.Module]  # num_classes (None: the factory's own) -> model
    takes_num_classes: bool
    description: str


def import_named(spec: str) -> Any:
    mod, _, attr = spec.rpartition(":")
    if not mod or not attr:
        raise ModelSourceError(
            f"--model {spec!r} is not of the form package.module:function, "
            "path/to/file.py:function or torchvision:NAME"
        )
    if mod.endswith(".py"):
        path = Path(mod)
        if not path.is_file():
            raise ModelSourceError(f"--model {spec!r}: {path} does not exist")
        name = f"_ncip_user_model_{path.stem}"
        s = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(s)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent.resolve()))  # its own sibling imports
        try:
            s.loader.exec_module(module)
        finally:
            sys.path.pop(0)
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # modules beside the user, as `python -m` does
        try:
            module = importlib.import_module(mod)
        except ImportError as e:
            raise ModelSourceError(
                f"--model {spec!r}: cannot import {mod!r} ({e}); run from the "
                "folder that holds it or install it"
            ) from None
    if not hasattr(module, attr):
        raise ModelSourceError(f"--model {spec!r}: {mod} has no attribute {attr!r}")
    return getattr(module, attr)


def _takes(fn: Callable, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def callable_factory(fn: Callable, description: str) -> Factory:
    if not callable(fn):
        raise ModelSourceError(f"{description} is not callable")
    takes = _takes(fn, "num_classes")

    def build(num_classes: int | None) -> nn.Module:
        model = fn(num_classes=num_classes) if takes and num_classes is not None else fn()
        if not isinstance(model, nn.Module):
            raise ModelSourceError(
                f"{description} returned a {type(model).__name__}, not a torch.nn.Module"
            )
        return model

    return Factory(build, takes, description)


def hf_meta_factory(meta: CheckpointMeta) -> Factory:
    """A transformers model from the architecture and config the HF callback recorded."""
    import transformers

    arch = str(meta.hf_architecture)
    if not hasattr(transformers, arch):
        raise ModelSourceError(
            f"transformers has no architecture {arch!r} (recorded in the "
            "checkpoints); upgrade transformers or pass --model"
        )
    cls = getattr(transformers, arch)
    config = cls.config_class.from_dict(meta.hf_config or {})
    return Factory(lambda _c: cls(config), False, f"transformers {arch} (config recorded)")


def build_external(meta: CheckpointMeta) -> nn.Module:
    """The :class:`ncip.core.models.ForeignClassifier` a study's imported checkpoint describes."""
    from ncip.core.models import ForeignClassifier

    spec = meta.factory
    if meta.hf_architecture:
        factory = hf_meta_factory(meta)
    elif spec:
        factory = callable_factory(import_named(spec), spec)
    else:
        raise ModelSourceError("an imported checkpoint records no model factory")
    if meta.head is None or (factory.takes_num_classes and meta.num_classes is None):
        raise ModelSourceError("an imported checkpoint records no head module or class count")
    net = factory.build(meta.num_classes if factory.takes_num_classes else None)
    return ForeignClassifier(net, meta.head, meta.mean, meta.std)
