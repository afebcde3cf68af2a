"""``ncip.rank_sequences``: rank a causal language model's test prompts from its fine-tuning
checkpoints (``ncip rank CHECKPOINTS --prompts prompts.jsonl``), as :mod:`ncip.core.sequences`
defines it.

Prompts: a ``.jsonl`` file (a ``prompt`` or ``text`` field, optional ``reference`` and ``id``),
a ``.txt`` file (one prompt per line), or a list of strings. They are encoded with the run's
``tokenizer.json`` (as raw texts are, :mod:`ncip.tool.texts`) with no padding: prompts longer
than ``max_prompt_tokens`` (default: the model's positions less ``new_tokens``) keep their last
tokens, and batches hold prompts of one length, so no model needs an attention mask.

The steps: σ_cos of each checkpoint's LM head (the Gram route for a vocabulary-sized head,
:func:`ncip.core.collapse.sigma_cos`), Algorithm 1; the final checkpoint's greedy continuation
of ``new_tokens`` tokens; then every selected checkpoint teacher-forced on prompt +
continuation. The final checkpoint's next-token distributions are held for a chunk of prompts
at a time (``memory_mb``), so memory is bounded whatever the vocabulary, N and K; each
checkpoint is loaded once per chunk. With references, each continuation's BLEU-2 decides which
prompts fail, and NCIP is compared with the token-level confidence scores on them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ncip.core.collapse import ALPHA
from ncip.core.engine import resolve_device
from ncip.core.errors import InputError
from ncip.core.lmengine import MEMORY_MB
from ncip.core.lmengine import sequence_stats as lm_sequence_stats
from ncip.core.logs import log
from ncip.core.sequences import METHODS, TokenStats, bleu2, failures, prompt_scores
from ncip.tool.compare import compare_scores
from ncip.tool.history import (
    bad_checkpoint,
    check_args,
    head_sigma,
    select_checkpoints,
    training_history,
)
from ncip.tool.modelsource import load_model
from ncip.tool.output import Ranking
from ncip.tool.ranking import selection_record
from ncip.tool.texts import (
    encode_with,
    find_tokenizer,
    json_rows,
    load_tokenizer,
    model_positions,
    read_text_lines,
)

PROMPT_FIELDS = ("prompt", "text")
NEW_TOKENS = 16  # the continuation scored (the paper's Fig. 4b setting is not stated; 16 here)
NAMES = {  # method -> its name in the evaluation table
    "ncip": "NCIP",
    "margin": "Margin",
    "entropy": "Entropy",
    "msp": "MSP",
    "deepgini": "DeepGini",
    "logppl": "LogPPL",
}
assert set(NAMES) == set(METHODS)


@dataclass
class Prompts:
    texts: list[str]
    ids: np.ndarray
    references: list[str] | None
    source: str


def read_prompts(prompts: str | Path | Sequence[str], references=None) -> Prompts:
    """Prompts (and references) from a .jsonl, a .txt or a list of strings."""
    if isinstance(prompts, str | Path) and Path(prompts).suffix.lower() in (".jsonl", ".txt"):
        path = Path(prompts)
        if not path.is_file():
            from ncip.tool.texts import not_a_file

            raise InputError(not_a_file(path, "prompts file", "a .jsonl or .txt of prompts"))
        if path.suffix.lower() == ".txt":
            texts, ids = read_text_lines(path)
            return Prompts(texts, ids, _references(references, len(texts)), str(path))
        rows = json_rows(path)
        key = next((k for k in PROMPT_FIELDS if k in rows[0]), None)
        if key is None:
            raise InputError(f"{path}: each line needs a 'prompt' (or 'text') field")
        has_ref = "reference" in rows[0]
        with_ref = [n for n, r in enumerate(rows, start=1) if "reference" in r]
        if with_ref and not has_ref:  # some lines have one: all of them must (issue 47)
            raise InputError(
                f"{path}: object {with_ref[0]} has a 'reference' but object 1 has none; give "
                "every line a reference, or none"
            )
        for n, row in enumerate(rows, start=1):
            if not isinstance(row.get(key), str) or (
                has_ref and not isinstance(row.get("reference"), str)
            ):
                want = f"{key!r} and 'reference'" if has_ref else repr(key)
                raise InputError(
                    f"{path}: object {n} lacks a string {want}; every line needs the same fields"
                )
        texts = [r[key] for r in rows]
        ids = np.array([str(r.get("id", i)) for i, r in enumerate(rows)])
        seen: dict[str, int] = {}
        for n, v in enumerate(ids.tolist(), start=1):
            if v in seen:
                raise InputError(
                    f"{path}: objects {seen[v]} and {n} have the same id {v!r}; every prompt "
                    "needs its own id (the ranking names prompts by it)"
                )
            seen[v] = n
        refs = [r["reference"] for r in rows] if has_ref else _references(references, len(rows))
        return Prompts(texts, ids, refs, str(path))
    if isinstance(prompts, str | Path):
        raise InputError(
            f"prompts {prompts}: give a .jsonl (a 'prompt' field, optional 'reference' and "
            "'id') or a .txt (one prompt per line)"
        )
    texts = [str(t) for t in prompts]
    ids = np.arange(len(texts)).astype(str)
    return Prompts(texts, ids, _references(references, len(texts)), "list")


def _references(references, n: int) -> list[str] | None:
    if references is None:
        return None
    refs = [str(r) for r in references]
    if len(refs) != n:
        raise InputError(f"{len(refs)} references for {n} prompts; give one per prompt")
    return refs


def encode_prompts(p: Prompts, tokenizer_path: Path, limit: int | None) -> list[list[int]]:
    """Token ids of each prompt (no padding), left-truncated to ``limit`` tokens."""
    tok = load_tokenizer(tokenizer_path)
    tok.no_padding()
    tok.no_truncation()
    ids = [e.ids for e in encode_with(tok, p.texts, tokenizer_path)]
    for i, t in enumerate(ids):
        if not t:
            raise InputError(f"{p.source}: prompt {p.ids[i]!r} encodes to no tokens; drop it")
    return [t[-limit:] if limit else t for t in ids]


@dataclass
class Run:
    """A language model's run made ready to score: its checkpoints, the model, the encoded
    prompts and σ_cos of each usable checkpoint's head."""

    cs: Any
    pruned: dict | None
    lm: Any
    prompts: Prompts
    ids: list[list[int]]
    tokenizer: Path
    limit: int | None
    usable: list[int]
    sigma: list[float]
    dropped: list[str]
    device: torch.device


def prepare_run(
    checkpoints,
    prompts,
    model=None,
    *,
    references=None,
    tokenizer=None,
    new_tokens=NEW_TOKENS,
    max_prompt_tokens=None,
    head=None,
    prefix=None,
    device="auto",
    order="auto",
    allow_uneven=False,
    trust_recorded_model=False,
    skip_bad=False,
    note=log.info,
    final=None,
) -> Run:
    """Read the prompts and checkpoints, build the model and read every head's σ_cos."""
    if isinstance(new_tokens, bool) or int(new_tokens) != new_tokens or new_tokens < 1:
        raise InputError(f"new_tokens must be a positive integer, got {new_tokens!r}")
    p = read_prompts(prompts, references)
    if not p.texts:
        raise InputError(f"{p.source} holds no prompts")
    cs, pruned = training_history(checkpoints, False, order, note, None, allow_uneven, final)
    dev = resolve_device(device)
    lm = load_model(model, cs, None, prefix, head, dev, trust_recorded_model)
    kind = type(lm.model).__name__
    if kind.endswith(("ForSequenceClassification", "ForImageClassification")):
        raise InputError(
            f"the checkpoints hold a classifier ({kind}); its test set is inputs to classify: "
            "rank them with --inputs (texts, a table, ids) instead of --prompts"
        )
    positions = model_positions(lm.model)
    limit = max_prompt_tokens or (positions - new_tokens if positions else None)
    if limit is not None and limit < 1:
        raise InputError(f"{new_tokens} new tokens leave no room for a prompt in {positions}")
    if positions and limit + new_tokens > positions:  # past them the position table has no row
        raise InputError(
            f"prompts of up to {limit} tokens (--max-length, max_prompt_tokens) and "
            f"{new_tokens} new tokens (--new-tokens) are more than the model's {positions} "
            "positions; give --max-length "
            f"at most {positions - new_tokens}, or fewer --new-tokens"
        )
    tok_path = find_tokenizer(cs.final.path, tokenizer)
    ids = encode_prompts(p, tok_path, limit)
    note(f"model: {lm.description}; head {lm.head_key!r} ({lm.num_classes} tokens)")
    note(
        f"prompts: {len(ids)} from {p.source}, tokenized with {tok_path} (up to {limit} tokens, "
        f"the last kept); continuation: {new_tokens} greedy tokens of the final checkpoint"
    )
    usable, sigma, dropped = head_sigma(lm, cs, skip_bad)
    return Run(cs, pruned, lm, p, ids, tok_path, limit, usable, sigma, dropped, dev)


def sequence_stats(
    run: Run,
    checkpoints: list,
    new_tokens: int = NEW_TOKENS,
    batch_size: int = 32,
    memory_mb: int = MEMORY_MB,
    skip_bad: bool = False,
    show_progress: bool = True,
) -> tuple[TokenStats, np.ndarray]:
    """:func:`ncip.core.lmengine.sequence_stats` over ``checkpoints`` (the final last) of a
    prepared run: a bad checkpoint stops the run, or is dropped with ``skip_bad``."""
    return lm_sequence_stats(
        run.lm.load,
        checkpoints,
        run.ids,
        new_tokens,
        run.lm.num_classes,
        run.device,
        lambda ck, why, final: bad_checkpoint(ck, why, final, skip_bad),
        batch_size,
        memory_mb,
        show_progress,
    )


def decode(run: Run, cont: np.ndarray) -> list[str]:
    """The continuations as text, decoded with the run's tokenizer."""
    tok = load_tokenizer(run.tokenizer)
    return tok.decode_batch([c.tolist() for c in cont], skip_special_tokens=True)


def rank_sequences(
    checkpoints: str | Path | Sequence[str | Path],
    prompts: str | Path | Sequence[str],
    model: str | Any = None,
    *,
    references: Sequence[str] | None = None,
    k: int | None = None,
    alpha: float = ALPHA,
    tokenizer: str | Path | None = None,
    new_tokens: int = NEW_TOKENS,
    max_prompt_tokens: int | None = None,
    failure: str | float = "median",
    head: str | None = None,
    prefix: str | None = None,
    batch_size: int = 32,
    device: str = "auto",
    seed: int = 0,
    show_progress: bool = True,
    order: str = "auto",
    allow_uneven: bool = False,
    trust_recorded_model: bool = False,
    skip_bad: bool = False,
    memory_mb: int = MEMORY_MB,
    final: str | None = None,
) -> Ranking:
    """Rank ``prompts`` by NCIP for sequences from a causal LM's ``checkpoints``; larger score
    = look first. ``references`` (or a ``reference`` field in the .jsonl) add the BLEU-2 of each
    continuation and, with failure = BLEU-2 at or below ``failure`` (the prompts' median, or a
    number), NCIP against the token-level baselines. Returns a :class:`ncip.tool.output.Ranking`
    (table: rank, sample_id, ncip, tvd, every baseline's score, the continuation)."""
    t0 = time.perf_counter()
    notes: list[str] = []

    def note(msg: str) -> None:
        notes.append(msg)
        log.info("%s", msg)

    check_args(k, batch_size)
    run = prepare_run(
        checkpoints,
        prompts,
        model,
        references=references,
        tokenizer=tokenizer,
        new_tokens=new_tokens,
        max_prompt_tokens=max_prompt_tokens,
        head=head,
        prefix=prefix,
        device=device,
        order=order,
        allow_uneven=allow_uneven,
        trust_recorded_model=trust_recorded_model,
        skip_bad=skip_bad,
        note=note,
        final=final,
    )
    cs, p = run.cs, run.prompts
    if failure != "median" and p.references is None:
        raise InputError(
            f"--failure {failure} judges continuations against references, and {p.source} has "
            "none: give each prompt a 'reference' (the text that should follow), or drop "
            "--failure"
        )
    sel = select_checkpoints(run.sigma, len(run.usable), k, alpha, False, run.pruned, note)
    selected = [cs[run.usable[i]] for i in sel.chosen]
    stats, cont = sequence_stats(
        run, selected, new_tokens, batch_size, memory_mb, skip_bad, show_progress
    )
    used = [ck for j, ck in enumerate(selected[:-1]) if stats.ok[j]] + [selected[-1]]
    scores = prompt_scores(stats)
    texts = decode(run, cont)
    table, ranked = _table(scores, p.ids, texts, seed)
    evaluation = None
    if p.references is not None:
        bleu = bleu2(texts, p.references)
        fail, threshold = failures(bleu, failure)
        table["bleu2"] = bleu[ranked]
        table["failed"] = fail[ranked]
        what = (
            "on your {n} prompts with references ({faults} continuations at or below BLEU-2 "
            f"{threshold:.3f} count as failures):"
        )
        evaluation = compare_scores({NAMES[m]: scores[m] for m in METHODS}, fail, seed, what)
        note(
            f"BLEU-2 against the references: median {np.median(bleu):.3f}; failure = BLEU-2 at "
            f"or below {threshold:.3f} ({'the median' if failure == 'median' else 'given'}): "
            f"{int(fail.sum())} of {len(fail)} prompts"
        )
    record = selection_record(
        [cs[i].describe() for i in run.usable],
        sel,
        order=cs.order,
        final=str(selected[-1].path),
        head=run.lm.head_key,
        model=run.lm.description,
        used=[str(c.path) for c in used],
        dropped=run.dropped + [c.name for c in selected if c not in used],
        skipped=[{"file": f, "reason": r} for f, r in cs.skipped],
        tokenizer=str(run.tokenizer),
        new_tokens=int(new_tokens),
        prompt_tokens_max=run.limit,
        aggregate="mean over the continuation's tokens",
        failure=None if p.references is None else failure,
    )
    record["seconds"] = seconds = time.perf_counter() - t0
    notes.append(
        f"ranked {len(run.ids)} prompts with {len(used)} checkpoints (selected from "
        f"{len(sel.pool)} in the pool of {len(cs)}) in {seconds:.1f} s"
    )
    return Ranking(table, record, evaluation, notes, ranked, None)


def _table(scores: dict[str, np.ndarray], ids, texts, seed: int):
    from ncip.core.metrics import order_from_scores

    ranked = order_from_scores(scores["ncip"], seed)
    table = pd.DataFrame(
        {
            "rank": np.arange(1, len(ranked) + 1),
            "sample_id": np.asarray(ids)[ranked],
            "ncip": scores["ncip"][ranked],
            "tvd": scores["tvd"][ranked],
        }
    )
    for m in METHODS:
        if m != "ncip":
            table[m] = scores[m][ranked]
    table["continuation"] = np.asarray(texts, dtype=object)[ranked]
    return table, ranked
