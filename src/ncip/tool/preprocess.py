"""How stored test inputs become a model batch, decided once from the inputs and the model,
and printed: uint8 images are divided by 255 (unless ``scale=False``); integer pixel values in
0-255 likewise; token ids (a model whose first layer is an ``nn.Embedding`` or
``nn.EmbeddingBag``) go in unscaled as int64; images without a channel axis get one,
channel-last images are moved to channel-first when the model's first convolution (or the
1/3/4-channel rule) makes that unambiguous; then ``(x - mean) / std`` per channel if given.
:func:`probe` runs one input through the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from ncip.core.checkpoints import CheckpointMeta
from ncip.core.errors import InputError
from ncip.core.models import logits_of
from ncip.tool.images import ImageFiles
from ncip.tool.inputs import Inputs
from ncip.tool.messages import reason

# the layers that take token ids (an EmbeddingBag sums or averages a bag of them: fastText-style)
EMBEDDINGS = (nn.Embedding, nn.EmbeddingBag)


def first_layer(model: nn.Module) -> nn.Module | None:
    """The first module (in registration order) with weights of its own: where inputs enter."""
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear, *EMBEDDINGS)):
            return m
    return None


def expected_input(model: nn.Module, meta: CheckpointMeta | None = None) -> str:
    """In words, what inputs a model takes (for error messages)."""
    if meta and meta.input_shape:
        shape = meta.input_shape
        kind = "token ids" if len(shape) == 1 else "images in [0, 1]"
        return f"{kind} of shape {list(shape)}"
    m = first_layer(model)
    if isinstance(m, EMBEDDINGS):
        return (
            f"integer token ids [L] (its first layer is {type(m).__name__}({m.num_embeddings}, "
            "...))"
        )
    if isinstance(m, nn.Conv2d):
        return f"images [{m.in_channels}, H, W] (its first layer is Conv2d({m.in_channels}, ...))"
    if isinstance(m, nn.Conv1d):
        return f"sequences [{m.in_channels}, L] (its first layer is Conv1d({m.in_channels}, ...))"
    if isinstance(m, nn.Linear):
        return f"vectors [{m.in_features}] (its first layer is Linear({m.in_features}, ...))"
    return "inputs of the shape it was trained on"


@dataclass
class Preprocess:
    """How a batch of stored inputs becomes a model batch (decided once, printed)."""

    tokens: bool = False
    divide_by: float | None = None  # 255 for 8-bit pixels (division, as the pipeline does)
    add_channel: bool = False
    channel_last: bool = False
    image_shape: tuple[int, ...] | None = None  # flat rows reshaped to [C, H, W]
    mean: np.ndarray | None = None
    std: np.ndarray | None = None
    unit_range: bool = False  # refuse values outside [0, 1] (ncip checkpoints record this)
    steps: list[str] = field(default_factory=list)

    def __call__(self, batch: np.ndarray) -> torch.Tensor:
        a = np.asarray(batch)
        if not a.flags.writeable:  # a slice of a memory map: torch wants its own copy
            a = a.copy()
        if self.tokens:
            return torch.from_numpy(a.astype(np.int64, copy=False))
        t = torch.from_numpy(np.ascontiguousarray(a)).float()
        if self.divide_by is not None:
            t = t.div(self.divide_by)
        if self.image_shape is not None:
            t = t.reshape(len(t), *self.image_shape)
        if self.add_channel:
            t = t.unsqueeze(1)
        if self.channel_last:
            t = t.permute(0, 3, 1, 2).contiguous()
        if self.unit_range and t.numel():
            lo, hi = float(t.min()), float(t.max())
            if lo < -1e-6 or hi > 1 + 1e-6:
                raise InputError(
                    f"inputs hold values in [{lo:g}, {hi:g}] but the model takes images in "
                    "[0, 1]: store 8-bit images as uint8, or divide float pixels by 255"
                )
        if self.mean is not None:
            shape = (1, -1) + (1,) * (t.ndim - 2)
            t = (t - torch.from_numpy(self.mean).float().view(shape)) / torch.from_numpy(
                self.std
            ).float().view(shape)
        return t

    def describe(self) -> str:
        return "; ".join(self.steps) if self.steps else "none (inputs go to the model as stored)"


def plan_preprocess(
    inp: Inputs,
    model: nn.Module,
    meta: CheckpointMeta | None = None,
    scale: bool = True,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
) -> Preprocess:
    """Decide the preprocessing of ``inp`` for ``model`` (see the module docstring)."""
    meta = meta or CheckpointMeta()
    first = first_layer(model)
    shape = tuple(inp.x.shape)
    dtype = np.dtype(inp.x.dtype)
    # token ids: an Embedding first, or (integer inputs) an Embedding anywhere in a model with
    # no convolution, whatever order its layers were declared in
    embeds = any(isinstance(m, EMBEDDINGS) for m in model.modules())
    convs = any(isinstance(m, nn.Conv1d | nn.Conv2d | nn.Conv3d) for m in model.modules())
    text = (
        isinstance(first, EMBEDDINGS)
        or bool(meta.vocab_size and len(shape) == 2)
        or (embeds and not convs and dtype.kind in "iu" and len(shape) == 2)
    )
    pre = Preprocess()
    if text:
        if dtype.kind not in "iu":
            raise InputError(
                f"the model takes integer token ids (its first layer is an "
                f"Embedding) but the inputs are {dtype}"
            )
        pre.tokens = True
        pre.steps.append(f"{dtype} token ids passed as int64, unscaled")
        return pre
    c_in = None
    if isinstance(first, nn.Conv2d):
        c_in = first.in_channels
    elif meta.input_shape and len(meta.input_shape) == 3:
        c_in = int(meta.input_shape[0])
    if isinstance(inp.x, ImageFiles):
        inp.x.set_channels(c_in)
        shape = tuple(inp.x.shape)
    _scaling(pre, inp, dtype, scale)
    if meta.arch and meta.input_shape and len(meta.input_shape) == 3:
        pre.unit_range = True  # ncip's image models are trained on [0, 1]
    _layout(pre, shape, c_in, isinstance(first, nn.Conv2d), meta.input_shape)
    _normalisation(pre, shape, mean, std)
    return pre


def _scaling(pre: Preprocess, inp: Inputs, dtype: np.dtype, scale: bool) -> None:
    """8-bit (or small integer) pixels divided by 255 unless ``scale`` is off; floats as given."""
    if not (dtype == np.uint8 or dtype.kind in "iub"):
        pre.steps.append(f"{dtype} values passed as float32, unscaled")
        return
    if dtype != np.uint8 and dtype.kind != "b":
        sample = np.asarray(inp.x[: min(len(inp), 1024)])
        if sample.size and (sample.min() < 0 or sample.max() > 255):
            raise InputError(
                f"the inputs are {dtype} with values in [{sample.min()}, "
                f"{sample.max()}], neither 8-bit pixels nor token ids for this "
                "model; store images as uint8 or floats"
            )
    if scale and dtype.kind != "b":
        pre.divide_by = 255.0
        pre.steps.append(f"{dtype} pixels divided by 255 to [0, 1]")
    else:
        pre.steps.append(f"{dtype} values passed as float32, unscaled")


def _layout(
    pre: Preprocess,
    shape: tuple,
    c_in: int | None,
    conv_first: bool,
    recorded: Sequence[int] | None = None,
) -> None:
    """A channel axis for ``[N, H, W]`` images; channel-last images moved to channel-first;
    flat rows (a table's pixel columns) reshaped to the image shape the checkpoints record, or
    to a square one-channel image for a convolution that takes one channel."""
    if len(shape) == 2 and conv_first:
        n = shape[1]
        side = int(round(np.sqrt(n)))
        if recorded and len(recorded) == 3 and int(np.prod(recorded)) == n:
            pre.image_shape = tuple(int(d) for d in recorded)
        elif c_in == 1 and side * side == n:
            pre.image_shape = (1, side, side)
        if pre.image_shape is not None:
            pre.steps.append(
                f"rows of {n} values reshaped to images {list(pre.image_shape)} (row-major)"
            )
        return
    if len(shape) == 3 and (c_in == 1 or (c_in is None and conv_first)):
        pre.add_channel = True
        pre.steps.append("a channel axis added ([N, H, W] -> [N, 1, H, W])")
    elif len(shape) == 4:
        if c_in is not None:
            pre.channel_last = shape[1] != c_in and shape[3] == c_in
        else:
            pre.channel_last = shape[3] in (1, 3, 4) and shape[1] not in (1, 3, 4)
        if pre.channel_last:
            pre.steps.append(
                "channel-last images moved to channel-first ([N, H, W, C] -> [N, C, H, W])"
            )


def _normalisation(
    pre: Preprocess,
    shape: tuple,
    mean: Sequence[float] | None,
    std: Sequence[float] | None,
) -> None:
    """Per-channel ``--mean``/``--std`` (one value for every channel, or one per channel)."""
    if (mean is None) != (std is None):
        raise InputError("give --mean and --std together")
    if mean is None:
        return
    channels = shape[3] if pre.channel_last else (1 if pre.add_channel else shape[1])
    if pre.image_shape is not None:
        channels = pre.image_shape[0]
    m, s = np.asarray(mean, np.float64), np.asarray(std, np.float64)
    if len(m) == 1:
        m, s = np.repeat(m, channels), np.repeat(s, channels)
    if len(m) != channels or len(s) != channels:
        raise InputError(f"--mean/--std give {len(m)}/{len(s)} values for {channels} channels")
    if np.any(s <= 0):
        raise InputError("--std values must be positive")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s))):
        raise InputError(
            f"--mean and --std must be finite numbers, got {m.tolist()} and {s.tolist()}"
        )
    pre.mean, pre.std = m, s
    pre.steps.append(f"normalised per channel with mean {m.tolist()} and std {s.tolist()}")


def probe_output(
    model: nn.Module,
    pre: Preprocess,
    inp: Inputs,
    device: torch.device | str,
    meta: CheckpointMeta | None = None,
    n: int = 1,
) -> Any:
    """The model's raw output on the first ``n`` inputs (a shape it cannot take: one line)."""
    xb = pre(inp.x[0:n])
    if meta and meta.input_shape and list(xb.shape[1:]) != list(meta.input_shape):
        raise InputError(
            f"{inp.source}: inputs have shape {list(xb.shape[1:])} after "
            f"preprocessing but the checkpoints were trained on "
            f"{list(meta.input_shape)}"
        )
    try:
        with torch.inference_mode():
            return model(xb.to(device))
    except Exception as e:  # noqa: BLE001  (any shape error inside the user's model)
        first = reason(e, 200)
        if isinstance(e, TypeError) and "required positional argument" in first:
            raise InputError(
                f"the model's forward needs more than one batch of inputs ({first}), as the "
                "PyTorch tutorial's forward(text, offsets) does; ncip calls model(x): give "
                "--model a factory that wraps it, a module whose forward(x) calls yours (for "
                "EmbeddingBag text: flatten x and pass offsets torch.arange(0, x.numel(), "
                "x.shape[1]))"
            ) from None
        raise InputError(
            f"the model cannot take inputs of shape {list(xb.shape[1:])} ({pre.describe()}): "
            f"{first}; it expects {expected_input(model, meta)}"
        ) from None


def probe(
    model: nn.Module,
    pre: Preprocess,
    inp: Inputs,
    device: torch.device | str,
    meta: CheckpointMeta | None = None,
) -> int:
    """Run one input through the model; return the number of classes it outputs."""
    out = probe_output(model, pre, inp, device, meta)
    try:
        z = logits_of(out)
    except ValueError as e:
        raise InputError(str(e)) from None
    if z.ndim != 2 or z.shape[0] != 1 or z.shape[1] < 1:
        raise InputError(
            f"the model's output for one input has shape {list(z.shape)}; ncip "
            "needs class logits [1, C] (C = 1: one logit of a binary classifier)"
        )
    return int(z.shape[1])
