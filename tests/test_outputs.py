"""What a model returns (issue 39, never silently wrong): logits that are not its first output,
and probabilities from a softmax or sigmoid at its end, rank as the plain-logits model does,
each said in a line; outputs ncip cannot read are refused with the fix."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from ncip.cli import app

runner = CliRunner()

NETS = """
import torch
import torch.nn as nn


class Plain(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, num_classes))

    def forward(self, x):
        return self.net(x)


class AuxFirst(Plain):  # (hidden features, logits): the logits are not first
    def forward(self, x):
        h = self.net[1](self.net[0](x))
        return h, self.net[2](h)


class AsDict(Plain):
    def forward(self, x):
        h = self.net[1](self.net[0](x))
        return {"features": h, "scores": self.net[2](h)}


class Softmaxed(Plain):
    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


class Binary(nn.Module):
    def __init__(self, num_classes=1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 1))

    def forward(self, x):
        return self.net(x)


class Sigmoided(Binary):
    def forward(self, x):
        return torch.sigmoid(self.net(x))


class TwoWide(Plain):  # two different tensors as wide as the head
    def forward(self, x):
        z = self.net(x)
        return z, 2 * z


class Loads(Plain):  # a class that opens a file its argument names
    def __init__(self, num_classes=10, act="relu", weights_path=None):
        super().__init__(num_classes)
        if weights_path is not None:
            raise RuntimeError(f"opened {weights_path}")


class NoneWide(Plain):
    def forward(self, x):
        h = self.net[1](self.net[0](x))
        return h, h[:, :5]
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 10-class and a binary MLP trained 8 epochs on separable data, a state dict a file."""
    d = tmp_path_factory.mktemp("outputs")
    (d / "nets.py").write_text(NETS)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((600, 20)).astype(np.float32)
    w = rng.standard_normal((20, 10))
    y = (x @ w + rng.standard_normal((600, 10)) * 2).argmax(1)
    yb = (x[:, 0] + x[:, 1] + rng.standard_normal(600) * 0.7 > 0).astype(np.int64)
    np.savez(d / "test.npz", x=x[400:], y=y[400:])
    np.savez(d / "testb.npz", x=x[400:], y=yb[400:])
    for name, classes, target in (("multi", 10, y), ("binary", 1, yb)):
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Linear(20, 48), torch.nn.ReLU(), torch.nn.Linear(48, classes)
        )
        opt = torch.optim.Adam(net.parameters(), 1e-2)
        xt, yt = torch.from_numpy(x[:400]), torch.from_numpy(target[:400])
        (d / name).mkdir()
        for epoch in range(1, 9):
            z = net(xt)
            if classes == 1:
                loss = torch.nn.functional.binary_cross_entropy_with_logits(z[:, 0], yt.float())
            else:
                loss = torch.nn.functional.cross_entropy(z, yt)
            opt.zero_grad()
            loss.backward()
            opt.step()
            state = {f"net.{k}": v.clone() for k, v in net.state_dict().items()}
            torch.save(state, d / name / f"epoch_{epoch}.pt")
    return d


def rank(d, ckpt, model, data, out, *extra):
    return runner.invoke(
        app,
        ["rank", str(d / ckpt), "--model", f"{d / 'nets.py'}:{model}", "--inputs",
         str(d / data), "--out", str(d / out), "--k", "3", "--quiet", *extra],
    )  # fmt: skip


@pytest.mark.parametrize("model", ["AuxFirst", "AsDict"])
def test_logits_that_are_not_first_rank_as_the_plain_model(runs, model):
    d = runs
    assert rank(d, "multi", "Plain", "test.npz", "plain.csv").exit_code == 0
    r = rank(d, "multi", model, "test.npz", f"{model}.csv")
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    key = "1" if model == "AuxFirst" else "'scores'"
    assert f"ranked on {key}, the one as wide as its head 'net.2'" in said
    assert (d / f"{model}.csv").read_bytes() == (d / "plain.csv").read_bytes()
    sel = json.loads((d / f"{model}.selection.json").read_text())
    assert sel["head"] == "net.2.weight" and sel["outputs"]["width"] == 10


@pytest.mark.parametrize(
    "ckpt, plain, probs, data",
    [("multi", "Plain", "Softmaxed", "test.npz"), ("binary", "Binary", "Sigmoided", "testb.npz")],
)
def test_probabilities_are_not_taken_for_logits(runs, ckpt, plain, probs, data):
    d = runs
    assert rank(d, ckpt, plain, data, f"{plain}.csv").exit_code == 0
    r = rank(d, ckpt, probs, data, f"{probs}.csv")
    assert r.exit_code == 0, r.output
    assert "ranked as probabilities; pass --outputs logits" in " ".join(r.output.split())
    a, b = pd.read_csv(d / f"{plain}.csv"), pd.read_csv(d / f"{probs}.csv")
    assert (a["pred"].to_numpy() == b["pred"].to_numpy()).all()
    np.testing.assert_allclose(a["ncip"], b["ncip"], atol=1e-4)
    assert len(set(b["pred"])) > 1  # not every prediction one class
    ev = json.loads((d / f"{probs}.evaluation.json").read_text())["methods"][0]
    assert (
        ev["faults"]
        == json.loads((d / f"{plain}.evaluation.json").read_text())["methods"][0]["faults"]
    )
    # as logits when told: a second softmax (the old, silent behaviour, now asked for)
    r = rank(d, ckpt, probs, data, "told.csv", "--outputs", "logits")
    assert r.exit_code == 0 and "ranked as probabilities" not in r.output


@pytest.mark.parametrize(
    "ckpt, model, data", [("binary", "Binary", "testb.npz"), ("multi", "Plain", "test.npz")]
)
def test_logits_that_fall_in_0_1_are_not_taken_for_probabilities(runs, ckpt, model, data):
    """Issue 47's red team: a head whose logits all lie in [0, 1] on the probe (one logit near
    0.5) was ranked as probabilities (sigmoid skipped), and a 10-class one was refused as
    'truncated probabilities'. Outputs equal to the head's own output are logits."""
    d = runs
    squashed = d / f"{ckpt}-squashed"
    squashed.mkdir(exist_ok=True)
    for f in sorted((d / ckpt).glob("epoch_*.pt")):
        state = torch.load(f, weights_only=True)
        state["net.2.weight"] = state["net.2.weight"] * 0.001
        state["net.2.bias"] = torch.full_like(state["net.2.bias"], 0.05) + torch.linspace(
            0, 0.01, state["net.2.bias"].numel()
        )
        torch.save(state, squashed / f.name)
    r = rank(d, squashed.name, model, data, f"sq-{ckpt}.csv")
    assert r.exit_code == 0, r.output
    assert "ranked as logits; pass --outputs probs" in " ".join(r.output.split())
    assert json.loads((d / f"sq-{ckpt}.selection.json").read_text())["outputs"]["kind"] == "logits"
    told = rank(d, squashed.name, model, data, f"sq-{ckpt}-told.csv", "--outputs", "logits")
    assert told.exit_code == 0, told.output
    assert (d / f"sq-{ckpt}.csv").read_bytes() == (d / f"sq-{ckpt}-told.csv").read_bytes()


@pytest.mark.parametrize(
    "model, expected",
    [
        ("TwoWide", "several tensors as wide as its head 'net.2'"),
        ("NoneWide", "none is as wide as its head 'net.2' (10 rows): name the classifier layer"),
    ],
)
def test_outputs_ncip_cannot_read_are_refused(runs, model, expected):
    d = runs
    out = d / f"{model}.csv"
    r = rank(d, "multi", model, "test.npz", out.name)
    assert r.exit_code == 2, r.output
    assert expected in " ".join(r.output.split()) and "Traceback" not in r.output
    assert not out.exists()


def test_outputs_of_one_run_are_never_mixed_with_an_earlier_runs(runs, monkeypatch):
    """The table goes in place last, after its old version and the old run's sidecars that this
    run does not write: a kill between the renames leaves no table, never a new table beside
    old sidecars; stale-temp clean-up removes ncip's own temporary names only (issue 39)."""
    import os

    d = runs
    out = d / "mix.csv"
    assert rank(d, "multi", "Plain", "test.npz", out.name).exit_code == 0
    assert (d / "mix.evaluation.json").exists()  # labels in test.npz
    mine = d / ".mix.csv.mine.tmp"
    mine.write_text("a user's own file")
    killed = d / ".mix.csv.ab12cd34.tmp"
    killed.write_text("left by a killed write")
    np.savez(d / "nolabels.npz", x=np.load(d / "test.npz")["x"])
    assert rank(d, "multi", "Plain", "nolabels.npz", out.name).exit_code == 0
    assert not (d / "mix.evaluation.json").exists()  # not this run's: gone with the old table
    assert mine.read_text() == "a user's own file" and not killed.exists()
    real = os.replace

    def kill_at_the_table(src, dst):
        if str(dst) == str(out):
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", kill_at_the_table)
    r = rank(d, "multi", "Plain", "test.npz", out.name)
    assert r.exit_code == 130
    assert not out.exists() and list(d.glob(".mix.csv.*.tmp")) == [mine]


def test_two_files_recording_the_same_step_are_refused(runs, tmp_path):
    """Lightning re-saves a checkpoint of the same step as ``-v1``: with other weights, which
    one is the history cannot be told (name order was taken silently before, issue 39)."""
    d = runs
    ck = tmp_path / "ck"
    ck.mkdir()
    for e in range(1, 6):
        state = torch.load(d / "multi" / f"epoch_{e}.pt", weights_only=True)
        blob = {"state_dict": state, "epoch": e - 1, "global_step": 10 * e}
        torch.save(blob, ck / f"epoch={e - 1}-step={10 * e}.ckpt")
    state = torch.load(d / "multi" / "epoch_8.pt", weights_only=True)
    torch.save({"state_dict": state, "epoch": 4, "global_step": 50}, ck / "epoch=4-step=50-v1.ckpt")
    r = runner.invoke(
        app,
        ["rank", str(ck), "--model", f"{d / 'nets.py'}:Plain", "--inputs", str(d / "test.npz"),
         "--out", str(tmp_path / "r.csv"), "--k", "2", "--quiet"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "record the same step 50 with different weights" in said and "-v1" in said


def test_recorded_hyper_parameters_that_name_files_are_not_passed(runs, tmp_path):
    """A Lightning checkpoint's hyper_parameters are data shipped with the folder: numbers and
    plain names are passed to the user's class (and printed), a value naming a file is not
    (printed, with how to pass it), so it never reaches user code unseen (issue 39)."""
    d = runs
    ck = tmp_path / "ck"
    ck.mkdir()
    hp = {"num_classes": 10, "act": "relu", "weights_path": str(tmp_path / "evil.pt")}
    for e in range(1, 6):
        state = torch.load(d / "multi" / f"epoch_{e}.pt", weights_only=True)
        blob = {"state_dict": state, "epoch": e - 1, "global_step": 10 * e, "hyper_parameters": hp}
        torch.save(blob, ck / f"epoch={e - 1}-step={10 * e}.ckpt")
    r = runner.invoke(
        app,
        ["rank", str(ck), "--model", f"{d / 'nets.py'}:Loads", "--inputs", str(d / "test.npz"),
         "--out", str(tmp_path / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "with the checkpoint's hyper_parameters (num_classes=10, act='relu')" in said
    assert "not passed, as they are not plain numbers or names: weights_path=" in said
    assert "opened" not in said
