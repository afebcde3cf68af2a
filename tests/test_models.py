import pytest
import torch

from ncip.core.models import create_model, list_models, model_kind

SHAPES = {"image": (2, 3, 32, 32)}


@pytest.mark.parametrize("name", list_models())
def test_every_model_runs_forward_and_backward(name):
    torch.manual_seed(0)
    if model_kind(name) == "text":
        m = create_model(name, 4, vocab_size=50)
        x = torch.randint(0, 50, (2, 16))
    else:
        shape = SHAPES["image"][1:]  # models sized by their input (the MLP) take it
        m = create_model(name, 4, 3, mean=[0.5] * 3, std=[0.25] * 3, input_shape=shape)
        x = torch.rand(*SHAPES["image"])
    out = m(x)
    assert out.shape == (2, 4)
    out.sum().backward()
    assert isinstance(m.head, torch.nn.Linear) and m.head.out_features == 4
    assert m.head.weight.grad is not None
    m.eval()
    with torch.no_grad():
        f = m.features(x)
        assert f.shape == (2, m.head.in_features)
        assert torch.allclose(m.head(f), m(x), atol=1e-5)  # forward = head(features)


def test_lenets_take_mnist_and_small_inputs():
    for name in ("lenet1", "lenet5"):
        m = create_model(name, 10, 1)
        assert m(torch.rand(3, 1, 28, 28)).shape == (3, 10)
        assert m(torch.rand(3, 1, 8, 8)).shape == (3, 10)  # resized to 28x28 inside


def test_normalisation_is_inside_the_model():
    m = create_model("lenet5", 10, 1, mean=[0.3], std=[0.2])
    assert "normalize.mean" in m.state_dict()
    assert m.normalize(torch.full((1, 1, 2, 2), 0.5)).flatten()[0].item() == pytest.approx(1.0)


def test_bad_names_and_arguments():
    with pytest.raises(ValueError, match="unknown model 'lenet9'.*lenet5"):
        create_model("lenet9", 10)
    with pytest.raises(ValueError, match="num_classes"):
        create_model("lenet5", 1)
    with pytest.raises(ValueError, match="vocab_size"):
        create_model("textcnn", 2)


@pytest.mark.parametrize(
    "name,shape",
    [
        ("mlp", (1, 28, 28)),
        ("mlp", (1, 1, 40)),
        ("cnn1d", (1, 1, 40)),
        ("vggsmall", (1, 28, 28)),
        ("vggsmall", (1, 8, 8)),
    ],  # fmt: skip
)
def test_extended_study_models_take_their_datasets_inputs(name, shape):
    m = create_model(name, 10, 1, input_shape=shape)
    assert m(torch.rand(3, *shape)).shape == (3, 10)


def test_a_checkpoint_rebuilds_an_input_sized_model(tmp_path):
    """The MLP's first layer follows the recorded input shape (MNIST-1D: 1 x 1 x 40)."""
    from ncip.core.checkpoints import CheckpointMeta, build_model

    m = build_model(CheckpointMeta(arch="mlp", num_classes=10, in_channels=1,
                                   input_shape=[1, 1, 40]))  # fmt: skip
    assert m.backbone[1].in_features == 40
