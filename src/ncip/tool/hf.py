"""A Hugging Face ``TrainerCallback`` that keeps the checkpoints NCIP needs.

The Trainer saves a full ``checkpoint-<step>/`` folder (weights, optimizer, scheduler, RNG)
every ``save_steps`` = 500 steps by default, and ``save_total_limit`` (often set to 1-3 to save
disk) deletes all but the newest. `ncip rank` reads those folders; this callback instead writes
one small safetensors file of the model's weights per epoch (or every N steps), from the main
process only, with the model's architecture and config recorded, so ranking needs no
``--model`` and no folder is ever deleted by the Trainer:

    from ncip.tool.hf import NCIPCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[NCIPCallback("ncip-ckpt")])
    # then: ncip rank ncip-ckpt --inputs tokens.npz --out ranking.csv
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ncip.core.errors import InputError
from ncip.tool.writer import CheckpointWriter


class NCIPCallback(TrainerCallback):
    """Write an ncip checkpoint at the end of every ``every_n_epochs`` epochs (or every
    ``every_n_steps`` steps) into ``dirpath``, and the tokenizer the Trainer holds (its
    ``processing_class``) beside them once; see :class:`ncip.CheckpointWriter`."""

    def __init__(
        self,
        dirpath: str | Path,
        *,
        every_n_epochs: int = 1,
        every_n_steps: int | None = None,
        head: str | None = None,
        input_shape: Sequence[int] | None = None,
        resume: bool = False,
    ):
        if every_n_epochs < 1 or (every_n_steps is not None and every_n_steps < 1):
            raise InputError("every_n_epochs and every_n_steps must be at least 1")
        self.every_n_epochs = every_n_epochs
        self.every_n_steps = every_n_steps
        self.dirpath = Path(dirpath)
        self.head = head
        self.input_shape = input_shape
        self.resume = resume
        self._writer: CheckpointWriter | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step > 0:  # resume_from_checkpoint continues this run
            self.resume = True

    def _save(self, model, epoch: int | None, step: int, kwargs: dict | None = None) -> None:
        if self._writer is None:
            # the tokenizer the Trainer holds, beside the checkpoints: what `ncip rank` reads to
            # encode raw texts (tokenizer.json); a slow tokenizer writes its own files
            tok = (kwargs or {}).get("processing_class") or (kwargs or {}).get("tokenizer")
            if tok is not None and hasattr(tok, "save_pretrained"):
                self.dirpath.mkdir(parents=True, exist_ok=True)
                tok.save_pretrained(str(self.dirpath))
            config = json.loads(model.config.to_json_string())
            extra = {"hf_architecture": type(model).__name__, "hf_config": config}
            self._writer = CheckpointWriter(
                self.dirpath,
                head=self.head,
                input_shape=self.input_shape,
                extra=extra,
                resume=self.resume,
            )
        self._writer.save(model, epoch=epoch, step=step)

    def on_step_end(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        n = self.every_n_steps
        if n and state.is_world_process_zero and state.global_step % n == 0:
            self._save(model, None, state.global_step, kwargs)

    def on_epoch_end(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        epoch = round(state.epoch)
        if (
            self.every_n_steps is None
            and state.is_world_process_zero
            and epoch % self.every_n_epochs == 0
        ):
            self._save(model, epoch, state.global_step, kwargs)
