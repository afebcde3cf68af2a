"""Per-epoch checkpoints as safetensors: atomic writes, metadata headers, head-only reads.

Each file holds the model's state dict and, in the safetensors header, a JSON record under the
key ``ncip``: epoch, architecture, dataset shape information, the name of the head's weight
tensor, the epoch's metrics and the resolved training configuration. The header can be read
without touching the tensors, and one tensor (the classifier head) can be read without loading
the others, which is what checkpoint selection needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ncip.core.errors import InputError, MissingFileError, NcipError
from ncip.core.io import atomic_path, safetensors_open

if TYPE_CHECKING:  # PyTorch is imported where a model or a whole state is built: selection
    import torch  # and the scoring stages read headers and one head without it

    from ncip.core.models import Classifier

HEAD_KEY = "head.weight"


class CheckpointError(NcipError, ValueError):
    """A checkpoint (or a folder of them) cannot be used; the message names the file and fix."""


@dataclass(frozen=True)
class CheckpointMeta:
    """The ``ncip`` record in every ncip checkpoint's header: one schema for the study's
    training, its import of models trained elsewhere and the tool's ``CheckpointWriter``.
    Fields that do not apply are None and are not written; keys this version does not know are
    kept in ``extra`` (and a writer's own ``extra=`` keys go there)."""

    epoch: int | None = None
    step: int | None = None
    head_key: str = HEAD_KEY  # the classifier head's weight tensor (rows: class vectors)
    num_classes: int | None = None
    input_shape: list[int] | None = None
    # an architecture of ncip.core.models (the study), or "external" (imported)
    arch: str | None = None
    in_channels: int | None = None
    vocab_size: int | None = None
    dataset: str | None = None
    subject: str | None = None
    run: int | None = None
    config: dict[str, Any] | None = None  # the resolved training configuration
    # a model built elsewhere: its factory ("module:callable"), head module, normalisation,
    # or a Hugging Face architecture with its config (rebuilt without running code)
    factory: str | None = None
    head: str | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    hf_architecture: str | None = None
    hf_config: dict[str, Any] | None = None
    # provenance
    writer: str | None = None
    run_id: str | None = None
    source: str | None = None
    metrics: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        return {**{k: v for k, v in out.items() if v is not None}, **self.extra}

    @classmethod
    def from_json(cls, record: Any, where: Path | str = "the checkpoint") -> CheckpointMeta:
        """The record as written by :meth:`to_json`; CheckpointError naming ``where`` if it is
        not a JSON object or a count is not an integer."""
        if not isinstance(record, dict):
            raise CheckpointError(f"{where} has an ncip metadata record that is not an object")
        known = {f.name for f in fields(cls)} - {"extra"}
        for key in ("epoch", "step", "num_classes", "in_channels", "vocab_size", "run"):
            v = record.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise CheckpointError(f"{where} records {key} = {v!r}, not an integer")
        extra = {k: v for k, v in record.items() if k not in known}
        return cls(**{k: v for k, v in record.items() if k in known}, extra=extra)

    @classmethod
    def from_header(cls, header: dict[str, str], path: Path | str) -> CheckpointMeta:
        """The record of a safetensors header that holds one (under ``ncip``)."""
        try:
            record = json.loads(header["ncip"])
        except ValueError:
            raise CheckpointError(f"{path} has an unreadable ncip metadata record") from None
        return cls.from_json(record, path)


def safetensors_header(p: Path) -> dict[str, str]:
    """The metadata of a safetensors file; CheckpointError naming the file if it is unreadable."""

    try:
        with safetensors_open(p, "np") as f:
            return f.metadata() or {}
    except Exception as e:  # noqa: BLE001  (safetensors raises its own error types)
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            f"{p} is not a readable safetensors file (truncated or corrupt? {first}); remove it "
            "from the folder or write it again"
        ) from None


@contextmanager
def _reading(path: Path, framework: str = "pt") -> Iterator[Any]:
    """The open safetensors file; CheckpointError naming the file if it is unreadable."""
    safetensors_header(path)
    try:
        with safetensors_open(path, framework) as f:
            yield f
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001
        raise CheckpointError(
            f"{path} could not be read (truncated or corrupt? "
            f"{str(e).strip().splitlines()[0][:160]})"
        ) from None


def read_safetensors(path: Path, keys: list[str] | None = None) -> dict:
    """Tensors of a safetensors file by name (all with ``keys`` None), on the CPU;
    CheckpointError naming the file if it is unreadable or lacks one."""
    with _reading(path) as f:
        names = list(f.keys())
        missing = [k for k in keys or () if k not in names]
        if missing:
            raise CheckpointError(f"{path} has no tensor {missing[0]!r}")
        return {k: f.get_tensor(k) for k in (keys if keys is not None else names)}


# What must agree between the ncip checkpoints of one run (where a file records it).
CONSISTENT_META = (
    "arch",
    "num_classes",
    "in_channels",
    "input_shape",
    "vocab_size",
    "dataset",
    "subject",
    "run",
)


def check_metas(items: Iterable[tuple[Path, CheckpointMeta]]) -> None:
    """The metadata records of one run's checkpoints agree on :data:`CONSISTENT_META`; the
    message names the file(s) that differ from the others."""
    from collections import Counter

    items = list(items)
    for key in CONSISTENT_META:
        values = {p: json.dumps(getattr(m, key)) for p, m in items if getattr(m, key) is not None}
        counts = Counter(values.values())
        if len(counts) < 2:
            continue
        common, n = counts.most_common(1)[0]
        odd = [p for p, v in values.items() if v != common]
        raise CheckpointError(
            f"{odd[0]} records {key} = {values[odd[0]]} but {n} other checkpoint(s) in the "
            f"folder record {common}: it mixes checkpoints of different runs; move "
            f"{', '.join(Path(p).name for p in odd[:3])} out"
        )


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    epoch: int
    meta: CheckpointMeta


def checkpoint_name(
    epoch: int | None = None, step: int | None = None, suffix: str = ".safetensors"
) -> str:
    """The one file-name rule of checkpoints (and of files derived from one checkpoint):
    ``epoch-006.safetensors`` (zero-padded to 3 digits, wider past 999), or for a checkpoint
    known by its optimiser step only, ``step-000001000.safetensors``."""
    if epoch is not None:
        return f"epoch-{int(epoch):03d}{suffix}"
    if step is not None:
        return f"step-{int(step):09d}{suffix}"
    raise InputError("give the epoch or the step of the checkpoint")


def save_state(path: Path | str, state: dict[str, torch.Tensor], meta: CheckpointMeta) -> None:
    """Write a state dict and ``meta`` (as JSON, under the header key ``ncip``) atomically.

    Tensors are copied, so tensors that share memory (tied weights) can be written."""
    from safetensors.torch import save_file

    tensors = {k: v.detach().cpu().clone().contiguous() for k, v in state.items()}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"ncip": json.dumps(meta.to_json())})


def save_checkpoint(path: Path | str, model: Classifier, meta: CheckpointMeta) -> None:
    """Write one of the study's models (ncip.core.models) with ``meta`` atomically."""
    save_state(path, model.state_dict(), replace(meta, head_key=HEAD_KEY, arch=model.arch))


def read_meta(path: Path | str) -> CheckpointMeta:
    """The checkpoint's metadata record, read from the header alone."""
    header = safetensors_header(Path(path))
    if "ncip" not in header:
        raise CheckpointError(
            f"{path} is not an ncip checkpoint (no 'ncip' metadata record); "
            "rank it with `ncip rank --model ...`, or move it out of the run"
        )
    return CheckpointMeta.from_header(header, path)


def read_tensor(path: Path | str, key: str) -> np.ndarray:
    """Read one tensor from a checkpoint without loading the rest, as float64. A float32 or
    float64 tensor is read as NumPy (no PyTorch import: the selection stage needs nothing
    else); any other dtype, bfloat16 included, through PyTorch."""
    header_dtype = _dtype(Path(path), key)
    if header_dtype in ("F32", "F64"):
        with safetensors_open(path, "np") as f:
            return f.get_tensor(key).astype(np.float64)
    return read_safetensors(Path(path), [key])[key].double().numpy()


def _dtype(path: Path, key: str) -> str:
    """The safetensors dtype name of tensor ``key`` (``F32``, ``BF16``, ...), read from the
    header; CheckpointError naming the file if it is unreadable or lacks the tensor."""
    with _reading(path, "np") as f:
        if key not in f.keys():
            raise CheckpointError(f"{path} has no tensor {key!r}")
        return str(f.get_slice(key).get_dtype())


def read_head(path: Path | str) -> np.ndarray:
    """The classifier head's weight matrix ``[C, d]`` (rows = class vectors)."""
    return read_tensor(path, read_meta(path).head_key)


def build_model(meta: CheckpointMeta) -> Classifier:
    """An untrained model of the architecture a checkpoint's metadata describes."""
    from ncip.core.models import create_model

    if meta.arch == "external":  # a model trained elsewhere, imported into the study
        from ncip.core.factory import build_external

        return build_external(meta)
    if meta.arch is None or meta.num_classes is None:
        raise CheckpointError("the checkpoint records no ncip architecture and class count")
    return create_model(
        meta.arch,
        meta.num_classes,
        meta.in_channels or 1,
        vocab_size=meta.vocab_size,
        input_shape=meta.input_shape,
    )


def _state(path: Path | str) -> dict:
    """All tensors of a checkpoint; CheckpointError naming the file if any is not finite."""
    import torch

    state = read_safetensors(Path(path))
    for k, v in state.items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise CheckpointError(
                f"{path} holds NaN or infinite weights (in {k!r}): training "
                "diverged; retrain with a lower learning rate"
            )
    return state


def load_model(path: Path | str, device: str | torch.device = "cpu") -> Classifier:
    """Rebuild the model from a checkpoint's metadata and load its weights, in eval mode."""
    model = build_model(read_meta(path))
    model.load_state_dict(_state(path))
    return model.to(device).eval()


def load_weights(model: Classifier, path: Path | str) -> Classifier:
    """Load a checkpoint's weights into an existing model of the same architecture."""
    device = next(model.parameters()).device
    model.load_state_dict({k: v.to(device) for k, v in _state(path).items()})
    return model


def check_data_matches(
    info: Any, meta: CheckpointMeta, data_dir: Path | str, checkpoint: Path
) -> None:
    """The prepared data is what the checkpoints were trained on (shape and classes)."""
    if meta.input_shape and list(meta.input_shape) != list(info.input_shape):
        raise CheckpointError(
            f"{data_dir} holds inputs of shape {list(info.input_shape)} but "
            f"{checkpoint} was trained on {list(meta.input_shape)}"
        )
    if meta.num_classes and meta.num_classes != info.num_classes:
        raise CheckpointError(
            f"{data_dir} has {info.num_classes} classes but {checkpoint} has {meta.num_classes}"
        )


def list_checkpoints(directory: Path | str) -> list[CheckpointInfo]:
    """All checkpoints in a directory, ordered by the epoch recorded in their metadata; they
    must belong to one run (same architecture, classes, data, subject and run)."""
    d = Path(directory)
    if not d.is_dir():
        raise MissingFileError(f"checkpoint directory {d} does not exist; train first")
    infos = []
    for p in d.glob("*.safetensors"):
        meta = read_meta(p)
        if meta.epoch is None:
            raise CheckpointError(f"{p} records no epoch; it is not a checkpoint of a study run")
        infos.append(CheckpointInfo(p, meta.epoch, meta))
    infos.sort(key=lambda c: c.epoch)
    epochs = [c.epoch for c in infos]
    if len(set(epochs)) != len(epochs):
        raise CheckpointError(f"{d} holds two checkpoints of the same epoch: {epochs}")
    check_metas((c.path, c.meta) for c in infos)
    return infos
