"""Model registry (``register_model`` / ``create_model`` / ``list_models``, as in timm).

Every model is a :class:`Classifier`: ``forward(x) = head(features(x))``, where ``head`` is the
final ``nn.Linear`` (its weight rows are the class vectors whose equiangularity NCIP measures)
and ``features`` returns the penultimate representation (used by LSA, DSA, SETS, NNS).
Image models take inputs in [0, 1]; normalisation by the training split's per-channel mean and
std is the model's first layer, so adversarial attacks work on raw pixels.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ncip.core.errors import InputError

_MODELS: dict[str, Callable[..., Classifier]] = {}
_KINDS: dict[str, str] = {}


def register_model(kind: str = "image") -> Callable:
    """Register a model factory under its function name; ``kind`` is "image" or "text"."""

    def wrap(fn: Callable[..., Classifier]) -> Callable[..., Classifier]:
        _MODELS[fn.__name__] = fn
        _KINDS[fn.__name__] = kind
        return fn

    return wrap


def list_models(kind: str | None = None) -> list[str]:
    return sorted(n for n in _MODELS if kind is None or _KINDS[n] == kind)


def model_kind(name: str) -> str:
    if name not in _MODELS:
        raise InputError(f"unknown model {name!r}; choose one of {', '.join(list_models())}")
    return _KINDS[name]


def create_model(
    name: str,
    num_classes: int,
    in_channels: int = 1,
    *,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    input_size: int | None = None,
    vocab_size: int | None = None,
    input_shape: Sequence[int] | None = None,
) -> Classifier:
    """Build a registered model. Image models get ``in_channels``, ``mean``, ``std`` and, if
    their builder takes it, the per-sample ``input_shape`` ``[C, H, W]`` (the MLP and the 1-D
    CNN size their first layers by it); text models get ``vocab_size``."""
    model_kind(name)  # validates the name
    if num_classes < 2:
        raise InputError(f"num_classes must be at least 2, got {num_classes}")
    if _KINDS[name] == "text":
        if not vocab_size:
            raise InputError(f"text model {name!r} needs vocab_size")
        model = _MODELS[name](num_classes=num_classes, vocab_size=vocab_size)
    else:
        kwargs: dict[str, Any] = {"num_classes": num_classes, "in_channels": in_channels}
        if input_shape is not None and "input_shape" in inspect.signature(_MODELS[name]).parameters:
            kwargs["input_shape"] = tuple(int(v) for v in input_shape)  # models sized by input
        model = _MODELS[name](**kwargs)
        model.set_normalization(
            mean if mean is not None else [0.0] * in_channels,
            std if std is not None else [1.0] * in_channels,
        )
    model.arch = name
    return model


class Normalize(nn.Module):
    """(x - mean) / std per channel, with the statistics stored as buffers (saved with weights)."""

    def __init__(self, channels: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(1, channels, 1, 1))
        self.register_buffer("std", torch.ones(1, channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class Classifier(nn.Module):
    """A backbone producing penultimate features and a linear head on top of them."""

    arch: str = ""

    def __init__(self, backbone: nn.Module, head: nn.Linear, normalize: nn.Module | None = None):
        super().__init__()
        self.normalize = normalize if normalize is not None else nn.Identity()
        self.backbone = backbone
        self.head = head

    def set_normalization(self, mean: Sequence[float], std: Sequence[float]) -> None:
        if not isinstance(self.normalize, Normalize):
            return
        c = self.normalize.mean.shape[1]
        if len(mean) != c or len(std) != c:
            raise InputError(f"mean/std need {c} channel values, got {len(mean)}/{len(std)}")
        self.normalize.mean.copy_(torch.tensor(mean, dtype=torch.float32).view(1, c, 1, 1))
        self.normalize.std.copy_(torch.tensor(std, dtype=torch.float32).view(1, c, 1, 1))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate representation: the input of the final linear layer."""
        return self.backbone(self.normalize(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def as_model_input(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Turn stored inputs (array or tensor) into a model batch: images as float32 in [0, 1],
    text as int64 ids."""
    t = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    if t.dtype == torch.uint8:
        return t.float().div(255.0)
    if t.is_floating_point():
        return t.float()
    return t.long()


def logits_of(out: Any) -> torch.Tensor:
    """The logits in a model's output: a tensor, ``.logits`` (Hugging Face), a dict with
    ``logits``, or the first element of a tuple."""
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits") and isinstance(out.logits, torch.Tensor):
        return out.logits
    if isinstance(out, dict) and isinstance(out.get("logits"), torch.Tensor):
        return out["logits"]
    if isinstance(out, tuple | list) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise InputError(
        f"the model returned a {type(out).__name__}; ncip reads logits from a "
        "tensor, .logits, a dict with 'logits', or a tuple with the logits first"
    )


class ForeignClassifier(nn.Module):
    """A model ncip did not build, seen as a :class:`Classifier`: ``head`` is its classifier
    layer (by name), ``features(x)`` what enters that layer (caught with a forward pre-hook),
    and inputs in [0, 1] are normalised with ``mean``/``std`` first when the model expects it.
    So every baseline (LSA, DSA, MC-Dropout on features, ...) runs on it unchanged."""

    arch = "external"

    def __init__(
        self,
        net: nn.Module,
        head: str,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
    ):
        super().__init__()
        self.net = net
        self.head_name = head
        self.net.get_submodule(head)  # fails early for a wrong name
        if mean is not None:
            self.normalize = Normalize(len(mean))
            self.normalize.mean.copy_(torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
            self.normalize.std.copy_(torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))
        else:
            self.normalize = nn.Identity()

    @property
    def head(self) -> nn.Module:
        return self.net.get_submodule(self.head_name)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return logits_of(self.net(self.normalize(x)))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        caught: list[torch.Tensor] = []
        hook = self.head.register_forward_pre_hook(lambda _m, args: caught.append(args[0]))
        try:
            self.net(self.normalize(x))
        finally:
            hook.remove()
        return caught[-1]


class _Resize(nn.Module):
    """Resize to the resolution an architecture was designed for (e.g. 8x8 digits to 28x28)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] == self.size and x.shape[-2] == self.size:
            return x
        return F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)


# ---------------------------------------------------------------------------------------------
# LeNets (LeCun et al. 1998), as used by DeepGini, NNS, TDPR and NCIP on (Fashion-)MNIST.
# ReLU and max pooling, the common choice of the DNN-testing literature's Keras models; every
# input is resized to 28x28 first, so the same definitions serve 8x8 digits and 32x32 CIFAR.


@register_model()
def lenet1(num_classes: int, in_channels: int) -> Classifier:
    backbone = nn.Sequential(
        _Resize(28),
        nn.Conv2d(in_channels, 4, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 4 x 12 x 12
        nn.Conv2d(4, 12, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 12 x 4 x 4
        nn.Flatten(),
    )
    return Classifier(backbone, nn.Linear(12 * 4 * 4, num_classes), Normalize(in_channels))


@register_model()
def lenet5(num_classes: int, in_channels: int) -> Classifier:
    backbone = nn.Sequential(
        _Resize(28),
        nn.Conv2d(in_channels, 6, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 6 x 14 x 14
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),  # 16 x 5 x 5
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
    )
    return Classifier(backbone, nn.Linear(84, num_classes), Normalize(in_channels))


# ---------------------------------------------------------------------------------------------
# Paper-scale image models: torchvision's definitions with the usual CIFAR stem (3x3 stride-1
# first convolution, no max pool) for 32x32 and 64x64 inputs.


def _torchvision_resnet(depth: int, num_classes: int, in_channels: int) -> Classifier:
    import torchvision

    net = getattr(torchvision.models, f"resnet{depth}")(num_classes=num_classes)
    net.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
    backbone = nn.Sequential(
        net.conv1,
        net.bn1,
        net.relu,
        net.layer1,
        net.layer2,
        net.layer3,
        net.layer4,
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )
    return Classifier(backbone, net.fc, Normalize(in_channels))


def _torchvision_densenet(depth: int, num_classes: int, in_channels: int) -> Classifier:
    import torchvision

    net = getattr(torchvision.models, f"densenet{depth}")(num_classes=num_classes)
    feats = net.features
    feats.conv0 = nn.Conv2d(in_channels, feats.conv0.out_channels, 3, 1, 1, bias=False)
    feats.pool0 = nn.Identity()
    backbone = nn.Sequential(feats, nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return Classifier(backbone, net.classifier, Normalize(in_channels))


@register_model()
def resnet18(num_classes: int, in_channels: int) -> Classifier:
    return _torchvision_resnet(18, num_classes, in_channels)


@register_model()
def resnet50(num_classes: int, in_channels: int) -> Classifier:
    return _torchvision_resnet(50, num_classes, in_channels)


@register_model()
def resnet152(num_classes: int, in_channels: int) -> Classifier:
    return _torchvision_resnet(152, num_classes, in_channels)


@register_model()
def densenet121(num_classes: int, in_channels: int) -> Classifier:
    return _torchvision_densenet(121, num_classes, in_channels)


@register_model()
def densenet201(num_classes: int, in_channels: int) -> Classifier:
    return _torchvision_densenet(201, num_classes, in_channels)


@register_model()
def vgg11(num_classes: int, in_channels: int) -> Classifier:
    """VGG-11 with batch norm, CIFAR variant: 8 conv layers, then global pooling to 512."""
    cfg = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]
    layers: list[nn.Module] = []
    c = in_channels
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            c = v
    backbone = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return Classifier(backbone, nn.Linear(512, num_classes), Normalize(in_channels))


# ---------------------------------------------------------------------------------------------
# Small models for the extended CPU study (issue 22): an MLP and a VGG-style CNN for images, a
# 1-D CNN for signals such as MNIST-1D (stored as 1 x 1 x L images).


@register_model()
def mlp(
    num_classes: int, in_channels: int, input_shape: tuple[int, ...] | None = None
) -> nn.Module:
    """Two hidden layers (256, 128 units, ReLU) on the flattened input (28 x 28 if the shape is
    not given)."""
    shape = input_shape or (in_channels, 28, 28)
    d = int(np.prod(shape))
    backbone = nn.Sequential(
        nn.Flatten(), nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU()
    )
    return Classifier(backbone, nn.Linear(128, num_classes), Normalize(in_channels))


@register_model()
def vggsmall(num_classes: int, in_channels: int) -> Classifier:
    """A small VGG-style CNN: two blocks of two 3x3 convolutions (16, then 32 channels) with
    batch norm and ReLU, each followed by 2x2 max pooling, on inputs resized to 28 x 28."""
    layers: list[nn.Module] = [_Resize(28)]
    c = in_channels
    for v in (16, 16, "M", 32, 32, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU()]
            c = v
    backbone = nn.Sequential(*layers, nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU())
    return Classifier(backbone, nn.Linear(128, num_classes), Normalize(in_channels))


@register_model()
def cnn1d(num_classes: int, in_channels: int) -> Classifier:
    """A 1-D CNN over the flattened rows of the input (MNIST-1D's 40 samples: 1 x 1 x 40):
    three convolutions (32 channels; kernel 5, 3, 3; stride 2) with ReLU, then 5 positions
    (average pooling; on 40 samples the convolutions leave exactly 5), flattened to 160."""
    backbone = nn.Sequential(
        nn.Flatten(2),  # [N, C, H * W]
        nn.Conv1d(in_channels, 32, 5, stride=2, padding=2),
        nn.ReLU(),
        nn.Conv1d(32, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv1d(32, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool1d(5),
        nn.Flatten(),
    )
    return Classifier(backbone, nn.Linear(32 * 5, num_classes), Normalize(in_channels))


# ---------------------------------------------------------------------------------------------
# Text models for IMDB and AG News: TextCNN (Kim 2014) and a small Transformer encoder.


class _TextCNN(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 128, filters: int = 100, p: float = 0.5):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(dim, filters, k) for k in (3, 4, 5))
        self.dropout = nn.Dropout(p)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        e = self.embed(tokens).transpose(1, 2)  # N x dim x L
        pooled = [F.relu(conv(e)).amax(dim=2) for conv in self.convs]
        return self.dropout(torch.cat(pooled, dim=1))


class _TextTransformer(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 128, heads: int = 4, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.pos = nn.Embedding(512, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pad = tokens == 0
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.encoder(self.embed(tokens) + self.pos(pos), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return (h * keep).sum(1) / keep.sum(1).clamp_min(1.0)  # mean over real tokens


@register_model(kind="text")
def textcnn(num_classes: int, vocab_size: int) -> Classifier:
    return Classifier(_TextCNN(vocab_size), nn.Linear(300, num_classes))


@register_model(kind="text")
def transformer(num_classes: int, vocab_size: int) -> Classifier:
    return Classifier(_TextTransformer(vocab_size), nn.Linear(128, num_classes))
