"""``ncip prune``: delete the checkpoints NCIP would not select, keeping the ranking unchanged.

A run that kept every epoch holds many checkpoints of which NCIP uses K. :func:`plan_prune`
selects them as `ncip rank` does (σ_cos of each head, Algorithm 1 over the last α share) and
lists the rest with the bytes they take; :func:`apply_prune` writes ``ncip-prune.json`` (what
was kept, for which K and α) and then deletes the others' weight files, and nothing else: a
checkpoint that is a folder (a Trainer's ``checkpoint-<step>/``) loses its model weights
(``model.safetensors``, ``pytorch_model.bin``, their shards and index) while the folder, its
optimizer and scheduler states, its trainer state and any file of the user's stay. `ncip rank`
on a pruned folder uses exactly the kept checkpoints, so it ranks as it did on the full folder.

Pruning needs an even history (every epoch, or every N steps): a folder whose checkpoints were
chosen by a metric (Lightning's ``save_top_k`` with a ``monitor``, timm's best-10) or thinned
unevenly is refused, because NCIP's candidate pool ("the last α of training") would not mean
what it says there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncip.core.collapse import ALPHA, K, plan
from ncip.core.errors import NcipError
from ncip.core.io import write_json
from ncip.tool.files import follow_umask
from ncip.tool.formats import Checkpoint, CheckpointError, CheckpointSet, check_consistent, discover
from ncip.tool.order import uneven_history

RECORD = "ncip-prune.json"


class PruneError(NcipError, ValueError):
    """The folder cannot be pruned; the message says why."""


@dataclass
class PrunePlan:
    folder: Path
    keep: list[Checkpoint]
    delete: list[Checkpoint]
    sizes: dict[Path, int]
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes_freed(self) -> int:
        return sum(self.sizes[c.path] for c in self.delete)

    def describe(self) -> str:
        lines = [
            f"{self.folder}: keep {len(self.keep)} of {len(self.keep) + len(self.delete)} "
            f"checkpoints (k = {self.record['k']}, alpha = {self.record['alpha']:g}), "
            f"delete {len(self.delete)}, freeing {_human(self.bytes_freed)}"
        ]
        kept = {c.path for c in self.keep}
        for c in sorted(self.keep + self.delete, key=lambda c: self.record["order"].index(c.name)):
            mark = "keep  " if c.path in kept else "delete"
            lines.append(f"  {mark} {c.name:<40} {_human(self.sizes[c.path]):>10}")
        if any(c.path.is_dir() for c in self.delete):
            lines.append(
                "  in each checkpoint folder only the model weights are deleted; the folder "
                "and its other files (optimizer, scheduler and trainer state, your own files) stay"
            )
        if self.record.get("other_files"):
            lines.append(
                f"  {self.record['other_files']} other files (optimizer or scheduler "
                "state, logs, ...) are left as they are"
            )
        return "\n".join(lines)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def weight_files(p: Path) -> list[Path]:
    """The files prune deletes for a checkpoint: the file itself, or in a checkpoint folder its
    model weights (:data:`ncip.tool.tensors.HF_WEIGHT_FILES` and the shards an index names,
    regular files inside the folder only)."""
    if not p.is_dir():
        return [p]
    from ncip.tool.tensors import HF_WEIGHT_FILES

    out = [p / f for f in HF_WEIGHT_FILES if (p / f).is_file()]
    for index in [f for f in out if f.name.endswith(".index.json")]:
        try:
            shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        except (OSError, ValueError, AttributeError):
            shards = set()
        for name in sorted(str(n) for n in shards):
            f = p / name
            if f.parent == p and f.is_file() and not f.is_symlink() and f not in out:
                out.append(f)
    return out


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in weight_files(p))


def read_record(folder: Path) -> dict[str, Any] | None:
    f = Path(folder) / RECORD
    if not f.is_file():
        return None
    try:
        record = json.loads(f.read_text())
        record["kept"]  # noqa: B018  (must be there)
        return record
    except (ValueError, KeyError, TypeError):
        raise CheckpointError(f"{f} is not a readable prune record; delete it") from None


def check_history(cs: CheckpointSet, folder: Path) -> None:
    """Refuse a history that is uneven (thinned) or chosen by a metric."""
    if len(cs) < 3:
        raise PruneError(f"{folder} holds {len(cs)} checkpoints: nothing to prune")
    why = uneven_history(cs)
    if why is not None:
        raise PruneError(
            f"{folder}: {why}, and NCIP's pool ('the last alpha of training') would not mean "
            "that here; keep every epoch (Lightning: save_top_k=-1; timm: the ncip writer) to "
            "prune"
        )


def plan_prune(
    folder: str | Path,
    model: str | Callable | None = None,
    *,
    k: int = K,
    alpha: float = ALPHA,
    head: str | None = None,
    num_classes: int | None = None,
    prefix: str | None = None,
    ema: bool = False,
    state_key: str | None = None,
) -> PrunePlan:
    """What :func:`apply_prune` would keep and delete (nothing is touched)."""
    from ncip.tool.history import head_sigma
    from ncip.tool.modelsource import load_model, recorded_head

    folder = Path(folder)
    if not folder.is_dir():
        raise PruneError(f"{folder} is not a folder of checkpoints")
    done = read_record(folder)
    if done is not None:
        return _resume(folder, done, ema, state_key, int(k), float(alpha))
    cs = discover(folder, ema, state_key=state_key)
    check_consistent(cs)
    check_history(cs, folder)
    lm = recorded_head(cs) if model is None and head is None else None
    if lm is None:
        lm = load_model(model, cs, num_classes, prefix, head, "cpu")
    usable, sigma, _ = head_sigma(lm, cs, skip_bad=False)
    binary = lm.num_classes == 1  # one logit: no sigma_cos; the last K, as rank takes them
    keep = [cs[usable[i]] for i in plan(sigma, int(k), alpha, binary=binary).chosen]
    _check_finite(keep, folder)
    kept = {c.path for c in keep}
    delete = [c for c in cs if c.path not in kept]
    record = {
        "k": int(k),
        "alpha": float(alpha),
        "kept": [c.name for c in keep],
        "deleted": [c.name for c in delete],
        "order": [c.name for c in cs],
        "sigma_cos": {cs[usable[i]].name: s for i, s in enumerate(sigma)},
        "head": lm.head_key,
        "ordered_by": cs.order,
        "other_files": len(cs.skipped),
    }
    return PrunePlan(folder, keep, delete, {c.path: _size(c.path) for c in cs}, record)


def _check_finite(keep: list[Checkpoint], folder: Path) -> None:
    """Every checkpoint to keep must hold finite weights, in every tensor: `ncip rank` would
    refuse the pruned folder otherwise (and the others would be gone)."""
    import torch

    from ncip.tool.tensors import read_tensors

    for c in keep:
        for name, t in read_tensors(c).items():
            if isinstance(t, torch.Tensor) and t.is_floating_point() and not t.isfinite().all():
                raise PruneError(
                    f"{c.path} holds NaN or infinite values in {name!r}, and NCIP would keep "
                    f"it: nothing was deleted; remove the checkpoints from the divergence on "
                    f"and prune {folder} again"
                )


def _resume(
    folder: Path,
    record: dict[str, Any],
    ema: bool,
    state_key: str | None = None,
    k: int | None = None,
    alpha: float | None = None,
) -> PrunePlan:
    """A folder pruned already: finish the deletions of a prune that was killed part-way, with
    the K and alpha it was started with; refuse another K or alpha, or a record that does not
    describe the folder any more (it holds NCIP's selection)."""
    asked = (k, alpha) != (record.get("k"), record.get("alpha")) and k is not None
    if asked:
        raise PruneError(
            f"{folder} was pruned with k = {record.get('k')}, alpha = {record.get('alpha'):g} "
            f"({RECORD}); k = {k}, alpha = {alpha:g} would need checkpoints it deleted: nothing "
            f"was deleted now (to finish that prune, pass --k {record.get('k')} --alpha "
            f"{record.get('alpha'):g})"
        )
    cs = discover(folder, ema, state_key=state_key)
    new = [c.name for c in cs if c.name not in record.get("order", [])]
    if new:
        raise PruneError(
            f"{folder} was pruned ({RECORD}), but {', '.join(new[:3])} came after: training "
            f"went on, so the record is stale; nothing was deleted (move the new checkpoints to "
            f"their own folder, or delete {RECORD} and prune again)"
        )
    left = [n for n in record.get("deleted", []) if (folder / n).exists()]
    if not left:
        raise PruneError(f"{folder} was pruned already ({RECORD}); it holds NCIP's selection")
    by_name = {c.name: c for c in cs}
    keep = [by_name[n] for n in record["kept"] if n in by_name]
    if len(keep) != len(record["kept"]):
        gone = sorted(set(record["kept"]) - set(by_name))
        raise PruneError(f"{folder}: the prune record keeps {gone[0]}, which is gone")
    delete = [by_name[n] for n in left if n in by_name]
    return PrunePlan(folder, keep, delete, {c.path: _size(c.path) for c in keep + delete}, record)


def _writable(folder: Path) -> bool:
    """Whether this user may create and delete files in ``folder``."""
    return os.access(folder, os.W_OK | os.X_OK)


def apply_prune(p: PrunePlan) -> None:
    """Write the record, then delete. A crash part-way leaves the record and some files: ranking
    uses the recorded ones, and the leftovers can be deleted by hand or by pruning again."""
    files = [f for c in p.delete for f in weight_files(c.path)]
    locked = sorted({str(f.parent) for f in files if not _writable(f.parent)} - {str(p.folder)})
    if not _writable(p.folder):
        locked.insert(0, str(p.folder))
    if locked:
        raise PruneError(
            f"cannot delete in {locked[0]}"
            + (f" and {len(locked) - 1} more folder(s)" if len(locked) > 1 else "")
            + ": not writable by this user; nothing was deleted (make the folders writable, or "
            "prune as their owner)"
        )
    try:
        write_json(p.folder / RECORD, {**p.record, "bytes_freed": p.bytes_freed})
    except OSError as e:
        raise PruneError(
            f"cannot write {p.folder / RECORD} ({e.strerror or e}); nothing was deleted"
        ) from None
    follow_umask([p.folder / RECORD])
    for f in files:
        try:
            f.unlink(missing_ok=True)
        except OSError as e:
            raise PruneError(
                f"cannot delete {f} ({e.strerror or e}): the prune stopped part-way; "
                f"{p.folder / RECORD} holds the selection: fix that and run the same command "
                "again to finish it"
            ) from None
