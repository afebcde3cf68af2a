"""Every method's score per test prompt for one fine-tuning run (stage lm-score).

Every checkpoint of the candidate pool is run once (:func:`ncip.tool.sequences.sequence_stats`
over the pool), so NCIP over any selection from the pool costs no further pass:

- ``ncip``: Algorithm 1's K checkpoints (σ_cos of the LM head, the Gram route), Eq. 8;
- ``ncip_lastk``: the last K checkpoints of the pool, with the margin term (Table 8's
  "last K" control);
- ``ncip_random``: the final checkpoint and K - 1 others drawn from the pool with
  ``default_rng(run_seed(seed, run))`` (the random-K control);
- the token-level confidence scores of the final checkpoint (:data:`ncip.core.sequences.METHODS`).

Each prompt's continuation (the final checkpoint's greedy one) and its BLEU-2 against the
reference are kept beside the scores; the failure rule is applied later (lm-evaluate).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ncip.core.collapse import plan, sigma_cos
from ncip.core.errors import InputError
from ncip.core.lmengine import sequence_stats
from ncip.core.metrics import run_seed
from ncip.core.sequences import METHODS, bleu2, prompt_scores
from ncip.study.lm.models import NEW_TOKENS

HEAD = "transformer.wte.weight"  # GPT-2's LM head is tied to the token embedding


def trainer_checkpoints(folder: Path) -> list[Path]:
    """A Trainer run's checkpoint-<step>/ folders in step order."""
    found = [p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    if len(found) < 2:
        raise InputError(f"{folder} holds {len(found)} checkpoint-<step>/ folders; run lm-finetune")
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def head_sigma(folder: Path) -> float:
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return sigma_cos(f.get_tensor(HEAD).double().numpy())


def read_prompts(path: Path) -> pd.DataFrame:
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines() if line])


def _raise(ck, why: str, final: bool) -> None:
    raise InputError(f"{ck} {why}; fine-tuning diverged: lower lm.finetune.lr")


def score_run(
    checkpoints: Path, prompts: Path, k: int, alpha: float, seed: int, run: int
) -> tuple[pd.DataFrame, dict]:
    """(per-prompt table, selection record) of one fine-tuning run."""
    from tokenizers import Tokenizer
    from transformers import GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per checkpoint load; lm-score has its own

    folders = trainer_checkpoints(checkpoints)
    sigma = [head_sigma(f) for f in folders]
    sel = plan(sigma, k, alpha)
    pool = list(sel.pool)  # indices into the checkpoints, in training order
    tok = Tokenizer.from_file(str(folders[-1] / "tokenizer.json"))
    p = read_prompts(prompts)
    ids = [e.ids for e in tok.encode_batch(p["prompt"].tolist())]

    def load(folder: Path) -> torch.nn.Module:
        return GPT2LMHeadModel.from_pretrained(folder, local_files_only=True).eval()

    vocab = int(load(folders[-1]).config.vocab_size)
    stats, cont = sequence_stats(
        load, [folders[i] for i in pool], ids, NEW_TOKENS, vocab, "cpu", _raise
    )
    others = pool[:-1]  # stats' non-final slots, in this order

    def slots(chosen) -> list[int]:
        return [others.index(i) for i in chosen if i != pool[-1]]

    rng = np.random.default_rng(run_seed(seed, run))
    subsets = {
        "ncip": slots(sel.chosen),
        "ncip_lastk": slots(pool[-k:]),
        "ncip_random": sorted(rng.choice(len(others), size=k - 1, replace=False).tolist()),
    }
    base = prompt_scores(stats)
    texts = tok.decode_batch([c.tolist() for c in cont], skip_special_tokens=True)
    table = pd.DataFrame({"id": p["id"].astype(str), "continuation": texts})
    table["bleu2"] = bleu2(texts, p["reference"].tolist())
    for name, subset in subsets.items():
        got = prompt_scores(stats, subset)
        table[name] = got["ncip"]
        if name == "ncip":
            table["tvd"] = got["tvd"]
    for m in METHODS:
        if m != "ncip":
            table[m] = base[m]
    record = sel.to_record() | {
        "checkpoints": [f.name for f in folders],
        "subsets": {n: [folders[others[j]].name for j in s] for n, s in subsets.items()},
    }
    return table, record
