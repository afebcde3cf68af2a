"""The training history a ranking reads: its checkpoints in training order up to the model
under test (a pruned folder's record, an uneven history refused), σ_cos of each usable one from
its head tensor alone, and the checkpoints Algorithm 1 selects. Shared by :mod:`ncip.tool.rank`,
:mod:`ncip.tool.sequences` and :mod:`ncip.tool.prune`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ncip.core.collapse import K, Selection, candidate_pool, plan, sigma_cos_series
from ncip.core.logs import log
from ncip.tool.formats import (
    Checkpoint,
    CheckpointError,
    CheckpointSet,
    best_checkpoint,
    check_consistent,
    discover,
    trainer_checkpoints,
)
from ncip.tool.inputs import InputError
from ncip.tool.modelsource import HeadRef, LoadedModel
from ncip.tool.order import late_start, uneven_history
from ncip.tool.tensors import read_tensors, tensor_shapes


def bad_checkpoint(ck: Checkpoint, why: str, final: bool, skip_bad: bool) -> None:
    """Raise for a bad checkpoint, unless it may be dropped (then warn)."""
    if final:
        raise CheckpointError(
            f"{ck.path} {why}; it is the final checkpoint, the model under "
            "test: remove it to rank with the last good one"
        )
    if not skip_bad:
        raise CheckpointError(
            f"{ck.path} {why}; remove it, or pass --skip-bad to drop such "
            "checkpoints with a warning"
        )
    log.warning("dropped %s: it %s", ck.path.name, why)


def _pruned_selection(source, cs) -> dict | None:
    """The record of ``ncip prune`` in a checkpoint folder, restricting ``cs`` to what it kept."""
    from ncip.tool.prune import RECORD, read_record

    if not isinstance(source, str | Path) or not Path(source).is_dir():
        return None
    record = read_record(Path(source))
    if record is None:
        return None
    kept = record["kept"]
    names = {c.name for c in cs}
    missing = [n for n in kept if n not in names]
    if missing:
        raise CheckpointError(
            f"{source} was pruned to {len(kept)} checkpoints ({RECORD}) but "
            f"{missing[0]} is gone; the selection cannot be rebuilt"
        )
    position = {c.name: i for i, c in enumerate(cs)}
    last_kept = max(position[n] for n in kept)
    later = [c.name for c in cs if c.name not in kept and position[c.name] > last_kept]
    if later:
        raise CheckpointError(
            f"{source} was pruned ({RECORD}), but {', '.join(later[:3])} came later in "
            "training: training went on after the prune, so the recorded selection is stale; "
            f"move the new checkpoints to their own folder, or delete {RECORD} and prune again"
        )
    cs.skipped += [(c.name, f"left over, not in {RECORD}") for c in cs if c.name not in kept]
    cs.checkpoints = [c for c in cs if c.name in kept]
    return record


def _class_count_mismatch(lm, cs, ck, rows: int) -> None:
    """Name the odd one out: the final checkpoint when most others differ from it."""
    counts = [int(tensor_shapes(c).get(lm.head_key, (rows,))[0]) for c in cs]
    final = counts[-1]
    others = [n for n in counts[:-1] if n != final]
    if len(others) * 2 >= len(counts) - 1:
        raise CheckpointError(
            f"{cs.final.path}: the final checkpoint's head {lm.head_key!r} has {final} rows, "
            f"but {len(others)} of the {len(counts) - 1} other checkpoints have "
            f"{max(set(others), key=others.count)}: it is not of this run; move it out"
        )
    raise CheckpointError(
        f"{ck.path}: head {lm.head_key!r} has {rows} rows, the model (and the final "
        f"checkpoint) {lm.num_classes} classes: it is not of this run; move it out"
    )


def head_sigma(
    lm: LoadedModel | HeadRef, cs: CheckpointSet, skip_bad: bool
) -> tuple[list[int], list[float], list[str]]:
    """(usable checkpoint indices, their σ_cos, the names dropped) from head tensors alone."""
    keep, sigma, dropped = [], [], []  # σ_cos head by head: one head in memory at a time
    for i, ck in enumerate(cs):
        W = read_tensors(ck, [lm.head_key])[lm.head_key].double().numpy()
        W = W.reshape(W.shape[0], -1)
        why = None
        if W.shape[0] != lm.num_classes:
            _class_count_mismatch(lm, cs, ck, W.shape[0])
        if not np.all(np.isfinite(W)):
            why = f"holds NaN or infinite values in its head {lm.head_key!r}"
        elif np.any(np.linalg.norm(W, axis=1) == 0):
            why = f"has an all-zero class vector in its head {lm.head_key!r}"
        if why:
            bad_checkpoint(ck, why, i == len(cs) - 1, skip_bad)
            dropped.append(ck.name)
            continue
        keep.append(i)
        sigma += sigma_cos_series([W], [ck.name])
    return keep, sigma, dropped


def check_args(k: Any, batch_size: int) -> None:
    if k is not None and (isinstance(k, bool) or int(k) != k or k < 2):
        raise InputError(
            f"k must be an integer of at least 2 (the final checkpoint and one more), got {k!r}"
        )
    if batch_size < 1:
        raise InputError(f"batch_size must be positive, got {batch_size}")


def _fmt(c) -> str:
    """A checkpoint's format, with the dict key its weights were read from."""
    return f"{c.fmt} under {c.container_key!r}" if c.container_key else c.fmt


def training_history(
    source,
    ema: bool,
    order: str,
    note: Callable[[str], None],
    state_key: str | None = None,
    allow_uneven: bool = False,
    final: str | None = None,
):
    """The run's checkpoints in training order, and the record of a pruned folder if any; a
    history that is not even is refused (as ``ncip prune`` refuses it) unless allowed.
    ``final`` names the model under test (:func:`_deployed`)."""
    cs = discover(source, ema, order, state_key)
    if isinstance(source, str | Path) and trainer_checkpoints(Path(source)):
        note(
            f"{source} is a Trainer output folder: its checkpoint-* folders are the history "
            "(the model trainer.save_model wrote beside them is not read)"
        )
    cs = _deployed(cs, final, note)
    check_consistent(cs)
    pruned = _pruned_selection(source, cs)
    why = None if pruned is not None else uneven_history(cs)
    if why is not None and not allow_uneven:
        raise CheckpointError(
            f"{source}: {why}, and NCIP's pool ('the last alpha of training') would not mean "
            "that here; keep every epoch (Lightning: save_top_k=-1), or pass --allow-uneven to "
            "rank these checkpoints as they are"
        )
    note(
        f"{len(cs)} checkpoints ({', '.join(sorted({_fmt(c) for c in cs}))}), ordered by "
        f"{cs.order}: {cs[0].name} ... {cs.final.name}"
    )
    if cs.skipped:
        listing = "; ".join(f"{n} ({w})" for n, w in cs.skipped[:6])
        more = f" and {len(cs.skipped) - 6} more" if len(cs.skipped) > 6 else ""
        note(f"skipped {len(cs.skipped)} file(s): {listing}{more}")
    if why is not None:
        note(f"--allow-uneven: {why}; the pool is the last alpha of these {len(cs)} checkpoints")
    elif pruned is None and (late := late_start(cs)):
        note(late)
    if not ema and cs.checkpoints and all(c.has_ema for c in cs):
        note("every checkpoint also holds EMA weights: ranked on the raw ones; --ema ranks those")
    return cs, pruned


def _deployed(cs, final: str | None, note) -> CheckpointSet:
    """The history up to the model under test: ``final`` names it (a checkpoint's name, or
    "last"); without it, a Trainer run whose trainer_state.json names another checkpoint as
    its best (``best_model_checkpoint``: with ``load_best_model_at_end`` that is the model it
    deploys) is refused, never ranked silently against the last one."""
    best = best_checkpoint(cs)
    if final is None and best is not None:
        raise CheckpointError(
            f"trainer_state.json names {best} the best checkpoint (best_model_checkpoint), not "
            f"the last, {cs.final.name}: with load_best_model_at_end=True the deployed model is "
            f"{best}. Rank it as the model under test with --final {best} (the history up to "
            "it), or the last checkpoint with --final last"
        )
    if final is None or final == "last":
        if final == "last" and best is not None:
            note(f"--final last: ranked against {cs.final.name}, not the best, {best}")
        return cs
    names = [c.name for c in cs]
    paths = [c.path.name for c in cs]
    at = names.index(final) if final in names else paths.index(final) if final in paths else None
    if at is None:
        shown = ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")
        raise CheckpointError(f"--final {final!r} is none of the checkpoints ({shown}, last)")
    if at < 1:
        raise CheckpointError(
            f"--final {final}: it is the first checkpoint, with no history before it to compare"
        )
    left = len(cs) - at - 1
    if left:
        note(
            f"--final {final}: the model under test; the {left} checkpoint(s) after it are "
            "left out (NCIP reads the training history up to the model it ranks)"
        )
    return CheckpointSet(cs.checkpoints[: at + 1], cs.order, cs.skipped, cs.ema)


def default_k(usable: int, alpha: float, note) -> int:
    """K when the user gave none: the paper's K, unless the pool holds K checkpoints or fewer
    (a typical fine-tuning history of 3-20), where it would keep the whole pool and selection
    would never run: then half the pool (at least 2), said in one line."""
    pool = len(candidate_pool(usable, alpha))
    if pool > K or pool < 3:
        return K
    k = max(2, pool // 2)
    note(
        f"K = {k}, half the pool of {pool} checkpoints: the default K = {K} would keep the "
        f"whole pool and sigma_cos would choose nothing (--k sets K)"
    )
    return k


def select_checkpoints(
    sigma, usable: int, k: int | None, alpha: float, binary: bool, pruned, note
) -> Selection:
    """Algorithm 1, the last K for one-logit models (their σ_cos is the same at every
    checkpoint), or a pruned folder's checkpoints as they are; a note on the whole pool.
    ``k`` None: :func:`default_k`."""
    if usable < 2:
        raise CheckpointError(
            f"only {usable} usable checkpoint(s): NCIP needs at least 2 (with one it reduces to "
            "the final model's margin); keep one per epoch: the Trainer's "
            "save_strategy='epoch' (its default saves every 500 steps), Lightning's "
            "ModelCheckpoint(save_top_k=-1), or torch.save in a plain loop's every epoch"
        )
    if pruned:  # the folder holds NCIP's selection already: use it as it is
        note(
            f"this folder was pruned to NCIP's selection (k = {pruned['k']}, alpha = "
            f"{pruned['alpha']:g}; {pruned['ordered_by']}): its {usable} checkpoints are "
            "used as selected"
        )
        return Selection.keep_all(sigma, pruned["k"], pruned["alpha"])
    k = default_k(usable, alpha, note) if k is None else int(k)
    sel = plan(sigma, k, alpha, binary=binary)
    if sel.note:
        note(sel.note)
    return sel
