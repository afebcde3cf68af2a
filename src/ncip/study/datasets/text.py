"""Text datasets with a word-level vocabulary built from the training texts: IMDB and AG News
from their standard archives, WordNet glosses and fortune quotes from Debian's packages
(:mod:`ncip.study.datasets.debian`).

The encoding is a Hugging Face ``tokenizers`` tokenizer (lower-case, ``<br />`` as a space, words
``[a-z0-9']+``, everything else dropped; 0 = padding, 1 = unknown word; truncated and padded to
a fixed length), so it is data, not code: prepare-data writes it as ``tokenizer.json`` beside the
prepared splits, training copies it beside the checkpoints, and `ncip rank` encodes raw texts
with the very same file.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np

from ncip.study.data import DatasetNotFoundError, RawDataset, Split, register_dataset

TOKEN_PATTERN = r"[a-z0-9']+"
PAD, UNK = 0, 1
PAD_TOKEN, UNK_TOKEN = "[PAD]", "[UNK]"


def word_tokenizer(vocab: dict[str, int] | None = None, length: int | None = None):
    """The study's word-level encoding as a ``tokenizers.Tokenizer``: with ``vocab`` (words ->
    ids from 2) and ``length`` (truncate and pad to it) it encodes; without, it only splits."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({PAD_TOKEN: PAD, UNK_TOKEN: UNK, **(vocab or {})}, UNK_TOKEN))
    tok.normalizer = normalizers.Sequence(
        [normalizers.Lowercase(), normalizers.Replace("<br />", " ")]
    )
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(TOKEN_PATTERN), behavior="removed", invert=True)
    if length is not None:
        tok.enable_truncation(length)
        tok.enable_padding(length=length, pad_id=PAD, pad_token=PAD_TOKEN)
    return tok


def tokenize(text: str, tok=None) -> list[str]:
    """The words of ``text`` as the encoding sees them."""
    tok = tok or word_tokenizer()
    return [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))]


def build_vocab(texts: list[str], max_size: int = 20000, min_count: int = 2) -> dict[str, int]:
    """Map the most frequent training words to ids 2.. (0 = padding, 1 = unknown); ties in
    count are broken by the word, so the vocabulary is the same on every machine."""
    tok = word_tokenizer()
    counts = Counter(w for t in texts for w in tokenize(t, tok))
    words = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_count]
    return {w: i + 2 for i, w in enumerate(words[: max_size - 2])}


def encode(texts: list[str], tok) -> np.ndarray:
    """Token ids ``[N, length]`` (int32) of ``texts`` under a tokenizer with a fixed length."""
    if not texts:
        return np.zeros((0, tok.truncation["max_length"]), dtype=np.int32)
    return np.asarray([e.ids for e in tok.encode_batch(texts)], dtype=np.int32)


def text_dataset(classes, train, test, length, max_vocab=20000) -> RawDataset:
    """A text :class:`RawDataset` from (texts, labels, ids) of each split: the vocabulary of the
    training texts, both splits encoded to ``length`` tokens, the tokenizer kept with them."""
    (tr_texts, tr_y, tr_ids), (te_texts, te_y, te_ids) = train, test
    vocab = build_vocab(tr_texts, max_vocab)
    tok = word_tokenizer(vocab, length)
    mk = lambda texts, y, ids: Split(  # noqa: E731
        encode(texts, tok), np.asarray(y, dtype=np.int64), np.asarray(ids)
    )
    return RawDataset(
        "text",
        classes,
        mk(tr_texts, tr_y, tr_ids),
        mk(te_texts, te_y, te_ids),
        len(vocab) + 2,
        tokenizer=tok.to_str(),
    )


@register_dataset("imdb", kind="text", source="IMDB")
def load_imdb(raw_root: Path) -> RawDataset:
    """IMDB reviews from the aclImdb folder (train/test x neg/pos), 400 tokens per review."""
    d = raw_root / "aclImdb"
    if not (d / "train").is_dir():
        raise DatasetNotFoundError(
            f"IMDB not found: extract aclImdb_v1.tar.gz so that {d}/train/pos exists"
        )
    parts = []
    for part in ("train", "test"):
        texts, ys, ids = [], [], []
        for label, sub in enumerate(("neg", "pos")):
            for p in sorted((d / part / sub).glob("*.txt")):
                texts.append(p.read_text(encoding="utf-8", errors="replace"))
                ys.append(label)
                ids.append(f"imdb:{part}:{sub}/{p.name}")
        parts.append((texts, ys, ids))
    return text_dataset(["neg", "pos"], parts[0], parts[1], length=400)


@register_dataset("agnews", kind="text", source="AG News")
def load_agnews(raw_root: Path) -> RawDataset:
    """AG News from ag_news_csv (train.csv/test.csv: class 1-4, title, description)."""
    d = raw_root / "ag_news_csv"
    if not (d / "train.csv").is_file():
        raise DatasetNotFoundError(
            f"AG News not found: extract ag_news_csv.tar.gz so that {d}/train.csv exists"
        )
    classes_file = d / "classes.txt"
    classes = (
        [c.strip() for c in classes_file.read_text().splitlines() if c.strip()]
        if classes_file.is_file()
        else ["World", "Sports", "Business", "Sci/Tech"]
    )
    parts = []
    for part in ("train", "test"):
        texts, ys, ids = [], [], []
        with open(d / f"{part}.csv", newline="", encoding="utf-8") as f:
            for i, row in enumerate(csv.reader(f)):
                ys.append(int(row[0]) - 1)
                texts.append(" ".join(row[1:]).replace("\\", " "))
                ids.append(f"agnews:{part}:{i:06d}")
        parts.append((texts, ys, ids))
    return text_dataset(classes, parts[0], parts[1], length=64)
