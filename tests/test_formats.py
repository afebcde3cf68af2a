"""Checkpoint formats, order, safe loading and key prefixes; inputs and their preprocessing."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
from helpers import ROOT
from safetensors.torch import save_file

from ncip.core.checkpoints import CheckpointMeta
from ncip.tool.formats import CheckpointError, discover
from ncip.tool.inputs import InputError, Inputs, check_inputs, load_inputs
from ncip.tool.preprocess import plan_preprocess, probe
from ncip.tool.tensors import find_prefix, read_tensors
from ncip.tool.unpickle import torch_load


def small(seed=0, classes=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, classes))


def test_natural_order_and_files_that_are_not_checkpoints(tmp_path):
    for e in (1, 2, 9, 10, 11):
        torch.save(small(e).state_dict(), tmp_path / f"epoch_{e}.pt")
    torch.save(torch.optim.SGD(small().parameters(), 0.1).state_dict(), tmp_path / "opt_3.pt")
    (tmp_path / "log.txt").write_text("hi")
    (tmp_path / ".epoch_12.pt.tmp").write_bytes(b"partial")
    cs = discover(tmp_path)
    assert [c.name for c in cs] == [
        "epoch_1.pt",
        "epoch_2.pt",
        "epoch_9.pt",
        "epoch_10.pt",
        "epoch_11.pt",
    ]
    assert "natural order" in cs.order
    reasons = dict(cs.skipped)
    assert reasons["opt_3.pt"] == "optimizer state" and "not a checkpoint" in reasons["log.txt"]
    assert ".epoch_12.pt.tmp" in reasons
    # a glob and an explicit list give the same checkpoints
    assert [c.name for c in discover(str(tmp_path / "epoch_*.pt"))] == [c.name for c in cs]
    assert len(discover([tmp_path / "epoch_2.pt", tmp_path / "epoch_10.pt"])) == 2


def test_recorded_steps_win_over_names_and_containers_are_found(tmp_path):
    for e, step in ((0, 30), (1, 7), (2, 99)):  # names and steps disagree on purpose
        torch.save(
            {"state_dict": small(e).state_dict(), "epoch": e, "global_step": step},
            tmp_path / f"e{e}.ckpt",
        )
    cs = discover(tmp_path)
    assert [c.step for c in cs] == [7, 30, 99] and cs.order.startswith("the step")
    assert cs.final.fmt == "container" and cs.final.container_key == "state_dict"


def test_ema_weights_and_tutorial_dicts(tmp_path):
    sd, ema = small(0).state_dict(), small(1).state_dict()
    torch.save({"state_dict": sd, "state_dict_ema": ema, "epoch": 1}, tmp_path / "a_1.pth.tar")
    torch.save({"model_state_dict": sd, "epoch": 2}, tmp_path / "a_2.pt")
    cs = discover(tmp_path / "a_1.pth.tar", ema=True)
    assert torch.equal(read_tensors(cs.final)["0.weight"], ema["0.weight"])
    assert discover(tmp_path / "a_2.pt").final.container_key == "model_state_dict"
    with pytest.raises(CheckpointError, match="no EMA weights"):
        discover(tmp_path / "a_2.pt", ema=True)


def test_arbitrary_pickles_are_refused_naming_the_file_and_the_fix(tmp_path):
    torch.save(small(), tmp_path / "whole_model.pt")  # a pickled nn.Module, not a state dict
    with pytest.raises(CheckpointError) as e:
        discover(tmp_path)
    msg = str(e.value)
    assert "whole_model.pt needs arbitrary unpickling" in msg
    assert "torch.nn.modules.container.Sequential" in msg and "state_dict()" in msg


@pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")
def test_torchscript_archives_are_refused_with_the_conversion(tmp_path):
    import warnings

    torch.jit.script(small()).save(str(tmp_path / "model_e3.pt"))
    with pytest.raises(CheckpointError) as e, warnings.catch_warnings():
        warnings.simplefilter("error")  # one line: torch's own warning is not shown
        discover(tmp_path)
    msg = str(e.value)
    assert "model_e3.pt is a TorchScript archive" in msg and "corrupt" not in msg
    assert f"torch.jit.load('{tmp_path / 'model_e3.pt'}').state_dict()" in msg
    # the conversion the message gives reads as a plain state dict
    torch.save(torch.jit.load(str(tmp_path / "model_e3.pt")).state_dict(), tmp_path / "w_3.pt")
    assert discover(tmp_path / "w_3.pt").final.fmt == "state_dict"


def test_other_frameworks_checkpoints_point_to_rank_probs(tmp_path):
    for name in ("model_01.h5", "ckpt-2.index", "ckpt-2.data-00000-of-00001"):
        (tmp_path / name).write_bytes(b"\x89HDF")
    with pytest.raises(CheckpointError) as e:
        discover(tmp_path)
    msg = str(e.value)
    assert "model_01.h5 (a Keras file: ncip reads PyTorch checkpoints" in msg
    assert "ckpt-2.data-00000-of-00001, ckpt-2.index (a TensorFlow file" in msg
    assert "ncip.rank_probs" in msg and "\n" not in msg


def test_payload_in_a_pickle_never_runs(tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"state_dict": small().state_dict(), "x": Payload()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="arbitrary unpickling"):
        torch_load(tmp_path / "evil.pt")
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"", b"garbage" * 10])
def test_corrupt_files_name_themselves(tmp_path, content):
    torch.save(small().state_dict(), tmp_path / "epoch_1.pt")
    (tmp_path / "epoch_2.pt").write_bytes(content)
    with pytest.raises(CheckpointError, match=r"epoch_2.pt is not a readable PyTorch checkpoint"):
        discover(tmp_path)
    save_file({"w": torch.ones(3)}, str(tmp_path / "t.safetensors"))
    data = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"t.safetensors is not a readable safetensors"):
        discover(tmp_path / "t.safetensors")


def test_last_ckpt_copies_and_ambiguous_orders(tmp_path):
    for e in (0, 1):
        torch.save(
            {"state_dict": small(e).state_dict(), "epoch": e, "global_step": 10 * (e + 1)},
            tmp_path / f"epoch={e}-step={10 * (e + 1)}.ckpt",
        )
    torch.save(
        {"state_dict": small(1).state_dict(), "epoch": 1, "global_step": 20}, tmp_path / "last.ckpt"
    )
    cs = discover(tmp_path)
    assert len(cs) == 2 and dict(cs.skipped)["last.ckpt"].startswith("a copy")
    d = tmp_path / "noorder"
    d.mkdir()
    torch.save(small().state_dict(), d / "best.pt")
    torch.save(small().state_dict(), d / "final.pt")
    with pytest.raises(CheckpointError, match="cannot tell the training order"):
        discover(d)


def test_hf_folders_plain_sharded_and_binary(tmp_path):
    sd = small().state_dict()
    for step in (5, 10, 15):
        f = tmp_path / f"checkpoint-{step}"
        f.mkdir()
        (f / "trainer_state.json").write_text(json.dumps({"global_step": step, "epoch": step / 5}))
        (f / "training_args.bin").write_bytes(b"not even a pickle")
        if step == 5:
            torch.save(sd, f / "pytorch_model.bin")
        elif step == 10:
            save_file({k: v.contiguous() for k, v in sd.items()}, str(f / "model.safetensors"))
        else:  # sharded
            keys = list(sd)
            save_file({k: sd[k] for k in keys[:2]}, str(f / "model-00001-of-00002.safetensors"))
            save_file({k: sd[k] for k in keys[2:]}, str(f / "model-00002-of-00002.safetensors"))
            wm = {
                k: f"model-0000{1 if i < 2 else 2}-of-00002.safetensors" for i, k in enumerate(keys)
            }
            (f / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    cs = discover(tmp_path)
    assert [c.step for c in cs] == [5, 10, 15] and {c.fmt for c in cs} == {"hf"}
    for c in cs:
        assert torch.equal(read_tensors(c, ["2.weight"])["2.weight"], sd["2.weight"])


def test_a_fifo_among_the_checkpoints_is_listed_not_read(tmp_path):
    """A named pipe called epoch_13.pt would block a read forever (issue 39): only regular
    files are opened, and the run says what else it found."""
    import os

    for e in (1, 2):
        torch.save(small().state_dict(), tmp_path / f"epoch_{e}.pt")
    os.mkfifo(tmp_path / "epoch_13.pt")
    cs = discover(tmp_path)
    assert [c.name for c in cs] == ["epoch_1.pt", "epoch_2.pt"]
    assert ("epoch_13.pt", "not a regular file (a FIFO, socket or device); not read") in cs.skipped


@pytest.mark.parametrize("case", ["outside", "fifo", "missing"])
def test_a_shard_index_naming_a_file_outside_or_not_regular_is_refused(tmp_path, case):
    import os

    sd = small().state_dict()
    f = tmp_path / "run" / "checkpoint-5"
    f.mkdir(parents=True)
    (f / "trainer_state.json").write_text(json.dumps({"global_step": 5, "epoch": 1.0}))
    keys = list(sd)
    save_file({k: sd[k] for k in keys[:2]}, str(f / "a.safetensors"))
    other = {"outside": "../../other_run/b.safetensors", "fifo": "b.safetensors"}
    name = other.get(case, "gone.safetensors")
    if case == "outside":
        (tmp_path / "other_run").mkdir()
        save_file({k: sd[k] for k in keys[2:]}, str(tmp_path / "other_run" / "b.safetensors"))
    elif case == "fifo":
        os.mkfifo(f / "b.safetensors")
    wm = {k: ("a.safetensors" if i < 2 else name) for i, k in enumerate(keys)}
    (f / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    expected = {
        "outside": "names the shard '../../other_run/b.safetensors' outside",
        "fifo": "is not a regular file",
        "missing": "does not exist",
    }[case]
    with pytest.raises(CheckpointError, match=expected):
        read_tensors(discover(tmp_path / "run").final, ["2.weight"])


def test_prefixes_of_wrappers_are_found():
    keys = ["0.weight", "0.bias", "2.weight", "2.bias"]
    for prefix in ("", "module.", "_orig_mod.", "model.", "module._orig_mod.", "encoder.clf."):
        assert find_prefix([prefix + k for k in keys] + ["other.x"], keys) == prefix
    with pytest.raises(CheckpointError, match="do not match the model"):
        find_prefix(["a.weight"], keys)
    with pytest.raises(CheckpointError, match="--prefix 'net.'"):
        find_prefix(["model." + k for k in keys], keys, given="net.")


def test_mixed_runs_of_ncip_checkpoints_are_refused(tiny_run, tmp_path):
    import shutil

    d = tmp_path / "m"
    shutil.copytree(tiny_run["dir"] / "models", d)
    from ncip.core.checkpoints import CheckpointMeta, save_checkpoint
    from ncip.core.models import create_model
    from ncip.tool.formats import check_consistent

    stray = create_model("lenet1", 10)
    save_checkpoint(
        d / "epoch-099.safetensors",
        stray,
        CheckpointMeta(epoch=99, num_classes=10, subject="other"),
    )
    with pytest.raises(
        CheckpointError,
        match=r"epoch-099.safetensors records arch = \"lenet1\" "
        r"but 6 other checkpoint\(s\) in the folder record \"lenet5\"",
    ):
        check_consistent(discover(d))


class Conv(nn.Module):
    def __init__(self, c=1):
        super().__init__()
        self.conv = nn.Conv2d(c, 2, 3)
        self.fc = nn.Linear(2, 3)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


@pytest.mark.parametrize(
    "x,c,steps,shape",
    [
        (np.zeros((4, 8, 8), np.uint8), 1, ["divided by 255", "channel axis added"], [4, 1, 8, 8]),
        (np.zeros((4, 8, 8, 3), np.uint8), 3, ["channel-first"], [4, 3, 8, 8]),
        (np.zeros((4, 3, 8, 8), np.float32), 3, ["float32 values passed"], [4, 3, 8, 8]),
        (np.zeros((4, 1, 8, 8), np.int64), 1, ["int64 pixels divided by 255"], [4, 1, 8, 8]),
        # a table's pixel columns (Kaggle's MNIST CSVs): rows of 64 values into a 1-channel conv
        (
            np.zeros((4, 64), np.int64),
            1,
            ["rows of 64 values reshaped to images [1, 8, 8]"],
            [4, 1, 8, 8],
        ),  # fmt: skip
    ],
)
def test_preprocessing_is_decided_from_inputs_and_model(x, c, steps, shape):
    inp = Inputs(x, np.arange(4).astype(str))
    pre = plan_preprocess(inp, Conv(c))
    for s in steps:
        assert s in pre.describe()
    assert list(pre(x).shape) == shape
    assert probe(Conv(c), pre, inp, "cpu") == 3


def test_flat_rows_become_images_only_where_the_shape_is_known():
    rows = np.arange(2 * 48, dtype=np.float32).reshape(2, 48) / 96
    pre = plan_preprocess(Inputs(rows, np.array(["a", "b"])), Conv(3))
    assert not pre.image_shape  # 3 channels: the order of the values is not known
    meta = CheckpointMeta(input_shape=[3, 4, 4])
    pre = plan_preprocess(Inputs(rows, np.array(["a", "b"])), Conv(3), meta)
    assert torch.equal(pre(rows), torch.from_numpy(rows).reshape(2, 3, 4, 4))
    square = np.arange(2 * 16, dtype=np.float32).reshape(2, 16)
    pre = plan_preprocess(Inputs(square, np.array(["a", "b"])), Conv(1), mean=[0.5], std=[2.0])
    assert torch.equal(pre(square), (torch.from_numpy(square).reshape(2, 1, 4, 4) - 0.5) / 2)
    assert not plan_preprocess(Inputs(square[:, :15], np.array(["a", "b"])), Conv(1)).image_shape


def test_tables_csv_tsv_parquet(tmp_path):
    import pandas as pd

    x = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    df = pd.DataFrame(x, columns=["a", "b", "c"])
    df.insert(1, "label", [0, 1, 2, 1, 0])
    df["sample_id"] = [f"s{i}" for i in range(5)]
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_csv(tmp_path / "t.tsv", index=False, sep="\t")
    df.to_parquet(tmp_path / "t.parquet")
    for name in ("t.csv", "t.tsv", "t.parquet"):
        inp = load_inputs(tmp_path / name)
        assert np.allclose(inp.x, x) and inp.x.dtype == np.float32, name
        assert inp.y.tolist() == [0, 1, 2, 1, 0] and inp.ids.tolist()[0] == "s0"
        assert inp.detail == "3 feature columns, labels 'label', ids 'sample_id'"
        assert inp.source == str(tmp_path / name)  # the path: outputs are checked against it
    # --labels / --ids naming columns; the default label column becomes a feature then
    inp = load_inputs(tmp_path / "t.csv", labels="c")
    assert np.allclose(inp.y, df["c"]) and inp.x.shape == (5, 3)
    with pytest.raises(InputError, match="column 'sample_id' is not numeric"):
        load_inputs(tmp_path / "t.parquet", ids="b")  # sample_id is a feature then
    df.drop(columns="sample_id").to_csv(tmp_path / "noid.csv", index=False)
    inp = load_inputs(tmp_path / "noid.csv", ids="b")
    assert inp.ids.tolist() == df["b"].astype(str).tolist() and inp.x.shape == (5, 2)
    with pytest.raises(InputError, match="labels 'klass' is neither a file nor a column"):
        load_inputs(tmp_path / "t.csv", labels="klass")
    np.save(tmp_path / "y.npy", np.zeros(5, np.int64))
    # a labels file beside the table's own label column: which is meant? (issue 39: the column
    # was silently taken as a feature)
    with pytest.raises(InputError, match="has its own label column 'label' and --labels gives"):
        load_inputs(tmp_path / "t.csv", labels=tmp_path / "y.npy")
    df.drop(columns="label").to_csv(tmp_path / "nolabel.csv", index=False)
    assert load_inputs(tmp_path / "nolabel.csv", labels=tmp_path / "y.npy").x.shape == (5, 3)
    df.assign(y=1).to_csv(tmp_path / "two.csv", index=False)
    with pytest.raises(InputError, match=r"several label columns \(label, y\).*--labels COLUMN"):
        load_inputs(tmp_path / "two.csv")
    df.assign(colour="red").to_csv(tmp_path / "text.csv", index=False)
    with pytest.raises(InputError, match="column 'colour' is not numeric"):
        load_inputs(tmp_path / "text.csv")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="bad.parquet cannot be read as a table"):
        load_inputs(tmp_path / "bad.parquet")


def test_label_and_id_files_written_by_pandas(tmp_path):
    import pandas as pd

    pd.DataFrame({"label": [2, 0, 1]}).to_csv(tmp_path / "y.csv", index=False)
    pd.DataFrame({"id": ["a", "b", "c"]}).to_csv(tmp_path / "ids.csv", index=False)
    pd.Series([2, 0, 1]).to_csv(tmp_path / "indexed.csv")  # the index as a first column
    x = np.zeros((3, 2), np.float32)
    inp = load_inputs(x, ids=tmp_path / "ids.csv", labels=tmp_path / "y.csv")
    assert inp.y.tolist() == ["2", "0", "1"] and inp.ids.tolist() == ["a", "b", "c"]
    check_inputs(inp, 3)
    assert inp.y.tolist() == [2, 0, 1]
    with pytest.raises(InputError, match=r"has several columns \(',0' \.\.\.\); give one value"):
        load_inputs(x, labels=tmp_path / "indexed.csv")


def test_mean_std_no_scale_and_tokens():
    x = np.full((2, 3, 4, 4), 255, np.uint8)
    pre = plan_preprocess(Inputs(x, np.array(["a", "b"])), Conv(3), mean=[0.5], std=[0.25])
    assert torch.allclose(pre(x), torch.full((2, 3, 4, 4), 2.0))
    pre = plan_preprocess(Inputs(x, np.array(["a", "b"])), Conv(3), scale=False)
    assert pre(x).max() == 255
    emb = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 2))
    tok = np.array([[1, 2, 3]], np.int32)
    pre = plan_preprocess(Inputs(tok, np.array(["a"])), emb)
    assert pre(tok).dtype == torch.int64 and "unscaled" in pre.describe()
    with pytest.raises(InputError, match="token ids"):
        plan_preprocess(Inputs(tok.astype(np.float32), np.array(["a"])), emb)


def test_a_shape_the_model_cannot_take_names_the_expected_shape():
    x = np.zeros((2, 3, 8, 8), np.float32)
    inp = Inputs(x, np.array(["a", "b"]))
    with pytest.raises(
        InputError,
        match=r"cannot take inputs of shape \[3, 8, 8\].*expects "
        r"images \[1, H, W\]",
    ):
        probe(Conv(1), plan_preprocess(inp, Conv(1)), inp, "cpu")


def test_image_folders_npy_memory_maps_and_label_checks(tmp_path):
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (6, 6), (40 * i, 0, 0)).save(tmp_path / "imgs" / cls / f"{i}.png")
    inp = load_inputs(tmp_path / "imgs")
    assert inp.y.tolist() == [0, 0, 0, 1, 1, 1] and inp.class_names == ["cat", "dog"]
    assert inp.ids[3] == "dog/0.png" and inp.x[0:2].shape == (2, 6, 6, 3)
    np.save(tmp_path / "x.npy", np.zeros((5, 2), np.float32))
    assert isinstance(load_inputs(tmp_path / "x.npy").x, np.memmap)
    bad = Inputs(np.zeros((3, 2)), np.array(["a", "b", "a"]))
    with pytest.raises(InputError, match="'a' appears more than once"):
        check_inputs(bad, 3)
    with pytest.raises(InputError, match="label 7 of input 'c' is outside"):
        check_inputs(Inputs(np.zeros((3, 2)), np.array(["a", "b", "c"]), np.array([0, 1, 7])), 3)
    with pytest.raises(InputError, match="2 ids for 3 inputs"):
        check_inputs(Inputs(np.zeros((3, 2)), np.array(["a", "b"])), 3)


def test_memory_does_not_grow_with_k(tmp_path):
    """Peak memory of ranking stays far below holding K x N x C probabilities (a loose bound;
    benchmarks/bench_rank_memory.py prints the numbers)."""
    bench = ROOT / "benchmarks" / "bench_rank_memory.py"
    sys.path.insert(0, str(bench.parent))
    from bench_rank_memory import make_run

    n, classes, k = 50_000, 100, 20
    make_run(tmp_path, n, classes, k + 6)
    out = subprocess.run(
        [sys.executable, str(bench), "worker", str(tmp_path), str(classes), str(k), "streamed"],
        capture_output=True,
        text=True,
        check=True,
    )
    row = json.loads(out.stdout.strip().splitlines()[-1])
    knc = k * n * classes * 8 / 1024  # KiB of float64 probabilities for all K checkpoints
    assert row["k"] == k
    assert row["growth_kib"] < 0.3 * knc, row


def test_no_output_is_written_inside_a_folder_of_inputs(tmp_path):
    """--preview (or --out) inside the --inputs image folder could overwrite an input image and
    would be read as an input next time: refused before any work (issue 39)."""
    from ncip.tool.output import check_output_path

    imgs = tmp_path / "imgs" / "cat"
    imgs.mkdir(parents=True)
    (imgs / "0.png").write_bytes(b"an input")
    for out, preview in [
        (tmp_path / "r.csv", imgs / "0.png"),
        (tmp_path / "r.csv", tmp_path / "imgs" / "top.png"),
        (tmp_path / "imgs" / "r.csv", None),
    ]:
        with pytest.raises(InputError, match="a folder of this run's inputs"):
            check_output_path(out, preview, [tmp_path / "imgs"])
    check_output_path(tmp_path / "r.csv", tmp_path / "top.png", [tmp_path / "imgs"])
    assert (imgs / "0.png").read_bytes() == b"an input"
