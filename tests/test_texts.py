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
        ("two-text-columns", "column 'a' is not numeric (2 such column(s))"),
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
