"""Real English text from Debian's packages, as CPU-sized analogues of the paper's text sets.

- ``wordnet10`` and ``wordnet4``: WordNet 3.0 noun synsets (``wordnet-base``,
  ``/usr/share/wordnet/data.noun``); the text is the synset's gloss (definition and examples),
  the label its lexicographer file (``noun.animal``, ``noun.artifact``, ...). ``wordnet10``
  takes the ten largest noun files, 2,000 synsets each (an IMDB-sized task by accuracy, about
  0.8 for a TextCNN); ``wordnet4`` four concrete ones (animal, artifact, person, plant), 3,000
  each (AG News' four classes and accuracy, about 0.9).
- ``fortunes``: the quotes of ``fortunes`` and ``fortunes-min``
  (``/usr/share/games/fortunes``), labelled by their topic file; the 15 largest files.

Deterministic on every machine: texts are deduplicated after lower-casing and collapsing white
space (the first in file order is kept), a text found under two labels is dropped, the sampling
and the stratified test split draw from ``numpy.random.default_rng(SEED)`` (PCG64, the same
stream on every platform), and the vocabulary breaks ties by word. Only the Debian package's
version changes the data (`prepare-data`'s hash is tested).

The files are looked for under ``<raw_root>/wordnet`` and ``<raw_root>/fortunes`` first (put
them there by hand where apt cannot run), then where Debian installs them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ncip.study.data import DataFormatError, DatasetNotFoundError, RawDataset, register_dataset
from ncip.study.datasets.text import text_dataset

SEED = 0  # the sampling and the test split of every set here
TEST_FRACTION = 0.2
WORDNET_DIR = Path("/usr/share/wordnet")
FORTUNES_DIR = Path("/usr/share/games/fortunes")
# lexnames(5WN): the noun lexicographer files' numbers
NOUN_FILES = {
    3: "Tops",
    4: "act",
    5: "animal",
    6: "artifact",
    7: "attribute",
    8: "body",
    9: "cognition",
    10: "communication",
    11: "event",
    12: "feeling",
    13: "food",
    14: "group",
    15: "location",
    16: "motive",
    17: "object",
    18: "person",
    19: "phenomenon",
    20: "plant",
    21: "possession",
    22: "process",
    23: "quantity",
    24: "relation",
    25: "shape",
    26: "state",
    27: "substance",
    28: "time",
}
WORDNET4 = ("animal", "artifact", "person", "plant")
FORTUNE_FILES = 15  # the largest topic files


def _find(raw_root: Path, sub: str, system: Path, probe: str, package: str) -> Path:
    for d in (Path(raw_root) / sub, system):
        if (d / probe).is_file():
            return d
    raise DatasetNotFoundError(
        f"{package} not found: install Debian's {package} (`apt-get install {package}`, which "
        f"`make repro`'s set-up does), or put its files in {Path(raw_root) / sub}/ "
        f"(looked for {probe} there and in {system})"
    )


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def deduplicate(items: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(text, label, id) items with each text once: the first in order is kept, and a text found
    under two labels is dropped (after lower-casing and collapsing white space)."""
    first: dict[str, tuple[str, str, str]] = {}
    labels: dict[str, set[str]] = {}
    for item in items:
        key = _normal(item[0])
        if not key:
            continue
        first.setdefault(key, item)
        labels.setdefault(key, set()).add(item[1])
    return [item for key, item in first.items() if len(labels[key]) == 1]


def largest(items: list[tuple[str, str, str]], n: int) -> list[str]:
    """The ``n`` labels with most items (ties by name), sorted by name."""
    counts = Counter(label for _, label, _ in items)
    return sorted(sorted(counts, key=lambda c: (-counts[c], c))[:n])


def split_texts(items: list[tuple[str, str, str]], classes: list[str], per_class: int | None):
    """``per_class`` items of each class (all when None), then a stratified test split of
    TEST_FRACTION, both drawn from one seeded generator; the items keep their order."""
    rng = np.random.default_rng(SEED)
    y = np.asarray([classes.index(label) for _, label, _ in items])
    train, test = [], []
    for c in range(len(classes)):
        idx = np.flatnonzero(y == c)
        if per_class is not None:
            if len(idx) < per_class:
                raise DataFormatError(
                    f"class {classes[c]!r} has {len(idx)} distinct texts, fewer than the "
                    f"{per_class} the set takes; is the package complete?"
                )
            idx = np.sort(rng.choice(idx, per_class, replace=False))
        held = rng.permutation(len(idx))[: int(round(TEST_FRACTION * len(idx)))]
        mask = np.zeros(len(idx), dtype=bool)
        mask[held] = True
        test += idx[mask].tolist()
        train += idx[~mask].tolist()

    def part(index: list[int]):
        index = sorted(index)
        return (
            [items[i][0] for i in index],
            [int(y[i]) for i in index],
            [items[i][2] for i in index],
        )

    return part(train), part(test)


def wordnet_glosses(root: Path) -> list[tuple[str, str, str]]:
    """(gloss, lexicographer file, ``wordnet:noun:<offset>``) of every noun synset."""
    out = []
    with open(root / "data.noun", encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the licence at the top of the file
                continue
            head, sep, gloss = line.partition(" | ")
            fields = head.split(" ", 2)
            if not sep or len(fields) < 3 or not fields[1].isdigit():
                raise DataFormatError(f"{root / 'data.noun'}: line {line[:40]!r} is not a synset")
            out.append((gloss.strip(), NOUN_FILES[int(fields[1])], f"wordnet:noun:{fields[0]}"))
    return out


def _wordnet(raw_root: Path, classes: list[str] | None, per_class: int) -> RawDataset:
    root = _find(raw_root, "wordnet", WORDNET_DIR, "data.noun", "wordnet-base")
    items = deduplicate(wordnet_glosses(root))
    classes = classes or largest(items, 10)  # wordnet10: the ten largest files
    items = [it for it in items if it[1] in classes]
    train, test = split_texts(items, classes, per_class)
    return text_dataset([f"noun.{c}" for c in classes], train, test, length=40)


@register_dataset("wordnet10", kind="text", source="WordNet")
def load_wordnet10(raw_root: Path) -> RawDataset:
    """WordNet noun glosses, the ten largest lexicographer files x 2,000 (4,000 test texts)."""
    return _wordnet(raw_root, None, 2000)


@register_dataset("wordnet4", kind="text", source="WordNet")
def load_wordnet4(raw_root: Path) -> RawDataset:
    """WordNet noun glosses of animals, artifacts, persons and plants x 3,000 (2,400 test)."""
    return _wordnet(raw_root, list(WORDNET4), 3000)


_OVERSTRIKE = re.compile(".\x08")  # "_\bx" underlining and "x\bx" bold in a few files


def fortune_quotes(root: Path) -> list[tuple[str, str, str]]:
    """(quote, topic file, ``fortunes:<file>:<index>``) of every quote in the folder's files
    (those without an extension; the ``.dat`` indexes and ``.u8`` links are skipped)."""
    out = []
    for path in sorted(root.iterdir()):
        if "." in path.name or not path.is_file():
            continue
        raw = _OVERSTRIKE.sub("", path.read_bytes().decode("utf-8", errors="replace"))
        quotes = [q.strip() for q in re.split(r"^%\n", raw, flags=re.M)]
        out += [(q, path.name, f"fortunes:{path.name}:{i:04d}") for i, q in enumerate(quotes) if q]
    return out


@register_dataset("fortunes", kind="text", source="fortunes")
def load_fortunes(raw_root: Path) -> RawDataset:
    """Quotes by topic file, the 15 largest files of fortunes and fortunes-min, all quotes."""
    root = _find(raw_root, "fortunes", FORTUNES_DIR, "people", "fortunes")
    items = deduplicate(fortune_quotes(root))
    classes = largest(items, FORTUNE_FILES)
    items = [it for it in items if it[1] in classes]
    train, test = split_texts(items, classes, None)
    return text_dataset(classes, train, test, length=128)
