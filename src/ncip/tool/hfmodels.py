"""Hugging Face checkpoint folders as models (:mod:`ncip.tool.modelsource`): the class and
config that ``config.json`` names, built locally (nothing is downloaded), and each checkpoint
loaded with ``from_pretrained`` (which renames weights on load as transformers saved them)."""

from __future__ import annotations

import json
from pathlib import Path

import torch.nn as nn

from ncip.core.factory import Factory, ModelSourceError
from ncip.tool.formats import Checkpoint, CheckpointError
from ncip.tool.messages import reason


def hf_pretrained(cls, ck: Checkpoint) -> nn.Module:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        return cls.from_pretrained(str(ck.path), local_files_only=True)
    except Exception as e:  # noqa: BLE001  (transformers raises many types for bad folders)
        first = reason(e, 200)
        raise CheckpointError(f"{ck.path} could not be loaded by transformers: {first}") from None


def hf_factory(config_path: Path) -> Factory:
    try:
        import transformers
    except ImportError:
        raise ModelSourceError(
            f"{config_path.parent} is a Hugging Face checkpoint: install transformers to "
            "rebuild its model, or name the model with --model"
        ) from None
    try:
        cfg = json.loads(config_path.read_text())
    except ValueError as e:
        raise CheckpointError(
            f"{config_path} is not valid JSON ({e}); restore it from the training run"
        ) from None
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{config_path} holds no model config (a JSON object)")
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else None
    cls = getattr(transformers, arch, None) if isinstance(arch, str) and arch[:1] != "_" else None
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise ModelSourceError(
            f"{config_path} names no transformers model class ({arch!r} in its "
            "'architectures'); name the model with --model"
        )
    try:
        config = transformers.AutoConfig.from_pretrained(
            str(config_path.parent), local_files_only=True
        )
    except (ValueError, KeyError, OSError) as e:
        first = reason(e)
        raise ModelSourceError(
            f"{config_path} cannot be read by this transformers ({first}); a model_type it does "
            "not know needs a newer transformers, or name the model with --model"
        ) from None
    return Factory(lambda _c: cls(config), False, f"transformers {arch} from config.json")
