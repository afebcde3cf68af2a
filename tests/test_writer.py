"""Keeping checkpoints while training (plain writer, Lightning and Hugging Face callbacks) and
`ncip prune`; each folder ranks with `ncip rank` and no option beyond what it cannot know."""

import json
import shutil
import sys

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from helpers import USER_NET
from typer.testing import CliRunner

import ncip
from ncip.cli import app

runner = CliRunner()

NET = USER_NET  # a user's own CNN (tests/helpers.py)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from ncip.study.data import prepare_dataset

    d = tmp_path_factory.mktemp("writer")
    (d / "writer_net.py").write_text(NET)
    sys.path.insert(0, str(d))
    _, splits = prepare_dataset("digits")
    np.savez(d / "test.npz", x=splits["test"].x, y=splits["test"].y, ids=splits["test"].ids)
    x = torch.from_numpy(splits["train"].x).float().div(255)
    y = torch.from_numpy(splits["train"].y)
    return {"dir": d, "x": x, "y": y}


def rank(folder, env, out, *extra):
    r = runner.invoke(
        app,
        [
            "rank",
            str(folder),
            "--inputs",
            str(env["dir"] / "test.npz"),
            "--out",
            str(out),
            "--quiet",
            *map(str, extra),
        ],
    )
    assert r.exit_code == 0, r.output
    return r


def plain_run(env, folder, epochs=8, resume_from=None, resume=False):
    from writer_net import Net

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters(), 3e-3)
    writer = ncip.CheckpointWriter(
        folder, model="writer_net:Net", input_shape=[1, 8, 8], resume=resume
    )
    x, y = env["x"], env["y"]
    for epoch in range(1, epochs + 1):
        for i in range(0, len(x), 64):
            loss = F.cross_entropy(model(x[i : i + 64]), y[i : i + 64])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if resume_from is None or epoch >= resume_from:
            writer.save(model, epoch=epoch, metrics={"loss": float(loss.detach())})
    return writer


def test_plain_writer_folder_ranks_and_records_sigma(env, tmp_path):
    writer = plain_run(env, tmp_path / "ck")
    files = sorted(p.name for p in (tmp_path / "ck").glob("*.safetensors"))
    assert files == [f"epoch-{e:03d}.safetensors" for e in range(1, 9)]
    hist = writer.history()
    assert hist["epoch"].tolist() == list(range(1, 9)) and "loss" in hist
    from ncip.core.checkpoints import read_tensor
    from ncip.core.collapse import sigma_cos

    last = read_tensor(tmp_path / "ck" / files[-1], "classifier.weight")
    assert hist["sigma_cos"].iloc[-1] == pytest.approx(sigma_cos(last), abs=1e-12)
    assert (tmp_path / "ck" / "sigma_cos.png").stat().st_size > 0
    # the recorded factory is a module: it is used only when the user says so
    r = rank(tmp_path / "ck", env, tmp_path / "r.csv", "--k", 4, "--trust-recorded-model")
    assert "writer_net:Net (recorded in the checkpoints)" in r.output
    # another run into the same folder is refused; a resumed one writes epochs again: files
    # and rows are replaced, not duplicated
    from ncip.core.checkpoints import CheckpointError

    with pytest.raises(CheckpointError, match="another training run"):
        plain_run(env, tmp_path / "ck", resume_from=6)
    plain_run(env, tmp_path / "ck", resume_from=6, resume=True)
    assert len(list((tmp_path / "ck").glob("*.safetensors"))) == 8
    assert len(pd.read_csv(tmp_path / "ck" / "sigma_cos.csv")) == 8


def test_lightning_callback(env, tmp_path):
    pl = pytest.importorskip("pytorch_lightning")
    from writer_net import Net

    from ncip.tool.lightning import NCIPCheckpoint

    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, _):
            return F.cross_entropy(self(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), 3e-3)

    pl.seed_everything(0)
    data = torch.utils.data.TensorDataset(env["x"], env["y"])
    trainer = pl.Trainer(
        max_epochs=4,
        logger=False,
        enable_checkpointing=False,
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[NCIPCheckpoint(tmp_path / "ck", model="writer_net:Net")],
    )
    trainer.fit(Lit(), torch.utils.data.DataLoader(data, batch_size=64))
    assert len(list((tmp_path / "ck").glob("epoch-*.safetensors"))) == 4
    r = rank(tmp_path / "ck", env, tmp_path / "r.csv", "--k", 2, "--model", "writer_net:Net")
    assert "prefix 'net.' stripped" in r.output


def test_hugging_face_callback(tmp_path):
    transformers = pytest.importorskip("transformers")
    from ncip.tool.hf import NCIPCallback

    cfg = transformers.BertConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=4,
        max_position_embeddings=16,
    )
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(2, 40, (160, 10), generator=g)
    labels = tokens[:, 0] % 4

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 128

        def __getitem__(self, i):
            return {"input_ids": tokens[i], "labels": labels[i]}

    args = transformers.TrainingArguments(
        str(tmp_path / "out"),
        num_train_epochs=3,
        per_device_train_batch_size=16,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        logging_strategy="no",
        learning_rate=5e-3,
        disable_tqdm=True,
    )
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": 0, "[UNK]": 1} | {f"w{i}": i for i in range(2, 40)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]")
    torch.manual_seed(0)
    transformers.Trainer(
        model=transformers.BertForSequenceClassification(cfg),
        args=args,
        train_dataset=Data(),
        processing_class=fast,
        callbacks=[NCIPCallback(tmp_path / "ck")],
    ).train()
    assert len(list((tmp_path / "ck").glob("epoch-*.safetensors"))) == 3
    # the tokenizer the Trainer held is saved beside the checkpoints (issue 47 item 7), so raw
    # texts rank in one command
    assert (tmp_path / "ck" / "tokenizer.json").is_file()
    texts = [" ".join(f"w{t}" for t in row) for row in tokens[128:].tolist()]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n")
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "ck"), "--inputs", str(tmp_path / "texts.txt"), "--out",
         str(tmp_path / "t.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert f"tokenized with {tmp_path / 'ck' / 'tokenizer.json'}" in " ".join(r.output.split())
    np.savez(tmp_path / "tok.npz", x=tokens[128:].numpy(), y=labels[128:].numpy())
    r = runner.invoke(
        app,
        [
            "rank",
            str(tmp_path / "ck"),
            "--inputs",
            str(tmp_path / "tok.npz"),
            "--out",
            str(tmp_path / "r.csv"),
            "--k",
            2,
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "BertForSequenceClassification (config recorded)" in r.output


def test_prune_keeps_exactly_the_selection_and_the_ranking(env, tmp_path):
    plain_run(env, tmp_path / "ck", epochs=10)
    (tmp_path / "ck" / "notes.txt").write_text("not a checkpoint")
    named = ["--model", "writer_net:Net"]  # the recorded factory, named by the user
    before = rank(tmp_path / "ck", env, tmp_path / "before.csv", "--k", 4, *named)
    used = json.loads((tmp_path / "before.selection.json").read_text())["used"]
    r = runner.invoke(app, ["prune", str(tmp_path / "ck"), "--k", 4])  # a dry run
    assert r.exit_code == 0 and "dry run" in r.output and "freeing" in r.output
    assert len(list((tmp_path / "ck").glob("*.safetensors"))) == 10
    r = runner.invoke(app, ["prune", str(tmp_path / "ck"), "--k", 4, "--yes"])
    assert r.exit_code == 0, r.output
    kept = sorted(str(p) for p in (tmp_path / "ck").glob("*.safetensors"))
    assert kept == sorted(used)
    assert (tmp_path / "ck" / "notes.txt").exists()  # only checkpoints are deleted
    after = rank(tmp_path / "ck", env, tmp_path / "after.csv", *named)
    assert "pruned to NCIP's selection" in after.output and before.exit_code == 0
    assert (tmp_path / "before.csv").read_bytes() == (tmp_path / "after.csv").read_bytes()
    r = runner.invoke(app, ["prune", str(tmp_path / "ck"), "--k", 4])
    assert r.exit_code == 2 and "pruned already" in r.output


def test_prune_keeps_to_the_k_it_started_with_and_to_its_folder(env, tmp_path):
    """A prune killed part-way is finished with its own K only; another K, or checkpoints added
    after the prune (a stale record), are refused before anything is deleted (issue 39)."""
    from ncip.tool.prune import RECORD, apply_prune, plan_prune

    ck = tmp_path / "ck"
    plain_run(env, ck, epochs=10)
    p = plan_prune(ck, k=4)
    first = p.delete[0]
    p.delete = p.delete[:1]  # killed after the first deletion
    apply_prune(p)
    assert not first.path.exists() and (ck / RECORD).is_file()
    count = len(list(ck.glob("*.safetensors")))
    r = runner.invoke(app, ["prune", str(ck), "--yes"])  # the default K = 30, not 4
    assert r.exit_code == 2 and "pass --k 4 --alpha 0.9" in " ".join(r.output.split())
    assert len(list(ck.glob("*.safetensors"))) == count
    extra = ck / "epoch-011.safetensors"  # training went on after the prune
    _another_epoch(ck / "epoch-010.safetensors", extra, 11)
    r = runner.invoke(app, ["prune", str(ck), "--k", 4, "--yes"])
    assert r.exit_code == 2 and "the record is stale" in " ".join(r.output.split())
    assert len(list(ck.glob("*.safetensors"))) == count + 1
    extra.unlink()
    r = runner.invoke(app, ["prune", str(ck), "--k", 4, "--yes"])
    assert r.exit_code == 0, r.output
    assert len(list(ck.glob("*.safetensors"))) == 4


def _another_epoch(src, dst, epoch, change=None):
    """A writer checkpoint like ``src`` recording ``epoch``, its tensors changed by ``change``."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(src), "pt") as f:
        meta = json.loads(f.metadata()["ncip"])
    tensors = load_file(src)
    for v in tensors.values():
        v += 0.01
    if change:
        change(tensors)
    save_file(tensors, dst, metadata={"ncip": json.dumps({**meta, "epoch": epoch})})


def test_prune_refuses_to_keep_a_checkpoint_with_nan_weights(env, tmp_path):
    ck = tmp_path / "ck"
    plain_run(env, ck, epochs=8)
    final = ck / "epoch-008.safetensors"
    body = "body.0.weight"

    def nan(tensors):  # a body weight: the head (and sigma_cos) look fine
        assert body in tensors
        tensors[body][0] = float("nan")

    _another_epoch(ck / "epoch-008.safetensors", final, 8, nan)
    r = runner.invoke(app, ["prune", str(ck), "--k", 3, "--yes"])
    assert r.exit_code == 2, r.output
    assert f"holds NaN or infinite values in {body!r}" in " ".join(r.output.split())
    assert len(list(ck.glob("*.safetensors"))) == 8


def test_prune_refuses_histories_chosen_by_a_metric(env, tmp_path):
    plain_run(env, tmp_path / "ck", epochs=10)
    for e in (2, 3, 5, 6, 7):  # what a top-k-by-metric saver leaves: an uneven history
        (tmp_path / "ck" / f"epoch-{e:03d}.safetensors").unlink()
    r = runner.invoke(app, ["prune", str(tmp_path / "ck"), "--k", 3, "--yes"])
    assert r.exit_code == 2 and "not an even history" in r.output
    assert len(list((tmp_path / "ck").glob("*.safetensors"))) == 5


def test_prune_refuses_lightning_top_k_checkpoints(env, tmp_path):
    pl = pytest.importorskip("pytorch_lightning")
    from writer_net import Net

    class Lit(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, _):
            loss = F.cross_entropy(self(batch[0]), batch[1])
            self.log("train_loss", loss, on_epoch=True, on_step=False)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), 0.5)  # noisy: the best epochs scatter

    pl.seed_everything(0)
    ck = pl.callbacks.ModelCheckpoint(tmp_path / "ck", monitor="train_loss", save_top_k=3)
    trainer = pl.Trainer(
        max_epochs=8,
        logger=False,
        callbacks=[ck],
        accelerator="cpu",
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = torch.utils.data.TensorDataset(env["x"], env["y"])
    trainer.fit(Lit(), torch.utils.data.DataLoader(data, batch_size=64))
    r = runner.invoke(app, ["prune", str(tmp_path / "ck"), "--model", "writer_net:Net", "--k", 2])
    assert r.exit_code == 2, r.output
    reasons = ("not an even history", "ModelCheckpoint monitor")
    assert any(w in r.output for w in reasons)
    # ncip rank refuses them for the same reason (one shared check), unless --allow-uneven
    out = tmp_path / "r.csv"
    args = ["rank", str(tmp_path / "ck"), "--inputs", str(env["dir"] / "test.npz"), "--out",
            str(out), "--quiet", "--model", "writer_net:Net", "--k", "2"]  # fmt: skip
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and not out.exists(), r.output
    error = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(error) == 1 and any(w in error[0] for w in reasons), r.output
    assert "--allow-uneven" in error[0]
    r = rank(tmp_path / "ck", env, out, "--model", "writer_net:Net", "--k", 2, "--allow-uneven")
    assert "--allow-uneven: " in r.output and "the pool is the last alpha of these 3" in r.output
    shutil.rmtree(tmp_path / "ck")


def test_two_writer_runs_in_one_folder_are_refused(env, tmp_path):
    """Checkpoints of another training run copied in (their run ids differ) would make its
    epochs part of this history, its last one the final model: refused, naming them."""
    import shutil

    plain_run(env, tmp_path / "a", epochs=5)
    plain_run(env, tmp_path / "b", epochs=8)
    for e in (6, 7, 8):
        name = f"epoch-{e:03d}.safetensors"
        shutil.copy(tmp_path / "b" / name, tmp_path / "a" / name)
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "a"), "--inputs", str(env["dir"] / "test.npz"), "--out",
         str(tmp_path / "r.csv"), "--k", "3", "--model", "writer_net:Net", "--quiet"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "mixes checkpoints of different training runs (5 record run_id" in said
    assert "3 record run_id" in said and "(epoch-006.safetensors ... epoch-008" in said
    assert not (tmp_path / "r.csv").exists()


def test_the_writer_records_the_factory_with_its_arguments(env, tmp_path):
    """Issue 47 item 7: model_args are recorded with the factory as --model takes them, so the
    run ranks in one round with the recorded model trusted; anything but a plain literal is
    refused."""
    from writer_net import Net

    from ncip.core.errors import InputError

    torch.manual_seed(0)
    model = Net(num_classes=10)
    writer = ncip.CheckpointWriter(tmp_path / "ck", model=Net, model_args={"num_classes": 10})
    for epoch in range(1, 5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        writer.save(model, epoch=epoch)
    assert writer.factory == "writer_net:Net(num_classes=10)"
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "ck"), "--inputs", str(env["dir"] / "test.npz"), "--out",
         str(tmp_path / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 2
    assert "--model 'writer_net:Net(num_classes=10)'" in " ".join(r.output.split())
    rank(tmp_path / "ck", env, tmp_path / "r.csv", "--k", 2, "--trust-recorded-model")
    with pytest.raises(InputError, match="plain literals"):
        ncip.CheckpointWriter(tmp_path / "x", model=Net, model_args={"act": torch.nn.ReLU()})
