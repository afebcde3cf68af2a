"""Keep the checkpoints NCIP needs while training: one safetensors file per epoch (or every N
steps), with the metadata `ncip rank` reads, and σ_cos of the head as training goes.

    writer = ncip.CheckpointWriter("ckpt", model="mynet:Net")   # head: found, or head="..."
    for epoch in range(1, epochs + 1):
        train_one_epoch(...)
        writer.save(model, epoch=epoch)
    # then: ncip rank ckpt --inputs test.npz --out ranking.csv     (no --model needed)

Each file is written atomically (temporary name, then rename); saving an epoch or step again
(a resumed run) replaces its file and its row, so nothing is duplicated. ``sigma_cos.csv`` (and
``sigma_cos.png``) beside the checkpoints show neural collapse arriving: σ_cos (Eq. 5) of the
head falls as class vectors become equiangular. The PyTorch Lightning and Hugging Face
callbacks (:mod:`ncip.tool.lightning`, :mod:`ncip.tool.hf`) use this writer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch.nn as nn

from ncip.core.checkpoints import CheckpointMeta, checkpoint_name, save_state
from ncip.core.collapse import sigma_cos
from ncip.core.errors import InputError
from ncip.core.io import write_csv
from ncip.core.logs import log
from ncip.tool.files import clean_stale_temps, follow_umask

HISTORY = "sigma_cos.csv"
PLOT = "sigma_cos.png"


def factory_spec(model: str | Callable | None, args: dict[str, Any] | None = None) -> str | None:
    """How `ncip rank` will rebuild the model: ``"package.module:function"`` as given, or that
    spec of an importable class or function; None (with a warning) when it cannot be. ``args``
    (keyword arguments of plain literals: numbers, strings, lists, dicts, True/None) are
    recorded with it, ``"mymodel:Net(vocab_size=300)"``, as `--model` takes them."""
    if args:
        import ast

        for key, value in args.items():
            try:
                same = ast.literal_eval(repr(value)) == value
            except (ValueError, SyntaxError):
                same = False
            if not (isinstance(key, str) and key.isidentifier() and same):
                raise InputError(
                    f"model_args {key}={value!r}: record keyword arguments of plain literals "
                    "only (numbers, strings, lists, dicts, True/None), as --model takes them"
                )
        if model is None:
            raise InputError("model_args need the model (its factory) too")
    spec = _spec(model)
    if spec is None or not args:
        return spec
    return f"{spec}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def _spec(model: str | Callable | None) -> str | None:
    if model is None or isinstance(model, str):
        return model
    module, name = getattr(model, "__module__", None), getattr(model, "__qualname__", None)
    if not module or not name or module == "__main__" or "<" in name:
        log.warning(
            "the model factory %r is defined in the training script itself; define it in "
            "a module to let `ncip rank` rebuild it, or pass --model when ranking",
            model,
        )
        return None
    return f"{module}:{name}"


class CheckpointWriter:
    """Write ncip checkpoints while training (see the module docstring).

    ``head``: the classifier layer's name (default: the last ``nn.Linear``); ``model``: how to
    rebuild the model (a ``"package.module:function"`` spec, or the class/function itself),
    with ``model_args`` (keyword arguments of plain literals, e.g. ``{"vocab_size": 300}``)
    recorded beside it;
    ``input_shape`` (one input, e.g. ``[1, 28, 28]``), ``mean``/``std`` are recorded for
    `ncip rank` to check and preprocess inputs; ``plot`` draws ``sigma_cos.png``. A folder
    holds one training run: a writer refuses a folder of another model or another run, unless
    ``resume=True`` continues the run it holds."""

    def __init__(
        self,
        directory: str | Path,
        *,
        head: str | None = None,
        model: str | Callable | None = None,
        model_args: dict[str, Any] | None = None,
        input_shape: Sequence[int] | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        plot: bool = True,
        extra: dict[str, Any] | None = None,
        resume: bool = False,
    ):
        import uuid

        self.dir = Path(directory)
        # one id per training run, in every file: a folder takes one run's checkpoints only,
        # and ``resume=True`` continues the run whose checkpoints the folder holds
        self.run_id = uuid.uuid4().hex[:12]
        self.resume = resume
        self.head = head
        self.factory = factory_spec(model, model_args)
        self.input_shape = list(input_shape) if input_shape is not None else None
        self.mean = list(mean) if mean is not None else None
        self.std = list(std) if std is not None else None
        self.plot = plot
        self.extra = dict(extra or {})

    def path_for(self, epoch: int | None, step: int | None) -> Path:
        return self.dir / checkpoint_name(epoch, step)

    def save(
        self,
        model: nn.Module,
        *,
        epoch: int | None = None,
        step: int | None = None,
        metrics: dict[str, float] | None = None,
    ) -> Path:
        """Write ``model``'s weights as the checkpoint of ``epoch`` (or ``step``); return its
        path. σ_cos of the head is added to ``sigma_cos.csv``."""
        from ncip.tool.modelsource import find_head

        head = find_head(model, None, self.head)
        state = model.state_dict()
        weight = state[f"{head}.weight"].detach().cpu().double()
        W = weight.reshape(weight.shape[0], -1).numpy()
        sigma = sigma_cos(W)
        meta = {
            "writer": "ncip.CheckpointWriter",
            "run_id": self.run_id,
            "epoch": epoch,
            "step": step,
            "head_key": f"{head}.weight",
            "num_classes": int(W.shape[0]),
            "input_shape": self.input_shape,
            "factory": self.factory,
            "mean": self.mean,
            "std": self.std,
            "metrics": metrics or {},
            **self.extra,
        }
        self._check_same_model(state, meta)
        meta["run_id"] = self.run_id  # the folder's run, when resuming it
        path = self.path_for(epoch, step)
        self.dir.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(path)
        record = CheckpointMeta.from_json({k: v for k, v in meta.items() if v is not None}, path)
        save_state(path, state, record)
        follow_umask([path])
        self._record({"epoch": epoch, "step": step, "sigma_cos": sigma, **(metrics or {})})
        return path

    def _check_same_model(self, state: dict, meta: dict[str, Any]) -> None:
        """Refuse to mix models in one folder: a writer resumed with another model class, or
        another training run's model written into this one's folder, would be ranked as one
        run. Checked once per writer, against the folder's newest ncip checkpoint."""
        if getattr(self, "_checked", False) or not self.dir.is_dir():
            return
        from ncip.core.checkpoints import CheckpointError, read_meta, safetensors_header
        from ncip.core.io import safetensors_open

        theirs = sorted(self.dir.glob("*.safetensors"), key=lambda p: p.stat().st_mtime)
        theirs = [p for p in theirs if "ncip" in safetensors_header(p)]
        if theirs:
            other = theirs[-1]
            with safetensors_open(other) as f:
                shapes = {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
            mine = {k: list(v.shape) for k, v in state.items()}
            old = read_meta(other)
            why = None
            if shapes != mine:
                diff = sorted(set(shapes) ^ set(mine)) or [
                    k for k in mine if shapes.get(k) != mine[k]
                ]
                why = f"another model (tensors differ, e.g. {diff[0]!r})"
            elif old.factory != meta.get("factory"):
                why = f"the model {old.factory!r}, this writer {meta.get('factory')!r}"
            elif old.run_id not in (None, self.run_id):
                if not self.resume:
                    raise CheckpointError(
                        f"{self.dir} holds the checkpoints of another training run "
                        f"({other.name}, run {old.run_id}); write this run into its own "
                        "folder, or pass resume=True to continue that run"
                    )
                self.run_id = old.run_id
            if why:
                raise CheckpointError(
                    f"{self.dir} holds checkpoints of {why} ({other.name}); write this run "
                    "into its own folder"
                )
        self._checked = True

    def history(self) -> pd.DataFrame:
        f = self.dir / HISTORY
        return (
            pd.read_csv(f) if f.is_file() else pd.DataFrame(columns=["epoch", "step", "sigma_cos"])
        )

    def _record(self, row: dict[str, Any]) -> None:
        hist = self.history()
        key = "epoch" if row["epoch"] is not None else "step"
        if len(hist) and key in hist:
            hist = hist[hist[key] != row[key]]  # a resumed run writes the epoch again
        hist = pd.concat([hist, pd.DataFrame([row])], ignore_index=True)
        hist = hist.sort_values(key, kind="stable").reset_index(drop=True)
        write_csv(self.dir / HISTORY, hist)
        follow_umask([self.dir / HISTORY])
        if self.plot:
            self._draw(hist, key)

    def _draw(self, hist: pd.DataFrame, key: str) -> None:
        from ncip.tool.figures import sigma_figure

        sigma_figure(hist, key, self.dir / PLOT)
        follow_umask([self.dir / PLOT])
