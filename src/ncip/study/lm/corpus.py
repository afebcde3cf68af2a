"""The language-model study's data (stage lm-data), all from Debian's packages.

- **Pretraining text**: every WordNet 3.0 noun gloss (``wordnet-base``) and every quote of
  ``fortunes`` and ``fortunes-min``, deduplicated (:mod:`ncip.study.datasets.debian`), shuffled
  with ``default_rng(SEED)`` and joined with the end-of-text token.
- **Fine-tuning text**: the prose paragraphs (HTML ``<p>`` elements of at least
  ``MIN_WORDS`` words) of the CPython documentation (``python3-doc``). The documentation's
  files are split before anything else: a share ``HELD_OUT`` of the files (drawn with
  ``default_rng(SEED)``) gives the test prompts, the rest the fine-tuning paragraphs, so no
  prompt comes from a page the model was fine-tuned on.
- **Tokenizer**: a byte-level BPE of the model's vocabulary size trained with ``tokenizers`` on
  the pretraining text alone (as a pretrained model's tokenizer is), saved as tokenizer.json.
- **Prompts**: from held-out paragraphs of at least PROMPT_TOKENS + NEW_TOKENS tokens, the first
  PROMPT_TOKENS tokens decoded as the prompt and the next NEW_TOKENS as its reference.

Outputs (``out``): ``tokenizer.json``, ``pretrain.npy`` and ``finetune.npy`` (uint16 token
streams), ``prompts.jsonl`` (id, prompt, reference, source file) and ``info.json`` (counts and
the Debian package versions, which alone change the data).
"""

from __future__ import annotations

import html.parser
import os
import subprocess
from pathlib import Path

import numpy as np

from ncip.core.io import write_json
from ncip.study.datasets import debian
from ncip.study.lm.models import EOS, NEW_TOKENS, PROMPT_TOKENS, LMSpec

SEED = 0
HELD_OUT = 0.3  # share of the documentation's files kept for the test prompts
MIN_WORDS = 30  # a prose paragraph, not a signature or a one-line note
PYTHON_DOC = Path("/usr/share/doc/python3-doc/html")
PACKAGES = ("wordnet-base", "fortunes", "fortunes-min", "python3-doc", "python3.11-doc")


class _Paragraphs(html.parser.HTMLParser):
    """The text of every <p> element of one HTML page, white space collapsed."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []
        self.out: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "p" and self.depth:
            self.depth -= 1
            if not self.depth:
                self.out.append(" ".join("".join(self.parts).split()))
                self.parts = []

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)


def doc_paragraphs(root: Path) -> list[tuple[str, str]]:
    """(page, paragraph) of every prose paragraph of the documentation's HTML pages, pages in
    sorted order (the tree's symbolic links followed, as Debian installs it)."""
    pages = []
    for d, subdirs, files in os.walk(root, followlinks=True):
        subdirs[:] = sorted(s for s in subdirs if not s.startswith("_"))  # _static, _sources
        pages += [Path(d) / f for f in files if f.endswith(".html")]
    out = []
    for page in sorted(pages, key=lambda p: str(p.relative_to(root))):
        parser = _Paragraphs()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        rel = str(page.relative_to(root))
        out += [(rel, t) for t in parser.out if len(t.split()) >= MIN_WORDS]
    return out


def pretraining_texts(raw_root: Path) -> list[str]:
    wn = debian._find(raw_root, "wordnet", debian.WORDNET_DIR, "data.noun", "wordnet-base")
    fo = debian._find(raw_root, "fortunes", debian.FORTUNES_DIR, "people", "fortunes")
    items = debian.deduplicate(debian.wordnet_glosses(wn) + debian.fortune_quotes(fo))
    texts = [t for t, _, _ in items]
    return [texts[i] for i in np.random.default_rng(SEED).permutation(len(texts))]


def train_tokenizer(texts: list[str], vocab: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def stream(tok, texts: list[str]) -> np.ndarray:
    """The texts' tokens joined by the end-of-text token, as uint16."""
    eos = tok.token_to_id(EOS)
    out: list[int] = []
    for e in tok.encode_batch(texts):
        out += e.ids + [eos]
    return np.asarray(out, dtype=np.uint16)


def make_prompts(tok, held: list[tuple[str, str]], count: int) -> list[dict]:
    need = PROMPT_TOKENS + NEW_TOKENS
    encoded = tok.encode_batch([t for _, t in held])
    usable = [i for i, e in enumerate(encoded) if len(e.ids) >= need]
    rng = np.random.default_rng(SEED)
    picked = sorted(rng.permutation(usable)[:count].tolist())
    rows = []
    for i in picked:
        ids = encoded[i].ids
        rows.append(
            {
                "id": f"p{i:05d}",
                "prompt": tok.decode(ids[:PROMPT_TOKENS]),
                "reference": tok.decode(ids[PROMPT_TOKENS:need]),
                "page": held[i][0],
            }
        )
    return rows


def _versions() -> dict[str, str]:
    out = {}
    for p in PACKAGES:
        try:
            r = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Version}", p], capture_output=True, text=True
            )
            out[p] = r.stdout.strip() if r.returncode == 0 else "not installed (raw files)"
        except OSError:
            out[p] = "unknown (no dpkg)"
    return out


def prepare(out: Path, raw_root: Path, spec: LMSpec, finetune_paragraphs: int, prompts: int):
    """Write the study's data for one model into ``out`` (a fresh folder)."""
    import json

    from ncip.core.io import write_text

    texts = pretraining_texts(raw_root)
    doc = debian._find(raw_root, "python-doc", PYTHON_DOC, "index.html", "python3-doc")
    paragraphs = doc_paragraphs(doc)
    pages = sorted({p for p, _ in paragraphs})
    rng = np.random.default_rng(SEED)
    held_pages = set(np.asarray(pages)[rng.permutation(len(pages))[: round(HELD_OUT * len(pages))]])
    train = [t for p, t in paragraphs if p not in held_pages]
    held = [(p, t) for p, t in paragraphs if p in held_pages]
    train = [train[i] for i in sorted(rng.permutation(len(train))[:finetune_paragraphs])]
    tok = train_tokenizer(texts, spec.vocab)
    tok.save(str(out / "tokenizer.json"))
    np.save(out / "pretrain.npy", stream(tok, texts))
    np.save(out / "finetune.npy", stream(tok, train))
    rows = make_prompts(tok, held, prompts)
    write_text(out / "prompts.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    info = {
        "model": spec.name,
        "pretraining_texts": len(texts),
        "pretraining_tokens": int(np.load(out / "pretrain.npy").size),
        "doc_pages": len(pages),
        "held_out_pages": len(held_pages),
        "finetune_paragraphs": len(train),
        "finetune_tokens": int(np.load(out / "finetune.npy").size),
        "held_out_paragraphs": len(held),
        "prompts": len(rows),
        "prompt_tokens": PROMPT_TOKENS,
        "new_tokens": NEW_TOKENS,
        "packages": _versions(),
    }
    write_json(out / "info.json", info)
    return info
