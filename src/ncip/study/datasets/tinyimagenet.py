"""Tiny ImageNet (tiny-imagenet-200)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ncip.study.data import DatasetNotFoundError, RawDataset, Split, register_dataset


@register_dataset("tinyimagenet", source="Tiny ImageNet")
def load_tinyimagenet(raw_root: Path) -> RawDataset:
    """Tiny ImageNet (tiny-imagenet-200); its labelled val split serves as the test split."""
    from PIL import Image

    d = raw_root / "tiny-imagenet-200"
    if not (d / "wnids.txt").is_file():
        raise DatasetNotFoundError(
            f"Tiny ImageNet not found: unzip tiny-imagenet-200.zip so that {d}/wnids.txt exists"
        )
    wnids = [w.strip() for w in (d / "wnids.txt").read_text().split() if w.strip()]
    index = {w: i for i, w in enumerate(wnids)}

    def read(paths: list[Path]) -> np.ndarray:
        out = np.empty((len(paths), 3, 64, 64), dtype=np.uint8)
        for i, p in enumerate(paths):
            with Image.open(p) as im:
                out[i] = np.asarray(im.convert("RGB").resize((64, 64))).transpose(2, 0, 1)
        return out

    train_paths, train_y = [], []
    for w in wnids:
        files = sorted((d / "train" / w / "images").glob("*.JPEG"))
        train_paths += files
        train_y += [index[w]] * len(files)
    val_paths, val_y = [], []
    for line in (d / "val" / "val_annotations.txt").read_text().splitlines():
        cols = line.split("\t")
        if len(cols) >= 2:
            val_paths.append(d / "val" / "images" / cols[0])
            val_y.append(index[cols[1]])
    train = Split(
        read(train_paths),
        np.array(train_y, dtype=np.int64),
        np.array([f"tinyimagenet:train:{p.name}" for p in train_paths]),
    )
    test = Split(
        read(val_paths),
        np.array(val_y, dtype=np.int64),
        np.array([f"tinyimagenet:val:{p.name}" for p in val_paths]),
    )
    return RawDataset("image", wnids, train, test)
