"""The text subjects' data: WordNet glosses and fortune quotes from Debian's packages (issue 37),
their word-level encoding as a `tokenizers` file, and its way into the checkpoint folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ncip.study.data import TOKENIZER_FILE, load_info, load_raw, prepare_dataset, save_prepared
from ncip.study.datasets import debian
from ncip.study.datasets.text import build_vocab, encode, tokenize, word_tokenizer

HAVE_WORDNET = (debian.WORDNET_DIR / "data.noun").is_file()
HAVE_FORTUNES = (debian.FORTUNES_DIR / "people").is_file()
needs_wordnet = pytest.mark.skipif(
    not HAVE_WORDNET, reason="wordnet-base not installed (scripts/setup.sh installs it)"
)
needs_fortunes = pytest.mark.skipif(
    not HAVE_FORTUNES, reason="fortunes not installed (scripts/setup.sh installs it)"
)

# md5 of every file prepare-data writes for wordnet4 (Debian bookworm's wordnet-base 1:3.0-37,
# split seed 0, val_fraction 0.1): the same bytes on every machine, so DVC's run-cache serves
# across machines. A new package version changes them: then check the data and update these.
WORDNET4_MD5 = {
    "info.json": "8a0b005d1783108028a0fdbc759db9e6",
    "test.npz": "2db409c1b63d69910b2fb9762b02968b",
    "tokenizer.json": "0c92138adfe0a44c05d0afa300f24681",
    "train.npz": "7a83c1ee1bfbf1a6785781b6d5dce57a",
    "val.npz": "2cb4c0eff05163f9799fea69f3800f9c",
}


def _md5s(d: Path) -> dict[str, str]:
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_the_encoding_is_the_word_rule_with_padding_and_unknown_words():
    vocab = build_vocab(["The cat sat.", "the CAT ran", "a dog<br />ran"], min_count=2)
    assert vocab == {"cat": 2, "ran": 3, "the": 4}  # by count, ties by word; "sat" is rare
    tok = word_tokenizer(vocab, 6)
    ids = encode(["The cat, the DOG's tail!", "ran<br />ran ran ran the cat ran"], tok)
    assert ids.dtype == np.int32
    assert ids.tolist() == [[4, 2, 4, 1, 1, 0], [3, 3, 3, 3, 4, 2]]  # unknown 1, pad 0
    assert tokenize("It's a <br />Test-case") == ["it's", "a", "test", "case"]
    # the file is the encoding: read back, it gives the same ids
    from tokenizers import Tokenizer

    again = Tokenizer.from_str(tok.to_str())
    assert encode(["The cat, the DOG's tail!"], again).tolist() == ids[:1].tolist()


def test_deduplicate_keeps_the_first_and_drops_texts_under_two_labels():
    items = [
        ("A  cat", "x", "1"),
        ("a cat", "x", "2"),  # the same text after case and spaces: dropped, the first kept
        ("Red", "x", "3"),
        ("red ", "y", "4"),  # the same text under another label: both dropped
        ("  ", "x", "5"),  # empty
        ("dog", "y", "6"),
    ]
    assert debian.deduplicate(items) == [("A  cat", "x", "1"), ("dog", "y", "6")]


def test_missing_package_names_it_and_the_folder_to_fill(tmp_path, monkeypatch):
    from ncip.study.data import DatasetNotFoundError

    monkeypatch.setattr(debian, "WORDNET_DIR", tmp_path / "none")
    with pytest.raises(DatasetNotFoundError, match=r"apt-get install wordnet-base.*raw/wordnet"):
        load_raw("wordnet4", tmp_path / "raw")


def test_wordnet_from_a_folder_put_by_hand(tmp_path, monkeypatch):
    """data/raw/wordnet/data.noun in WordNet's format: glosses by lexicographer file."""
    monkeypatch.setattr(debian, "WORDNET_DIR", tmp_path / "none")
    lines = ["  1 This software and database is being provided to you, the LICENSEE"]
    for i in range(40):
        for num, word in ((5, "beast"), (6, "tool"), (18, "human"), (20, "herb")):
            lines.append(
                f"{num * 1000 + i:08d} {num:02d} n 01 w{i} 0 000 | a {word} of kind {i}; "
                f'"the {word} example {i}"'
            )
    (tmp_path / "raw" / "wordnet").mkdir(parents=True)
    (tmp_path / "raw" / "wordnet" / "data.noun").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(debian, "_wordnet", _small_wordnet(debian._wordnet, 30))
    raw = load_raw("wordnet4", tmp_path / "raw")
    assert raw.classes == ["noun.animal", "noun.artifact", "noun.person", "noun.plant"]
    assert len(raw.train) == 4 * 24 and len(raw.test) == 4 * 6  # 30 a class, 20% test
    assert all(i.startswith("wordnet:noun:000") for i in raw.test.ids)
    assert raw.train.x.shape[1] == 40 and raw.tokenizer is not None


def _small_wordnet(fn, per_class):
    return lambda raw_root, classes, _: fn(raw_root, classes, per_class)


@needs_wordnet
def test_wordnet_sets_are_balanced_and_their_splits_disjoint():
    for name, classes, per_class in (("wordnet10", 10, 2000), ("wordnet4", 4, 3000)):
        raw = load_raw(name)
        assert len(raw.classes) == classes
        y = np.concatenate([raw.train.y, raw.test.y])
        assert np.bincount(y).tolist() == [per_class] * classes
        assert np.bincount(raw.test.y).tolist() == [per_class // 5] * classes
        assert not set(raw.train.ids) & set(raw.test.ids)
        assert raw.vocab_size == len(json.loads(raw.tokenizer)["model"]["vocab"])


@needs_fortunes
def test_fortunes_are_the_fifteen_largest_topic_files():
    raw = load_raw("fortunes")
    assert len(raw.classes) == debian.FORTUNE_FILES and "people" in raw.classes
    counts = np.bincount(np.concatenate([raw.train.y, raw.test.y]))
    assert counts.min() >= 400  # the smallest kept file
    assert raw.train.ids[0].startswith("fortunes:art:")


@needs_wordnet
def test_prepare_data_writes_the_same_bytes_on_every_machine(tmp_path):
    info, splits = prepare_dataset("wordnet4")
    save_prepared(tmp_path, info, splits)
    got = _md5s(tmp_path)
    assert got == WORDNET4_MD5, f"prepare-data's wordnet4 files changed: {got}"
    assert load_info(tmp_path).tokenizer == (tmp_path / TOKENIZER_FILE).read_text()


@needs_wordnet
def test_training_puts_the_tokenizer_beside_the_checkpoints(tmp_path):
    from ncip.study.training import TrainConfig, train_with_checkpoints

    info, splits = prepare_dataset("wordnet4")
    small = {k: v.subset(np.arange(0, len(v), 20)) for k, v in splits.items()}
    train_with_checkpoints(
        TrainConfig(arch="textcnn", epochs=1), info, small, tmp_path / "out", tmp_path / "w"
    )
    assert (tmp_path / "out" / TOKENIZER_FILE).read_text() == info.tokenizer
