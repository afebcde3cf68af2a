"""The options of ``ncip rank`` and ``ncip prune`` (typer annotations), apart from the commands
in :mod:`ncip.cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# `ncip rank --help` groups its options under these headings (plain text, 80 columns)
CHECKPOINTS = "Checkpoints"
MODEL = "Model"
INPUTS = "Inputs and labels"
TEXTS = "Texts and prompts"
SELECTION = "Selection and scores"
OUTPUTS = "Outputs"

Model = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=MODEL,
        help="package.module:function or file.py:function (a factory returning an nn.Module; "
        "gets num_classes if it takes it; other arguments as literals: 'file.py:Net(hidden=256)'"
        "), torchvision:NAME, or an ncip model; not needed for "
        "ncip or Hugging Face checkpoints",
    ),
]
KOpt = Annotated[
    int, typer.Option(rich_help_panel=SELECTION, help="checkpoints NCIP selects (paper: 30)")
]
Holdout = Annotated[
    Path | None,
    typer.Option(
        "--holdout",
        rich_help_panel=INPUTS,
        help="labelled inputs of the pool's kind (a validation split): every score is tried "
        "on them and the pool ranked by the one that works (docs/tool.md)",
    ),
]
HoldoutLabels = Annotated[
    str | None,
    typer.Option(
        "--holdout-labels",
        rich_help_panel=INPUTS,
        help="the holdout's labels: a file, or its label column",
    ),
]
Method = Annotated[
    str | None,
    typer.Option(
        "--method",
        rich_help_panel=SELECTION,
        help="rank by this score instead: ncip, tvd, msp, entropy, margin, deepgini or a "
        "checkpoint score (ensemble_entropy, mutual_information, variation_ratio, flips, "
        "settle_epoch, aum, variability)",
    ),
]
LabelStudio = Annotated[
    Path | None,
    typer.Option(
        "--label-studio",
        rich_help_panel=OUTPUTS,
        help="also write Label Studio's task import JSON here",
    ),
]
Top = Annotated[
    int | None,
    typer.Option(
        "--top",
        rich_help_panel=OUTPUTS,
        help="also write <out stem>.top.csv with the first N ranked inputs",
    ),
]
Plot = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        rich_help_panel=OUTPUTS,
        help="with labels or a holdout: the detection curves as a .png here",
    ),
]
Final = Annotated[
    str | None,
    typer.Option(
        "--final",
        rich_help_panel=CHECKPOINTS,
        help="the model under test: a checkpoint's name (the history up to it is read), or "
        "'last'; needed where a Trainer run names another checkpoint its best",
    ),
]
TextColumn = Annotated[
    str | None,
    typer.Option(
        "--text-column",
        rich_help_panel=TEXTS,
        help="a table of raw texts: the column the model reads (others left out)",
    ),
]
LabelColumn = Annotated[
    str | None,
    typer.Option(
        "--label-column", rich_help_panel=INPUTS, help="a table's label column (as --labels COLUMN)"
    ),
]
Classes = Annotated[
    str | None,
    typer.Option(
        "--classes",
        rich_help_panel=INPUTS,
        help="labels given as names: the class names in class order (class 0 first), "
        "comma-separated or a file with one per line (a Hugging Face config's id2label is "
        "used without it)",
    ),
]
RankKOpt = Annotated[
    int | None,
    typer.Option(
        "--k",
        rich_help_panel=SELECTION,
        help="checkpoints NCIP selects (default: the paper's 30, or half the pool where the "
        "pool holds 30 or fewer, so that selection runs)",
    ),
]
AlphaOpt = Annotated[
    float,
    typer.Option(
        rich_help_panel=SELECTION, help="candidate pool: the last round(alpha*m) checkpoints"
    ),
]
Head = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=MODEL,
        help="the classifier layer (default: the last nn.Linear with one output per class)",
    ),
]
NumClasses = Annotated[
    int | None,
    typer.Option(
        rich_help_panel=MODEL,
        min=2,
        help="classes, for a factory that takes num_classes (default: from the checkpoint)",
    ),
]
Prefix = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=CHECKPOINTS,
        help="prefix to strip from the checkpoint's keys (default: found, e.g. 'module.')",
    ),
]
Ema = Annotated[
    bool,
    typer.Option(
        "--ema", rich_help_panel=CHECKPOINTS, help="use the EMA weights (state_dict_ema, model_ema)"
    ),
]
StateKey = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=CHECKPOINTS,
        help="the key of a dict-shaped checkpoint that holds the classifier's state dict "
        "(default: state_dict, model, model_state_dict, else the only key holding one)",
    ),
]
Checkpoints = Annotated[
    list[str] | None,
    typer.Argument(
        rich_help_panel=CHECKPOINTS,
        help="a folder of checkpoints, a glob ('ckpt/epoch_*.pt'), or the files in training "
        "order: ncip or plain safetensors, .pt/.pth/.bin state dicts, Lightning .ckpt, timm and "
        "torchvision dicts, Hugging Face checkpoint-<step>/ folders",
        show_default=False,
    ),
]
CheckpointsOpt = Annotated[
    list[str] | None,
    typer.Option("--checkpoints", rich_help_panel=CHECKPOINTS, help="same as the argument"),
]
InputsOpt = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel=INPUTS,
        help=".npz (x, optional ids and y), .npy (memory-mapped), .pt, a table (.csv, .tsv, "
        ".parquet: a row per input; columns y/label and id are labels and ids; one text "
        "column: raw texts), raw texts (.txt: one per line; .jsonl: text, label, id), or a "
        "folder of images (ImageFolder layout or flat)",
    ),
]
Out = Annotated[
    Path,
    typer.Option(
        rich_help_panel=OUTPUTS,
        help="ranked table, .csv or .parquet; <stem>.selection.json (and with labels "
        "<stem>.evaluation.json) are written beside it",
    ),
]
Labels = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel=INPUTS,
        help="labels (.npy or .txt, or a column of a table --inputs): compare NCIP with "
        "margin, DeepGini and random order on your model",
    ),
]
Ids = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel=INPUTS,
        help="sample ids (.npy or .txt, or a column of a table --inputs), one per input",
    ),
]
Prompts = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel=TEXTS,
        help="a causal language model's test prompts instead of --inputs: .jsonl (prompt, "
        "optional reference and id) or .txt (one per line); with references, each "
        "continuation's BLEU-2 decides which prompts fail (see ncip.core.sequences)",
    ),
]
NewTokens = Annotated[
    int,
    typer.Option(
        "--new-tokens",
        "--max-new-tokens",
        rich_help_panel=TEXTS,
        min=1,
        help="--prompts: greedy tokens of the final checkpoint scored (generate's name too)",
    ),
]
Failure = Annotated[
    str,
    typer.Option(
        rich_help_panel=TEXTS,
        help="--prompts with references: a continuation fails at or below this BLEU-2, "
        "'median' (of the prompts) or a number in [0, 1]",
    ),
]
Outputs = Annotated[
    str,
    typer.Option(
        rich_help_panel=OUTPUTS,
        help="what the model returns: auto (decided from its outputs on the first inputs and "
        "printed: rows in [0, 1] summing to 1, or one column in [0, 1], are probabilities), "
        "logits, or probs (a softmax or sigmoid at its end: not softmaxed again)",
    ),
]
Tokenizer = Annotated[
    Path | None,
    typer.Option(
        rich_help_panel=TEXTS,
        help="raw texts: the tokenizers JSON file (or a folder holding tokenizer.json) to "
        "encode them with; default: the tokenizer.json beside the final checkpoint (a "
        "Trainer's checkpoint-<step>/, ncip's own text models). Read as data, nothing "
        "downloaded",
    ),
]
MaxLength = Annotated[
    int | None,
    typer.Option(
        rich_help_panel=TEXTS,
        min=1,
        help="raw texts: tokens kept per text (default: the tokenizer's own length, else the "
        "model's max_position_embeddings)",
    ),
]
NoScale = Annotated[
    bool,
    typer.Option("--no-scale", rich_help_panel=INPUTS, help="do not divide uint8 inputs by 255"),
]
Mean = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=INPUTS,
        help="mean to subtract after scaling: one per image channel (e.g. 0.485,0.456,0.406) "
        "or one per feature of a table",
    ),
]
Std = Annotated[
    str | None,
    typer.Option(
        rich_help_panel=INPUTS, help="std to divide by: one per image channel or one per feature"
    ),
]
SkipBad = Annotated[
    bool,
    typer.Option(
        "--skip-bad",
        rich_help_panel=INPUTS,
        help="drop checkpoints with NaN/inf weights or outputs (with a warning) instead of "
        "stopping",
    ),
]
Preview = Annotated[
    Path | None,
    typer.Option(rich_help_panel=OUTPUTS, help="a .png grid of the top-ranked image inputs"),
]
BatchSize = Annotated[int, typer.Option(rich_help_panel=MODEL, min=1)]
Device = Annotated[str, typer.Option(rich_help_panel=MODEL, help="auto, cpu or cuda[:N]")]
EnginePath = Annotated[
    str,
    typer.Option(
        "--engine",
        rich_help_panel=MODEL,
        help="inference path: auto, sequential, channels_last, stacked (see ncip.core.engine)",
    ),
]
Precision = Annotated[
    str, typer.Option(rich_help_panel=MODEL, help="fp32, bf16 or fp16 (autocast)")
]
Compile = Annotated[
    bool,
    typer.Option(
        "--compile", rich_help_panel=MODEL, help="torch.compile the model (pays off on long runs)"
    ),
]
Seed = Annotated[int, typer.Option(rich_help_panel=SELECTION, help="tie-breaking seed")]
Quiet = Annotated[bool, typer.Option("--quiet", rich_help_panel=OUTPUTS, help="no progress bar")]
Order = Annotated[
    str,
    typer.Option(
        rich_help_panel=CHECKPOINTS,
        help="auto: what the files record (step, epoch), else the number in their names (a "
        "list of files sorted by name, as an unquoted glob expands, is ordered so too; another "
        "list keeps its order); given: the order the files are listed in (a list only)",
    ),
]
AllowUneven = Annotated[
    bool,
    typer.Option(
        "--allow-uneven",
        rich_help_panel=CHECKPOINTS,
        help="rank checkpoints that are not an even history (kept by a metric, e.g. Lightning's "
        "save_top_k with a monitor, or thinned), which are refused otherwise; the pool is then "
        "the last alpha of the checkpoints kept, not of training",
    ),
]
TrustRecordedModel = Annotated[
    bool,
    typer.Option(
        "--trust-recorded-model",
        rich_help_panel=MODEL,
        help="import the model factory the checkpoints record (a module or file named inside "
        "them); without it, such a factory is printed as the --model to pass",
    ),
]

GROUPS = (CHECKPOINTS, MODEL, INPUTS, TEXTS, SELECTION, OUTPUTS)


class GroupedHelp(typer.core.TyperCommand):
    """Plain-text help, no boxes: the usage, the description, the options under their group's
    heading (in :data:`GROUPS` order), then the examples as written; click wraps the rest to
    the terminal, 80 columns at most."""

    def format_help(self, ctx, formatter) -> None:
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record:
                group = getattr(param, "rich_help_panel", None) or "Other options"
                groups.setdefault(group, []).append(record)
        order = sorted(groups, key=lambda g: GROUPS.index(g) if g in GROUPS else len(GROUPS))
        for name in order:
            with formatter.section(name):
                formatter.write_dl(groups[name])
        if self.epilog:
            formatter.write_paragraph()
            for line in self.epilog.rstrip().splitlines():
                formatter.write(f"{line}\n" if line.strip() else "\n")
