"""Hugging Face Trainer: a small ViT built from a config (nothing downloaded), a checkpoint
folder per epoch (save_total_limit unset, so none is deleted).

    python train_hf.py OUT_DIR [EPOCHS]
    ncip rank OUT_DIR/ckpt --inputs OUT_DIR/test.npz --out ranking.csv   (model from config.json)
"""

import sys
from pathlib import Path

import torch
import transformers
from common import fashion_mnist, save_test_set

out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 15
x, y, *_ = fashion_mnist()
pixels = torch.from_numpy(x).float().div(255).unsqueeze(1)
labels = torch.from_numpy(y)


class Images(torch.utils.data.Dataset):
    def __len__(self):
        return len(labels)

    def __getitem__(self, i):
        return {"pixel_values": pixels[i], "labels": labels[i]}


config = transformers.ViTConfig(
    image_size=28,
    patch_size=7,
    num_channels=1,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    num_labels=10,
)
torch.manual_seed(0)
args = transformers.TrainingArguments(
    str(out / "ckpt"),
    num_train_epochs=epochs,
    per_device_train_batch_size=128,
    learning_rate=1e-3,
    save_strategy="epoch",
    logging_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
transformers.Trainer(
    model=transformers.ViTForImageClassification(config), args=args, train_dataset=Images()
).train()
save_test_set(out / "test.npz")
