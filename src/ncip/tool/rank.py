"""``ncip.rank``: rank a model's test inputs from its own training checkpoints, streamed.

Checkpoints in any format :mod:`ncip.tool.formats` reads, a model from
:mod:`ncip.tool.modelsource`, inputs from :mod:`ncip.tool.inputs`. σ_cos is read from each
checkpoint's head tensor alone, then Algorithm 1 selects K (:mod:`ncip.tool.history`); the final
checkpoint runs first (its probabilities are kept, O(N × C)), then each selected checkpoint in
turn, batch by batch, adding its distance to the final's into a running TVD sum. Peak memory
therefore does not grow with K. Everything is validated on the way: finite inputs, finite
weights and outputs of every checkpoint (``skip_bad`` drops a bad one with a warning instead;
the final one is never dropped), unique ids, labels in range.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ncip.core.collapse import ALPHA
from ncip.core.engine import Engine, EngineConfig, resolve_device
from ncip.core.logs import log, progress_bar
from ncip.tool.choose import (
    DEFAULT,
    DISPLAY,
    candidate_scores,
    check_method,
    choice_paragraph,
    choose,
)
from ncip.tool.compare import compare_orders
from ncip.tool.formats import Checkpoint, CheckpointError
from ncip.tool.history import (
    bad_checkpoint,
    check_args,
    head_sigma,
    select_checkpoints,
    training_history,
)
from ncip.tool.inputs import (
    InputError,
    Inputs,
    check_inputs,
    labels_by_name,
    load_inputs,
    model_class_names,
)
from ncip.tool.modelsource import LoadedModel, load_model
from ncip.tool.output import Ranking
from ncip.tool.outputs import model_outputs
from ncip.tool.preprocess import plan_preprocess
from ncip.tool.ranking import (
    PassAccumulator,
    as_probs,
    ncip_scores,
    ncip_table,
    selection_record,
)
from ncip.tool.warnings import accuracy_gap, differing_tokenizers, unscaled_features


def _nonfinite_weight(model: torch.nn.Module) -> str | None:
    for k, v in model.state_dict().items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            return k
    return None


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
    k: int | None = None,
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
    class_names: Sequence[str] | None = None,
    text_column: str | None = None,
    final: str | None = None,
    holdout: str | Path | np.ndarray | None = None,
    holdout_labels: Any = None,
    method: str | None = None,
) -> Ranking:
    """Rank ``inputs`` by NCIP from a training run's ``checkpoints``; larger score = label first.

    ``checkpoints``: a folder, a glob (``"ckpt/epoch_*.pt"``) or a list of files, in any format
    of :mod:`ncip.tool.formats`. ``model``: ``"package.module:function"``,
    ``"torchvision:NAME"``, an ncip model name, a callable, or None for ncip and Hugging Face
    checkpoints. ``inputs``: a path (.npz, .npy, a table, raw texts, an image folder) or an
    array; raw texts are encoded with ``tokenizer`` (default: the tokenizer.json beside the
    final checkpoint), truncated to ``max_length`` (:mod:`ncip.tool.texts`); ``labels`` (path or
    array; class indices, or class names mapped through ``class_names`` or a Hugging Face
    config's ``id2label``) add an honest comparison with the final model's confidence scores
    (margin, DeepGini, Entropy, MSP), the checkpoint scores and random order on this model. A run
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

    def warn(line: str | None) -> None:  # a warning of ncip.tool.warnings, shown even --quiet
        if line:
            notes.append(line)
            log.warning("%s", line.removeprefix("warning: "))

    check_args(k, batch_size)
    cs, pruned = training_history(checkpoints, ema, order, note, state_key, allow_uneven, final)
    dev = resolve_device(device)
    lm = load_model(model, cs, num_classes, prefix, head, dev, trust_recorded_model)
    kind = type(lm.model).__name__
    if kind.endswith(("ForCausalLM", "LMHeadModel")):
        raise InputError(
            f"the checkpoints hold a causal language model ({kind}); its test set is prompts: "
            "rank them with --prompts prompts.jsonl instead of --inputs"
        )
    inp = load_inputs(inputs, ids, labels, text_column)
    if inp.texts is not None:
        inp = _encoded(inp, cs.final.path, tokenizer, max_length, lm.model)
        if tokenizer is None:
            from ncip.tool.texts import find_tokenizer

            warn(differing_tokenizers(cs, find_tokenizer(cs.final.path, None)))
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
    warn(unscaled_features(inp.x, inp.detail, mean is not None or std is not None))
    classes, binary, out_plan = model_outputs(lm, cs, pre, inp, dev, head, outputs)
    for line in out_plan.notes:
        note(line)
    # the heads first: a checkpoint of another class count is named before the labels are
    usable, sigma, dropped = head_sigma(lm, cs, skip_bad)
    names = list(class_names) if class_names else model_class_names(lm.model)
    where = "--classes" if class_names else "the config's id2label"
    inp = labels_by_name(inp, names, where)
    if names and inp.class_names is None:
        inp.class_names = list(names)  # shown in previews and Label Studio tasks
    check_inputs(inp, classes)
    sel = select_checkpoints(sigma, len(usable), k, alpha, binary, pruned, note)
    selected = [cs[usable[i]] for i in sel.chosen]
    engine = Engine(
        _as_trained(lm.model, inp, note),
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
    cands = candidate_scores(final_probs, ncip_scores(final_probs, acc.tvd())[0], acc.tvd(), scores)
    choice: dict[str, Any] = {}
    curves = None
    if holdout is not None:
        hold = _holdout(
            holdout,
            holdout_labels,
            text_column,
            cs,
            tokenizer,
            max_length,
            lm,
            names,
            where,
            classes,
            inp,
        )
        note(f"holdout: {len(hold)} labelled inputs from {hold.source}")
        ran = [c for c in selected if c in used]  # final last, as in the pass over the pool
        h_probs, h_acc, _ = _stream(
            engine,
            lm,
            ran,
            hold,
            classes,
            skip_bad,
            show_progress,
            out_plan.kind,
            checkpoint_scores,
        )
        h_cands = candidate_scores(
            h_probs, ncip_scores(h_probs, h_acc.tvd())[0], h_acc.tvd(), h_acc.checkpoint_scores()
        )
        h_fault = h_probs.argmax(axis=1) != np.asarray(hold.y)
        choice["holdout"] = choose(h_cands, h_fault, seed)
        curves = (h_cands, h_fault, f"the holdout, {len(hold)} inputs")
    chosen = (
        check_method(method)
        if method is not None
        else (choice.get("holdout") or {}).get("chosen") or DEFAULT
    )
    if chosen not in cands:
        raise InputError(f"--method {chosen}: not computed in this run (checkpoint scores off)")
    choice |= {"chosen": chosen, "forced": method is not None, "default": DEFAULT}
    table, score, ranked = ncip_table(
        final_probs, acc.tvd(), inp.ids, inp.y, seed, scores, rank_by=cands[chosen]
    )
    record = _record(cs, usable, sel, selected, used, dropped, lm, pre, engine)
    record["outputs"] = out_plan.describe()
    record["method"] = choice
    note(choice_paragraph(choice))
    ev = compare_orders(final_probs, score, inp.y, seed, scores) if inp.y is not None else None
    if inp.y is not None and curves is None:
        curves = (cands, final_probs.argmax(axis=1) != np.asarray(inp.y), "your labelled inputs")
    warn(accuracy_gap(cs, final_probs, inp.y))
    record["seconds"] = seconds = time.perf_counter() - t0
    notes.append(
        f"ranked {len(inp)} inputs with {len(used)} checkpoints (selected from {len(sel.pool)} in "
        f"the pool of {len(cs)}) in {seconds:.1f} s"
    )
    plot = None
    if curves is not None:
        c_all, fault, what = curves
        shown = [chosen] + [n for n in ("ncip", "entropy") if n != chosen]
        plot = ({DISPLAY[n]: c_all[n] for n in shown if n in c_all}, fault, what)
    return Ranking(table, record, ev, notes, ranked, inp, chosen, plot)


def _holdout(
    holdout,
    holdout_labels,
    text_column,
    cs,
    tokenizer,
    max_length,
    lm,
    names,
    where,
    classes,
    inp: Inputs,
) -> Inputs:
    """The labelled holdout, read, encoded and checked as the pool is."""
    hold = load_inputs(holdout, None, holdout_labels, text_column)
    if hold.texts is not None:
        hold = _encoded(hold, cs.final.path, tokenizer, max_length, lm.model)
    _check_finite_inputs(hold)
    hold = labels_by_name(hold, names, where)
    if hold.y is None:
        raise InputError(
            f"--holdout {hold.source} has no labels: give --holdout-labels (a file, or its "
            "label column), or a holdout with a label column or y"
        )
    check_inputs(hold, classes)
    token_ids = np.asarray(inp.x[:1]).dtype.kind in "iu" and np.ndim(inp.x) == 2
    if not token_ids and tuple(hold.x.shape[1:]) != tuple(inp.x.shape[1:]):
        raise InputError(
            f"--holdout {hold.source}: inputs of shape {list(hold.x.shape[1:])}, the pool's "
            f"{list(inp.x.shape[1:])}; give a holdout like the pool (a labelled validation split)"
        )
    if token_ids:
        from ncip.tool.texts import check_token_ids, embedding_rows

        check_token_ids(hold.x, embedding_rows(lm.model), hold.source)
    return hold


def _encoded(inp: Inputs, final: Path, tokenizer, max_length, model) -> Inputs:
    """Raw texts as the token ids of the run's own tokenizer (:mod:`ncip.tool.texts`)."""
    from ncip.tool.texts import embedding_rows, encode_texts, find_tokenizer, model_positions

    positions, rows = model_positions(model), embedding_rows(model)
    x, how, pad = encode_texts(
        inp.texts, find_tokenizer(final, tokenizer), max_length, positions, rows
    )
    return replace(
        inp, x=x, texts=None, detail=f"{inp.detail}; {how}", pad_id=pad, raw_texts=inp.texts
    )


def _as_trained(model: torch.nn.Module, inp: Inputs, note) -> torch.nn.Module:
    """The model to run: a text model that takes an attention mask gets one, 0 on the padding
    positions (the padding id the texts were encoded with, else the model config's
    ``pad_token_id`` where the ids hold it), as its Trainer evaluates it; any other model as
    it is."""
    from ncip.tool.texts import (
        MaskedTextModel,
        check_token_ids,
        config_pad_id,
        embedding_rows,
        takes_attention_mask,
    )

    x = inp.x
    if not (isinstance(x, np.ndarray) and x.ndim == 2 and x.dtype.kind in "iu"):
        return model
    rows = embedding_rows(model)
    check_token_ids(x, rows, inp.source)
    if not takes_attention_mask(model):
        if rows is not None:
            pad = "" if inp.pad_id is None else f" (padding id {inp.pad_id})"
            note(
                f"token ids go in as given, padded{pad}, with no attention mask (the model's "
                "forward takes none): it sees the padding as its training batches showed it"
            )
        return model
    pad = inp.pad_id if inp.pad_id is not None else config_pad_id(model)
    if pad is None:
        note(
            "attention mask: all ones (the model takes one, but neither the tokenizer nor its "
            "config names a padding id: every position counts)"
        )
        return model
    padded = int((x == pad).sum())
    note(
        f"attention mask: 0 on the positions holding the padding id {pad} ({padded} of "
        f"{x.size} positions), as the Hugging Face Trainer evaluates the model"
    )
    return MaskedTextModel(model, pad)


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
        bad_checkpoint(final, why, True, skip_bad)
    acc = PassAccumulator(final_probs, checkpoint_scores)
    used = [final]
    for ck in others:
        bar.set_postfix_str(ck.name, refresh=False)
        why = _pass(engine, lm, ck, inp, acc.add, bar, kind)
        if why:
            bad_checkpoint(ck, why, False, skip_bad)
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
