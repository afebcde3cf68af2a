"""Shared by the examples: Fashion-MNIST as uint8 arrays, and a small CNN of a user's own."""

from pathlib import Path

import numpy as np
import torch.nn as nn


def fashion_mnist(n_train: int = 12000):
    """(x_train, y_train, x_test, y_test): uint8 [N, 28, 28] images and int64 labels."""
    from ncip.study.data import load_raw  # finds Debian's dataset-fashion-mnist or data/raw

    raw = load_raw("fmnist", Path(__file__).resolve().parents[2] / "data" / "raw")
    rng = np.random.default_rng(0)
    keep = np.sort(rng.permutation(len(raw.train))[:n_train])
    return raw.train.x[keep, 0], raw.train.y[keep], raw.test.x[:, 0], raw.test.y


class Net(nn.Module):
    """A user's CNN: its classifier is called `classifier`, its inputs are [N, 1, 28, 28]."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.classifier = nn.Linear(16 * 7 * 7, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def save_test_set(path: Path) -> None:
    """The 10,000 test images as ncip rank reads them: uint8 [N, 28, 28] with labels."""
    *_, x, y = fashion_mnist()
    np.savez(path, x=x, y=y)
