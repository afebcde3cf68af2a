"""The language models of the study and its fixed choices, in one place.

``tiny-gpt2`` is a GPT-2 built from ``transformers.GPT2Config`` (2 layers, width 128, 4 heads,
a 2,048-token byte-level BPE, 64 positions: 0.67 M parameters), sized so that pretraining and
three fine-tuning runs take minutes on two CPU cores. The paper fine-tunes GPT-2 (124 M) and
OPT-125m on WikiText; neither the weights nor WikiText can be fetched here (docs/study.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ncip.core.errors import InputError


@dataclass(frozen=True)
class LMSpec:
    name: str
    vocab: int  # the byte-level BPE's size, special token included
    positions: int  # context length
    layers: int
    width: int
    heads: int

    def config(self):
        from transformers import GPT2Config

        return GPT2Config(
            vocab_size=self.vocab,
            n_positions=self.positions,
            n_embd=self.width,
            n_layer=self.layers,
            n_head=self.heads,
            bos_token_id=0,
            eos_token_id=0,
        )


LM_MODELS = {m.name: m for m in (LMSpec("tiny-gpt2", 2048, 64, 2, 128, 4),)}
EOS = "<|endoftext|>"  # token 0: separates texts, never scored

# Fixed before any ranking (issue 38): prompts of 32 tokens, references and continuations of
# 16; failure = BLEU-2 at or below the test prompts' median (ties at the median fail, so the
# failure rate is at least one half: a small model's median BLEU-2 can be 0), and a fixed 0.1
# as the sensitivity row.
PROMPT_TOKENS = 32
NEW_TOKENS = 16
FAILURE_RULES = ("median", 0.1)
PRIMARY_RULE = "median"
# NCIP over other checkpoint sets of the pool (lm-score), each with the margin term
CONTROLS = {"ncip_lastk": "last K of the pool", "ncip_random": "random K of the pool"}


def get_lm(name: str) -> LMSpec:
    if name not in LM_MODELS:
        raise InputError(f"unknown language model {name!r}; choose one of {', '.join(LM_MODELS)}")
    return LM_MODELS[name]
