"""`ncip rank` meets the habits users have (issue 23): each habit is a real folder saved the way
people save it, from a small model trained here on scikit-learn's digits."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from typer.testing import CliRunner

from ncip.cli import app
from ncip.core.checkpoints import CheckpointError
from ncip.tool.formats import discover
from ncip.tool.ranking import rank_probs

runner = CliRunner()


# the same network as a user's module file, for --model
MLP_SOURCE = (
    "import torch.nn as nn\n\n"
    "class MLP(nn.Module):\n"
    "    def __init__(self, num_classes=10):\n"
    "        super().__init__()\n"
    "        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU())\n"
    "        self.fc = nn.Linear(32, num_classes)\n\n"
    "    def forward(self, x):\n"
    "        return self.fc(self.body(x))\n"
)


class MLP(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU())
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.fc(self.body(x))


def _digits(binary: bool = False):
    from ncip.study.data import prepare_dataset

    _, s = prepare_dataset("digits")
    tr, te = s["train"], s["test"]
    if binary:  # zeros against ones
        tr = tr.subset(np.flatnonzero(tr.y < 2))
        te = te.subset(np.flatnonzero(te.y < 2))
    return tr, te


def _train(model, tr, epochs, save, binary=False):
    x = torch.from_numpy(tr.x).float().div(255)
    y = torch.from_numpy(tr.y)
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    for e in range(1, epochs + 1):
        for i in range(0, len(x), 64):
            out = model(x[i : i + 64])
            loss = (
                F.binary_cross_entropy_with_logits(out[:, 0], y[i : i + 64].float())
                if binary
                else F.cross_entropy(out, y[i : i + 64])
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
        save(e, model, opt)


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    """PyTorch's tutorial layout: checkpoint_{e}.tar dicts (epoch, model and optimizer state),
    with best.tar and final.tar copies beside them."""
    d = tmp_path_factory.mktemp("tutorial")
    tr, te = _digits()
    (d / "ck").mkdir()

    def save(e, model, opt):
        torch.save(
            {
                "epoch": e,
                "model_state_dict": model.state_dict(),
                "optimizer_state_dict": opt.state_dict(),
            },
            d / "ck" / f"checkpoint_{e}.tar",
        )

    _train(MLP(), tr, 8, save)
    shutil.copy(d / "ck" / "checkpoint_6.tar", d / "ck" / "best.tar")
    shutil.copy(d / "ck" / "checkpoint_8.tar", d / "ck" / "final.tar")
    np.savez(d / "test.npz", x=te.x, y=te.y, ids=te.ids)
    (d / "mynet.py").write_text(MLP_SOURCE)
    return d


def _rank(*args):
    r = runner.invoke(app, ["rank", *map(str, args), "--quiet"])
    assert r.exit_code == 0, r.output
    return r


def test_tutorial_dicts_with_best_and_final_copies(tutorial, tmp_path):
    cs = discover(tutorial / "ck")
    assert [c.name for c in cs] == [f"checkpoint_{e}.tar" for e in range(1, 9)]
    assert cs.order == "the epoch recorded in each file"
    copies = dict(cs.skipped)
    assert copies["best.tar"] == "a copy of checkpoint_6.tar (same weights)"
    assert copies["final.tar"] == "a copy of checkpoint_8.tar (same weights)"
    d = tutorial
    r = _rank(d / "ck", "--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz",
              "--out", tmp_path / "r.csv", "--k", 4)  # fmt: skip
    assert "a copy of checkpoint_6.tar" in r.output
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sel["final"].endswith("checkpoint_8.tar")
    assert {s["file"] for s in sel["skipped"]} >= {"best.tar", "final.tar"}


def test_a_copy_with_other_bytes_but_the_same_epoch_and_weights_is_a_copy(tutorial, tmp_path):
    shutil.copytree(tutorial / "ck", tmp_path / "ck")
    obj = torch.load(tmp_path / "ck" / "checkpoint_8.tar", weights_only=True)
    torch.save({**obj, "note": "saved again"}, tmp_path / "ck" / "last_epoch.tar")
    cs = discover(tmp_path / "ck")
    assert cs.final.name == "checkpoint_8.tar"
    assert "last_epoch.tar" in dict(cs.skipped)


@pytest.mark.parametrize(
    "pattern, field",
    [
        ("model-e{e:02d}-acc0.{acc}.pt", "after 'model-e'"),
        ("ckpt_step{step}_ep{e}.pt", "after 'ckpt_step'"),
        ("run2_epoch_{e}.pt", "after 'epoch'"),
    ],
)
def test_names_with_several_numbers(tutorial, tmp_path, pattern, field):
    accs = [91, 93, 90, 95, 94, 96, 92, 97]  # not in training order
    for e in range(1, 9):
        sd = torch.load(tutorial / "ck" / f"checkpoint_{e}.tar", weights_only=True)
        name = pattern.format(e=e, acc=accs[e - 1], step=e * 125)
        torch.save(sd["model_state_dict"], tmp_path / name)  # no epoch inside
    cs = discover(tmp_path)
    assert field in cs.order
    got = [torch.equal(*(t["fc.weight"] for t in (
        torch.load(c.path, weights_only=True),
        torch.load(tutorial / "ck" / f"checkpoint_{e}.tar", weights_only=True)["model_state_dict"],
    ))) for e, c in zip(range(1, 9), cs, strict=True)]  # fmt: skip
    assert all(got)


def _rewrap(tutorial, dest, make):
    """The tutorial run saved again as ``make(epoch, state_dict)`` dicts."""
    dest.mkdir()
    for e in range(1, 9):
        sd = torch.load(tutorial / "ck" / f"checkpoint_{e}.tar", weights_only=True)
        torch.save(make(e, sd["model_state_dict"]), dest / f"ckpt_{e}.pth")
    return dest


def test_state_dicts_under_the_keys_a_script_chose(tutorial, tmp_path):
    """A training script's own dict keys (``model_state``; DeepSpeed's ``module``) are found when
    one key holds a state dict; several are refused naming them, until --state-key picks one;
    an EMA-named key is used only with --ema."""
    d = tutorial
    base = ["--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz", "--k", 4]
    _rank(d / "ck", *base, "--out", tmp_path / "ref.csv")
    ref = (tmp_path / "ref.csv").read_bytes()
    own = _rewrap(d, tmp_path / "own", lambda e, sd: {"epoch": e, "model_state": sd, "loss": 0.1})
    deepspeed = _rewrap(d, tmp_path / "ds", lambda e, sd: {"module": sd, "global_steps": e * 10})
    for folder, key in ((own, "model_state"), (deepspeed, "module")):
        r = _rank(folder, *base, "--out", tmp_path / f"{folder.name}.csv")
        assert (tmp_path / f"{folder.name}.csv").read_bytes() == ref
        assert f"8 checkpoints (container under '{key}')" in r.output
    sel = json.loads((tmp_path / "own.selection.json").read_text())
    assert {c["key"] for c in sel["checkpoints"]} == {"model_state"}

    two = _rewrap(d, tmp_path / "two", lambda e, sd: {"epoch": e, "student": sd, "teacher": sd})
    out = tmp_path / "two.csv"
    r = runner.invoke(app, ["rank", str(two), *map(str, base), "--out", str(out)])
    assert r.exit_code == 2 and not out.exists()
    line = r.output.strip()
    assert "\n" not in line and line.count("student, teacher") == 1, line
    assert "and 5 more (holds several state dicts (student, teacher)" in line
    assert "--state-key" in line
    _rank(two, *base, "--state-key", "teacher", "--out", out)
    assert out.read_bytes() == ref
    r = runner.invoke(app, ["rank", str(two), *map(str, base), "--state-key", "tutor",
                            "--out", str(tmp_path / "x.csv")])  # fmt: skip
    assert r.exit_code == 2 and "no state dict under 'tutor' (state dicts under: student, " \
        "teacher)" in r.output  # fmt: skip

    ema = _rewrap(d, tmp_path / "ema", lambda e, sd: {"epoch": e, "ema_state": sd})
    r = runner.invoke(app, ["rank", str(ema), *map(str, base), "--out", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "holds only EMA weights (ema_state); pass --ema" in r.output
    _rank(ema, *base, "--ema", "--out", tmp_path / "ema.csv")
    assert (tmp_path / "ema.csv").read_bytes() == ref
    r = runner.invoke(app, ["rank", str(ema), *map(str, base), "--ema", "--state-key",
                            "ema_state", "--out", str(tmp_path / "x.csv")])  # fmt: skip
    assert r.exit_code == 2 and "give one" in r.output
    assert not (tmp_path / "x.csv").exists()


def test_deepspeed_folders_one_file_each(tutorial, tmp_path):
    """DeepSpeed's layout: global_step<N>/mp_rank_00_model_states.pt, the weights under
    ``module``, the step as ``global_steps``. The folder names the glob to pass; the glob ranks
    as the tutorial files do, each checkpoint named by its folder."""
    d = tutorial
    base = ["--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz", "--k", 4]
    _rank(d / "ck", *base, "--out", tmp_path / "ref.csv")
    ds = tmp_path / "ds"
    for e in range(1, 9):
        sd = torch.load(d / "ck" / f"checkpoint_{e}.tar", weights_only=True)["model_state_dict"]
        (ds / f"global_step{e * 17}").mkdir(parents=True)
        torch.save({"module": sd, "global_steps": e * 17, "dp_world_size": 1},
                   ds / f"global_step{e * 17}" / "mp_rank_00_model_states.pt")  # fmt: skip
        optim = ds / f"global_step{e * 17}" / "zero_pp_rank_0_mp_rank_00_optim_states.pt"
        torch.save({"optimizer_state_dict": {"state": {}, "param_groups": []}}, optim)
    r = runner.invoke(app, ["rank", str(ds), *map(str, base), "--out", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and f"'{ds}/*/mp_rank_00_model_states.pt'" in r.output
    r = _rank(f"{ds}/global_step*/mp_rank_00_model_states.pt", *base, "--out", tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()
    assert "global_step17/mp_rank_00_model_states.pt ... global_step136/" in r.output
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sum(c["selected"] for c in sel["checkpoints"]) == 4 == len(sel["used"])
    # one level above a run's folder: the folder to give, not a glob
    (tmp_path / "logs").mkdir()
    shutil.copytree(d / "ck", tmp_path / "logs" / "checkpoints")
    r = runner.invoke(app, ["rank", str(tmp_path / "logs"), *map(str, base),
                            "--out", str(tmp_path / "x.csv")])  # fmt: skip
    assert r.exit_code == 2
    assert f"a folder of 10 checkpoint files: give {tmp_path / 'logs' / 'checkpoints'}" in r.output


def test_a_csv_with_label_and_id_columns_ranks_as_the_npz(tutorial, tmp_path):
    """The table habit (one row per input, pixel columns, a label column, an id column)."""
    import pandas as pd

    d = tutorial
    z = np.load(d / "test.npz")
    df = pd.DataFrame(z["x"].reshape(len(z["x"]), -1), columns=[f"pixel{i}" for i in range(64)])
    df.insert(0, "label", z["y"])
    df["id"] = z["ids"]
    df.to_csv(tmp_path / "test.csv", index=False)
    base = ["--model", f"{d / 'mynet.py'}:MLP", "--k", 4]
    _rank(d / "ck", *base, "--inputs", d / "test.npz", "--out", tmp_path / "npz.csv")
    r = _rank(d / "ck", *base, "--inputs", tmp_path / "test.csv", "--out", tmp_path / "t.csv")
    assert "64 feature columns, labels 'label', ids 'id'" in r.output
    assert "on your" in r.output  # the labels column gives the comparison
    assert (tmp_path / "t.csv").read_bytes() == (tmp_path / "npz.csv").read_bytes()
    # from Python too, a ranking never replaces the table it was read from
    from ncip.core.errors import InputError
    from ncip.tool.rank import rank

    before = (tmp_path / "test.csv").read_bytes()
    result = rank(d / "ck", tmp_path / "test.csv", f"{d / 'mynet.py'}:MLP", k=4,
                  show_progress=False)  # fmt: skip
    with pytest.raises(InputError, match="test.csv"):
        result.save(tmp_path / "test.csv")
    assert (tmp_path / "test.csv").read_bytes() == before


ACCELERATE_RUN = """
import sys, numpy as np, torch
from accelerate import Accelerator
from accelerate.utils import ProjectConfiguration
sys.path.insert(0, sys.argv[2])
from mynet import MLP
z = np.load(sys.argv[3])
x, y = torch.from_numpy(z["x"]).float().div(255), torch.from_numpy(z["y"]).long()
cfg = ProjectConfiguration(project_dir=sys.argv[1], automatic_checkpoint_naming=True)
acc = Accelerator(cpu=True, project_config=cfg)
torch.manual_seed(0)
model = MLP()
model, opt = acc.prepare(model, torch.optim.Adam(model.parameters(), 3e-3))
for epoch in range(11):
    for i in range(0, len(x), 64):
        loss = torch.nn.functional.cross_entropy(model(x[i : i + 64]), y[i : i + 64])
        opt.zero_grad()
        acc.backward(loss)
        opt.step()
    acc.save_state()
"""


def test_accelerate_save_state_folders(tutorial, tmp_path):
    """Accelerate's save_state: checkpoints/checkpoint_<i>/ with model.safetensors, the
    optimizer and RNG states beside it, no trainer_state.json; ordered by the folder names
    (checkpoint_10 after checkpoint_9), said as such."""
    import subprocess
    import sys

    d = tutorial
    script = tmp_path / "run.py"
    script.write_text(ACCELERATE_RUN)
    subprocess.run([sys.executable, script, tmp_path / "run", d, d / "test.npz"], check=True)
    ck = tmp_path / "run" / "checkpoints"
    assert (ck / "checkpoint_10" / "model.safetensors").is_file()
    assert (ck / "checkpoint_10" / "optimizer.bin").is_file()
    r = _rank(ck, "--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz",
              "--out", tmp_path / "r.csv", "--k", 4)  # fmt: skip
    assert "11 checkpoints (hf), ordered by the number in each file name" in r.output
    assert "checkpoint_0 ... checkpoint_10" in r.output


def test_a_known_key_with_an_ema_named_twin(tmp_path):
    """``{"model": ..., "ema": ...}``: the model by default, the EMA-named key with ema."""
    torch.manual_seed(0)
    a, b = MLP().state_dict(), MLP().state_dict()
    torch.save({"model": a, "ema": b, "epoch": 3}, tmp_path / "c_3.pt")
    assert discover(tmp_path).final.container_key == "model"
    assert discover(tmp_path, ema=True).final.container_key == "ema"


def test_names_whose_numbers_disagree_are_refused_naming_the_fields(tutorial, tmp_path):
    sd = torch.load(tutorial / "ck" / "checkpoint_1.tar", weights_only=True)["model_state_dict"]
    for a, b in ((1, 3), (2, 1), (3, 2)):
        torch.save(sd, tmp_path / f"ckpt_step{a}_ep{b}.pt")
        sd = {k: v + 1 for k, v in sd.items()}
    with pytest.raises(CheckpointError, match="order the files differently"):
        discover(tmp_path)


def test_a_list_the_files_contradict_takes_their_order_unless_order_given(tutorial, caplog):
    files = [tutorial / "ck" / f"checkpoint_{e}.tar" for e in (1, 2, 4, 3, 5)]
    cs = discover(files)  # the epochs the files record win over the list
    assert [c.name for c in cs] == [f"checkpoint_{e}.tar" for e in range(1, 6)]
    assert cs.order == (
        "the epoch recorded in each file (not the order listed; --order given keeps the list "
        "as typed)"
    )
    with caplog.at_level(logging.WARNING, logger="ncip"):
        cs = discover(files, order="given")
    assert [c.name for c in cs] == [f.name for f in files]
    assert cs.order == "the order given"
    assert "checkpoint_3.tar (epoch 3) after checkpoint_4.tar (epoch 4)" in caplog.text


def test_an_unquoted_glob_is_ranked_in_training_order(tmp_path):
    """`ncip rank ckpt/epoch_*.pt` unquoted: the shell lists epoch_1, epoch_10, epoch_11,
    epoch_12, epoch_2, ...; plain state dicts record no epoch, so the names' number orders
    them and the run says why (issue 39: epoch_9 had become the final model)."""
    import glob

    torch.manual_seed(0)
    for e in range(1, 13):
        torch.save(nn.Linear(4, 3).state_dict(), tmp_path / f"epoch_{e}.pt")
    shell = sorted(glob.glob(str(tmp_path / "epoch_*.pt")))  # what bash passes (C locale)
    assert Path(shell[-1]).name == "epoch_9.pt"
    cs = discover(shell)
    assert [c.name for c in cs] == [f"epoch_{e}.pt" for e in range(1, 13)]
    assert "unquoted glob" in cs.order and "--order given keeps the list" in cs.order
    assert [c.name for c in discover(shell, order="given")][-1] == "epoch_9.pt"
    # a list in another order than by name is the user's: kept
    mine = [tmp_path / f"epoch_{e}.pt" for e in (2, 1, 3)]
    assert [c.name for c in discover(mine)] == ["epoch_2.pt", "epoch_1.pt", "epoch_3.pt"]
    # newest first, as $(ls -t ckpt/*.pt) lists them: exactly backwards, so put in training
    # order (epoch_1.pt had become the final model; issue 47 item 9), and said
    newest_first = [tmp_path / f"epoch_{e}.pt" for e in range(12, 0, -1)]
    cs = discover(newest_first)
    assert [c.name for c in cs] == [f"epoch_{e}.pt" for e in range(1, 13)]
    assert "as `ls -t` lists newest first" in cs.order
    assert [c.name for c in discover(newest_first, order="given")][-1] == "epoch_1.pt"


@pytest.mark.parametrize("kind", ["folder", "glob"])
def test_order_given_on_a_folder_or_glob_is_refused(tmp_path, kind):
    for e in range(1, 4):
        torch.save(nn.Linear(4, 3).state_dict(), tmp_path / f"epoch_{e}.pt")
    source = tmp_path if kind == "folder" else str(tmp_path / "epoch_*.pt")
    with pytest.raises(CheckpointError, match=f"is a {kind}, which has none"):
        discover(source, order="given")


def test_order_given_on_the_command_line(tutorial, tmp_path):
    d = tutorial
    files = [d / "ck" / f"checkpoint_{e}.tar" for e in range(1, 9)]
    _rank(*files, "--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz",
          "--out", tmp_path / "r.csv", "--k", 3, "--order", "given")  # fmt: skip
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sel["order"] == "the order given"
    _rank(*files, "--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz",
          "--out", tmp_path / "r.csv", "--k", 3)  # fmt: skip
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sel["order"] == "the epoch recorded in each file"  # the list agrees with them


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """A one-logit binary classifier (nn.Linear(d, 1) + BCEWithLogitsLoss), a plain loop."""
    d = tmp_path_factory.mktemp("binary")
    tr, te = _digits(binary=True)
    (d / "ck").mkdir()
    _train(
        MLP(num_classes=1),
        tr,
        8,
        lambda e, m, _o: torch.save(m.state_dict(), d / "ck" / f"epoch_{e}.pt"),
        binary=True,
    )
    (d / "bin.py").write_text(
        (d.parent / "x").as_posix()
        and "import torch.nn as nn\n\n"
        "def Net():\n"
        "    return nn.Sequential(nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU()))\n"
    )
    np.savez(d / "test.npz", x=te.x, y=te.y, ids=te.ids)
    return d, te


def test_a_one_logit_binary_model_is_ranked_as_two_classes(binary, tmp_path, tutorial):
    d, te = binary
    (tmp_path / "bnet.py").write_text(
        (tutorial / "mynet.py").read_text() + "\n\ndef Binary():\n    return MLP(num_classes=1)\n"
    )
    r = _rank(d / "ck", "--model", f"{tmp_path / 'bnet.py'}:Binary", "--inputs", d / "test.npz",
              "--out", tmp_path / "r.csv", "--k", 3)  # fmt: skip
    assert "one-logit (binary) head" in r.output
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sel["selected_count"] == 3 and sel["num_checkpoints"] == 8
    import pandas as pd

    table = pd.read_csv(tmp_path / "r.csv")
    assert set(table["pred"]) <= {0, 1} and table["margin"].between(0, 1).all()
    # the same ranking from the sigmoid probabilities, computed here
    import importlib.util

    spec = importlib.util.spec_from_file_location("bnet", tmp_path / "bnet.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.Binary().eval()
    x = torch.from_numpy(te.x).float().div(255)
    probs = []
    for e in (6, 7, 8):  # the last K = 3 of the pool
        model.load_state_dict(torch.load(d / "ck" / f"epoch_{e}.pt", weights_only=True))
        with torch.inference_mode():
            probs.append(torch.sigmoid(model(x).double())[:, 0].numpy())
    ref = rank_probs(probs, ids=te.ids, k=3).table
    assert table["sample_id"].astype(str).tolist() == ref["sample_id"].tolist()


def test_rank_probs_takes_sigmoid_outputs_and_says_what_it_assumed():
    rng = np.random.default_rng(0)
    p = [rng.uniform(size=50) for _ in range(4)]
    r = rank_probs(p)
    assert r.notes[0].startswith("predictions treated as probabilities")
    assert r.table["margin"].between(0, 1).all()


def test_rank_probs_float16_truncated_and_mixed_inputs():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3, 40, 10)) * 3
    p = np.exp(z) / np.exp(z).sum(axis=2, keepdims=True)
    r = rank_probs(list(p.astype(np.float16)))
    assert "probabilities" in r.selection["treated_as"]
    top5 = p.copy()
    top5[top5 < np.sort(top5, axis=2)[:, :, -5:-4]] = 0
    with pytest.raises(ValueError, match="truncated"):
        rank_probs(list(top5))
    with pytest.raises(ValueError, match="look like"):
        rank_probs([p[0], z[1], p[2]])
    heads = [rng.normal(size=(10, 8)), rng.normal(size=(10, 8)), rng.normal(size=(9, 8))]
    with pytest.raises(ValueError, match="one shape"):
        rank_probs(list(p), heads=heads)
    for k, alpha in ((-1, 0.9), (3, 1.5)):
        with pytest.raises(ValueError, match="k must|alpha must"):
            rank_probs(list(p), k=k, alpha=alpha)


def test_inputs_saved_with_torch_save(tutorial, tmp_path):
    d = tutorial
    with np.load(d / "test.npz") as z:
        x, y, ids = z["x"], z["y"], z["ids"]
    torch.save(torch.from_numpy(x), tmp_path / "x.pt")
    torch.save({"x": torch.from_numpy(x), "y": torch.from_numpy(y), "ids": ids.tolist()},
               tmp_path / "test.pth")  # fmt: skip
    model = ["--model", f"{d / 'mynet.py'}:MLP", "--k", 3]
    _rank(d / "ck", *model, "--inputs", tmp_path / "x.pt", "--out", tmp_path / "a.csv")
    r = _rank(d / "ck", *model, "--inputs", tmp_path / "test.pth", "--out", tmp_path / "b.csv")
    assert "RAUC" in r.output or "random" in r.output  # the labels in the file were used
    _rank(d / "ck", *model, "--inputs", d / "test.npz", "--out", tmp_path / "c.csv")
    import pandas as pd

    a, b, c = (
        pd.read_csv(tmp_path / f, dtype={"sample_id": str}) for f in ("a.csv", "b.csv", "c.csv")
    )
    assert b["sample_id"].tolist() == c["sample_id"].tolist()
    assert np.allclose(np.sort(a["ncip"]), np.sort(c["ncip"]))


def _writer_folder(tmp_path, model=None):
    from ncip.tool.writer import CheckpointWriter

    tr, te = _digits()
    w = CheckpointWriter(tmp_path / "ck", head="fc", model=model, plot=False)
    _train(MLP(), tr, 6, lambda e, m, _o: w.save(m, epoch=e))
    np.savez(tmp_path / "test.npz", x=te.x, y=te.y, ids=te.ids)
    return w


def test_prune_needs_no_model_for_a_writer_folder(tmp_path):
    _writer_folder(tmp_path)
    r = runner.invoke(app, ["prune", str(tmp_path / "ck"), "--k", 3, "--yes"])
    assert r.exit_code == 0, r.output
    assert len(list((tmp_path / "ck").glob("*.safetensors"))) == 3
    # the pruned folder still ranks (with the model named, since the files name none)
    (tmp_path / "m.py").write_text(MLP_SOURCE)
    _rank(tmp_path / "ck", "--model", f"{tmp_path / 'm.py'}:MLP", "--inputs",
          tmp_path / "test.npz", "--out", tmp_path / "r.csv")  # fmt: skip


def test_a_writer_folder_refuses_another_model(tmp_path):
    w = _writer_folder(tmp_path)

    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(x.flatten(1))

    from ncip.tool.writer import CheckpointWriter

    with pytest.raises(CheckpointError, match="holds checkpoints of another model"):
        CheckpointWriter(tmp_path / "ck", head="fc", plot=False).save(Other(), epoch=7)
    w.save(MLP(), epoch=7)  # the same model goes on


def test_a_recorded_factory_runs_only_when_trusted(tmp_path):
    from dataclasses import replace

    from safetensors.torch import load_file

    from ncip.core.checkpoints import read_meta, save_state

    _writer_folder(tmp_path)
    (tmp_path / "model_def.py").write_text(
        f"from pathlib import Path\nPath({str(tmp_path / 'ran')!r}).write_text('yes')\n"
        + MLP_SOURCE
    )
    spec = f"{tmp_path / 'model_def.py'}:MLP"
    for f in (tmp_path / "ck").glob("*.safetensors"):
        save_state(f, load_file(str(f)), replace(read_meta(f), factory=spec))
    args = ["rank", str(tmp_path / "ck"), "--inputs", str(tmp_path / "test.npz"), "--quiet",
            "--out", str(tmp_path / "r.csv"), "--k", "3"]  # fmt: skip
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and f"pass --model {spec}" in r.output
    assert not (tmp_path / "ran").exists()
    r = runner.invoke(app, [*args, "--trust-recorded-model"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ran").exists()


WIDE_SOURCE = MLP_SOURCE + (
    "\n\nclass Wide(MLP):  # arguments without defaults, as many research models have\n"
    "    def __init__(self, width, num_classes, act='relu'):\n"
    "        assert width == 64 and act == 'relu'\n"
    "        super().__init__(num_classes)\n"
)


def test_a_factory_with_required_arguments(tutorial, tmp_path):
    """--model 'file.py:Net(64, act="relu")': literal arguments only; a factory that needs
    arguments names them in the error; a recorded factory with arguments works when trusted."""
    from dataclasses import replace

    from safetensors.torch import load_file

    from ncip.core.checkpoints import read_meta, save_state

    d = tutorial
    (tmp_path / "wide.py").write_text(WIDE_SOURCE)
    base = ["--inputs", d / "test.npz", "--k", 4]
    _rank(d / "ck", "--model", f"{d / 'mynet.py'}:MLP", *base, "--out", tmp_path / "ref.csv")
    spec = f"{tmp_path / 'wide.py'}:Wide"
    r = runner.invoke(app, ["rank", str(d / "ck"), "--model", spec, *map(str, base),
                            "--out", str(tmp_path / "x.csv")])  # fmt: skip
    assert r.exit_code == 2 and f"--model '{spec}(width=...)' (ncip passes num_classes)" in r.output
    _rank(d / "ck", "--model", f"{spec}(64, act='relu')", *base, "--out", tmp_path / "w.csv")
    assert (tmp_path / "w.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()
    r = runner.invoke(app, ["rank", str(d / "ck"), "--model", f"{spec}(open('x'))",
                            *map(str, base), "--out", str(tmp_path / "x.csv")])  # fmt: skip
    assert r.exit_code == 2 and "must be Python literals" in r.output
    assert not (tmp_path / "x.csv").exists()

    _writer_folder(tmp_path / "w")
    recorded = f"{spec}(width=64)"
    for f in (tmp_path / "w" / "ck").glob("*.safetensors"):
        save_state(f, load_file(str(f)), replace(read_meta(f), factory=recorded))
    args = ["rank", str(tmp_path / "w" / "ck"), "--inputs", str(tmp_path / "w" / "test.npz"),
            "--out", str(tmp_path / "r.csv"), "--k", "3", "--quiet"]  # fmt: skip
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and f"pass --model '{recorded}'" in r.output
    r = runner.invoke(app, [*args, "--trust-recorded-model"])
    assert r.exit_code == 0, r.output


LIT_SOURCE = """
import torch, torch.nn as nn, torch.nn.functional as F
import pytorch_lightning as pl


class LitMLP(pl.LightningModule):  # the layers on the module itself, its arguments recorded
    def __init__(self, width, classes, lr=3e-3):
        super().__init__()
        self.save_hyperparameters()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(64, width), nn.ReLU())
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        return self.fc(self.body(x))

    def training_step(self, batch, _):
        return F.cross_entropy(self(batch[0]), batch[1])

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), self.hparams.lr)
"""


def test_a_lightning_module_rebuilt_with_its_recorded_hyperparameters(tmp_path):
    """`--model lit.py:LitMLP` where the LightningModule is the network and takes arguments:
    the checkpoint's ``hyper_parameters`` (data, as load_from_checkpoint uses them) fill them;
    literal arguments given on the command line win."""
    pl = pytest.importorskip("pytorch_lightning")
    (tmp_path / "lit.py").write_text(LIT_SOURCE)
    import importlib.util

    spec = importlib.util.spec_from_file_location("lit_for_test", tmp_path / "lit.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tr, te = _digits()
    ds = torch.utils.data.TensorDataset(torch.from_numpy(tr.x).float().div(255),
                                        torch.from_numpy(tr.y))  # fmt: skip
    pl.seed_everything(0)
    trainer = pl.Trainer(
        max_epochs=4, accelerator="cpu", logger=False, enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ck", save_top_k=-1)],
    )  # fmt: skip
    trainer.fit(mod.LitMLP(24, 10), torch.utils.data.DataLoader(ds, batch_size=64))
    np.savez(tmp_path / "test.npz", x=te.x, y=te.y, ids=te.ids)
    base = ["--inputs", tmp_path / "test.npz", "--k", 3]
    r = _rank(tmp_path / "ck", "--model", f"{tmp_path / 'lit.py'}:LitMLP", *base,
              "--out", tmp_path / "a.csv")  # fmt: skip
    assert "with the checkpoint's hyper_parameters (width=24, classes=10, lr=0.003)" in r.output
    _rank(tmp_path / "ck", "--model", f"{tmp_path / 'lit.py'}:LitMLP(24, classes=10)", *base,
          "--out", tmp_path / "b.csv")  # fmt: skip
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_split_call_takes_literals_only():
    from ncip.core.factory import ModelSourceError
    from ncip.tool.userspec import split_call

    assert split_call("m:Net") == ("m:Net", (), {})
    assert split_call("a/b.py:Net(3, [1, 2], k={'x': None}, s='(')") == (
        "a/b.py:Net",
        (3, [1, 2]),
        {"k": {"x": None}, "s": "("},
    )
    for bad in ("m:Net(x)", "m:Net(**kw)", "m:Net(f(1))", "m:Net(1)(2)"):
        with pytest.raises(ModelSourceError, match="must be Python literals"):
            split_call(bad)


def test_outputs_follow_the_umask_and_stale_temps_go(tutorial, tmp_path):
    import os

    d = tutorial
    (tmp_path / ".r.csv.abc12345.tmp").write_text("left by a killed run")
    old = os.umask(0o022)
    try:
        _rank(d / "ck", "--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz",
              "--out", tmp_path / "r.csv", "--k", 3)  # fmt: skip
    finally:
        os.umask(old)
    for f in ("r.csv", "r.selection.json"):
        assert (tmp_path / f).stat().st_mode & 0o777 == 0o644
    assert not (tmp_path / ".r.csv.abc12345.tmp").exists()


def test_truncated_hugging_face_files_are_named(tmp_path):
    from safetensors.torch import save_file

    from ncip.tool.hfmodels import hf_factory
    from ncip.tool.tensors import read_tensors

    d = tmp_path / "checkpoint-10"
    d.mkdir()
    save_file({"w": torch.zeros(2, 2)}, str(d / "model-00001-of-00001.safetensors"))
    (d / "model.safetensors.index.json").write_text('{"weight_map": {"w": "model-0000')
    cs = discover(tmp_path)
    with pytest.raises(CheckpointError, match="model.safetensors.index.json is not a readable"):
        read_tensors(cs.final, ["w"])
    (d / "config.json").write_text('{"architectures": ["Bert')
    with pytest.raises(CheckpointError, match="config.json is not valid JSON"):
        hf_factory(d / "config.json")


def test_an_interrupted_rank_says_so_and_writes_nothing(tutorial, tmp_path, monkeypatch):
    """Ctrl-C during the work: one line, exit code 130, an earlier ranking left as it was."""
    import ncip.tool.rank

    d = tutorial
    args = [d / "ck", "--model", f"{d / 'mynet.py'}:MLP", "--inputs", d / "test.npz",
            "--out", tmp_path / "r.csv", "--k", 4]  # fmt: skip
    _rank(*args)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ncip.tool.rank, "rank", interrupted)
    r = runner.invoke(app, ["rank", *map(str, args)])
    assert r.exit_code == 130
    said = f"interrupted: nothing was written; {tmp_path / 'r.csv'} is as it was"
    assert r.output.strip() == said
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_import_external_refuses_a_model_with_arguments(tmp_path):
    """The study's stages rebuild an imported subject's model from the recorded factory by name
    alone, so `ncip import-external` refuses arguments there (ncip rank takes them) before
    writing anything, and does not fill them from hyper_parameters either."""
    from dataclasses import replace

    from ncip.study.data import prepare_dataset
    from ncip.study.external import ExternalError, ExternalSpec
    from ncip.study.importing import import_external

    _writer_folder(tmp_path)
    (tmp_path / "wide.py").write_text(WIDE_SOURCE)
    info, splits = prepare_dataset("digits")
    out = tmp_path / "imported"
    spec = ExternalSpec("digits-wide", tmp_path / "ck", tmp_path,
                        model=f"{tmp_path / 'wide.py'}:Wide(64)", head="fc")  # fmt: skip
    with pytest.raises(ExternalError, match="passes arguments, but the study's stages import"):
        import_external(spec, info, splits, out, "digits-wide", 0)
    assert not out.exists()
    plain = replace(spec, model=f"{tmp_path / 'wide.py'}:MLP")
    hist = import_external(plain, info, splits, out, "digits-wide", 0)
    assert len(hist) == 6 and (out / "history.csv").is_file()
    # importing again replaces what the last import wrote; a file of the user's there is never
    # deleted: the import is refused, the folder left as it was (issue 47 item 9)
    import_external(plain, info, splits, out, "digits-wide", 0)
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ExternalError, match=r"holds files an import did not write \(notes.txt\)"):
        import_external(plain, info, splits, out, "digits-wide", 0)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("where", ["itself", "above", "inside"])
def test_import_external_never_writes_over_its_own_checkpoints(tmp_path, where):
    """The import replaces its output folder as a whole: an output that is, holds or lies
    inside the checkpoints it reads is refused and every checkpoint stays (issue 39)."""
    from dataclasses import replace

    from ncip.study.data import prepare_dataset
    from ncip.study.external import ExternalError, ExternalSpec
    from ncip.study.importing import import_external

    _writer_folder(tmp_path)
    (tmp_path / "wide.py").write_text(WIDE_SOURCE)
    info, splits = prepare_dataset("digits")
    ck = tmp_path / "ck"
    before = {p.name: p.read_bytes() for p in ck.iterdir()}
    out = {"itself": ck, "above": tmp_path, "inside": ck / "imported"}[where]
    spec = ExternalSpec("digits-wide", ck, tmp_path, model=f"{tmp_path / 'wide.py'}:MLP")
    with pytest.raises(ExternalError, match="and would replace them; keep the checkpoints"):
        import_external(replace(spec), info, splits, out, "digits-wide", 0)
    assert {p.name: p.read_bytes() for p in ck.iterdir()} == before
