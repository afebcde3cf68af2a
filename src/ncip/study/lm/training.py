"""Pretraining (stage lm-pretrain) and fine-tuning (stage lm-finetune) of the study's language
models.

Pretraining is a plain PyTorch loop (AdamW, linear warm-up then cosine decay) over blocks of
``positions`` tokens drawn at random from the pretraining stream with a seeded generator; the
model is written with ``save_pretrained`` beside its tokenizer. It runs once per model and DVC
caches it; every fine-tuning seed starts from it.

Fine-tuning is what a user of the Hugging Face stack does: ``transformers.Trainer`` over the
fine-tuning stream cut into blocks, ``save_strategy="epoch"`` with ``save_only_model=True`` (the
weights, config and tokenizer in each ``checkpoint-<step>/``; no optimizer state), the seed
given to the Trainer (data order, dropout). `ncip rank` and the scoring stage read those folders
as they read any Trainer run.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ncip.core.logs import log, progress_bar
from ncip.study.lm.models import EOS, LMSpec


def _fast_tokenizer(path: Path):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token=EOS, pad_token=EOS)


def pretrain(
    data: Path, out: Path, spec: LMSpec, steps: int, batch_size: int, lr: float, seed: int
) -> dict:
    """Pretrain ``spec`` from scratch on ``data/pretrain.npy``; write it to ``out``."""
    from transformers import GPT2LMHeadModel

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(spec.config())
    tokens = torch.from_numpy(np.load(data / "pretrain.npy").astype(np.int64))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 20)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    block = spec.positions
    model.train()
    bar = progress_bar(steps, f"pretrain {spec.name}", unit="step")
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(tokens) - block, (batch_size,), generator=gen)
        x = torch.stack([tokens[s : s + block] for s in starts.tolist()])
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix_str(f"loss {losses[-1]:.3f}", refresh=False)
    bar.close()
    model.save_pretrained(out)
    _fast_tokenizer(data / "tokenizer.json").save_pretrained(out)
    last = float(np.mean(losses[-50:]))
    log.info("pretrained %s for %d steps: loss %.3f over the last 50", spec.name, steps, last)
    return {"steps": steps, "final_loss": last, "parameters": model.num_parameters()}


class _Blocks(torch.utils.data.Dataset):
    """A token stream cut into consecutive blocks of ``block`` tokens (the last partial one
    dropped); labels are the inputs (the model shifts them)."""

    def __init__(self, tokens: np.ndarray, block: int):
        n = len(tokens) // block
        self.x = torch.from_numpy(tokens[: n * block].astype(np.int64)).view(n, block)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.x[i], "labels": self.x[i]}


def finetune(
    pretrained: Path,
    data: Path,
    out: Path,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
) -> dict:
    """Fine-tune the pretrained model on ``data/finetune.npy`` with a Trainer, a checkpoint per
    epoch in ``out/checkpoint-<step>/``; returns the training loss per epoch."""
    from transformers import GPT2LMHeadModel, Trainer, TrainingArguments, set_seed
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # its bars per saved shard; the Trainer's own bar stays
    set_seed(seed)
    model = GPT2LMHeadModel.from_pretrained(pretrained, local_files_only=True)
    tokens = np.load(data / "finetune.npy")
    args = TrainingArguments(
        str(out),
        num_train_epochs=epochs,
        per_device_train_batch_size=batch_size,
        learning_rate=lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        save_strategy="epoch",
        save_only_model=True,
        logging_strategy="epoch",
        report_to=[],
        seed=seed,
        data_seed=seed,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=_Blocks(tokens, model.config.n_positions),
        processing_class=_fast_tokenizer(pretrained / "tokenizer.json"),
    )
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"epochs": epochs, "loss_per_epoch": [float(v) for v in losses]}
