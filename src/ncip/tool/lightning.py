"""A PyTorch Lightning callback that keeps the checkpoints NCIP needs.

Lightning's ``ModelCheckpoint`` keeps one file by default (``save_top_k=1``, the best or the
last): nothing to rank with. This callback writes one small safetensors file per epoch (or
every N training steps) through :class:`ncip.CheckpointWriter`, from global rank 0 only:

    from ncip.tool.lightning import NCIPCheckpoint
    trainer = pl.Trainer(callbacks=[NCIPCheckpoint("ncip-ckpt", model="mynet:Net")])
    # then: ncip rank ncip-ckpt --inputs test.npz --out ranking.csv

The LightningModule's whole state dict is written, so its attribute prefix (``net.``) is in the
keys; `ncip rank` strips it when it builds the recorded ``model`` (the plain network). Works
with ``pytorch_lightning`` and, when that is not installed, ``lightning.pytorch``
(:func:`callback_class` builds the class for either).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ncip.core.errors import InputError
from ncip.tool.writer import CheckpointWriter


def callback_class(base: type) -> type:
    """``NCIPCheckpoint`` as a subclass of ``base`` (a Lightning ``Callback`` class)."""

    class NCIPCheckpoint(base):
        """Write an ncip checkpoint every ``every_n_epochs`` epochs (or every
        ``every_n_train_steps`` steps) into ``dirpath``; see :class:`ncip.CheckpointWriter`."""

        def __init__(
            self,
            dirpath: str | Path,
            *,
            every_n_epochs: int = 1,
            every_n_train_steps: int | None = None,
            head: str | None = None,
            model: str | Callable | None = None,
            input_shape: Sequence[int] | None = None,
            resume: bool = False,
        ):
            super().__init__()
            if every_n_epochs < 1 or (every_n_train_steps is not None and every_n_train_steps < 1):
                raise InputError("every_n_epochs and every_n_train_steps must be at least 1")
            self.every_n_epochs = every_n_epochs
            self.every_n_train_steps = every_n_train_steps
            self.writer = CheckpointWriter(
                dirpath, head=head, model=model, input_shape=input_shape, resume=resume
            )

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if getattr(trainer, "ckpt_path", None):  # fit(ckpt_path=...) continues this run
                self.writer.resume = True

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            n = self.every_n_train_steps
            if n and trainer.is_global_zero and trainer.global_step % n == 0:
                self.writer.save(pl_module, step=trainer.global_step)

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            epoch = trainer.current_epoch + 1  # 1-based, as the files are named
            if (
                self.every_n_train_steps is None
                and trainer.is_global_zero
                and epoch % self.every_n_epochs == 0
            ):
                self.writer.save(pl_module, epoch=epoch, step=trainer.global_step)

    return NCIPCheckpoint


def __getattr__(name: str):
    if name != "NCIPCheckpoint":
        raise AttributeError(f"module 'ncip.tool.lightning' has no attribute {name!r}")
    try:
        import pytorch_lightning as pl
    except ImportError:
        try:
            import lightning.pytorch as pl
        except ImportError:
            raise ImportError(
                "ncip.tool.lightning needs pytorch-lightning (pip install "
                "pytorch-lightning) or lightning"
            ) from None
    cls = callback_class(pl.Callback)
    globals()["NCIPCheckpoint"] = cls
    return cls
