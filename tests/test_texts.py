"""`ncip rank` on raw texts (issue 37): a table, .txt or .jsonl of texts is encoded with the
run's own tokenizer (tokenizer.json beside the checkpoints, or --tokenizer), and ranks exactly
as the same token ids given as an .npy."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from ncip.cli import app

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, ["rank", *map(str, args)])


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory):
    """A BERT-style classifier built from a config, fine-tuned with a real Trainer on WordNet
    glosses (4 classes) with a WordPiece tokenizer trained here; the Trainer saves the
    tokenizer into every checkpoint-<step>/ folder, as it does when given one."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    from ncip.study.datasets import debian

    if not (debian.WORDNET_DIR / "data.noun").is_file():
        pytest.skip("wordnet-base not installed (scripts/setup.sh installs it)")
    d = tmp_path_factory.mktemp("hftext")
    items = debian.deduplicate(debian.wordnet_glosses(debian.WORDNET_DIR))
    classes = list(debian.WORDNET4)
    rng = np.random.default_rng(0)
    by_class = [[t for t, c, _ in items if c == name] for name in classes]
    picked = [
        (by_class[c][i], c) for c in range(4) for i in rng.permutation(len(by_class[c]))[:250]
    ]
    order = rng.permutation(len(picked))
    texts = [picked[i][0] for i in order]
    labels = np.array([picked[i][1] for i in order])

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=800, special_tokens=special)
    tok.train_from_iterator(texts, trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=48,
    )  # fmt: skip
    cfg = transformers.BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, num_labels=4,
        max_position_embeddings=48, pad_token_id=tok.token_to_id("[PAD]"),
    )  # fmt: skip
    train = fast(texts[:800], truncation=True, max_length=48)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 800

        def __getitem__(self, i):
            return {"input_ids": train["input_ids"][i], "labels": int(labels[i])}

    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        str(d / "hf"), num_train_epochs=4, per_device_train_batch_size=32,
        save_strategy="epoch", report_to=[], use_cpu=True, logging_strategy="no",
        learning_rate=3e-3, disable_tqdm=True,
    )  # fmt: skip
    transformers.Trainer(
        model=transformers.BertForSequenceClassification(cfg),
        args=args,
        train_dataset=Data(),
        processing_class=fast,
        data_collator=transformers.DataCollatorWithPadding(fast),
    ).train()
    test = pd.DataFrame({"text": texts[800:], "label": labels[800:]})
    return d, test


def test_a_trainer_run_ranks_from_a_csv_of_texts_as_from_its_token_ids(trainer_run):
    d, test = trainer_run
    folders = sorted((d / "hf").glob("checkpoint-*"), key=lambda f: int(f.name.split("-")[1]))
    assert len(folders) == 4 and all((f / "tokenizer.json").is_file() for f in folders)
    test.to_csv(d / "test.csv", index=False)
    r = cli(d / "hf", "--inputs", d / "test.csv", "--out", d / "texts.csv", "--k", 2, "--quiet")
    assert r.exit_code == 0, r.output
    tokenizer = folders[-1] / "tokenizer.json"
    said = " ".join(r.output.split())
    assert f"(texts in column 'text', labels 'label'; 200 texts tokenized with {tokenizer}" in said
    assert "to 48 tokens (truncated at 48: " in said
    # the same texts encoded by hand with the saved tokenizer: the same ranking, byte for byte
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(48)  # the model's max_position_embeddings
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    ids = np.array([e.ids for e in tok.encode_batch(test["text"].tolist())], dtype=np.int64)
    np.save(d / "ids.npy", ids)
    np.save(d / "y.npy", test["label"].to_numpy())
    r = cli(d / "hf", "--inputs", d / "ids.npy", "--labels", d / "y.npy", "--out", d / "ids.csv",
            "--k", 2, "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (d / "texts.csv").read_bytes() == (d / "ids.csv").read_bytes()
    ev = json.loads((d / "texts.evaluation.json").read_text())
    assert ev == json.loads((d / "ids.evaluation.json").read_text())


def test_texts_as_txt_and_jsonl_rank_alike(trainer_run):
    d, test = trainer_run
    (d / "t.txt").write_text("\n".join(test["text"]) + "\n")
    rows = [{"text": t, "label": int(y), "id": f"q{i}"} for i, (t, y) in enumerate(test.values)]
    (d / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for name in ("t.txt", "t.jsonl"):
        r = cli(d / "hf", "--inputs", d / name, "--out", d / f"{name}.csv", "--k", 2, "--quiet")
        assert r.exit_code == 0, r.output
    a = pd.read_csv(d / "t.txt.csv")
    b = pd.read_csv(d / "t.jsonl.csv")
    assert (a["ncip"].to_numpy() == b["ncip"].to_numpy()).all()
    assert a["sample_id"].iloc[0].startswith("line-") and b["sample_id"].iloc[0].startswith("q")
    assert (d / "t.jsonl.evaluation.json").exists() and not (d / "t.txt.evaluation.json").exists()


@pytest.mark.parametrize(
    "case, expected",
    [
        ("no-tokenizer", "no tokenizer.json is beside the checkpoints"),
        ("bad-tokenizer", "is not a tokenizers JSON file"),
        (
            "two-text-columns",
            "has 2 text columns (a, b); name the one the model reads with --text-column",
        ),
        ("jsonl-no-text", "name the text field 'text'"),
        ("jsonl-not-json", "line 2: not JSON"),
        ("tokenizer-for-ids", "--tokenizer encodes raw texts, and"),
        ("max-length-for-ids", "--max-length encodes raw texts, and"),
    ],
)
def test_bad_text_inputs_get_one_line_and_exit_2(trainer_run, tmp_path, case, expected):
    import shutil

    d, test = trainer_run
    run = tmp_path / "hf"
    shutil.copytree(d / "hf", run)
    args = ["--k", 2, "--quiet"]
    inputs = tmp_path / "in.csv"
    test.to_csv(inputs, index=False)
    if case == "no-tokenizer":
        for f in run.glob("checkpoint-*/tokenizer.json"):
            f.unlink()
    elif case == "bad-tokenizer":
        (tmp_path / "tok.json").write_text("{not json")
        args += ["--tokenizer", tmp_path / "tok.json"]
    elif case == "two-text-columns":
        pd.DataFrame({"a": ["x y", "z"], "b": ["p", "q"]}).to_csv(inputs, index=False)
    elif case == "jsonl-no-text":
        inputs = tmp_path / "in.jsonl"
        inputs.write_text('{"a": "x", "b": "y"}\n')
    elif case == "jsonl-not-json":
        inputs = tmp_path / "in.jsonl"
        inputs.write_text('{"text": "x"}\n{oops\n')
    elif case.endswith("-for-ids"):  # token ids already: nothing to encode
        inputs = tmp_path / "ids.npy"
        np.save(inputs, np.full((4, 10), 5, dtype=np.int64))
        if case.startswith("tokenizer"):
            args += ["--tokenizer", next(run.glob("checkpoint-*/tokenizer.json"))]
        else:
            args += ["--max-length", 8]
    out = tmp_path / "r.csv"
    out.write_text("before\n")
    r = cli(run, "--inputs", inputs, "--out", out, *args)
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0] and "Traceback" not in r.output, r.output
    assert out.read_text() == "before\n"


def test_ncip_text_models_rank_texts_with_the_recorded_tokenizer(tmp_path):
    """A study text model's checkpoint folder carries tokenizer.json: its texts rank as the
    prepared token ids do."""
    from ncip.study.datasets import debian
    from ncip.study.training import TrainConfig, train_with_checkpoints

    if not (debian.WORDNET_DIR / "data.noun").is_file():
        pytest.skip("wordnet-base not installed (scripts/setup.sh installs it)")
    from ncip.study.data import prepare_dataset

    info, splits = prepare_dataset("wordnet4")
    small = {k: v.subset(np.arange(0, len(v), 10)) for k, v in splits.items()}
    train_with_checkpoints(TrainConfig(arch="textcnn", epochs=3), info, small, tmp_path / "m")
    items = {i: t for t, _, i in debian.deduplicate(debian.wordnet_glosses(debian.WORDNET_DIR))}
    test = small["test"]
    pd.DataFrame({"text": [items[i] for i in test.ids], "id": test.ids}).to_csv(
        tmp_path / "t.csv", index=False
    )
    np.savez(tmp_path / "t.npz", x=test.x, ids=test.ids)
    for name in ("t.csv", "t.npz"):
        r = cli(tmp_path / "m", "--inputs", tmp_path / name, "--out", tmp_path / f"{name}.r.csv",
                "--k", 2, "--quiet")  # fmt: skip
        assert r.exit_code == 0, r.output
    assert (tmp_path / "t.csv.r.csv").read_bytes() == (tmp_path / "t.npz.r.csv").read_bytes()


@pytest.mark.parametrize("padding", ["longest", "max_length"])
def test_the_final_model_predicts_as_the_trainer_evaluates_it(trainer_run, tmp_path, padding):
    """Issue 47 item 1: a Hugging Face classifier ranked from raw texts runs with its attention
    mask, so the ranking's final model predicts what the Trainer's own `predict` predicts on
    the same texts, whether the texts are padded to the longest (the tutorial's dynamic
    padding) or to a fixed length (a pre-padded run)."""
    import transformers

    d, test = trainer_run
    final = sorted((d / "hf").glob("checkpoint-*"), key=lambda f: int(f.name.split("-")[1]))[-1]
    fast = transformers.PreTrainedTokenizerFast.from_pretrained(final)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(final)
    enc = fast(test["text"].tolist(), truncation=True, max_length=48)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(test)

        def __getitem__(self, i):
            return {"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i]}

    collate = transformers.DataCollatorWithPadding(
        fast, padding=padding, max_length=48 if padding == "max_length" else None
    )
    args = transformers.TrainingArguments(
        str(tmp_path / "eval"), report_to=[], use_cpu=True, disable_tqdm=True
    )
    out = transformers.Trainer(model=model, args=args, data_collator=collate).predict(Data())
    trainer_pred = out.predictions.argmax(axis=1)

    # the texts as given to the tool: raw, and as ids padded the same way
    test[["text"]].to_csv(tmp_path / "texts.csv", index=False)
    r = cli(d / "hf", "--inputs", tmp_path / "texts.csv", "--out", tmp_path / "r.csv", "--k", 2)
    assert r.exit_code == 0, r.output
    assert "attention mask: 0 on the positions holding the padding id" in " ".join(r.output.split())
    table = pd.read_csv(tmp_path / "r.csv").set_index("sample_id").sort_index()
    assert (table["pred"].to_numpy() == trainer_pred).all()
    ids = collate([Data()[i] for i in range(len(test))])["input_ids"].numpy()
    np.save(tmp_path / "ids.npy", ids)
    r = cli(d / "hf", "--inputs", tmp_path / "ids.npy", "--out", tmp_path / "ids.csv", "--k", 2)
    assert r.exit_code == 0, r.output
    table = pd.read_csv(tmp_path / "ids.csv").set_index("sample_id").sort_index()
    assert (table["pred"].to_numpy() == trainer_pred).all()  # the config's pad_token_id


def test_prune_deletes_only_the_model_weights_of_trainer_folders(trainer_run, tmp_path):
    """Issue 47 item 9: `ncip prune --yes` on Trainer checkpoint-<step>/ folders deletes each
    unselected folder's model weights, never the folder with its optimizer state and a user's
    own file; the pruned run ranks as the full one did."""
    import shutil

    d, test = trainer_run
    run = tmp_path / "hf"
    shutil.copytree(d / "hf", run)
    for f in run.glob("checkpoint-*"):
        (f / "notes.txt").write_text("mine")
    test.to_csv(tmp_path / "test.csv", index=False)
    before = cli(run, "--inputs", tmp_path / "test.csv", "--out", tmp_path / "a.csv", "--k", 2)
    assert before.exit_code == 0, before.output
    r = runner.invoke(app, ["prune", str(run), "--k", "2", "--yes"])
    assert r.exit_code == 0, r.output
    assert "only the model weights are deleted" in " ".join(r.output.split())
    folders = sorted(run.glob("checkpoint-*"))
    assert len(folders) == 4  # every folder is still there
    assert all((f / "notes.txt").read_text() == "mine" for f in folders)
    assert all((f / "optimizer.pt").is_file() for f in folders)
    weights = [f for f in folders if (f / "model.safetensors").is_file()]
    assert len(weights) == 2
    after = cli(run, "--inputs", tmp_path / "test.csv", "--out", tmp_path / "b.csv", "--k", 2)
    assert after.exit_code == 0, after.output
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_a_tokenizer_or_ids_beyond_the_embedding_are_refused(trainer_run, tmp_path):
    """Issue 47 item 9: a tokenizer with more tokens than the model's embedding (not the run's
    own) and token ids past the embedding anywhere in the file (not only in the first inputs
    the model is probed with) each end in one line, exit 2, nothing written."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    d, test = trainer_run
    big = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    big.pre_tokenizer = pre_tokenizers.Whitespace()
    words = [f"w{i}" for i in range(3000)]
    big.train_from_iterator(words, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]"]))
    big.save(str(tmp_path / "big.json"))
    test[["text"]].to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "r.csv"
    r = cli(d / "hf", "--inputs", tmp_path / "t.csv", "--tokenizer", tmp_path / "big.json",
            "--out", out, "--k", 2)  # fmt: skip
    assert r.exit_code == 2 and not out.exists(), r.output
    said = " ".join(r.output.split())
    assert "has 3002 tokens but the model's embedding has" in said and "--tokenizer" in said
    ids = np.ones((200, 20), dtype=np.int64)
    ids[150, 3] = 5000  # past the 64 inputs the model is first probed with
    np.save(tmp_path / "ids.npy", ids)
    r = cli(d / "hf", "--inputs", tmp_path / "ids.npy", "--out", out, "--k", 2)
    assert r.exit_code == 2 and not out.exists(), r.output
    assert "token id 5000 lies outside the model's embedding of" in " ".join(r.output.split())


def test_labels_given_by_name(trainer_run, tmp_path):
    """Issue 47 item 2: class names in the label column map through --classes or the
    checkpoint config's id2label; names without either, or an unknown name, get one line."""
    import shutil

    d, test = trainer_run
    names = ["act", "animal", "artifact", "person"]
    named = test.assign(label=[names[i] for i in test["label"]])
    named.to_csv(tmp_path / "named.csv", index=False)
    test.to_csv(tmp_path / "ints.csv", index=False)
    base = cli(d / "hf", "--inputs", tmp_path / "ints.csv", "--out", tmp_path / "a.csv", "--k", 2)
    assert base.exit_code == 0, base.output
    out = tmp_path / "b.csv"
    r = cli(d / "hf", "--inputs", tmp_path / "named.csv", "--out", out, "--k", 2)
    assert r.exit_code == 2 and not out.exists(), r.output
    assert "are names ('act', 'animal'" in " ".join(r.output.split()) and "--classes" in r.output
    r = cli(d / "hf", "--inputs", tmp_path / "named.csv", "--out", out, "--k", 2,
            "--classes", ",".join(names))  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.csv").read_bytes() == out.read_bytes()
    out.unlink()
    r = cli(d / "hf", "--inputs", tmp_path / "named.csv", "--out", out, "--k", 2,
            "--classes", "act,animal,artifact,people")  # fmt: skip
    assert r.exit_code == 2 and not out.exists(), r.output
    assert "label 'person' of input" in r.output and "act, animal, artifact, people" in r.output
    # the config's id2label, as a Trainer run with named labels saves it
    run = tmp_path / "hf"
    shutil.copytree(d / "hf", run)
    for cfg_file in run.glob("checkpoint-*/config.json"):
        cfg = json.loads(cfg_file.read_text())
        cfg["id2label"] = {str(i): n for i, n in enumerate(names)}
        cfg["label2id"] = {n: i for i, n in enumerate(names)}
        cfg_file.write_text(json.dumps(cfg))
    r = cli(run, "--inputs", tmp_path / "named.csv", "--out", out, "--k", 2)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.csv").read_bytes() == out.read_bytes()


def test_a_table_with_two_text_columns_names_the_way(trainer_run, tmp_path):
    """Issue 47 item 3: a second text column was blamed as the wrong column with no way
    through; --text-column names the one the model reads, --label-column the labels."""
    d, test = trainer_run
    test.to_csv(tmp_path / "plain.csv", index=False)
    r = cli(d / "hf", "--inputs", tmp_path / "plain.csv", "--out", tmp_path / "a.csv", "--k", 2)
    assert r.exit_code == 0, r.output
    two = test.assign(title=[t.split()[0] for t in test["text"]]).rename(columns={"label": "topic"})
    two.to_csv(tmp_path / "two.csv", index=False)
    out = tmp_path / "b.csv"
    r = cli(d / "hf", "--inputs", tmp_path / "two.csv", "--out", out, "--k", 2)
    assert r.exit_code == 2 and not out.exists(), r.output
    assert "name the text column with --text-column" in " ".join(r.output.split())
    r = cli(d / "hf", "--inputs", tmp_path / "two.csv", "--text-column", "text",
            "--label-column", "topic", "--out", out, "--k", 2)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "left out: title" in " ".join(r.output.split())
    assert (tmp_path / "a.csv").read_bytes() == out.read_bytes()
    r = cli(d / "hf", "--inputs", tmp_path / "two.csv", "--text-column", "body",
            "--out", tmp_path / "c.csv", "--k", 2)  # fmt: skip
    assert r.exit_code == 2 and "--text-column 'body' is not a text column" in r.output


def test_a_trainer_output_folder_and_its_deployed_checkpoint(trainer_run, tmp_path):
    """Issue 47 item 4: trainer.save_model(out) beside checkpoint-* folders: the folder is
    read as its history, not as one checkpoint; where trainer_state.json names another
    checkpoint the best (load_best_model_at_end deploys it), the run is refused with --final
    as the way, never ranked silently against the last."""
    import shutil

    d, test = trainer_run
    out = tmp_path / "out"
    shutil.copytree(d / "hf", out)
    folders = sorted(out.glob("checkpoint-*"), key=lambda f: int(f.name.split("-")[1]))
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        shutil.copy(folders[-1] / name, out / name)  # what trainer.save_model(out) writes
    test.to_csv(tmp_path / "t.csv", index=False)
    r = cli(out, "--inputs", tmp_path / "t.csv", "--out", tmp_path / "a.csv", "--k", 2)
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "is a Trainer output folder: its checkpoint-* folders are the history" in said
    sel = json.loads((tmp_path / "a.selection.json").read_text())
    assert sel["num_checkpoints"] == 4
    state_file = folders[-1] / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["best_model_checkpoint"] = str(folders[1])
    state_file.write_text(json.dumps(state))
    r = cli(out, "--inputs", tmp_path / "t.csv", "--out", tmp_path / "b.csv", "--k", 2)
    assert r.exit_code == 2 and not (tmp_path / "b.csv").exists(), r.output
    said = " ".join(r.output.split())
    assert f"names {folders[1].name} the best checkpoint" in said
    assert f"--final {folders[1].name}" in said and "--final last" in said
    r = cli(out, "--inputs", tmp_path / "t.csv", "--out", tmp_path / "b.csv", "--k", 2,
            "--final", folders[1].name)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "the 2 checkpoint(s) after it are left out" in " ".join(r.output.split())
    sel = json.loads((tmp_path / "b.selection.json").read_text())
    assert sel["num_checkpoints"] == 2 and sel["used"][-1].endswith(folders[1].name)
    r = cli(out, "--inputs", tmp_path / "t.csv", "--out", tmp_path / "c.csv", "--k", 2,
            "--final", "last")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "c.csv").read_bytes()


def test_differing_tokenizers_across_checkpoints_are_said(trainer_run, tmp_path):
    """Issue 47 item 6: the final checkpoint's tokenizer encodes the texts for every
    checkpoint; where the folders hold different ones, the run says so."""
    import shutil

    d, test = trainer_run
    run = tmp_path / "hf"
    shutil.copytree(d / "hf", run)
    first = sorted(run.glob("checkpoint-*"), key=lambda f: int(f.name.split("-")[1]))[0]
    tok = json.loads((first / "tokenizer.json").read_text())
    tok["truncation"] = {"direction": "Right", "max_length": 7, "strategy": "LongestFirst",
                         "stride": 0}  # fmt: skip
    (first / "tokenizer.json").write_text(json.dumps(tok))
    test.to_csv(tmp_path / "t.csv", index=False)
    r = cli(run, "--inputs", tmp_path / "t.csv", "--out", tmp_path / "r.csv", "--k", 2)
    assert r.exit_code == 0, r.output
    assert "hold 2 different tokenizer.json files" in " ".join(r.output.split())


def test_a_classifier_given_prompts_is_told_to_use_inputs(trainer_run, tmp_path):
    """Issue 47 item 9: a sequence classifier given --prompts gets the hint to switch."""
    d, _ = trainer_run
    (tmp_path / "p.jsonl").write_text('{"prompt": "a gloss"}\n')
    r = cli(d / "hf", "--prompts", tmp_path / "p.jsonl", "--out", tmp_path / "r.csv", "--k", 2)
    assert r.exit_code == 2 and not (tmp_path / "r.csv").exists(), r.output
    assert "rank them with --inputs" in " ".join(r.output.split())


def test_a_tokenizer_pattern_that_backtracks_without_bound_is_one_line(
    trainer_run, tmp_path, capfd
):
    """Issue 47's red team ('unclear'): a pathological pre-tokenizer regex made the Rust library
    panic (Oniguruma's retry limit) with a Rust backtrace and a Python traceback."""
    import json

    d, _ = trainer_run
    spec = json.loads(next((d / "hf").glob("checkpoint-*/tokenizer.json")).read_text())
    spec["pre_tokenizer"] = {
        "type": "Split",
        "pattern": {"Regex": "(a+)+$"},
        "behavior": "Isolated",
        "invert": False,
    }
    (tmp_path / "tok.json").write_text(json.dumps(spec))
    pd.DataFrame({"text": ["a" * 40 + "b", "a short text"]}).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "r.csv"
    capfd.readouterr()
    r = cli(d / "hf", "--inputs", tmp_path / "t.csv", "--tokenizer", tmp_path / "tok.json",
            "--out", out, "--k", 2, "--quiet")  # fmt: skip
    said = capfd.readouterr()
    assert r.exit_code == 2, r.output
    assert "one of its patterns cannot handle them" in " ".join(r.output.split())
    assert "panicked" not in said.err and "Traceback" not in r.output and not out.exists()
