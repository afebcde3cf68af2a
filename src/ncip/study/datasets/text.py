"""Text datasets (IMDB, AG News) with a word-level vocabulary built from the training texts."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import numpy as np

from ncip.study.data import DatasetNotFoundError, RawDataset, Split, register_dataset

_TOKEN = re.compile(r"[a-z0-9']+")
PAD, UNK = 0, 1


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("<br />", " "))


def build_vocab(texts: list[str], max_size: int = 20000, min_count: int = 2) -> dict[str, int]:
    """Map the most frequent training words to ids 2.. (0 = padding, 1 = unknown)."""
    counts = Counter(tok for t in texts for tok in tokenize(t))
    words = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c >= min_count]
    return {w: i + 2 for i, w in enumerate(words[: max_size - 2])}


def encode(texts: list[str], vocab: dict[str, int], length: int) -> np.ndarray:
    out = np.full((len(texts), length), PAD, dtype=np.int32)
    for i, t in enumerate(texts):
        ids = [vocab.get(tok, UNK) for tok in tokenize(t)][:length]
        out[i, : len(ids)] = ids
    return out


def _text_dataset(name, classes, train, test, length, max_vocab=20000) -> RawDataset:
    (tr_texts, tr_y, tr_ids), (te_texts, te_y, te_ids) = train, test
    vocab = build_vocab(tr_texts, max_vocab)
    mk = lambda texts, y, ids: Split(  # noqa: E731
        encode(texts, vocab, length), np.asarray(y, dtype=np.int64), np.asarray(ids)
    )
    return RawDataset(
        "text", classes, mk(tr_texts, tr_y, tr_ids), mk(te_texts, te_y, te_ids), len(vocab) + 2
    )


@register_dataset("imdb", kind="text")
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
    return _text_dataset("imdb", ["neg", "pos"], parts[0], parts[1], length=400)


@register_dataset("agnews", kind="text")
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
    return _text_dataset("agnews", classes, parts[0], parts[1], length=64)
