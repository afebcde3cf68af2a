"""Hugging Face Trainer, a causal language model's prompts: a small GPT-2 built from a config
(nothing downloaded) and a byte-level BPE tokenizer trained here, fine-tuned on the quotes of
Debian's fortunes; a checkpoint-<epoch>/ folder per epoch with the tokenizer in each, and
held-out prompts (a quote's first words) with their references (the words that follow).

    python train_hf_lm.py OUT_DIR [EPOCHS] [QUOTES]
    ncip rank OUT_DIR/hf --prompts OUT_DIR/prompts.jsonl --out ranking.csv
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from ncip.study.datasets import debian

out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 6
n_quotes = int(sys.argv[3]) if len(sys.argv) > 3 else 4000
quotes = debian.deduplicate(debian.fortune_quotes(debian.FORTUNES_DIR))
rng = np.random.default_rng(0)
texts = [" ".join(quotes[i][0].split()) for i in rng.permutation(len(quotes))[:n_quotes]]
n_train = len(texts) * 9 // 10

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train_from_iterator(
    texts[:n_train],
    trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    ),
)
tokenizer = transformers.PreTrainedTokenizerFast(
    tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
)
encoded = [tokenizer(t, truncation=True, max_length=96)["input_ids"] for t in texts[:n_train]]


class Quotes(torch.utils.data.Dataset):
    def __len__(self):
        return len(encoded)

    def __getitem__(self, i):
        return {"input_ids": encoded[i]}


torch.manual_seed(0)
config = transformers.GPT2Config(
    vocab_size=tok.get_vocab_size(), n_positions=128, n_embd=64, n_layer=2, n_head=2
)
args = transformers.TrainingArguments(
    str(out / "hf"),
    num_train_epochs=epochs,
    per_device_train_batch_size=32,
    learning_rate=2e-3,
    save_strategy="epoch",  # one checkpoint per epoch: the fine-tuning history ncip reads
    logging_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
transformers.Trainer(
    model=transformers.GPT2LMHeadModel(config),
    args=args,
    train_dataset=Quotes(),
    processing_class=tokenizer,  # saved into every checkpoint folder
    data_collator=transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False),
).train()
rows = []
for i, text in enumerate(texts[n_train:]):
    words = text.split()
    if len(words) >= 10:  # the first six words prompt, the next eight are the reference
        rows.append(
            {"id": f"q{i}", "prompt": " ".join(words[:6]), "reference": " ".join(words[6:14])}
        )
(out / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
