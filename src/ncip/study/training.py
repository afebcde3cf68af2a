"""Seeded, resumable training that writes a safetensors checkpoint after every epoch.

Determinism: the model is initialised from ``seed``; every epoch re-seeds its own shuffling,
mixup and dropout randomness from ``(seed, epoch)``, so an interrupted run resumed from its last
complete epoch continues exactly as if it had never stopped.

Resume: checkpoints and a small training-state file (optimizer, scheduler, history) are written
to ``work_dir`` after every epoch, each atomically (temporary file, then rename). A later call
with the same configuration and data picks up after the last complete epoch. The state file is
read with ``weights_only=True``: tensors and plain containers only.

Finishing is crash-safe: the history and a ``complete.json`` marker are written into
``work_dir``, the resume state is dropped, and ``work_dir`` replaces ``out_dir`` as a whole (one
rename; DVC deletes a stage's outputs before it runs, so the work lives beside the output, not
inside it). A call that finds a complete marker with its own fingerprint only repeats the
hand-over, so a crash at any step of finishing is recovered by running again.

Checkpoint files (and the folder's history.csv) carry no wall-clock time, so one seed gives the
same bytes every time; the seconds per epoch go to the history the function returns.

Training stops at the first non-finite loss (or weight) with :class:`TrainingDiverged`, before
any checkpoint of that epoch is written.

GPU options (all off by default, so a CPU run is bit-for-bit what it was): ``precision``
bf16/fp16 trains under autocast (fp16 with a gradient scaler); ``channels_last`` puts conv
models and image batches in channels-last layout; ``deterministic=False`` lets cuDNN pick its
fastest (non-reproducible) kernels. The training set goes to the GPU once when it takes at most
a quarter of the GPU's memory; a larger one stays in pinned host memory and each mini-batch is
copied asynchronously.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ncip.core.checkpoints import CheckpointMeta
from ncip.core.collapse import sigma_cos
from ncip.core.engine import PRECISIONS, autocast, resolve_device
from ncip.core.errors import InputError, NcipError
from ncip.core.logs import log, progress
from ncip.core.models import Classifier, as_model_input, create_model
from ncip.study.data import DatasetInfo, Split
from ncip.study.predict import batched_outputs
from ncip.study.trainstate import (
    HISTORY_FILE,
    _finish,
    _is_complete,
    _resume,
    _save_epoch,
)


class TrainingDiverged(NcipError, ValueError):
    """The loss or the weights became NaN or infinite; the message says where and what to try."""


OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("none", "cosine")
DEVICE_DATA_SHARE = 0.25  # the training set is uploaded to a GPU when it fits in this share


@dataclass
class TrainConfig:
    arch: str
    epochs: int = 60
    batch_size: int = 128
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9  # SGD only
    weight_decay: float = 0.0
    schedule: str = "none"
    label_smoothing: float = 0.0  # calibration variant (paper Fig. 4a)
    mixup_alpha: float = 0.0  # calibration variant; 0 disables mixup
    seed: int = 0
    eval_batch_size: int = 1024
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast; fp16 with a gradient scaler)
    channels_last: bool = False  # conv models and image batches in channels-last layout
    deterministic: bool = True  # False: cuDNN benchmark mode (faster, not reproducible)

    def validate(self) -> None:
        if self.epochs <= 0:
            raise InputError(f"epochs must be positive, got {self.epochs}")
        if self.batch_size <= 0:
            raise InputError(f"batch_size must be positive, got {self.batch_size}")
        if self.lr <= 0:
            raise InputError(f"lr must be positive, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise InputError(f"label_smoothing must lie in [0, 1), got {self.label_smoothing}")
        if self.mixup_alpha < 0:
            raise InputError(f"mixup_alpha must be >= 0, got {self.mixup_alpha}")
        if self.precision not in PRECISIONS:
            raise InputError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")


def _epoch_seed(seed: int, epoch: int) -> int:
    return (seed * 1_000_003 + epoch * 7919) % (2**63 - 1)


def data_fingerprint(splits: dict[str, Split]) -> str:
    h = hashlib.sha256()
    for name in sorted(splits):
        s = splits[name]
        h.update(name.encode())
        h.update(np.ascontiguousarray(s.x).tobytes())
        h.update(np.ascontiguousarray(s.y).tobytes())
        h.update("\n".join(s.ids.astype(str).tolist()).encode())
    return h.hexdigest()


def make_model(cfg: TrainConfig, info: DatasetInfo) -> Classifier:
    torch.manual_seed(cfg.seed)
    return create_model(
        cfg.arch,
        info.num_classes,
        info.in_channels,
        mean=info.mean,
        std=info.std,
        vocab_size=info.vocab_size,
        input_shape=info.input_shape if info.kind == "image" else None,
    )


def _optimizer(cfg: TrainConfig, model: torch.nn.Module):
    if cfg.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.SGD(
            model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    if cfg.schedule == "cosine":
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    return opt, sched


def accuracy(model: Classifier, split: Split, batch_size: int) -> float:
    if len(split) == 0:
        return float("nan")
    z = batched_outputs(model, split.x, batch_size)
    return float((z.argmax(1) == split.y).mean())


def _distributed(dev: torch.device) -> tuple[int, int, bool]:
    """(rank, world size, whether this call started the process group) under torchrun
    (WORLD_SIZE > 1); (0, 1, False) otherwise. Gloo on the CPU, NCCL on CUDA."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or not dist.is_available():
        return 0, 1, False
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), started


def _barrier(world: int) -> None:
    if world > 1:
        import torch.distributed as dist

        dist.barrier()


def train_with_checkpoints(
    cfg: TrainConfig,
    info: DatasetInfo,
    splits: dict[str, Split],
    out_dir: Path | str,
    work_dir: Path | str | None = None,
    subject: str = "",
    run: int = 0,
    device: str = "auto",
    stop_after: int | None = None,
) -> pd.DataFrame:
    """Train ``cfg.arch`` on ``splits['train']``, checkpointing every epoch; return the history.

    ``splits`` must hold "train", "val" and "test"; val and test are only evaluated, never
    trained on. ``stop_after`` ends the call after that many epochs of this call (used by tests
    to simulate an interruption); the next call resumes.

    Under torchrun (``WORLD_SIZE`` > 1) the model trains with DistributedDataParallel: every
    process takes its share of each mini-batch of the same seeded order (the global batch stays
    ``cfg.batch_size``), and only rank 0 evaluates, writes checkpoints (of the unwrapped model,
    so no ``module.`` prefix), the resume state and the history, and hands the folder over; the
    other ranks return an empty table.
    """
    cfg.validate()
    for name in ("train", "val", "test"):
        if name not in splits:
            raise InputError(f"splits must include {name!r}")
    dev = resolve_device(device)
    if dev.type == "cuda" and "LOCAL_RANK" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
    rank, world, started = _distributed(dev)
    try:
        return _train(
            cfg, info, splits, out_dir, work_dir, subject, run, dev, stop_after, rank, world
        )
    finally:
        if started:
            import torch.distributed as dist

            dist.destroy_process_group()


def _train(cfg, info, splits, out_dir, work_dir, subject, run, dev, stop_after, rank, world):
    out_dir = Path(out_dir)
    work = Path(work_dir) if work_dir is not None else out_dir
    _set_determinism(cfg.deterministic, dev)

    label = f"{subject or cfg.arch}/run-{run}"
    fingerprint = hashlib.sha256(
        json.dumps({"cfg": asdict(cfg), "data": data_fingerprint(splits)}).encode()
    ).hexdigest()
    if _is_complete(work, fingerprint):
        log.info("%s finished training earlier; handing its checkpoints over", label)
        hist = pd.read_csv(work / HISTORY_FILE)
        _barrier(world)  # every rank has seen the marker before rank 0 moves the folder
        return _finish(work, out_dir, hist, fingerprint, info) if rank == 0 else pd.DataFrame()
    model, net, opt, sched, history, start = _setup(
        cfg, info, work, fingerprint, dev, label, rank, world
    )
    x_train = _place_training_data(torch.from_numpy(np.ascontiguousarray(splits["train"].x)), dev)
    y_train = torch.from_numpy(splits["train"].y).to(dev)
    scaler = torch.amp.GradScaler(dev.type, enabled=cfg.precision == "fp16")
    meta_base = _run_meta(cfg, info, subject, run)
    epochs = range(start, cfg.epochs + 1)
    bar = progress(epochs, f"train {label}", total=len(epochs), unit="epoch")
    for done_this_call, epoch in enumerate(bar, start=1):
        t0 = time.perf_counter()
        loss, train_acc = _train_epoch(
            net, opt, x_train, y_train, cfg, epoch, label, rank, world, scaler
        )
        lr = opt.param_groups[0]["lr"]
        sched.step()
        if rank != 0:  # rank 0 evaluates and writes; the others wait for it
            _barrier(world)
            if stop_after is not None and done_this_call >= stop_after and epoch < cfg.epochs:
                return pd.DataFrame()
            continue
        row = _epoch_row(model, splits, cfg, epoch, loss, train_acc, lr, t0)
        history.append(row)
        _save_epoch(
            work, model, replace(meta_base, epoch=epoch), row, opt, sched, history, fingerprint
        )
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(
                loss=f"{loss:.3f}", train=f"{train_acc:.3f}", test=f"{row['test_acc']:.3f}"
            )
        _barrier(world)
        if stop_after is not None and done_this_call >= stop_after and epoch < cfg.epochs:
            log.info("stopping after epoch %d as asked; the next call resumes", epoch)
            return pd.DataFrame(history)
    if rank != 0:
        return pd.DataFrame()
    return _finish(work, out_dir, pd.DataFrame(history), fingerprint, info)


def _setup(
    cfg: TrainConfig,
    info: DatasetInfo,
    work: Path,
    fingerprint: str,
    dev: torch.device,
    label: str,
    rank: int,
    world: int,
) -> tuple:
    """(model, the network to step: the model or its DDP wrapper, optimizer, schedule,
    history so far, first epoch): a fresh model, or the interrupted run's state resumed."""
    model = make_model(cfg, info).to(dev)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt, sched = _optimizer(cfg, model)
    history, start = [], 1
    if rank == 0:  # rank 0 may discard a stale state; the others read what it kept
        history, start = _resume(work, fingerprint, model, opt, sched, dev, label)
        work.mkdir(parents=True, exist_ok=True)
    _barrier(world)
    if rank != 0:
        history, start = _resume(work, fingerprint, model, opt, sched, dev, label, discard=False)
    net = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    return model, net, opt, sched, history, start


def _run_meta(cfg: TrainConfig, info: DatasetInfo, subject: str, run: int) -> CheckpointMeta:
    """What every checkpoint of the run records besides its epoch and metrics."""
    return CheckpointMeta(
        subject=subject,
        run=run,
        dataset=info.name,
        num_classes=info.num_classes,
        in_channels=info.in_channels,
        input_shape=list(info.input_shape),
        vocab_size=info.vocab_size,
        config=asdict(cfg),
    )


def _epoch_row(
    model: Classifier,
    splits: dict[str, Split],
    cfg: TrainConfig,
    epoch: int,
    loss: float,
    train_acc: float,
    lr: float,
    t0: float,
) -> dict[str, Any]:
    """The epoch's record in the training history (and the checkpoint's metrics)."""
    return {
        "epoch": epoch,
        "loss": loss,
        # running accuracy over the epoch's mini-batches (an extra pass would cost ~30%);
        # under mixup, against each mixed input's dominant label
        "train_acc": train_acc,
        "val_acc": accuracy(model, splits["val"], cfg.eval_batch_size),
        "test_acc": accuracy(model, splits["test"], cfg.eval_batch_size),
        "sigma_cos": sigma_cos(model.head.weight.detach().cpu().double().numpy()),
        "lr": lr,
        "seconds": time.perf_counter() - t0,
    }


def _train_epoch(
    model,
    opt,
    x_train,
    y_train,
    cfg: TrainConfig,
    epoch: int,
    label: str,
    rank: int = 0,
    world: int = 1,
    scaler: torch.amp.GradScaler | None = None,
) -> tuple[float, float]:
    """One pass over the training data in the epoch's seeded order; (mean loss, running
    accuracy). Stops with TrainingDiverged on a non-finite loss or weight. Under DDP each rank
    takes every ``world``-th input of each mini-batch; loss and accuracy are summed over ranks.
    """
    n = len(y_train)
    gen = torch.Generator().manual_seed(_epoch_seed(cfg.seed, epoch))
    torch.manual_seed(_epoch_seed(cfg.seed, epoch) + 1)  # dropout, if the model has any
    perm = torch.randperm(n, generator=gen)
    dev = y_train.device
    model.train()
    loss_sum, correct = 0.0, 0
    for i in range(0, n, cfg.batch_size):
        idx = perm[i : i + cfg.batch_size][rank::world]
        xb = x_train[idx.to(x_train.device)].to(dev, non_blocking=True)
        xb, yb = as_model_input(xb), y_train[idx.to(dev)]
        if cfg.channels_last and xb.ndim == 4:
            xb = xb.contiguous(memory_format=torch.channels_last)
        with autocast(dev, cfg.precision):
            loss, out, target = _step_loss(model, xb, yb, cfg, gen)
        if world == 1 and not torch.isfinite(loss):  # under DDP: the weight check below
            raise TrainingDiverged(
                f"training {label} diverged at epoch {epoch}, batch {i // cfg.batch_size + 1}: "
                f"the loss is {float(loss.detach())} (lr {opt.param_groups[0]['lr']:g}); "
                "lower train.lr (or add a schedule); no checkpoint of this epoch was written"
            )
        opt.zero_grad(set_to_none=True)
        if scaler is not None and scaler.is_enabled():
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        loss_sum += float(loss.detach()) * len(idx)
        correct += int((out.argmax(1) == target).sum())
    if world > 1:
        import torch.distributed as dist

        totals = torch.tensor([loss_sum, float(correct)], dtype=torch.float64, device=dev)
        dist.all_reduce(totals)
        loss_sum, correct = float(totals[0]), int(totals[1])
    bad = [
        k
        for k, t in getattr(model, "module", model).state_dict().items()
        if t.is_floating_point() and not bool(torch.isfinite(t).all())
    ]
    if bad:
        raise TrainingDiverged(
            f"training {label} diverged in epoch {epoch}: {bad[0]!r} holds NaN or infinite "
            "values; lower train.lr; no checkpoint of this epoch was written"
        )
    return loss_sum / n, correct / n


def _set_determinism(deterministic: bool, dev: torch.device) -> None:
    """Reproducible kernels (the default), or cuDNN's fastest ones."""
    if dev.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.deterministic = deterministic
        torch.backends.cudnn.benchmark = not deterministic
    torch.use_deterministic_algorithms(deterministic, warn_only=True)


def _place_training_data(x: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """The training inputs where mini-batches are cut from: on the GPU when they fit in
    ``DEVICE_DATA_SHARE`` of its memory (one upload), else in pinned host memory (each batch is
    then copied asynchronously); on the CPU, as they are."""
    if dev.type != "cuda":
        return x.to(dev)
    total = torch.cuda.get_device_properties(dev).total_memory
    nbytes = x.element_size() * x.nelement()
    if nbytes <= DEVICE_DATA_SHARE * total:
        return x.to(dev)
    log.info(
        "training set (%.1f GiB) kept in pinned host memory; batches copied asynchronously",
        nbytes / 2**30,
    )
    return x.pin_memory()


def _step_loss(model, xb, yb, cfg: TrainConfig, gen: torch.Generator):
    """(loss, logits, the labels accuracy is counted against) of one mini-batch."""
    if cfg.mixup_alpha > 0:
        lam = float(
            np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=gen))).beta(
                cfg.mixup_alpha, cfg.mixup_alpha
            )
        )
        j = torch.randperm(len(yb), generator=gen).to(xb.device)
        out = model(lam * xb + (1 - lam) * xb[j])
        loss = lam * F.cross_entropy(out, yb, label_smoothing=cfg.label_smoothing) + (
            1 - lam
        ) * F.cross_entropy(out, yb[j], label_smoothing=cfg.label_smoothing)
        return loss, out, (yb if lam >= 0.5 else yb[j])
    out = model(xb)
    return F.cross_entropy(out, yb, label_smoothing=cfg.label_smoothing), out, yb
