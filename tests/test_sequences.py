"""NCIP for causal language models (issue 38): the per-token scores against a direct
computation, BLEU-2 and the failure rule, and `ncip rank --prompts` on a real Hugging Face
Trainer run of a GPT-2 built from a config, and on a plain PyTorch language model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from ncip.cli import app
from ncip.core.errors import InputError
from ncip.core.scores import zscore
from ncip.core.sequences import TokenStats, bleu2, failures, prompt_scores

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, ["rank", *map(str, args)])


def test_token_stats_equal_a_direct_computation_over_the_whole_stack():
    rng = np.random.default_rng(0)
    k, n, length, v = 4, 7, 5, 11
    probs = torch.softmax(torch.as_tensor(rng.standard_normal((k, n, length, v)) * 2), dim=-1)
    tokens = probs[-1].argmax(-1)
    stats = TokenStats(n, length, k - 1)
    halves = [np.arange(0, 3), np.arange(3, n)]  # filled in two batches of rows
    for rows in halves:
        stats.set_final(rows, probs[-1, rows], tokens[rows])
        for j in range(k - 1):
            stats.add(j, rows, probs[j, rows], probs[-1, rows])
    p = probs.numpy()
    tvd = (0.5 * np.abs(p - p[-1]).sum(-1)).sum(0) / k  # Eq. 6, the final's zero term in |S|
    top = np.sort(p[-1], axis=-1)
    margin = (top[..., -1] - top[..., -2]).mean(1)
    got = prompt_scores(stats)
    np.testing.assert_allclose(got["tvd"], tvd.mean(1), rtol=1e-12)
    np.testing.assert_allclose(got["ncip"], zscore(tvd.mean(1)) + zscore(1 - margin), rtol=1e-9)
    np.testing.assert_allclose(got["entropy"], -(p[-1] * np.log(p[-1])).sum(-1).mean(1))
    np.testing.assert_allclose(got["msp"], 1 - top[..., -1].mean(1))
    np.testing.assert_allclose(got["deepgini"], 1 - (p[-1] ** 2).sum(-1).mean(1))
    logp = np.log(np.take_along_axis(p[-1], tokens.numpy()[..., None], -1)[..., 0])
    np.testing.assert_allclose(got["logppl"], -logp.mean(1))
    stats.drop(1)  # a checkpoint found bad: dropped whole, |S| shrinks with it
    keep = [0, 2, 3]
    tvd2 = (0.5 * np.abs(p[keep] - p[-1]).sum(-1)).sum(0) / 3
    np.testing.assert_allclose(prompt_scores(stats)["tvd"], tvd2.mean(1), rtol=1e-12)


def test_bleu2_and_the_failure_rule():
    b = bleu2(["the cat sat on the mat", "a b", "", "The Cat sat"], ["the cat sat on the mat"] * 4)
    assert b[0] == pytest.approx(1.0) and b[2] == 0.0 and 0 < b[3] < 1 and b[1] < b[3]
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    ref = ["the", "cat", "sat", "on", "the", "mat"]
    direct = sentence_bleu([ref], ["the", "cat", "sat"], (0.5, 0.5), SmoothingFunction().method1)
    assert b[3] == pytest.approx(direct)  # lower-cased words, NLTK's BLEU-2, smoothing 1
    fail, t = failures(np.array([0.0, 0.0, 0.0, 0.2, 0.5]))  # median 0: ties at it fail
    assert t == 0.0 and fail.tolist() == [True, True, True, False, False]
    fail, t = failures(np.array([0.05, 0.2, 0.5]), 0.1)
    assert t == 0.1 and fail.tolist() == [True, False, False]
    with pytest.raises(InputError, match="'median' or a BLEU-2"):
        failures(np.zeros(3), 2.0)
    with pytest.raises(InputError, match="one each"):
        bleu2(["a"], [])


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """A GPT-2 built from a config (1 layer, width 32), a byte-level BPE tokenizer trained
    here, fine-tuned for 6 epochs with a real Trainer on WordNet glosses, which saves
    checkpoint-<step>/ folders with the tokenizer in each; 120 held-out prompts with
    references (their next words)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from ncip.study.datasets import debian

    if not (debian.WORDNET_DIR / "data.noun").is_file():
        pytest.skip("wordnet-base not installed (scripts/setup.sh installs it)")
    d = tmp_path_factory.mktemp("lm")
    items = debian.deduplicate(debian.wordnet_glosses(debian.WORDNET_DIR))
    rng = np.random.default_rng(0)
    texts = [items[i][0] for i in rng.permutation(len(items))[:1620]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts[:1500],
        trainers.BpeTrainer(
            vocab_size=400,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    enc = [fast(t, truncation=True, max_length=40)["input_ids"] for t in texts[:1500]]

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(enc)

        def __getitem__(self, i):
            return {"input_ids": enc[i]}

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=400, n_positions=64, n_embd=32, n_layer=1, n_head=2)
    args = transformers.TrainingArguments(
        str(d / "hf"), num_train_epochs=6, per_device_train_batch_size=32,
        save_strategy="epoch", report_to=[], use_cpu=True, logging_strategy="no",
        learning_rate=3e-3, disable_tqdm=True, seed=0,
    )  # fmt: skip
    transformers.Trainer(
        model=transformers.GPT2LMHeadModel(cfg),
        args=args,
        train_dataset=Data(),
        processing_class=fast,
        data_collator=transformers.DataCollatorForLanguageModeling(fast, mlm=False),
    ).train()
    rows = []
    for i, t in enumerate(texts[1500:]):
        w = t.split()
        if len(w) >= 8:
            rows.append({"id": f"p{i}", "prompt": " ".join(w[:5]), "reference": " ".join(w[5:13])})
    (d / "prompts.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return d, rows


def test_a_trainer_run_ranks_its_prompts_in_one_command(lm_run):
    d, rows = lm_run
    r = cli(d / "hf", "--prompts", d / "prompts.jsonl", "--out", d / "r.csv", "--k", 3, "--quiet")
    assert r.exit_code == 0, r.output
    t = pd.read_csv(d / "r.csv", keep_default_na=False)
    assert len(t) == len(rows) and list(t.columns[:4]) == ["rank", "sample_id", "ncip", "tvd"]
    assert {"entropy", "msp", "deepgini", "margin", "logppl", "continuation", "bleu2"} <= set(
        t.columns
    )
    assert t["ncip"].is_monotonic_decreasing and (t["tvd"] > 0).all()
    sel = json.loads((d / "r.selection.json").read_text())
    assert sel["head"] == "transformer.wte.weight"  # GPT-2's LM head is tied to the embedding
    assert len(sel["used"]) == 3 and sel["final"].endswith(sel["used"][-1].split("/")[-1])
    ev = json.loads((d / "r.evaluation.json").read_text())
    methods = [m["method"] for m in ev["methods"]]
    assert methods == ["NCIP", "Entropy", "MSP", "DeepGini", "Margin", "LogPPL", "Random"]
    fail = t["failed"].to_numpy(dtype=bool)
    assert fail.sum() >= len(t) / 2  # at or below the median fails
    said = " ".join(r.output.split())
    assert "count as failures" in said and "random order" in said
    # the continuation is the final checkpoint's greedy one, decoded with the run's tokenizer
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast

    final = sel["final"]
    model = GPT2LMHeadModel.from_pretrained(final).eval()
    fast = PreTrainedTokenizerFast.from_pretrained(final)
    first = next(x for x in rows if x["id"] == str(t["sample_id"].iloc[0]))
    x = fast(first["prompt"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(x, max_new_tokens=16, do_sample=False, min_new_tokens=16,
                             pad_token_id=0)  # fmt: skip
    assert fast.decode(out[0, x.shape[1] :], skip_special_tokens=True) == t["continuation"].iloc[0]


def test_streaming_in_chunks_gives_the_same_scores(lm_run):
    from ncip.tool.sequences import rank_sequences

    d, _ = lm_run
    one = rank_sequences(d / "hf", d / "prompts.jsonl", k=3, show_progress=False, device="cpu")
    many = rank_sequences(d / "hf", d / "prompts.jsonl", k=3, show_progress=False,
                          device="cpu", memory_mb=0, batch_size=5)  # fmt: skip
    a = one.table.sort_values("sample_id").reset_index(drop=True)
    b = many.table.sort_values("sample_id").reset_index(drop=True)
    np.testing.assert_allclose(a["ncip"], b["ncip"], rtol=1e-9, atol=1e-12)
    assert (a["continuation"] == b["continuation"]).all()


TINY_LM = """
import torch


class TinyLM(torch.nn.Module):
    # a plain PyTorch causal language model (token ids -> logits [B, T, V]), no transformers
    def __init__(self, vocab=400, width=24):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, width)
        self.rnn = torch.nn.GRU(width, width, batch_first=True)
        self.lm_head = torch.nn.Linear(width, vocab)

    def forward(self, x):
        return self.lm_head(self.rnn(self.emb(x))[0])
"""


def test_a_plain_pytorch_language_model_ranks_with_its_tokenizer(lm_run, tmp_path, monkeypatch):
    d, _ = lm_run
    (tmp_path / "tinylm.py").write_text(TINY_LM)
    monkeypatch.syspath_prepend(str(tmp_path))
    from tinylm import TinyLM

    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    x = torch.randint(0, 400, (64, 12))
    ck = tmp_path / "ckpt"
    ck.mkdir()
    for epoch in range(1, 6):
        for _ in range(5):
            loss = torch.nn.functional.cross_entropy(model(x[:, :-1]).transpose(1, 2), x[:, 1:])
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.save({"epoch": epoch, "state_dict": model.state_dict()}, ck / f"epoch_{epoch}.pt")
    tokenizer = next((d / "hf").glob("checkpoint-*")) / "tokenizer.json"
    r = cli(ck, "--model", "tinylm:TinyLM", "--prompts", d / "prompts.jsonl", "--tokenizer",
            tokenizer, "--out", tmp_path / "r.csv", "--k", 2, "--quiet")  # fmt: skip
    assert r.exit_code == 0, r.output
    sel = json.loads((tmp_path / "r.selection.json").read_text())
    assert sel["head"] == "lm_head.weight" and len(sel["used"]) == 2


@pytest.mark.parametrize(
    "case, expected",
    [
        ("both", "--inputs (a classifier's inputs) or --prompts"),
        ("no-field", "each line needs a 'prompt' (or 'text') field"),
        ("no-reference", "lacks a string 'prompt' and 'reference'"),
        ("first-no-reference", "object 2 has a 'reference' but object 1 has none"),
        ("same-id", "objects 1 and 2 have the same id 'p'"),
        ("bad-suffix", "give a .jsonl"),
        ("failure", "--failure is 'median' or a BLEU-2"),
        ("empty", "encodes to no tokens"),
        ("past-positions", "more than the model's 64 positions; give --max-length at most 48"),
        ("failure-no-references", "--failure 0.2 judges continuations against references"),
    ],
)
def test_bad_prompts_end_in_one_line_and_keep_the_outputs(lm_run, tmp_path, case, expected):
    d, rows = lm_run
    out = tmp_path / "r.csv"
    out.write_text("old\n")
    prompts = tmp_path / "p.jsonl"
    extra = []
    if case == "both":
        extra = ["--inputs", prompts]
        prompts.write_text(json.dumps(rows[0]) + "\n")
    elif case == "no-field":
        prompts.write_text(json.dumps({"question": "a"}) + "\n")
    elif case == "no-reference":
        prompts.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"prompt": "a"}) + "\n")
    elif case == "first-no-reference":  # references were dropped silently (issue 47)
        prompts.write_text(json.dumps({"prompt": "a"}) + "\n" + json.dumps(rows[0]) + "\n")
    elif case == "same-id":  # ranked twice before
        same = [{**rows[0], "id": "p"}, {**rows[1], "id": "p"}]
        prompts.write_text("".join(json.dumps(r) + "\n" for r in same))
    elif case == "bad-suffix":
        prompts = tmp_path / "p.csv"
        prompts.write_text("prompt\na\n")
    elif case == "failure":
        prompts.write_text(json.dumps(rows[0]) + "\n")
        extra = ["--failure", "low"]
    elif case == "empty":
        prompts.write_text(json.dumps({"prompt": "", "reference": "a"}) + "\n")
    elif case == "failure-no-references":  # ignored without a word before
        prompts.write_text(json.dumps({"prompt": rows[0]["prompt"]}) + "\n")
        extra = ["--failure", "0.2"]
    elif case == "past-positions":  # a traceback from the position table before
        prompts.write_text(json.dumps(rows[0]) + "\n")
        extra = ["--max-length", 60]
    r = cli(d / "hf", "--prompts", prompts, "--out", out, "--k", 2, "--quiet", *extra)
    assert r.exit_code == 2, r.output
    assert expected in " ".join(r.output.split()) and "Traceback" not in r.output
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["r.csv", prompts.name]
    )


def test_the_readme_language_model_example_runs(lm_run, tmp_path, monkeypatch, capsys):
    """docs/tool.md's `ncip.rank_sequences` snippet, as written, on a Trainer run."""
    from helpers import ROOT

    d, _ = lm_run
    text = (ROOT / "docs" / "tool.md").read_text()
    section = text[text.index("### From Python") :]
    block = section.split("```python\n")[3].split("```")[0]
    assert "rank_sequences" in block
    (tmp_path / "lm_out").symlink_to(d / "hf")
    (tmp_path / "prompts.jsonl").write_text((d / "prompts.jsonl").read_text())
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "README language model", "exec"), {})
    out = capsys.readouterr().out
    assert "continuation" in out and "RAUC-ALL" in out and "Random" in out


def test_a_language_model_given_inputs_is_told_to_use_prompts(lm_run, tmp_path):
    """Issue 47 item 9: a GPT-2 given --inputs gets the hint to switch."""
    d, _ = lm_run
    np.save(tmp_path / "ids.npy", np.ones((4, 8), dtype=np.int64))
    r = cli(d / "hf", "--inputs", tmp_path / "ids.npy", "--out", tmp_path / "r.csv", "--k", 2)
    assert r.exit_code == 2 and not (tmp_path / "r.csv").exists(), r.output
    assert "rank them with --prompts" in " ".join(r.output.split())


def test_a_bert_checkpoint_among_gpt2_ones_is_named(lm_run, tmp_path):
    """Issue 47's red team ('unclear'): a BERT checkpoint as the last of GPT-2 ones made every
    good GPT-2 file the one blamed. The config.json files are compared first."""
    import shutil

    import transformers

    d, rows = lm_run
    hf = tmp_path / "hf"
    shutil.copytree(d / "hf", hf)
    last = sorted(hf.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[-1]
    cfg = transformers.BertConfig(
        vocab_size=400,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    transformers.BertForMaskedLM(cfg).save_pretrained(last)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps(rows[0]) + "\n")
    r = cli(hf, "--prompts", prompts, "--out", tmp_path / "r.csv", "--k", 2, "--quiet")
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    said = " ".join(r.output.split())
    assert "config.json files name different models" in said, said
    assert f"1 name BertForMaskedLM ({last.name})" in said and "name GPT2LMHeadModel" in said
    assert not (tmp_path / "r.csv").exists()
