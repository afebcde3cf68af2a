"""torchvision's ResNet-18 (no weights), saved the way torchvision's reference scripts save:
{"model": state_dict, "optimizer": ..., "epoch": e, "args": Namespace}. The test images are
stored channel-last with 3 channels, as image files load.

    python train_torchvision.py OUT_DIR [EPOCHS]
    ncip rank OUT_DIR/ckpt --model torchvision:resnet18 --inputs OUT_DIR/test.npy \\
        --labels OUT_DIR/test_y.npy --out ranking.csv
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from common import fashion_mnist

out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 8
(out / "ckpt").mkdir(parents=True, exist_ok=True)
x, y, x_test, y_test = fashion_mnist(n_train=6000)
rgb = torch.from_numpy(x).float().div(255).unsqueeze(1).expand(-1, 3, -1, -1)
y = torch.from_numpy(y)
torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
for epoch in range(epochs):
    model.train()
    perm = torch.randperm(len(rgb))
    for i in range(0, len(rgb), 128):
        b = perm[i : i + 128]
        loss = F.cross_entropy(model(rgb[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "epoch": epoch,
            "args": argparse.Namespace(model="resnet18", lr=0.05),
        },
        out / "ckpt" / f"model_{epoch}.pth",
    )
np.save(out / "test.npy", np.repeat(x_test[..., None], 3, axis=-1))  # [N, 28, 28, 3] uint8
np.save(out / "test_y.npy", y_test)
