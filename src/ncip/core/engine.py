"""Multi-checkpoint inference: the outputs of many checkpoints of one model on the same inputs.

NCIP pays for its signal with K forward passes over the test set (the paper calls this its
weakness). This engine runs them on one model instance whose weights are swapped per
checkpoint, by one of these paths:

- ``sequential``: contiguous tensors, checkpoint after checkpoint (what ncip did before);
- ``channels_last``: the same with images in channels-last layout, which is oneDNN's fast path
  for convolutions on a CPU (measured here: 0.36 of K sequential passes for LeNet-5);
- ``stacked``: a chunk of checkpoints at once with ``torch.func`` (stacked weights, ``vmap``
  over ``functional_call``), which turns convolutions into grouped ones; it pays off where
  kernel launches dominate (small models on a GPU) and is slower on this machine's CPU.

``auto`` picks by rule, so one machine always takes the same path and gives the same bytes:
``stacked`` for models of at most 5M parameters on CUDA, else ``channels_last`` for models with
2-D convolutions on 4-D inputs, else ``sequential``. Models that cannot be stacked fall back to
the sequential paths. Precision is fp32 by default (every path equals ``sequential`` within
1e-6 in probabilities, tested per registered architecture); ``bf16``/``fp16`` run under
autocast. ``compile`` wraps the model in ``torch.compile`` (about 25 s of compilation for
LeNet-5 on this CPU, then 0.2 of the sequential time; worth it for long jobs only).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn

from ncip.core.errors import InputError
from ncip.core.models import as_model_input, logits_of

PATHS = ("auto", "sequential", "channels_last", "stacked")
PRECISIONS = ("fp32", "bf16", "fp16")
STACK_MAX_PARAMS = 5_000_000  # auto stacks on CUDA only models this small (launch-bound)


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available; use 'cpu'")
    return torch.device(device)


@dataclass
class EngineConfig:
    """How to run: the path, the batch size (None: 256 on a CPU, 1024 on CUDA), the precision,
    ``torch.compile``, and how many checkpoints the stacked path runs at once."""

    path: str = "auto"
    batch_size: int | None = None
    precision: str = "fp32"
    compile: bool = False
    stack_chunk: int = 8

    def validate(self) -> None:
        if self.path not in PATHS:
            raise InputError(f"engine path must be one of {', '.join(PATHS)}, got {self.path!r}")
        if self.precision not in PRECISIONS:
            raise InputError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if self.batch_size is not None and self.batch_size < 1:
            raise InputError(f"batch size must be positive, got {self.batch_size}")
        if self.stack_chunk < 1:
            raise InputError(f"stack_chunk must be positive, got {self.stack_chunk}")


def _has_conv2d(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def choose_path(
    model: nn.Module, device: torch.device, sample: torch.Tensor, path: str, checkpoints: int
) -> str:
    """The path ``auto`` resolves to for this model, input and device (a rule, not a timing)."""
    if path != "auto":
        if path == "stacked" and checkpoints < 2:
            return choose_path(model, device, sample, "auto", checkpoints)
        return path
    image = sample.ndim == 4 and sample.is_floating_point() and _has_conv2d(model)
    if device.type == "cuda" and checkpoints > 1:
        if sum(p.numel() for p in model.parameters()) <= STACK_MAX_PARAMS:
            return "stacked"
    return "channels_last" if image else "sequential"


@contextmanager
def _true_fp32():
    """TF32 off inside (PyTorch lets cuDNN convolutions use it by default, which put
    ResNet-50's probabilities 0.05 from a float64 computation on an H200, against 4e-7 without)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """The autocast context of a precision, for training and inference alike. fp32 means
    float32 arithmetic: on CUDA, TF32 is off inside; bf16/fp16 are the fast options."""
    if precision == "fp32":
        return _true_fp32() if device.type == "cuda" else nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


class Engine:
    """Run one model's checkpoints over inputs (see the module docstring).

    ``load(i)`` puts checkpoint i's weights into ``model`` (in place); ``preprocess`` turns a
    stored batch (numpy) into a model batch (a tensor on the CPU)."""

    def __init__(
        self,
        model: nn.Module,
        device: torch.device | str = "cpu",
        config: EngineConfig | None = None,
        preprocess: Callable[[np.ndarray], torch.Tensor] | None = None,
    ):
        self.config = config or EngineConfig()
        self.config.validate()
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.preprocess = preprocess or as_model_input
        self.path: str | None = None
        self._compiled: nn.Module | None = None

    @property
    def batch_size(self) -> int:
        return self.config.batch_size or (1024 if self.device.type == "cuda" else 256)

    def _prepare(self, sample: torch.Tensor, checkpoints: int) -> str:
        path = choose_path(self.model, self.device, sample, self.config.path, checkpoints)
        if path != self.path:
            fmt = torch.channels_last if path == "channels_last" else torch.contiguous_format
            self.model.to(memory_format=fmt)
            self._compiled = None
            self.path = path
        return path

    def _batch(self, xb: np.ndarray) -> torch.Tensor:
        t = self.preprocess(xb).to(self.device, non_blocking=True)
        if self.path in ("channels_last", "stacked") and t.ndim == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        return t

    def _forward(self) -> nn.Module:
        if not self.config.compile:
            return self.model
        if self._compiled is None:
            self._compiled = torch.compile(self.model, dynamic=False)
        return self._compiled

    def run(
        self,
        load: Callable[[int], None],
        checkpoints: int,
        x: np.ndarray,
        features: bool = False,
    ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray | None]]:
        """Yield ``(checkpoint index, start row, logits [b, C] float32, features or None)``
        batch by batch, checkpoints in order. ``features`` (penultimate representation, the
        model's ``features(x)``) forces a sequential path."""
        n = len(x)
        if n == 0 or checkpoints == 0:
            return
        path = self._prepare(self.preprocess(x[:1]), checkpoints)
        if path == "stacked" and not features:
            try:
                yield from self._stacked(load, checkpoints, x)
                return
            except _CannotStack:
                self._prepare(self.preprocess(x[:1]), 1)  # falls back to a sequential path
        bs = self.batch_size
        for i in range(checkpoints):
            load(i)  # outside inference mode: the model's own tensors stay ordinary tensors
            self.model.eval()
            fwd = self._forward()
            for start in range(0, n, bs):
                xb = self._batch(x[start : start + bs])
                with torch.inference_mode(), autocast(self.device, self.config.precision):
                    if features:
                        f = self.model.features(xb)
                        z = self.model.head(f)
                    else:
                        z = _logits(fwd(xb))
                feats = f.float().cpu().numpy() if features else None
                yield i, start, z.float().cpu().numpy(), feats

    def _stacked(self, load, checkpoints: int, x):
        from torch.func import functional_call, stack_module_state, vmap

        skeleton = copy.deepcopy(self.model).to("meta")

        def call(p, b, xb):
            return _logits(functional_call(skeleton, (p, b), (xb,)))

        n, bs, chunk = len(x), self.batch_size, self.config.stack_chunk
        for c0 in range(0, checkpoints, chunk):
            members = []
            for i in range(c0, min(c0 + chunk, checkpoints)):
                load(i)
                members.append(copy.deepcopy(self.model).eval())
            params, buffers = stack_module_state(members)
            batched = vmap(call, in_dims=(0, 0, None))
            chunk_out = []  # [batch][member]: consumers expect checkpoint after checkpoint
            for start in range(0, n, bs):
                xb = self._batch(x[start : start + bs])
                try:
                    with torch.inference_mode(), autocast(self.device, self.config.precision):
                        z = batched(params, buffers, xb)  # [chunk, b, C]
                except Exception as e:  # noqa: BLE001  (an op without a batching rule)
                    if c0 == 0 and start == 0:
                        raise _CannotStack(str(e)) from e
                    raise
                chunk_out.append((start, z.float().cpu().numpy()))
            for j in range(len(members)):
                for start, z in chunk_out:
                    yield c0 + j, start, z[j], None

    def outputs(
        self,
        load: Callable[[int], None],
        checkpoints: int,
        x: np.ndarray,
        features: bool = False,
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray | None]]:
        """Whole arrays per checkpoint: yields ``(index, logits [N, C], features or None)``."""
        logits: list[np.ndarray] = []
        feats: list[np.ndarray] = []
        current = 0
        for i, _start, z, f in self.run(load, checkpoints, x, features):
            if i != current:
                yield current, np.concatenate(logits), (np.concatenate(feats) if feats else None)
                logits, feats, current = [], [], i
            logits.append(z)
            if f is not None:
                feats.append(f)
        if logits:
            yield current, np.concatenate(logits), (np.concatenate(feats) if feats else None)


class _CannotStack(RuntimeError):
    pass


def _logits(out) -> torch.Tensor:
    return logits_of(out)


def single(
    model: nn.Module,
    x: np.ndarray | torch.Tensor,
    *,
    device: torch.device | str | None = None,
    config: EngineConfig | None = None,
    features: bool = False,
    preprocess: Callable[[np.ndarray], torch.Tensor] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """One model's logits (and features) on ``x`` through the engine."""
    dev = device or next(model.parameters()).device
    engine = Engine(model, dev, config, preprocess)
    for _, z, f in engine.outputs(lambda _i: None, 1, x, features):
        return z, f
    c = 0
    return np.zeros((0, c), np.float32), (np.zeros((0, 0), np.float32) if features else None)
