"""The GPU paths, on a GPU only (skipped elsewhere; scripts/gpu_check.sh runs them on a lent
device): every engine path on CUDA against a float64 CPU computation, reduced precision,
training in bf16 with channels-last, and `ncip.rank` on CUDA against the CPU.

CUDA's float32 convolutions and matrix products may use TF32 (10-bit mantissa) by default,
so the CUDA paths are held to 2e-3 in probabilities: rounding of that kind passes, a wrong
summation order or wrong weights (off by 1e-1, see test_engine.py) do not."""

import copy

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_engine import checkpoints_of, float64_reference

from ncip.core.engine import Engine, EngineConfig
from ncip.core.models import list_models
from ncip.core.scores import softmax64

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _engine_probs(model, states, x, config):
    m = copy.deepcopy(model)
    engine = Engine(m, "cuda", config)
    out = [
        softmax64(z)
        for _, z, _ in engine.outputs(lambda i: m.load_state_dict(states[i]), len(states), x)
    ]
    return engine.path, np.stack(out)


@pytest.fixture
def no_tf32():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.parametrize("path", ["channels_last", "stacked"])
@pytest.mark.parametrize("name", list_models())
def test_every_cuda_path_is_as_exact_as_the_sequential_one(name, path, no_tf32):
    """As on the CPU (test_engine.py), in true float32 (TF32 off): within 10x the sequential
    CUDA path's own distance to a float64 computation (+1e-6). With TF32 on (PyTorch's default
    for cuDNN convolutions) the paths differ by TF32 rounding, which depends on the kernel
    each layout picks; test_tf32_rounding_stays_small bounds that."""
    model, states, x = checkpoints_of(name)
    exact = float64_reference(model, states, x)
    _, seq = _engine_probs(model, states, x, EngineConfig(path="sequential", batch_size=4))
    used, got = _engine_probs(model, states, x, EngineConfig(path=path, batch_size=4))
    seq_err, err = np.max(np.abs(seq - exact)), np.max(np.abs(got - exact))
    assert err <= 10 * seq_err + 1e-6, (used, err, seq_err)


@pytest.mark.parametrize("path", ["sequential", "channels_last", "stacked"])
@pytest.mark.parametrize("name", ["lenet1", "resnet50", "vgg11"])
def test_fp32_is_float32_at_pytorchs_defaults(name, path):
    """With PyTorch's defaults (TF32 allowed in cuDNN convolutions), precision fp32 still
    computes in float32: the engine turns TF32 off while it runs (on an H200, TF32 put
    ResNet-50 0.05 from float64) and puts the global flags back afterwards."""
    assert torch.backends.cudnn.allow_tf32  # PyTorch's default
    model, states, x = checkpoints_of(name)
    exact = float64_reference(model, states, x)
    _, got = _engine_probs(model, states, x, EngineConfig(path=path, batch_size=4))
    assert np.max(np.abs(got - exact)) < 1e-4
    assert torch.backends.cudnn.allow_tf32


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_on_cuda_stays_close(precision):
    model, states, x = checkpoints_of("lenet5")
    exact = float64_reference(model, states, x)
    _, got = _engine_probs(model, states, x, EngineConfig(precision=precision, batch_size=4))
    assert np.max(np.abs(got - exact)) < 0.05  # close, not equal


def test_bf16_channels_last_training_on_cuda_learns(tmp_path):
    from ncip.study.data import prepare_dataset
    from ncip.study.training import TrainConfig, train_with_checkpoints

    info, splits = prepare_dataset("digits")
    cfg = TrainConfig(arch="lenet5", epochs=4, batch_size=64, precision="bf16", channels_last=True)
    hist = train_with_checkpoints(cfg, info, splits, tmp_path / "m", None, device="cuda")
    assert np.isfinite(hist["loss"]).all()
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    assert hist["val_acc"].iloc[-1] > 0.5  # 8x8 digits: well above chance (0.1)
    weights = load_file(str(tmp_path / "m" / "epoch-004.safetensors"))
    assert all(torch.isfinite(v).all() for v in weights.values() if v.is_floating_point())


def test_rank_on_cuda_matches_the_cpu(tiny_run):
    import ncip

    x = tiny_run["splits"]["test"].x
    models = tiny_run["dir"] / "models"
    kw = dict(k=3, show_progress=False, model="lenet5", num_classes=10)
    cpu = ncip.rank(models, x, device="cpu", **kw).table.sort_values("sample_id")
    gpu = ncip.rank(models, x, device="cuda", **kw).table.sort_values("sample_id")
    assert np.max(np.abs(cpu["ncip"].to_numpy() - gpu["ncip"].to_numpy())) < 2e-3
    assert (cpu["pred"].to_numpy() == gpu["pred"].to_numpy()).mean() > 0.99
