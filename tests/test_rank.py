"""`ncip rank` on checkpoints that ncip did not write: a plain loop, PyTorch Lightning, the
Hugging Face Trainer, torchvision's ResNet-18; each ranked with one command and checked against
`rank_probs` on the same checkpoints' outputs, computed here independently."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from helpers import ROOT, USER_NET
from typer.testing import CliRunner

import ncip
from ncip.cli import app
from ncip.core.dynamics import CHECKPOINT_SCORES, checkpoint_scores, column
from ncip.core.scores import ncip_score, tvd
from ncip.tool.ranking import TABLE_COLUMNS, TVDAccumulator, rank_probs

runner = CliRunner()

USER_MODEL = USER_NET  # a user's own CNN (tests/helpers.py)


def cli(*args):
    return runner.invoke(app, ["rank", *[str(a) for a in args]])


def digits():
    from ncip.study.data import prepare_dataset

    _, splits = prepare_dataset("digits")
    return splits


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A plain training loop: torch.save(model.state_dict(), f'ckpt/epoch_{e}.pt'), plus the
    optimizer's state beside it, as users do."""
    d = tmp_path_factory.mktemp("user")
    (d / "usermodel.py").write_text(USER_MODEL)
    sys.path.insert(0, str(d))
    from usermodel import Net

    s = digits()
    x = torch.from_numpy(s["train"].x).float().div(255)
    y = torch.from_numpy(s["train"].y)
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    (d / "ckpt").mkdir()
    for e in range(1, 13):
        for i in range(0, len(x), 64):
            loss = F.cross_entropy(model(x[i : i + 64]), y[i : i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.save(model.state_dict(), d / "ckpt" / f"epoch_{e}.pt")
        torch.save(opt.state_dict(), d / "ckpt" / f"optimizer_{e}.pt")
    test = s["test"]
    # uint8 [N, 8, 8]: no channel axis, as users often store grey images
    np.savez(d / "test.npz", x=test.x[:, 0], y=test.y, ids=test.ids)
    return {"dir": d, "Net": Net, "test": test}


def probs_of(model, files, x, load=lambda f: torch.load(f, weights_only=True)):
    out = []
    for f in files:
        model.load_state_dict(load(f))
        model.eval()
        with torch.inference_mode():
            out.append(torch.softmax(model(x).double(), dim=1).numpy())
    return out


def same_order_as_rank_probs(out_csv, probs, ids):
    table = pd.read_csv(out_csv, dtype={"sample_id": str})
    ref = rank_probs(probs, ids=ids).table
    assert table["sample_id"].tolist() == ref["sample_id"].tolist()
    # float32 logits differ in their last bits with the batch size and the memory layout
    # (the engine runs convolutions channels-last): up to 1e-4 in the score for ResNet-18
    assert np.allclose(table["ncip"], ref["ncip"], atol=1e-4)
    return table


def test_plain_loop_state_dicts_rank_with_one_command(user, tmp_path):
    d = user["dir"]
    out = tmp_path / "ranking.csv"
    r = cli(
        d / "ckpt",
        "--model",
        f"{d / 'usermodel.py'}:Net",
        "--inputs",
        d / "test.npz",
        "--out",
        out,
        "--k",
        5,
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    assert "optimizer_1.pt (optimizer state)" in r.output  # skipped, and said so
    assert "natural order" in r.output and "channel axis added" in r.output
    sel = json.loads((tmp_path / "ranking.selection.json").read_text())
    used = sel["used"]
    assert len(used) == 5 and used[-1].endswith("epoch_12.pt")  # natural order: 12 after 9
    assert [c["file"].rsplit("/", 1)[1] for c in sel["checkpoints"]][-3:] == [
        "epoch_10.pt",
        "epoch_11.pt",
        "epoch_12.pt",
    ]
    x = torch.from_numpy(user["test"].x).float().div(255)
    probs = probs_of(user["Net"](), used, x)
    table = same_order_as_rank_probs(out, probs, user["test"].ids)
    assert list(table.columns) == TABLE_COLUMNS + ["label"]
    # the checkpoint scores, over the checkpoints NCIP used, as ncip.core computes them
    want = checkpoint_scores(np.stack([np.asarray(p, dtype=np.float64) for p in probs]))
    row = pd.Series(np.arange(len(user["test"].ids)), index=user["test"].ids.astype(str))
    at = row.loc[table["sample_id"]].to_numpy()
    for name, v in want.items():
        np.testing.assert_allclose(table[column(name)], v[at], atol=1e-4, err_msg=name)
    ev = json.loads((tmp_path / "ranking.evaluation.json").read_text())
    methods = {m["method"]: m for m in ev["methods"]}
    shown = {i.display for i in CHECKPOINT_SCORES.values()}
    assert set(methods) == {"NCIP", "Margin", "DeepGini", "Entropy", "MSP", "Random"} | shown
    assert methods["NCIP"]["rauc_all"] > methods["Random"]["rauc_all"] + 0.2
    assert "RAUC-ALL" in r.output and ev["summary"] in r.output


def test_lightning_trainer_checkpoints(user, tmp_path):
    pl = pytest.importorskip("pytorch_lightning")
    Net = user["Net"]

    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Net()  # keys are saved as "net.<...>": the prefix is found and stripped

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, _):
            x, y = batch
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), 3e-3)

    s = digits()["train"]
    ds = torch.utils.data.TensorDataset(
        torch.from_numpy(s.x).float().div(255), torch.from_numpy(s.y)
    )
    pl.seed_everything(0)
    ck = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "lit", save_top_k=-1, save_last=True)
    trainer = pl.Trainer(
        max_epochs=3,
        callbacks=[ck],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Lit(), torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True))
    assert (tmp_path / "lit" / "last.ckpt").exists()
    out = tmp_path / "lit.csv"
    d = user["dir"]
    r = cli(
        tmp_path / "lit",
        "--model",
        f"{d / 'usermodel.py'}:Net",
        "--inputs",
        d / "test.npz",
        "--out",
        out,
        "--k",
        2,
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    assert "step recorded in each file" in r.output and "'net.' stripped" in r.output
    assert "last.ckpt (a copy" in r.output
    used = json.loads((tmp_path / "lit.selection.json").read_text())["used"]
    assert used[-1].endswith(f"epoch=2-step={trainer.global_step}.ckpt")

    def load(f):
        sd = torch.load(f, weights_only=True)["state_dict"]
        return {k.removeprefix("net."): v for k, v in sd.items()}

    x = torch.from_numpy(user["test"].x).float().div(255)
    same_order_as_rank_probs(out, probs_of(Net(), used, x, load), user["test"].ids)


def test_hugging_face_trainer_folders_need_no_model_option(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=4,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(2, 40, (160, 10), generator=g)
    labels = tokens[:, 0] % 4  # learnable: the first token decides

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 128

        def __getitem__(self, i):
            return {"input_ids": tokens[i], "labels": labels[i]}

    args = transformers.TrainingArguments(
        str(tmp_path / "hf"),
        num_train_epochs=3,
        per_device_train_batch_size=16,
        save_strategy="epoch",
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        learning_rate=5e-3,
        disable_tqdm=True,
    )
    transformers.Trainer(
        model=transformers.BertForSequenceClassification(cfg), args=args, train_dataset=Data()
    ).train()
    folders = sorted((tmp_path / "hf").glob("checkpoint-*"))
    assert len(folders) == 3 and (folders[0] / "training_args.bin").exists()
    np.savez(tmp_path / "tok.npz", x=tokens[128:].numpy(), y=labels[128:].numpy())
    out = tmp_path / "hf.csv"
    r = cli(tmp_path / "hf", "--inputs", tmp_path / "tok.npz", "--out", out, "--k", 2, "--quiet")
    assert r.exit_code == 0, r.output
    assert "BertForSequenceClassification from config.json" in r.output
    assert "token ids passed as int64, unscaled" in r.output
    used = json.loads((tmp_path / "hf.selection.json").read_text())["used"]
    assert used[-1].endswith("checkpoint-24")  # by trainer_state.json's step, not by name
    probs = []
    for f in used:
        m = transformers.BertForSequenceClassification.from_pretrained(f).eval()
        with torch.inference_mode():
            probs.append(torch.softmax(m(tokens[128:]).logits.double(), 1).numpy())
    same_order_as_rank_probs(out, probs, [str(i) for i in range(32)])


def test_torchvision_resnet18_reference_script_checkpoints(tmp_path):
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.rand(48, 3, 32, 32)
    y = torch.arange(48) % 10
    d = tmp_path / "tv"
    d.mkdir()
    for e in range(3):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        # what torchvision's references/classification/train.py saves (args is a Namespace)
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "epoch": e,
                "args": argparse.Namespace(model="resnet18", lr=0.05),
            },
            d / f"model_{e}.pth",
        )
    pix = (x * 255).round().to(torch.uint8)
    np.save(tmp_path / "x.npy", pix.permute(0, 2, 3, 1).numpy())  # channel-last, as images load
    out = tmp_path / "tv.csv"
    r = cli(
        d,
        "--model",
        "torchvision:resnet18",
        "--inputs",
        tmp_path / "x.npy",
        "--out",
        out,
        "--k",
        2,
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    assert "channel-last images moved to channel-first" in r.output
    assert "epoch recorded in each file" in r.output
    used = json.loads((tmp_path / "tv.selection.json").read_text())["used"]
    net = torchvision.models.resnet18(num_classes=10)
    xs = pix.float().div(255)

    def load(f):
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(f, weights_only=True)["model"]

    probs = probs_of(net, used, xs, load)
    same_order_as_rank_probs(out, probs, [str(i) for i in range(48)])


def test_streaming_tvd_equals_in_memory():
    rng = np.random.default_rng(0)
    from ncip.core.scores import softmax64

    probs = softmax64(rng.normal(size=(7, 500, 12)) * 4)
    acc = TVDAccumulator(probs[-1])
    for p in probs[:-1]:
        for start in range(0, 500, 64):  # batch by batch
            acc.add(start, p[start : start + 64])
        acc.checkpoint_done()
    assert np.max(np.abs(acc.tvd() - tvd(probs))) < 1e-12
    r = rank_probs(list(probs))  # a list of [N, C] arrays, final last
    by_id = r.table.set_index("sample_id").loc[[str(i) for i in range(500)]]
    assert np.max(np.abs(by_id["ncip"].to_numpy() - ncip_score(probs))) < 1e-12
    logits = np.log(probs)  # the same from logits
    assert (
        rank_probs(logits, kind="logits").table["sample_id"].tolist()
        == r.table["sample_id"].tolist()
    )


def test_rank_on_ncip_checkpoints_equals_the_in_memory_computation(tiny_run):
    from ncip.core.checkpoints import load_model
    from ncip.core.scores import softmax64
    from ncip.study.predict import batched_outputs

    d = tiny_run["dir"]
    test = tiny_run["splits"]["test"]
    r = ncip.rank(d / "models", test.x, k=4, batch_size=37, show_progress=False)
    assert r.notes[0].startswith("6 checkpoints (ncip), ordered by the epoch")
    used = r.selection["used"]
    probs = np.stack([softmax64(batched_outputs(load_model(f), test.x, 37)) for f in used])
    by_id = r.table.set_index("sample_id").loc[[str(i) for i in range(len(test))]]
    assert np.max(np.abs(by_id["ncip"].to_numpy() - ncip_score(probs))) < 1e-12
    assert np.max(np.abs(by_id["tvd"].to_numpy() - tvd(probs))) < 1e-12


def test_rank_probs_selects_by_heads_and_says_when_k_covers_the_pool():
    rng = np.random.default_rng(1)
    from ncip.core.scores import softmax64

    probs = softmax64(rng.normal(size=(12, 50, 4)))
    heads = [rng.normal(size=(4, 8)) for _ in range(12)]
    r = rank_probs(probs, heads=heads, k=4, alpha=0.5)
    assert r.selection["pool_size"] == 6 and r.selection["selected_count"] == 4
    assert r.selection["checkpoints"][-1]["selected"]  # the final is always kept
    r = rank_probs(probs, heads=heads, k=30)
    assert r.selection["whole_pool"] and "use --k below 11" in r.selection["note"]
    with pytest.raises(ValueError, match="at least 2 checkpoints"):
        rank_probs(probs[:1])


def test_python_dash_m_ncip_and_one_line_errors(user, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(
        [sys.executable, "-m", "ncip", "rank", "--help"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0 and "Examples" in r.stdout and "--skip-bad" in r.stdout
    out = tmp_path / "r.csv"
    out.write_text("previous\n")
    bad = tmp_path / "x.npy"
    np.save(bad, np.zeros((5, 3, 9, 9), np.float32))  # 3 channels for a 1-channel model
    d = user["dir"]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ncip",
            "rank",
            str(d / "ckpt"),
            "--model",
            f"{d / 'usermodel.py'}:Net",
            "--inputs",
            str(bad),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "expects images [1, H, W]" in errors[0]
    assert "Traceback" not in r.stderr
    assert out.read_text() == "previous\n"


def _readme_python_blocks():
    text = (ROOT / "docs" / "tool.md").read_text()
    section = text[text.index("### From Python") :]
    blocks = section.split("```python\n")[1:]
    return [b.split("```")[0] for b in blocks[:2]]


def test_readme_python_examples_run(user, tmp_path, monkeypatch, capsys):
    """Both snippets of docs/tool.md's "From Python" run as written."""
    import shutil

    with_files, standalone = _readme_python_blocks()
    exec(compile(standalone, "README standalone", "exec"), {})
    assert "selected" in capsys.readouterr().out
    d = user["dir"]
    shutil.copytree(d / "ckpt", tmp_path / "ckpt")
    shutil.copy(d / "usermodel.py", tmp_path / "mynet.py")
    with np.load(d / "test.npz") as z:
        np.savez(tmp_path / "test.npz", x=z["x"])
        np.save(tmp_path / "y.npy", z["y"])
    monkeypatch.chdir(tmp_path)
    exec(compile(with_files, "README with files", "exec"), {})
    out = capsys.readouterr().out
    assert "RAUC-ALL" in out and "NCIP" in out
