"""Hugging Face Trainer, a text classifier ranked from raw texts: a small BERT built from a
config (nothing downloaded) and a WordPiece tokenizer trained here, fine-tuned on WordNet's
noun glosses in four classes (Debian's wordnet-base); the Trainer saves the tokenizer into
every checkpoint-<epoch>/ folder, so `ncip rank` reads the texts as the model was trained on
them (with their attention mask, as the Trainer's `predict` does).

    python train_hf_text.py OUT_DIR [EPOCHS] [TEXTS_PER_CLASS]
    ncip rank OUT_DIR/hf --inputs OUT_DIR/test.csv --out ranking.csv
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import transformers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

from ncip.study.datasets import debian

out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 8
per_class = int(sys.argv[3]) if len(sys.argv) > 3 else 1500
classes = list(debian.WORDNET4)  # animal, artifact, person, plant
glosses = debian.deduplicate(debian.wordnet_glosses(debian.WORDNET_DIR))
rng = np.random.default_rng(0)
picked = []
for c, name in enumerate(classes):
    texts = [t for t, label, _ in glosses if label == name]
    picked += [(texts[i], c) for i in rng.permutation(len(texts))[:per_class]]
picked = [picked[i] for i in rng.permutation(len(picked))]
n_train = len(picked) * 4 // 5
texts, labels = [t for t, _ in picked], [c for _, c in picked]

tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
tok.normalizer = normalizers.BertNormalizer(lowercase=True)
tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
tok.train_from_iterator(
    texts[:n_train], trainers.WordPieceTrainer(vocab_size=4000, special_tokens=special)
)
tok.post_processor = processors.TemplateProcessing(
    single="[CLS] $A [SEP]",
    special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
)
tokenizer = transformers.PreTrainedTokenizerFast(
    tokenizer_object=tok,
    pad_token="[PAD]",
    unk_token="[UNK]",
    cls_token="[CLS]",
    sep_token="[SEP]",
    mask_token="[MASK]",
    model_max_length=64,
)
config = transformers.BertConfig(
    vocab_size=tok.get_vocab_size(),
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    max_position_embeddings=64,
    pad_token_id=tok.token_to_id("[PAD]"),
    num_labels=len(classes),
    id2label=dict(enumerate(classes)),
    label2id={name: c for c, name in enumerate(classes)},
)
encoded = tokenizer(texts[:n_train], truncation=True, max_length=64)


class Glosses(torch.utils.data.Dataset):
    def __len__(self):
        return n_train

    def __getitem__(self, i):
        return {"input_ids": encoded["input_ids"][i], "labels": labels[i]}


torch.manual_seed(0)
args = transformers.TrainingArguments(
    str(out / "hf"),
    num_train_epochs=epochs,
    per_device_train_batch_size=32,
    learning_rate=1e-3,
    save_strategy="epoch",  # one checkpoint per epoch: the history ncip reads
    logging_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
transformers.Trainer(
    model=transformers.BertForSequenceClassification(config),
    args=args,
    train_dataset=Glosses(),
    processing_class=tokenizer,  # saved into every checkpoint folder
    data_collator=transformers.DataCollatorWithPadding(tokenizer),  # the tutorial's padding
).train()
# the held-out texts as a user has them: raw text and the label by name
test = pd.DataFrame({"text": texts[n_train:], "label": [classes[c] for c in labels[n_train:]]})
test.to_csv(out / "test.csv", index=False)
