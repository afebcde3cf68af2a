"""A folder of images as inputs: torchvision's ImageFolder layout (one subfolder per class,
sorted names = class indices) or a flat folder, read lazily as uint8 arrays of one size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ncip.core.errors import InputError

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


class ImageFiles:
    """Images of one size read lazily, as uint8 ``[n, H, W]`` (gray) or ``[n, H, W, 3]``."""

    def __init__(self, paths: list[Path], mode: str | None = None):
        from PIL import Image

        self.paths = paths
        sizes: dict[tuple[int, int], int] = {}
        for p in paths:  # headers only: every image's size, so a mixed folder is said at once
            try:
                with Image.open(p) as im:
                    sizes[im.size] = sizes.get(im.size, 0) + 1
            except OSError:
                continue  # named when it is read
        if len(sizes) > 1:
            shown = ", ".join(
                f"{w}x{h} ({n})" for (w, h), n in sorted(sizes.items(), key=lambda kv: -kv[1])
            )
            raise InputError(
                f"{paths[0].parent}: the images have {len(sizes)} sizes ({shown}); resize them "
                "to the size the model was trained on"
            )
        with Image.open(paths[0]) as im:
            self.size = im.size
            native = "L" if im.mode in ("L", "1", "I;16", "I") else "RGB"
        self.mode = mode or native
        self.dtype = np.dtype(np.uint8)

    def set_channels(self, channels: int | None) -> None:
        if channels == 1:
            self.mode = "L"
        elif channels == 3:
            self.mode = "RGB"

    @property
    def shape(self) -> tuple[int, ...]:
        w, h = self.size
        return (len(self.paths), h, w) if self.mode == "L" else (len(self.paths), h, w, 3)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index) -> np.ndarray:
        from PIL import Image

        if not isinstance(index, slice):
            raise TypeError("ImageFiles supports slices only")
        out = np.empty((len(range(*index.indices(len(self)))), *self.shape[1:]), np.uint8)
        for i, p in enumerate(self.paths[index]):
            try:
                with Image.open(p) as im:
                    if im.size != self.size:
                        raise InputError(
                            f"{p} is {im.size[0]}x{im.size[1]} but the first image "
                            f"is {self.size[0]}x{self.size[1]}; resize the images "
                            "to one size first"
                        )
                    out[i] = np.asarray(im.convert(self.mode))
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001  (PIL raises many types for bad files)
                raise InputError(f"{p} is not a readable image ({e})") from None
        return out


def image_folder(d: Path) -> tuple[list[Path], np.ndarray | None, list[str] | None]:
    subdirs = sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
    flat = sorted(p for p in d.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTS)
    if subdirs and not flat:
        paths, labels = [], []
        for c, sub in enumerate(subdirs):
            files = sorted(p for p in sub.rglob("*") if p.suffix.lower() in IMAGE_EXTS)
            paths += files
            labels += [c] * len(files)
        if not paths:
            raise InputError(f"{d} holds no images ({', '.join(sorted(IMAGE_EXTS))})")
        return paths, np.array(labels, dtype=np.int64), [s.name for s in subdirs]
    if not flat:
        raise InputError(
            f"{d} holds no images ({', '.join(sorted(IMAGE_EXTS))}) directly or in class subfolders"
        )
    return flat, None, None
