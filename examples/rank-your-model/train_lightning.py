"""PyTorch Lightning: keep every epoch's checkpoint (ModelCheckpoint keeps one by default).

python train_lightning.py OUT_DIR [EPOCHS]
ncip rank OUT_DIR/ckpt --model common.py:Net --inputs OUT_DIR/test.npz --out ranking.csv
"""

import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from common import Net, fashion_mnist, save_test_set
from torch.utils.data import DataLoader, TensorDataset


class LitNet(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = Net()  # saved as "net.*": ncip strips the prefix

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, _):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), 1e-3)


out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
x, y, *_ = fashion_mnist()
data = TensorDataset(torch.from_numpy(x).float().div(255).unsqueeze(1), torch.from_numpy(y))
pl.seed_everything(0)
keep_all = pl.callbacks.ModelCheckpoint(dirpath=out / "ckpt", save_top_k=-1)  # every epoch
trainer = pl.Trainer(
    max_epochs=epochs,
    callbacks=[keep_all],
    logger=False,
    accelerator="cpu",
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(LitNet(), DataLoader(data, batch_size=128, shuffle=True))
save_test_set(out / "test.npz")
