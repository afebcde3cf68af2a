"""Issue 39's red team: runs that ended with exit code 0 and a wrong result, or none, without a
word. Each now ends in one line naming the problem and the fix, exit code 2, nothing written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from ncip.cli import app

runner = CliRunner()

MLP = """
import torch.nn as nn


def build(num_classes=10):
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, num_classes))


def leave(num_classes=10):
    raise SystemExit(0)
"""


@pytest.fixture
def run(tmp_path):
    (tmp_path / "mlp.py").write_text(MLP)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    (tmp_path / "ck").mkdir()
    for e in range(1, 6):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.05 * torch.randn_like(p))
        state = {k: v.contiguous() for k, v in net.state_dict().items()}
        save_file(state, tmp_path / "ck" / f"epoch_{e}.safetensors", metadata={"epoch": str(e)})
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((50, 20)).astype("f4"))
    return tmp_path


def rank(d, *extra):
    return runner.invoke(
        app,
        ["rank", str(d / "ck"), "--inputs", str(d / "x.npy"), "--out", str(d / "r.csv"),
         "--k", "2", "--quiet", *extra],
    )  # fmt: skip


def test_ema_on_files_without_ema_weights_is_refused(run):
    assert rank(run, "--model", f"{run / 'mlp.py'}:build").exit_code == 0
    (run / "r.csv").unlink()
    r = rank(run, "--model", f"{run / 'mlp.py'}:build", "--ema")
    assert r.exit_code == 2, r.output
    assert "holds one set of weights, no EMA copy beside them; drop --ema" in " ".join(
        r.output.split()
    )
    assert not (run / "r.csv").exists()


def test_a_model_factory_that_exits_is_an_error_not_a_silent_success(run):
    r = rank(run, "--model", f"{run / 'mlp.py'}:leave")
    assert r.exit_code == 2, r.output
    assert "called sys.exit(0) while building the model" in " ".join(r.output.split())
    assert not (run / "r.csv").exists()
