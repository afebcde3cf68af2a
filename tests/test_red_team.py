"""Issue 39's red team: runs that ended with exit code 0 and a wrong result, or none, without a
word. Each now ends in one line naming the problem and the fix, exit code 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import save_drifting_epochs
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
    save_drifting_epochs(net, tmp_path / "ck", 5)
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


def _inputs_case(d, case):
    """Write the bad input of ``case``; return (the --inputs path, the expected words)."""
    x = np.load(d / "x.npy")
    if case == "link loop":
        (d / "loop").symlink_to(d / "loop")
        return d / "loop", "is a symbolic link loop"
    if case == "0-d x":
        np.savez(d / "x0.npz", x=np.float32(3))
        return d / "x0.npz", "'x' holds one number, not a batch"
    if case == "sparse":
        torch.save({"x": torch.from_numpy(x).to_sparse()}, d / "s.pt")
        return d / "s.pt", "is a sparse_coo tensor; save it dense"
    if case == "meta":
        torch.save({"x": torch.empty(4, 20, device="meta")}, d / "m.pt")
        return d / "m.pt", "is a meta tensor, which holds no data"
    if case == "quantized":
        q = torch.quantize_per_tensor(torch.from_numpy(x), 0.1, 0, torch.qint8)
        torch.save({"x": q}, d / "q.pt")
        return d / "q.pt", "is a quantized tensor; save t.dequantize()"
    if case == "header only":
        (d / "e.csv").write_text("a,b\n")
        return d / "e.csv", "has a header (a, b) and no rows"
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case", ["link loop", "0-d x", "sparse", "meta", "quantized", "header only"]
)
def test_bad_inputs_end_in_one_line(run, case):
    path, expected = _inputs_case(run, case)
    r = runner.invoke(
        app,
        ["rank", str(run / "ck"), "--model", f"{run / 'mlp.py'}:build", "--inputs", str(path),
         "--out", str(run / "r.csv"), "--k", "2", "--quiet"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and expected in lines[0], r.output
    assert "Traceback" not in r.output and not (run / "r.csv").exists()


def test_float8_inputs_and_pandas_index_columns_are_read_as_such(run):
    x = np.load(run / "x.npy")
    torch.save({"x": torch.from_numpy(x).to(torch.float8_e4m3fn)}, run / "f8.pt")
    import pandas as pd

    pd.DataFrame(x).to_csv(run / "idx.csv")  # pandas' index written as an unnamed column
    for name in ("f8.pt", "idx.csv"):
        r = rank_inputs(run, run / name)
        assert r.exit_code == 0, r.output
    assert "ids: the column pandas wrote as its index" in " ".join(r.output.split())
    t = pd.read_csv(run / "r.csv")
    assert sorted(t["sample_id"]) == list(range(len(x)))


def rank_inputs(d, inputs, *extra):
    return runner.invoke(
        app,
        ["rank", str(d / "ck"), "--model", f"{d / 'mlp.py'}:build", "--inputs", str(inputs),
         "--out", str(d / "r.csv"), "--k", "2", *extra],
    )  # fmt: skip


@pytest.mark.parametrize(
    "case, expected",
    [
        ("link to a system file", "(a link to /etc/passwd) is not a readable PyTorch checkpoint"),
        ("state key on safetensors", "--state-key model: epoch_1.safetensors (safetensors) is"),
        ("unary minus", "arguments after"),
        ("zero-3", "a DeepSpeed ZeRO-3 checkpoint"),
    ],
)
def test_bad_checkpoints_and_models_end_in_one_line(run, case, expected):
    extra = []
    model = f"{run / 'mlp.py'}:build"
    if case == "link to a system file":
        (run / "ck" / "epoch_13.pt").symlink_to("/etc/passwd")
    elif case == "state key on safetensors":
        extra = ["--state-key", "model"]
    elif case == "unary minus":
        model = f"{run / 'mlp.py'}:build(" + "-" * 100_000 + "1)"
    elif case == "zero-3":
        for f in (run / "ck").iterdir():
            f.unlink()
        for e in (1, 2, 3):
            torch.save({"module": None, "global_steps": e, "ds_version": "0.14"},
                       run / "ck" / f"mp_rank_00_model_states_{e}.pt")  # fmt: skip
    r = runner.invoke(
        app,
        ["rank", str(run / "ck"), "--model", model, "--inputs", str(run / "x.npy"), "--out",
         str(run / "r.csv"), "--k", "2", "--quiet", *extra],
    )  # fmt: skip
    assert r.exit_code == 2, r.output[-500:]
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and expected in lines[0], r.output[-500:]
    assert "Traceback" not in r.output


def test_a_model_file_in_a_folder_with_a_parenthesis_and_a_glob_in_a_bracket_folder(run):
    import shutil

    odd = run / "my(models)"
    odd.mkdir()
    shutil.copy(run / "mlp.py", odd / "mlp.py")
    runs = run / "runs[v2]"
    shutil.copytree(run / "ck", runs)
    r = runner.invoke(
        app,
        ["rank", f"{runs}/epoch_*.safetensors", "--model", f"{odd / 'mlp.py'}:build",
         "--inputs", str(run / "x.npy"), "--out", str(run / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "5 checkpoints" in r.output


@pytest.mark.parametrize(
    "arch, expected",
    [
        ('["__class__"]', "names no transformers model class ('__class__'"),
        ("[123]", "names no transformers model class (123"),
    ],
)
def test_hugging_face_configs_naming_no_model_class_are_refused(run, arch, expected):
    pytest.importorskip("transformers")
    hf = run / "hf" / "checkpoint-1"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text(f'{{"architectures": {arch}, "model_type": "bert"}}')
    save_file({"w": torch.zeros(2, 2)}, hf / "model.safetensors")
    r = runner.invoke(
        app,
        ["rank", str(run / "hf"), "--inputs", str(run / "x.npy"), "--out", str(run / "r.csv"),
         "--k", "2", "--quiet"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output[-500:]
    assert expected in " ".join(r.output.split())


def test_check_params_on_a_folder(tmp_path):
    r = runner.invoke(app, ["check-params", str(tmp_path)])
    assert r.exit_code == 2 and "is a folder; give the params file" in r.output


def test_prune_on_a_one_logit_model_keeps_the_last_k(tmp_path):
    """A one-logit head has no sigma_cos ("nc_scores contain NaN" before): prune keeps the
    last K of the pool, as ncip rank selects for such a model."""
    (tmp_path / "bmlp.py").write_text(
        "import torch.nn as nn\n\n\ndef build():\n"
        "    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 1))\n"
    )
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    save_drifting_epochs(net, tmp_path / "ck", 6)
    r = runner.invoke(
        app, ["prune", str(tmp_path / "ck"), "--model", f"{tmp_path / 'bmlp.py'}:build",
              "--k", "2", "--yes"]
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "ck").glob("*.safetensors")) == [
        "epoch_5.safetensors",
        "epoch_6.safetensors",
    ]


def test_what_rank_says_about_a_late_start_and_unread_ema_weights(run, tmp_path):
    """Further problems users would not find (issue 39): a history whose first checkpoints
    were deleted (save_total_limit) and files holding EMA weights beside the raw ones."""
    for e in (1, 2):
        (run / "ck" / f"epoch_{e}.safetensors").unlink()
    r = rank_inputs(run, run / "x.npy", "--quiet")
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "these 3 checkpoints start at epoch 3: about 2 earlier one(s) are gone" in said
    from safetensors.torch import load_file

    ema = tmp_path / "ema"
    ema.mkdir()
    for e in (3, 4, 5):
        state = load_file(run / "ck" / f"epoch_{e}.safetensors")
        blob = {"state_dict": state, "state_dict_ema": state, "epoch": e}
        torch.save(blob, ema / f"epoch_{e}.pt")
    r = runner.invoke(
        app,
        ["rank", str(ema), "--model", f"{run / 'mlp.py'}:build", "--inputs", str(run / "x.npy"),
         "--out", str(run / "e.csv"), "--k", "2", "--quiet", "--allow-uneven"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "every checkpoint also holds EMA weights: ranked on the raw ones" in " ".join(
        r.output.split()
    )


def test_an_image_folder_of_mixed_sizes_is_refused_with_the_counts(run):
    from PIL import Image

    imgs = run / "imgs"
    imgs.mkdir()
    for i in range(5):
        Image.new("L", (16, 16) if i < 3 else (20, 12)).save(imgs / f"{i}.png")
    r = rank_inputs(run, imgs, "--quiet")
    assert r.exit_code == 2, r.output
    assert "the images have 2 sizes (16x16 (3), 20x12 (2)); resize them" in " ".join(
        r.output.split()
    )


EMB_LAST = """
import torch.nn as nn


class Net(nn.Module):  # the head is declared before the embedding it follows
    def __init__(self, num_classes=4):
        super().__init__()
        self.head = nn.Linear(8, num_classes)
        self.emb = nn.Embedding(50, 8)

    def forward(self, x):
        return self.head(self.emb(x).mean(1))
"""


# a fastText-style bag of token ids: an EmbeddingBag averages them
EMB_BAG = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.emb = nn.EmbeddingBag(50, 8)
        self.head = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.head(self.emb(x))
"""


@pytest.mark.parametrize("source", [EMB_LAST, EMB_BAG], ids=["embedding-last", "embedding-bag"])
def test_token_ids_for_a_model_declaring_its_embedding_after_its_head(tmp_path, source):
    """Token ids go in as they are for an Embedding declared after the head, and for an
    EmbeddingBag (they were refused as 'neither 8-bit pixels nor token ids')."""
    (tmp_path / "embnet.py").write_text(source)
    import sys

    sys.path.insert(0, str(tmp_path))
    sys.modules.pop("embnet", None)  # the other parameter's module of the same name
    try:
        from embnet import Net
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    net = Net()
    save_drifting_epochs(net, tmp_path / "ck", 4)
    np.save(tmp_path / "ids.npy", np.random.default_rng(0).integers(0, 50, (30, 12)))
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "ck"), "--model", f"{tmp_path / 'embnet.py'}:Net", "--inputs",
         str(tmp_path / "ids.npy"), "--out", str(tmp_path / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "token ids passed as int64, unscaled" in " ".join(r.output.split())


def test_a_lightning_run_resumed_into_two_version_folders(run, tmp_path):
    """lightning_logs/version_0 and version_1 of one resumed run: the root says where the
    checkpoints are and the glob to give; the two folders given together are one history."""
    from safetensors.torch import load_file

    root = tmp_path / "root"
    logs = root / "lightning_logs"
    for v, epochs in ((0, (1, 2)), (1, (3, 4, 5))):
        d = logs / f"version_{v}" / "checkpoints"
        d.mkdir(parents=True)
        for e in epochs:
            state = load_file(run / "ck" / f"epoch_{e}.safetensors")
            blob = {"state_dict": state, "epoch": e - 1, "global_step": 10 * e}
            torch.save(blob, d / f"epoch={e - 1}-step={10 * e}.ckpt")
    model = ["--model", f"{run / 'mlp.py'}:build", "--inputs", str(run / "x.npy"), "--k", "2"]
    r = runner.invoke(app, ["rank", str(root), "--out", str(tmp_path / "a.csv"), *model])
    assert r.exit_code == 2
    said = " ".join(r.output.split())
    assert f"give them as one history with a quoted glob, '{root}/lightning_logs/*/" in said
    folders = [str(logs / "version_0" / "checkpoints"), str(logs / "version_1" / "checkpoints")]
    r = runner.invoke(app, ["rank", *folders, "--out", str(tmp_path / "b.csv"), *model])
    assert r.exit_code == 0, r.output
    assert "5 checkpoints (container under 'state_dict'), ordered by the step" in r.output


CUSTOM_HF = """
import torch.nn as nn
from transformers import PretrainedConfig, PreTrainedModel


class TinyConfig(PretrainedConfig):
    model_type = "tiny-user-model"

    def __init__(self, width=16, classes=10, **kw):
        super().__init__(**kw)
        self.width, self.classes = width, classes


class TinyModel(PreTrainedModel):
    config_class = TinyConfig

    def __init__(self, config):
        super().__init__(config)
        self.body = nn.Sequential(nn.Linear(20, config.width), nn.ReLU())
        self.classifier = nn.Linear(config.width, config.classes)
        self.post_init()

    def forward(self, x):
        return self.classifier(self.body(x))
"""


def test_a_users_own_pretrained_model_is_built_from_its_config_json(run, tmp_path):
    """A custom PreTrainedModel saved per epoch: --model names the class, the config.json
    beside the weights configures it (a config is no literal to write in --model)."""
    pytest.importorskip("transformers")
    (tmp_path / "custom_hf.py").write_text(CUSTOM_HF)
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        from custom_hf import TinyConfig, TinyModel
    finally:
        sys.path.pop(0)
    torch.manual_seed(0)
    model = TinyModel(TinyConfig(width=24))
    for step in (10, 20, 30, 40):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        model.save_pretrained(tmp_path / "out" / f"checkpoint-{step}")
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "out"), "--model", f"{tmp_path / 'custom_hf.py'}:TinyModel",
         "--inputs", str(run / "x.npy"), "--out", str(tmp_path / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "custom_hf.py:TinyModel with its config.json" in " ".join(r.output.split())


def test_epoch_and_accuracy_in_the_names_is_an_even_history(run):
    """Issue 47 item 5 (a regression): model-e07-acc0.93.pt files, every epoch kept, are an even
    history by the epoch field the order reads, not 'chosen by a metric' by the accuracy."""
    from safetensors.torch import load_file

    ck = run / "named"
    ck.mkdir()
    accs = [91, 88, 93, 90, 92]  # not monotone: read as the order key, they look thinned
    for e, acc in zip(range(1, 6), accs, strict=True):
        state = load_file(run / "ck" / f"epoch_{e}.safetensors")
        torch.save(state, ck / f"model-e{e:02d}-acc0.{acc}.pt")
    r = runner.invoke(
        app,
        ["rank", str(ck), "--model", f"{run / 'mlp.py'}:build", "--inputs", str(run / "x.npy"),
         "--out", str(run / "n.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "chosen by a metric" not in said and "not an even history" not in said
    assert "the number after 'model-e' in each file name" in said


@pytest.mark.parametrize("option", ["--inputs", "--labels", "--tokenizer", "--prompts"])
def test_a_named_pipe_is_refused_not_read_for_ever(run, option):
    """Issue 47 item 9: `--inputs texts.txt` that is a FIFO blocked for ever; every file option
    now refuses what is not a regular file, in one line."""
    import os

    names = {"--inputs": "texts.txt", "--labels": "y.txt", "--tokenizer": "tok.json"}
    fifo = run / names.get(option, "prompts.jsonl")
    os.mkfifo(fifo)
    args = ["rank", str(run / "ck"), "--model", f"{run / 'mlp.py'}:build", "--out",
            str(run / "r.csv"), "--k", "2", "--quiet"]  # fmt: skip
    if option == "--prompts":
        args += ["--prompts", str(fifo)]
    elif option == "--inputs":
        args += ["--inputs", str(fifo)]
    elif option == "--tokenizer":  # read when raw texts are encoded
        (run / "t.txt").write_text("one text\nanother text\n")
        args += ["--inputs", str(run / "t.txt"), "--tokenizer", str(fifo)]
    else:
        args += ["--inputs", str(run / "x.npy"), option, str(fifo)]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output
    assert "is not a regular file" in " ".join(r.output.split()), r.output
    assert not (run / "r.csv").exists()


@pytest.mark.parametrize(
    ("kind", "extra", "said"),
    [
        ("--inputs", ["--new-tokens", "8"], "--new-tokens does not apply to --inputs"),
        ("--inputs", ["--failure", "0.3"], "--failure does not apply to --inputs"),
        ("--prompts", ["--labels", "y.npy"], "--labels does not apply to --prompts"),
        ("--prompts", ["--ema", "--precision", "bf16"], "--ema, --precision do not apply"),
        ("--prompts", ["--mean", "0.5"], "--mean does not apply to --prompts"),
    ],
)
def test_options_of_the_other_input_kind_are_refused_not_ignored(run, kind, extra, said):
    """Issue 47 item 9: options that do not apply to the input kind were silently ignored."""
    (run / "p.jsonl").write_text('{"prompt": "a"}\n')
    source = str(run / "x.npy") if kind == "--inputs" else str(run / "p.jsonl")
    r = runner.invoke(
        app,
        ["rank", str(run / "ck"), "--model", f"{run / 'mlp.py'}:build", kind, source,
         "--out", str(run / "r.csv"), *extra],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    assert said in " ".join(r.output.split()) and "Traceback" not in r.output
    assert not (run / "r.csv").exists()


def test_warnings_where_the_evidence_is_there(run, tmp_path):
    """Issue 47 item 6: table features on a scale no standardized training sees, and labelled
    inputs the final model gets far more wrong than its run recorded, are each said in a
    warning (the ranking is still written)."""
    import pandas as pd

    import ncip

    x = np.load(run / "x.npy")
    table = pd.DataFrame(x * 1000.0, columns=[f"f{i}" for i in range(20)])
    table.to_csv(tmp_path / "raw.csv", index=False)
    r = runner.invoke(
        app,
        ["rank", str(run / "ck"), "--model", f"{run / 'mlp.py'}:build", "--inputs",
         str(tmp_path / "raw.csv"), "--out", str(tmp_path / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "varies with standard deviation" in said and "StandardScaler" in said
    # a writer's run that recorded 98% validation accuracy, ranked with labels it gets wrong
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    writer = ncip.CheckpointWriter(tmp_path / "wck", plot=False)
    for epoch in range(1, 5):
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.05 * torch.randn_like(p))
        writer.save(net, epoch=epoch, metrics={"val_acc": 0.98})
    with torch.no_grad():
        pred = net(torch.from_numpy(x)).argmax(1).numpy()
    np.save(tmp_path / "y.npy", (pred + 1) % 10)  # every label wrong
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "wck"), "--model", f"{run / 'mlp.py'}:build", "--inputs",
         str(run / "x.npy"), "--labels", str(tmp_path / "y.npy"), "--out",
         str(tmp_path / "w.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "gets 0.0% of your labelled inputs right, where its run recorded 98.0%" in said


def test_a_forward_that_needs_offsets_gets_the_wrapper_hint(run, tmp_path):
    """Issue 47 item 4: the PyTorch tutorial's text model, forward(text, offsets), refused
    with the two-line wrapper as the way."""
    (tmp_path / "bag.py").write_text(
        "import torch.nn as nn\n\n"
        "class Bag(nn.Module):\n"
        "    def __init__(self, num_classes=10):\n"
        "        super().__init__()\n"
        "        self.emb = nn.EmbeddingBag(50, 8)\n"
        "        self.fc = nn.Linear(8, num_classes)\n\n"
        "    def forward(self, text, offsets):\n"
        "        return self.fc(self.emb(text, offsets))\n"
    )
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        from bag import Bag
    finally:
        sys.path.remove(str(tmp_path))
    torch.manual_seed(0)
    save_drifting_epochs(Bag(), tmp_path / "bagck", 4)
    np.save(tmp_path / "ids.npy", np.random.default_rng(0).integers(0, 50, (30, 6)))
    r = runner.invoke(
        app,
        ["rank", str(tmp_path / "bagck"), "--model", f"{tmp_path / 'bag.py'}:Bag", "--inputs",
         str(tmp_path / "ids.npy"), "--out", str(tmp_path / "r.csv"), "--k", "2"],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "forward(text, offsets)" in said and "wraps it" in said


def test_no_checkpoints_never_points_at_an_empty_place(run, tmp_path):
    """Issue 47 item 9 (a regression): 'holds no model checkpoints' ended with 'checkpoints
    are further down, in : ...' where nothing further down held one."""
    d = tmp_path / "empty-run"
    (d / "logs").mkdir(parents=True)
    torch.save({"state": {}, "param_groups": []}, d / "optimizer.pt")
    (d / "logs" / "notes.txt").write_text("x")
    r = runner.invoke(
        app,
        ["rank", str(d), "--model", f"{run / 'mlp.py'}:build", "--inputs", str(run / "x.npy"),
         "--out", str(tmp_path / "r.csv")],
    )  # fmt: skip
    assert r.exit_code == 2, r.output
    said = " ".join(r.output.split())
    assert "holds no model checkpoints" in said and "further down" not in said


def prune(d, *extra):
    return runner.invoke(
        app, ["prune", str(d / "ck"), "--model", f"{d / 'mlp.py'}:build", "--k", "2", *extra]
    )


def test_prune_in_a_folder_it_cannot_write_deletes_nothing_and_says_so(run, monkeypatch):
    """Issue 47's red team ('unclear'): a read-only checkpoint folder. Root writes anywhere, so
    the folder's permission is what os.access reports here."""
    import ncip.tool.prune as pr

    before = {p.name: p.read_bytes() for p in (run / "ck").iterdir()}
    real = pr._writable
    monkeypatch.setattr(pr, "_writable", lambda p: Path(p) != run / "ck" and real(p))
    r = prune(run, "--yes")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    said = " ".join(r.output.split())
    assert f"cannot delete in {run / 'ck'}" in said and "nothing was deleted" in said
    assert {p.name: p.read_bytes() for p in (run / "ck").iterdir()} == before


def test_prune_stopped_by_a_file_it_cannot_delete_says_how_to_finish(run, monkeypatch):
    real = Path.unlink
    calls = []

    def unlink(self, missing_ok=False):
        calls.append(self.name)
        if len(calls) == 2:
            raise PermissionError(13, "Permission denied")
        return real(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    r = prune(run, "--yes")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    said = " ".join(r.output.split())
    assert f"cannot delete {run / 'ck' / calls[1]} (Permission denied)" in said
    assert "run the same command again to finish it" in said
    assert (run / "ck" / "ncip-prune.json").is_file() and (run / "ck" / calls[1]).is_file()
    monkeypatch.setattr(Path, "unlink", real)
    r = prune(run, "--yes")
    assert r.exit_code == 0, r.output
    assert len(list((run / "ck").glob("*.safetensors"))) == 2
