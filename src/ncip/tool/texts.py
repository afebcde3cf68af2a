"""Raw texts as inputs: read them, then encode them with the model's own tokenizer.

Sources: a ``.txt`` file (one text per non-empty line; the ids are the line numbers), a
``.jsonl`` file (one JSON object per line: a ``text`` field, or the one string field, with
optional ``label``/``y`` and ``id`` fields), or a table (``.csv``, ``.tsv``, ``.parquet``) whose
one non-numeric column beside its label and id columns holds the texts.

The tokenizer is a Hugging Face ``tokenizers`` file, read as data (no code runs, nothing is
downloaded): ``--tokenizer PATH`` (the file, or a folder holding ``tokenizer.json``), else the
``tokenizer.json`` beside the final checkpoint (what ``Trainer`` saves in each
``checkpoint-<step>/`` when given a tokenizer, ``save_pretrained`` writes, and ncip's own text
models carry), in its folder or the folder above. Texts are truncated to ``--max-length``, else
to the tokenizer's own length, else to the model's ``max_position_embeddings``; then padded to
the tokenizer's own length, or to the longest text, with its padding token.

A model whose ``forward`` takes an ``attention_mask`` (every Hugging Face text model) is run as
its Trainer evaluates it: through :class:`MaskedTextModel`, with the mask 0 on the padding
positions, so padding changes nothing (without it, padded positions counted).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from ncip.core.errors import InputError
from ncip.tool.messages import reason

TOKENIZER_FILE = "tokenizer.json"
PAD_TOKENS = ("[PAD]", "<pad>", "<|pad|>", "<PAD>")
JSON_LABELS = ("label", "y")
JSON_IDS = ("id", "ids", "sample_id")


def read_text_lines(path: Path) -> tuple[list[str], np.ndarray]:
    """A .txt file's texts, one per non-empty line, and their line numbers (1-based) as ids."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    keep = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip()]
    return [t for _, t in keep], np.array([f"line-{i}" for i, _ in keep])


def json_rows(path: Path) -> list[dict]:
    """The JSON objects of a .jsonl file, one per non-blank line (at least one)."""
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise InputError(f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            raise InputError(f"{path}, line {n}: not JSON ({e.args[0][:80]})") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}, line {n}: a JSON object per line is needed, got {row!r:.40}")
        rows.append(row)
    if not rows:
        raise InputError(f"{path} holds no texts")
    return rows


def read_jsonl(path: Path) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """A .jsonl file's texts, ids and labels (one object per line, blank lines skipped)."""
    rows = json_rows(path)
    key = _text_key(path, rows[0])
    label = next((k for k in JSON_LABELS if k in rows[0]), None)
    ident = next((k for k in JSON_IDS if k in rows[0]), None)
    for n, row in enumerate(rows, start=1):
        missing = [k for k in (key, label, ident) if k is not None and k not in row]
        if missing or not isinstance(row[key], str):
            raise InputError(
                f"{path}: object {n} has no string {key!r}"
                + (f" (or lacks {', '.join(map(repr, missing))})" if missing else "")
                + "; every line needs the same fields"
            )
    texts = [row[key] for row in rows]
    ids = np.array([str(r[ident]) for r in rows]) if ident else np.arange(len(rows)).astype(str)
    y = np.array([r[label] for r in rows]) if label else None
    return texts, ids, y


def _text_key(path: Path, row: dict) -> str:
    if "text" in row:
        return "text"
    strings = [k for k, v in row.items() if isinstance(v, str) and k not in JSON_IDS]
    if len(strings) != 1:
        raise InputError(
            f"{path}: name the text field 'text' (the first object's string fields: "
            f"{', '.join(strings) or 'none'})"
        )
    return strings[0]


def model_positions(model) -> int | None:
    """The positions a model's (Hugging Face) config allows, ``max_position_embeddings``."""
    for m in model.modules():
        n = getattr(getattr(m, "config", None), "max_position_embeddings", None)
        if isinstance(n, int):
            return n
    return None


def not_a_file(p: Path, what: str, give: str) -> str:
    """Why ``p`` cannot be read as a file, in one line: missing, a folder, or not a regular
    file (a named pipe would block the read)."""
    if p.is_dir():
        return f"{what} {p} is a folder; give {give}"
    if p.exists() or p.is_symlink():
        return (
            f"{what} {p} is not a regular file (a named pipe, socket, device or broken link): "
            f"give {give}"
        )
    return f"{what} {p} does not exist; give {give}"


def find_tokenizer(final: Path, given: str | Path | None) -> Path:
    """The tokenizer file: ``given`` (a file or a folder with tokenizer.json), else the one
    beside the final checkpoint ``final`` (a file or a Hugging Face checkpoint folder)."""
    if given is not None:
        p = Path(given)
        p = p / TOKENIZER_FILE if p.is_dir() else p
        if not p.is_file():
            raise InputError(
                not_a_file(
                    p, "tokenizer", f"a tokenizers JSON file, or a folder holding {TOKENIZER_FILE}"
                )
            )
        return p
    folder = final if final.is_dir() else final.parent
    where = [folder, folder.parent]
    for d in where:
        if (d / TOKENIZER_FILE).is_file():
            return d / TOKENIZER_FILE
    raise InputError(
        f"the inputs are raw texts, and no {TOKENIZER_FILE} is beside the checkpoints (looked "
        f"in {' and '.join(map(str, where))}); pass --tokenizer PATH (the training run's "
        "tokenizer, e.g. what tokenizer.save_pretrained(folder) writes), or give token ids "
        "as an .npy"
    )


@contextlib.contextmanager
def _stderr_held():
    """Hold what is written to file descriptor 2 (where a Rust panic prints its message) while
    the block runs; give it back unless the block raised."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            raise
        else:
            os.dup2(saved, 2)
            held.seek(0)
            if said := held.read():
                sys.stderr.flush()
                os.write(2, said)
        finally:
            os.close(saved)


def encode_with(tok, texts: list[str], path: Path):
    """``tok.encode_batch(texts)``; a panic inside the tokenizer (a pre-tokenizer pattern that
    backtracks without bound stops at Oniguruma's retry limit, and the Rust library panics)
    becomes one line, its Rust message kept off the terminal."""
    try:
        with _stderr_held():
            return tok.encode_batch(texts)
    except BaseException as e:  # noqa: BLE001  (pyo3's PanicException derives from BaseException)
        if type(e).__name__ != "PanicException":
            raise
        first = reason(e, 120, empty="a panic")
        raise InputError(
            f"{path} failed while encoding the texts ({first}): one of its patterns cannot "
            "handle them (a regex that backtracks without bound); fix that pattern in the "
            "tokenizer, or give another with --tokenizer"
        ) from None


def load_tokenizer(path: Path):
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - a dependency of ncip
        raise InputError("raw texts need the tokenizers package: pip install tokenizers") from None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # noqa: BLE001  (the Rust parser raises a bare Exception)
        first = reason(e, 120)
        raise InputError(
            f"{path} is not a tokenizers JSON file ({first}); give the tokenizer.json that "
            "tokenizer.save_pretrained writes"
        ) from None


def encode_texts(
    texts: list[str],
    tokenizer: Path,
    max_length: int | None,
    model_positions: int | None,
    embedding: int | None = None,
) -> tuple[np.ndarray, str, int]:
    """Token ids ``[N, L]`` (int64) of ``texts``, one line saying how they were made, and the
    padding id. A tokenizer with more tokens than the model's ``embedding`` has rows is
    refused: it is not the one the model was trained with."""
    tok = load_tokenizer(tokenizer)
    if embedding is not None and tok.get_vocab_size() > embedding:
        raise InputError(
            f"{tokenizer} has {tok.get_vocab_size()} tokens but the model's embedding has "
            f"{embedding} rows: it is not the tokenizer this model was trained with; pass the "
            "run's own with --tokenizer"
        )
    own = tok.truncation["max_length"] if tok.truncation else None
    if max_length is not None and model_positions is not None and max_length > model_positions:
        raise InputError(
            f"--max-length {max_length} is more than the model's {model_positions} positions; "
            f"give at most {model_positions}"
        )
    if own is not None and model_positions is not None and own > model_positions:
        own = None  # a tokenizer limit past the model's positions: the model's limit holds
    limit = max_length or own or model_positions
    if limit is not None:
        tok.enable_truncation(int(limit))
    fixed = tok.padding.get("length") if tok.padding else None
    if tok.padding:
        pad_id, pad_token = tok.padding["pad_id"], tok.padding["pad_token"]
    else:
        pad_token = next((t for t in PAD_TOKENS if tok.token_to_id(t) is not None), None)
        if pad_token is None:
            raise InputError(
                f"{tokenizer} names no padding token ({', '.join(PAD_TOKENS)}); give the texts "
                "as token ids of one length in an .npy instead"
            )
        pad_id = tok.token_to_id(pad_token)
    if max_length is not None and fixed is not None and fixed != max_length:
        fixed = max_length
    tok.enable_padding(pad_id=pad_id, pad_token=pad_token, length=fixed)
    encoded = encode_with(tok, texts, tokenizer)
    x = np.asarray([e.ids for e in encoded], dtype=np.int64)
    cut = sum(len(e.overflowing) > 0 for e in encoded)
    how = (
        f"{len(texts)} texts tokenized with {tokenizer} to {x.shape[1]} tokens"
        + (f" (truncated at {limit}: {cut} texts were longer)" if limit is not None else "")
        + f", padded with {pad_token!r}"
    )
    return x, how, int(pad_id)


def text_inputs(texts: list[str], ids: Any, y: Any, source: str, detail: str):
    """:class:`ncip.tool.inputs.Inputs` holding raw texts, to be encoded once the tokenizer is
    known (:func:`encode_texts`)."""
    from ncip.tool.inputs import Inputs

    if not texts:
        raise InputError(f"{source} holds no texts")
    x = np.empty((len(texts), 0), dtype=np.int64)  # the ids, once encoded
    return Inputs(x, np.asarray(ids).astype(str), y, source, detail=detail, texts=texts)


def embedding_rows(model: nn.Module) -> int | None:
    """The rows of the model's input embedding (its vocabulary): a Hugging Face model's
    ``get_input_embeddings()``, else a first layer that is an embedding; None otherwise."""
    get = getattr(model, "get_input_embeddings", None)
    if callable(get):
        try:
            emb = get()
        except (NotImplementedError, AttributeError):
            emb = None
        if isinstance(emb, nn.Embedding | nn.EmbeddingBag):
            return int(emb.num_embeddings)
    from ncip.tool.preprocess import first_layer

    first = first_layer(model)
    if isinstance(first, nn.Embedding | nn.EmbeddingBag):
        return int(first.num_embeddings)
    return None


def check_token_ids(x: np.ndarray, rows: int | None, source: str) -> None:
    """Every token id of ``x`` (read in chunks) within the embedding's ``rows``; one line
    naming the largest (or a negative one) otherwise."""
    if rows is None:
        return
    lo, hi = 0, -1
    for start in range(0, len(x), 65536):
        chunk = np.asarray(x[start : start + 65536])
        if chunk.size:
            lo, hi = min(lo, int(chunk.min())), max(hi, int(chunk.max()))
    if lo < 0 or hi >= rows:
        bad = lo if lo < 0 else hi
        raise InputError(
            f"{source}: token id {bad} lies outside the model's embedding of {rows} rows (ids "
            f"0..{rows - 1}): the ids come from another tokenizer or vocabulary; encode the "
            "texts with the run's own tokenizer"
        )


def takes_attention_mask(model: nn.Module) -> bool:
    """Whether the model's ``forward`` has an ``attention_mask`` parameter."""
    try:
        return "attention_mask" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def config_pad_id(model: nn.Module) -> int | None:
    """The padding id a (Hugging Face) model's config names, ``pad_token_id``."""
    pad = getattr(getattr(model, "config", None), "pad_token_id", None)
    return pad if isinstance(pad, int) and not isinstance(pad, bool) else None


class MaskedTextModel(nn.Module):
    """A text model run as the Hugging Face Trainer evaluates it: token ids as ``input_ids``
    and ``attention_mask`` 1 at every position but those holding the padding id. It holds the
    model itself, so weights loaded into that model are the ones run."""

    def __init__(self, model: nn.Module, pad_id: int):
        super().__init__()
        self.model = model
        self.pad_id = int(pad_id)

    def forward(self, x: torch.Tensor):
        return self.model(input_ids=x, attention_mask=(x != self.pad_id).long())
