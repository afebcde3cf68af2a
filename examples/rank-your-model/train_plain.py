"""A plain PyTorch loop that keeps one state dict per epoch, as many users already do.

python train_plain.py OUT_DIR [EPOCHS]
ncip rank OUT_DIR/ckpt --model common.py:Net --inputs OUT_DIR/test.npz --out ranking.csv
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from common import Net, fashion_mnist, save_test_set

out = Path(sys.argv[1])
epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
(out / "ckpt").mkdir(parents=True, exist_ok=True)
x, y, *_ = fashion_mnist()
x = torch.from_numpy(x).float().div(255).unsqueeze(1)
y = torch.from_numpy(y)
torch.manual_seed(0)
model = Net()
opt = torch.optim.Adam(model.parameters(), 1e-3)
for epoch in range(1, epochs + 1):
    perm = torch.randperm(len(x))
    for i in range(0, len(x), 128):
        b = perm[i : i + 128]
        loss = F.cross_entropy(model(x[b]), y[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), out / "ckpt" / f"epoch_{epoch}.pt")
    torch.save(opt.state_dict(), out / "ckpt" / f"optimizer_{epoch}.pt")  # ncip skips these
save_test_set(out / "test.npz")
