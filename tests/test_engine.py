"""The multi-checkpoint engine equals the sequential path, for every registered architecture."""

import copy

import numpy as np
import pytest
import torch

from ncip.core.engine import Engine, EngineConfig, choose_path
from ncip.core.models import create_model, list_models, model_kind
from ncip.core.scores import softmax64

SHAPES = {"lenet1": (1, 28, 28), "lenet5": (1, 28, 28), "vgg11": (3, 32, 32)}


def checkpoints_of(name, k=3, seed=0):
    """k checkpoints of one architecture (random weights, small drifts) and inputs for it."""
    torch.manual_seed(seed)
    if model_kind(name) == "text":
        model = create_model(name, 4, vocab_size=50)
        x = np.random.default_rng(seed).integers(1, 50, (6, 12)).astype(np.int64)
    else:
        c, h, w = SHAPES.get(name, (3, 32, 32))
        model = create_model(name, 10, c, input_shape=(c, h, w))
        x = np.random.default_rng(seed).integers(0, 256, (6, c, h, w)).astype(np.uint8)
        # batch-norm statistics as training leaves them (fresh ones let deep nets' activations
        # grow without bound, far from any checkpoint ncip will see)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = None  # a cumulative average over the calibration batches
        model.train()
        with torch.no_grad():
            for _ in range(3):
                model(torch.rand(16, c, h, w))
    model.eval()
    params = {n for n, _ in model.named_parameters()}
    states = []
    for _ in range(k):  # checkpoints drift in their weights; buffers (BN statistics) stay valid
        sd = {
            n: (v + 0.01 * torch.randn_like(v)) if n in params else v
            for n, v in model.state_dict().items()
        }
        states.append(sd)
    return model, states, x


def reference(model, states, x):
    from ncip.core.models import as_model_input

    out = []
    m = copy.deepcopy(model).eval()
    with torch.inference_mode():
        for sd in states:
            m.load_state_dict(sd)
            out.append(softmax64(m(as_model_input(x)).float().numpy()))
    return np.stack(out)


def float64_reference(model, states, x):
    from ncip.core.models import as_model_input

    m = copy.deepcopy(model).double().eval()
    out = []
    with torch.inference_mode():
        for sd in states:
            m.load_state_dict(
                {k: v.double() if v.is_floating_point() else v for k, v in sd.items()}
            )
            xin = as_model_input(x)
            out.append(softmax64(m(xin.double() if xin.is_floating_point() else xin).numpy()))
    return np.stack(out)


@pytest.mark.parametrize("path", ["sequential", "channels_last", "stacked"])
@pytest.mark.parametrize("name", list_models())
def test_every_path_equals_sequential_for_every_architecture(name, path):
    """Within 1e-6 of the sequential path in probabilities. Deep nets in float32 are less exact
    than that whatever the layout (ResNet-50's sequential path is 1.8e-5 from a float64
    computation): there the engine must be as exact as float32 arithmetic allows, within 10x
    the sequential path's own distance to float64 (+1e-6). Rounding in another summation order
    passes; a wrong order or wrong weights (off by 1e-1) does not."""
    model, states, x = checkpoints_of(name)
    want = reference(model, states, x)
    m = copy.deepcopy(model)
    engine = Engine(m, "cpu", EngineConfig(path=path, batch_size=4))
    got = np.stack(
        [
            softmax64(z)
            for _, z, _ in engine.outputs(lambda i: m.load_state_dict(states[i]), len(states), x)
        ]
    )
    assert got.shape == want.shape
    diff = np.max(np.abs(got - want))
    if diff >= 1e-6:
        exact = float64_reference(model, states, x)
        float32_error = np.max(np.abs(want - exact))
        assert np.max(np.abs(got - exact)) <= 10 * float32_error + 1e-6, (engine.path, diff)


def test_auto_picks_channels_last_for_convolutions_on_a_cpu_and_sequential_for_text():
    lenet = create_model("lenet5", 10, 1)
    assert (
        choose_path(lenet, torch.device("cpu"), torch.zeros(1, 1, 28, 28), "auto", 30)
        == "channels_last"
    )
    text = create_model("textcnn", 2, vocab_size=20)
    sample = torch.zeros(1, 5, dtype=torch.long)
    assert choose_path(text, torch.device("cpu"), sample, "auto", 30) == "sequential"
    assert (
        choose_path(lenet, torch.device("cuda"), torch.zeros(1, 1, 28, 28), "auto", 30) == "stacked"
    )
    assert (
        choose_path(lenet, torch.device("cpu"), torch.zeros(1, 1, 28, 28), "stacked", 1)
        == "channels_last"
    )


def test_features_and_reduced_precision():
    model, states, x = checkpoints_of("lenet5", k=1)
    model.load_state_dict(states[0])
    from ncip.study.predict import batched_outputs

    z, f = batched_outputs(model, x, 4, features=True)
    assert f.shape == (6, 84) and np.allclose(
        model.head(torch.from_numpy(f)).detach().numpy(), z, atol=1e-5
    )
    zb = batched_outputs(model, x, 4, config=EngineConfig(precision="bf16", batch_size=4))
    assert np.max(np.abs(softmax64(zb) - softmax64(z))) < 0.05  # bf16: close, not equal
    with pytest.raises(ValueError, match="precision"):
        EngineConfig(precision="int4").validate()


def test_batched_outputs_leaves_the_training_model_as_it_was():
    model = create_model("lenet5", 10, 1)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    from ncip.study.predict import batched_outputs

    batched_outputs(model, np.zeros((3, 1, 28, 28), np.uint8))
    assert model.training
    w = model.backbone[1].weight
    assert w.is_contiguous()  # the layout training uses, not channels-last
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
