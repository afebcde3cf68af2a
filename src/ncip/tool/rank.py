"""``ncip.rank``: rank a model's test inputs from its own training checkpoints, streamed.

Checkpoints in any format :mod:`ncip.tool.formats` reads, a model from :mod:`ncip.tool.modelsource`,
inputs from :mod:`ncip.tool.inputs`. σ_cos is read from each checkpoint's head tensor alone, then
Algorithm 1 selects K; the final checkpoint runs first (its probabilities are kept, O(N × C)),
then each selected checkpoint in turn, batch by batch, adding its distance to the final's into
a running TVD sum. Peak memory therefore does not grow with K. Everything is validated on the
way: finite inputs, finite weights and outputs of every checkpoint (``skip_bad`` drops a bad
one with a warning instead; the final one is never dropped), unique ids, labels in range.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ncip.core.collapse import ALPHA, K, Selection, plan, sigma_cos_series
from ncip.core.engine import Engine, EngineConfig, resolve_device
from ncip.core.logs import log, progress_bar
from ncip.tool.compare import compare_orders
from ncip.tool.formats import (
    Checkpoint,
    CheckpointError,
    CheckpointSet,
    check_consistent,
    discover,
)
from ncip.tool.inputs import InputError, Inputs, check_inputs, load_inputs
from ncip.tool.modelsource import HeadRef, LoadedModel, ModelSourceError, find_head, load_model
from ncip.tool.order import late_start, uneven_history
from ncip.tool.output import Ranking
from ncip.tool.outputs import PROBE, OutputPlan, install, plan_outputs
from ncip.tool.preprocess import plan_preprocess, probe_output
from ncip.tool.ranking import (
    PassAccumulator,
    as_probs,
    ncip_table,
    selection_record,
)
from ncip.tool.tensors import read_tensors, tensor_shapes


def _bad(ck: Checkpoint, why: str, final: bool, skip_bad: bool) -> None:
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


def _nonfinite_weight(model: torch.nn.Module) -> str | None:
    for k, v in model.state_dict().items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            return k
    return None


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
            _bad(ck, why, i == len(cs) - 1, skip_bad)
            dropped.append(ck.name)
            continue
        keep.append(i)
        sigma += sigma_cos_series([W], [ck.name])
    return keep, sigma, dropped


MAX_INPUT = 1e15  # no preprocessing brings a value this large to a model's range


def _check_finite_inputs(inp: Inputs) -> None:
    """Float inputs must be finite and of a sane size (integer inputs cannot hold NaN); checked
    in chunks, so a memory-mapped test set larger than memory is read once and not held."""
    if np.dtype(inp.x.dtype).kind != "f":
        return
    for start in range(0, len(inp), 65536):
        chunk = np.asarray(inp.x[start : start + 65536]).reshape(min(65536, len(inp) - start), -1)
        ok = np.isfinite(chunk).all(axis=1)
        if not ok.all():
            i = start + int(np.flatnonzero(~ok)[0])
            raise InputError(
                f"{inp.source}: input {str(inp.ids[i])!r} holds NaN or infinite "
                "values; fix or drop such inputs (NCIP's scores would be "
                "meaningless)"
            )
        big = np.abs(chunk).max(axis=1) > MAX_INPUT
        if big.any():
            i = start + int(np.flatnonzero(big)[0])
            raise InputError(
                f"{inp.source}: input {str(inp.ids[i])!r} holds values up to "
                f"{float(np.abs(chunk[i - start]).max()):.3g}, far outside any model's range "
                "(overflowing its outputs); fix or drop such inputs"
            )


def _pass(
    engine: Engine,
    lm: LoadedModel,
    ck: Checkpoint,
    inp: Inputs,
    on_batch: Callable[[int, np.ndarray], None],
    bar,
    kind: str = "logits",
) -> str | None:
    """Run one checkpoint over all inputs through the engine; call ``on_batch(start, probs)``.
    Returns why the checkpoint is bad (non-finite weights or outputs), or None."""
    batches = -(-len(inp) // engine.batch_size)
    model = lm.load(ck)
    bad = _nonfinite_weight(model)
    if bad:
        bar.update(batches)
        return f"holds NaN or infinite weights (in {bad!r})"
    for done, (_, start, z, _) in enumerate(engine.run(lambda _i: None, 1, inp.x)):
        if not np.all(np.isfinite(z)):
            bar.update(batches - done)
            return "produces NaN or infinite outputs"
        on_batch(start, as_probs(z, kind, f"{ck.name}'s outputs"))
        bar.update(1)
    return None


def rank(
    checkpoints: str | Path | Sequence[str | Path],
    inputs: str | Path | np.ndarray | Inputs,
    model: str | Callable | None = None,
    *,
    k: int = K,
    alpha: float = ALPHA,
    ids: Any = None,
    labels: Any = None,
    head: str | None = None,
    num_classes: int | None = None,
    prefix: str | None = None,
    ema: bool = False,
    state_key: str | None = None,
    scale: bool = True,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    batch_size: int = 256,
    device: str = "auto",
    skip_bad: bool = False,
    seed: int = 0,
    show_progress: bool = True,
    engine_path: str = "auto",
    precision: str = "fp32",
    compile: bool = False,
    trust_recorded_model: bool = False,
    order: str = "auto",
    tokenizer: str | Path | None = None,
    max_length: int | None = None,
    allow_uneven: bool = False,
    outputs: str = "auto",
    checkpoint_scores: bool = True,
) -> Ranking:
    """Rank ``inputs`` by NCIP from a training run's ``checkpoints``; larger score = label first.

    ``checkpoints``: a folder, a glob (``"ckpt/epoch_*.pt"``) or a list of files, in any format
    of :mod:`ncip.tool.formats`. ``model``: ``"package.module:function"``,
    ``"torchvision:NAME"``, an ncip model name, a callable, or None for ncip and Hugging Face
    checkpoints. ``inputs``: a path (.npz, .npy, a table, raw texts, an image folder) or an
    array; raw texts are encoded with ``tokenizer`` (default: the tokenizer.json beside the
    final checkpoint), truncated to ``max_length`` (:mod:`ncip.tool.texts`); ``labels`` (path or
    array) add an honest comparison with margin, DeepGini and random order on this model. A run
    whose checkpoints are not an even history (kept by a metric, thinned) is refused unless
    ``allow_uneven`` (:func:`ncip.tool.order.uneven_history`). Returns a
    :class:`ncip.tool.output.Ranking`: ``table`` (rank, sample_id, ncip, tvd, margin, pred and,
    unless ``checkpoint_scores`` is False, the checkpoint scores of :mod:`ncip.core.dynamics`
    over the same checkpoints as TVD),
    ``selection`` (candidates with σ_cos, pool, selected), ``evaluation`` and ``notes``.
    """
    t0 = time.perf_counter()
    notes: list[str] = []

    def note(msg: str) -> None:
        notes.append(msg)
        log.info("%s", msg)

    _check_args(k, batch_size)
    cs, pruned = _checkpoints(checkpoints, ema, order, note, state_key, allow_uneven)
    dev = resolve_device(device)
    lm = load_model(model, cs, num_classes, prefix, head, dev, trust_recorded_model)
    inp = load_inputs(inputs, ids, labels)
    if inp.texts is not None:
        inp = _encoded(inp, cs.final.path, tokenizer, max_length, lm.model)
    elif tokenizer is not None or max_length is not None:
        flag = "--tokenizer" if tokenizer is not None else "--max-length"
        raise InputError(
            f"{flag} encodes raw texts, and {inp.source} holds none (a table with one text "
            f"column, a .txt or a .jsonl); drop {flag}"
        )
    _check_finite_inputs(inp)
    pre = plan_preprocess(inp, lm.model, lm.meta, scale, mean, std)
    note(f"model: {lm.description}; head {lm.head_key!r}" + _stripped(lm))
    shape = list(inp.x.shape[1:])
    read = f"{inp.source} ({inp.detail})" if inp.detail else inp.source
    note(f"inputs: {len(inp)} from {read}, shape {shape}; preprocessing: {pre.describe()}")
    classes, binary, out_plan = _classes(lm, cs, pre, inp, dev, head, outputs)
    for line in out_plan.notes:
        note(line)
    # the heads first: a checkpoint of another class count is named before the labels are
    usable, sigma, dropped = head_sigma(lm, cs, skip_bad)
    check_inputs(inp, classes)
    sel = _plan(sigma, len(usable), int(k), alpha, binary, pruned, note)
    selected = [cs[usable[i]] for i in sel.chosen]
    engine = Engine(
        lm.model,
        dev,
        EngineConfig(path=engine_path, batch_size=batch_size, precision=precision, compile=compile),
        pre,
    )
    final_probs, acc, used = _stream(
        engine,
        lm,
        selected,
        inp,
        classes,
        skip_bad,
        show_progress,
        out_plan.kind,
        checkpoint_scores,
    )
    dropped += [c.name for c in selected if c not in used]
    scores = acc.checkpoint_scores()
    table, score, ranked = ncip_table(final_probs, acc.tvd(), inp.ids, inp.y, seed, scores)
    record = _record(cs, usable, sel, selected, used, dropped, lm, pre, engine)
    record["outputs"] = out_plan.describe()
    ev = compare_orders(final_probs, score, inp.y, seed, scores) if inp.y is not None else None
    record["seconds"] = seconds = time.perf_counter() - t0
    notes.append(
        f"ranked {len(inp)} inputs with {len(used)} checkpoints (selected from {len(sel.pool)} in "
        f"the pool of {len(cs)}) in {seconds:.1f} s"
    )
    return Ranking(table, record, ev, notes, ranked, inp)


def _encoded(inp: Inputs, final: Path, tokenizer, max_length, model) -> Inputs:
    """Raw texts as the token ids of the run's own tokenizer (:mod:`ncip.tool.texts`)."""
    from ncip.tool.texts import encode_texts, find_tokenizer, model_positions

    positions = model_positions(model)
    x, how = encode_texts(inp.texts, find_tokenizer(final, tokenizer), max_length, positions)
    return replace(inp, x=x, texts=None, detail=f"{inp.detail}; {how}")


def _stripped(lm) -> str:
    return f" (prefix {lm.prefix!r} stripped)" if lm.prefix else ""


def _record(cs, usable, sel, selected, used, dropped, lm, pre, engine) -> dict[str, Any]:
    """The selection record written beside the ranking: every usable candidate with σ_cos,
    the pool and the selection (a selected checkpoint dropped while streaming is not selected),
    and how the run was done."""
    record = selection_record(
        [cs[i].describe() for i in usable],
        sel,
        order=cs.order,
        final=str(selected[-1].path),
        head=lm.head_key,
        model=lm.description,
        used=[str(c.path) for c in sorted(used, key=lambda c: selected.index(c))],
        dropped=dropped,
        skipped=[{"file": f, "reason": r} for f, r in cs.skipped],
        preprocessing=pre.describe(),
        engine={
            "path": engine.path,
            "batch_size": engine.batch_size,
            "precision": engine.config.precision,
        },
    )
    used_files = {str(c.path) for c in used}
    for row in record["checkpoints"]:
        row["selected"] = row["selected"] and row["file"] in used_files
    return record


def _check_args(k: Any, batch_size: int) -> None:
    if isinstance(k, bool) or int(k) != k or k < 2:
        raise InputError(
            f"k must be an integer of at least 2 (the final checkpoint and one more), got {k!r}"
        )
    if batch_size < 1:
        raise InputError(f"batch_size must be positive, got {batch_size}")


def _fmt(c) -> str:
    """A checkpoint's format, with the dict key its weights were read from."""
    return f"{c.fmt} under {c.container_key!r}" if c.container_key else c.fmt


def _checkpoints(
    source,
    ema: bool,
    order: str,
    note: Callable[[str], None],
    state_key: str | None = None,
    allow_uneven: bool = False,
):
    """The run's checkpoints in training order, and the record of a pruned folder if any; a
    history that is not even is refused (as ``ncip prune`` refuses it) unless allowed."""
    cs = discover(source, ema, order, state_key)
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


def _classes(
    lm: LoadedModel, cs, pre, inp: Inputs, dev, head: str | None, outputs: str
) -> tuple[int, bool, OutputPlan]:
    """The model's class count (a one-logit model: 2, ranked as ``[1 - p, p]``) and what its
    outputs are (:mod:`ncip.tool.outputs`), with the head found again when the recorded one
    has another row count."""
    raw = probe_output(lm.model, pre, inp, dev, lm.meta, min(len(inp), PROBE))
    out_plan = plan_outputs(raw, lm.head, lm.num_classes, outputs)
    classes = out_plan.width
    if classes != lm.num_classes:
        if head:
            raise ModelSourceError(
                f"the model outputs {classes} classes but --head {head!r} has {lm.num_classes} rows"
            )
        lm.set_head(find_head(lm.model, classes), cs.final)
    install(lm.model, out_plan)
    binary = classes == 1  # one logit: p = sigmoid(z), or one probability
    return (2 if binary else classes), binary, out_plan


def _plan(sigma, usable: int, k: int, alpha: float, binary: bool, pruned, note) -> Selection:
    """Algorithm 1, the last K for one-logit models (their σ_cos is the same at every
    checkpoint), or a pruned folder's checkpoints as they are; a note on the whole pool."""
    if usable < 2:
        raise CheckpointError(
            f"only {usable} usable checkpoint(s): NCIP needs at least 2 "
            "(with one it reduces to the final model's margin)"
        )
    if pruned:  # the folder holds NCIP's selection already: use it as it is
        note(
            f"this folder was pruned to NCIP's selection (k = {pruned['k']}, alpha = "
            f"{pruned['alpha']:g}; {pruned['ordered_by']}): its {usable} checkpoints are "
            "used as selected"
        )
        return Selection.keep_all(sigma, pruned["k"], pruned["alpha"])
    sel = plan(sigma, k, alpha, binary=binary)
    if sel.note:
        note(sel.note)
    return sel


def _stream(
    engine: Engine,
    lm: LoadedModel,
    selected: list,
    inp: Inputs,
    classes: int,
    skip_bad: bool,
    show_progress: bool,
    kind: str = "logits",
    checkpoint_scores: bool = True,
):
    """The final checkpoint's probabilities, then every other selected checkpoint's TVD to
    them (and the checkpoint scores), one pass each; returns (final probabilities, the
    :class:`ncip.tool.ranking.PassAccumulator`, checkpoints used).
    A checkpoint with non-finite outputs stops the run, or is skipped with ``skip_bad``."""
    n = len(inp)
    final, others = selected[-1], selected[:-1]
    batches = -(-n // engine.batch_size)
    bar = progress_bar(len(selected) * batches, "NCIP", enabled=show_progress, unit="batch")
    final_probs = np.empty((n, classes), dtype=np.float64)

    def keep_final(start: int, p: np.ndarray) -> None:
        final_probs[start : start + len(p)] = p

    bar.set_postfix_str(final.name, refresh=False)
    why = _pass(engine, lm, final, inp, keep_final, bar, kind)
    if why:
        _bad(final, why, True, skip_bad)
    acc = PassAccumulator(final_probs, checkpoint_scores)
    used = [final]
    for ck in others:
        bar.set_postfix_str(ck.name, refresh=False)
        why = _pass(engine, lm, ck, inp, acc.add, bar, kind)
        if why:
            _bad(ck, why, False, skip_bad)
            acc.discard()
            continue
        acc.checkpoint_done()
        used.append(ck)
    bar.set_postfix_str("done", refresh=False)
    bar.close()
    if len(used) < 2:
        raise CheckpointError(
            "fewer than 2 selected checkpoints gave finite outputs: NCIP would "
            "reduce to the final model's margin"
        )
    return final_probs, acc, used
