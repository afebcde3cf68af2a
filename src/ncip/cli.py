"""The ``ncip`` command: list what is registered, and rank your own test inputs with NCIP."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ncip.core.collapse import ALPHA, K
from ncip.study.stage import StageError, stage_main

app = typer.Typer(add_completion=False, help=__doc__, no_args_is_help=True)

# third-party packages only the study needs (pyproject's `study` extra)
STUDY_PACKAGES = {"dvc", "scipy", "sklearn", "xgboost", "torchattacks", "seaborn", "mlxtend",
                  "mnist1d", "submitit", "transformers", "accelerate", "rdata"}  # fmt: skip


def needs_study(fn):
    """A study command run where only the tool is installed: one line saying what to install."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in STUDY_PACKAGES:
                raise
            raise StageError(
                f"`ncip {fn.__name__.replace('_', '-')}` is part of the study, which needs "
                f"{e.name}: pip install 'ncip[study]' (the tool alone: pip install ncip)"
            ) from None

    return run


@app.command()
@stage_main
@needs_study
def datasets() -> None:
    """List the registered datasets."""
    from ncip.study.data import list_datasets

    typer.echo("\n".join(list_datasets()))


@app.command()
def models() -> None:
    """List the registered models."""
    from ncip.core.models import list_models, model_kind

    typer.echo("\n".join(f"{m}\t{model_kind(m)}" for m in list_models()))


@app.command("check-params")
@stage_main
@needs_study
def check_params(
    params: Path = typer.Argument(Path("params.yaml"), help="the study's parameters"),
) -> None:
    """Validate a study's params.yaml before `dvc repro` (make repro runs this first)."""
    from ncip.study.paramcheck import check_shape
    from ncip.study.subjects import check_params as check

    check_shape(params)
    subjects, runs = check(params)
    typer.echo(f"{params}: valid ({len(subjects)} subjects x {len(runs)} runs)")


@app.command()
@stage_main
@needs_study
def methods() -> None:
    """List the registered methods: name, table name, paper name, options with defaults, needs."""
    from ncip.study.evaluation import method_order
    from ncip.study.scores import list_methods, method_info
    from ncip.study.scores.registry import NEEDS

    for family, title in (
        ("baseline", "baselines (score-baselines; params.yaml `baselines`)"),
        ("ncip", "NCIP and its ablations (score-ncip)"),
    ):
        typer.echo(f"{title}:")
        for name in method_order(list_methods(family)):
            i = method_info(name)
            opts = ", ".join(f"{k}={v!r}" for k, v in i.options.items()) or "-"
            needs = ", ".join(NEEDS[n] for n in i.needs) or "the final model's outputs"
            typer.echo(f"  {name:<11} {i.display:<11} paper: {i.paper or '-':<11} options: {opts}")
            typer.echo(f"  {'':<11} needs: {needs}")
            if i.summary:
                typer.echo(f"  {'':<11} {i.summary}")


@app.command()
@stage_main
@needs_study
def preset(
    name: str = typer.Argument(None, help="a preset; omit to list them"),
    runs: int = typer.Option(None, min=1, help="training runs (paper: 5; experiments: their own)"),
) -> None:
    """The paper's subjects at full scale, or the extended CPU study: print the
    `dvc exp run -S ...` line of a preset."""
    import shlex

    from ncip.study.presets import EXPERIMENTS, PRESETS, set_args

    if name is None:
        for p in PRESETS.values():
            acc = ", ".join(f"{a:.4f}" for a in p.paper_accuracy)
            typer.echo(
                f"{p.name:<13} {' '.join(p.subjects):<48} {p.epochs} epochs  paper acc {acc}"
            )
        for e in EXPERIMENTS.values():
            count = f"{len(e.subjects)} " if e.subjects else ""
            typer.echo(f"{e.name:<13} {count}{e.description} (`make {e.name}`)")
        typer.echo("ncip preset NAME prints the command (epochs: paper Table 1; recipe: ours)")
        return
    typer.echo(shlex.join(["dvc", "exp", "run", *set_args(name, runs)]))


@app.command()
@stage_main
@needs_study
def launch(
    stage: str = typer.Argument("train-with-checkpoints", help="a (matrix) stage of dvc.yaml"),
    cluster: str = typer.Option(None, help="slurm or local (default: slurm where srun exists)"),
    workdir: Path = typer.Option(Path(".ncip-launch"), help="worktrees and submitit logs"),
    cache: Path = typer.Option(None, help="shared DVC cache (default: this repository's)"),
    timeout_min: int = typer.Option(24 * 60, help="time limit per task"),
    gpus_per_node: int = typer.Option(0, help="GPUs per task"),
    cpus_per_task: int = typer.Option(4),
    partition: str = typer.Option(None, help="SLURM partition"),
    parallel: int = typer.Option(64, help="tasks running at once (slurm_array_parallelism)"),
    keep: bool = typer.Option(False, help="keep the worktrees afterwards"),
) -> None:
    """Run each item of a matrix stage as a SLURM array task in its own worktree, sharing runs
    through DVC's run-cache; then run `dvc repro --pull` here (README "Scaling out")."""
    from ncip.study.launch import launch as run

    extra = {"slurm_partition": partition} if partition else {}
    results = run(
        Path.cwd(),
        stage,
        workdir,
        cluster=cluster,
        cache=cache,
        keep=keep,
        timeout_min=timeout_min,
        gpus_per_node=gpus_per_node,
        cpus_per_task=cpus_per_task,
        slurm_array_parallelism=parallel,
        **extra,
    )
    for r in results:
        how = "ran" if r.item in r.ran else "restored" if r.item in r.restored else "up to date"
        pushed = "pushed" if r.pushed else "no remote"
        typer.echo(f"{r.item:<48} {how:<10} {r.seconds:8.1f} s  {pushed}")
    typer.echo("next, here: dvc repro --pull   (restores these runs instead of running them)")


@app.command("import-external")
@stage_main
@needs_study
def import_external(
    subjects: list[str] = typer.Argument(None, help="external subjects (default: all of them)"),
    params: Path = typer.Option(Path("params.yaml"), help="the study's parameters"),
    device: str = typer.Option("auto", help="auto, cpu or cuda[:N]"),
) -> None:
    """Import models trained elsewhere (params.yaml `external`) into the study's checkpoint
    format, for every run in `runs`; run it before `dvc repro` and after their files change."""
    from ncip.study.importing import import_subject
    from ncip.study.subjects import external_specs, load_study

    specs = external_specs(params)
    names = subjects or sorted(specs)
    unknown = [s for s in names if s not in specs]
    if unknown or not names:
        raise StageError(
            f"{params} describes no external subject {', '.join(unknown) or '(none at all)'}; "
            'add it under `external` (README "Study a model trained elsewhere")'
        )
    runs = load_study(params)[2]
    for name in names:
        for folder in import_subject(specs[name], runs, device):
            typer.echo(f"{name}: imported into {folder}")


RANK_EXAMPLES = """Examples:

  ncip rank ckpt/ --model mynet:Net --inputs test.npz --out ranking.csv

  ncip rank 'lightning_logs/version_0/checkpoints/*.ckpt' --model train:Net \
      --inputs x.npy --labels y.npy --out ranking.parquet

  ncip rank hf_out/ --inputs tokens.npz --out ranking.csv   (model from config.json)

  ncip rank models/fmnist-lenet5/run-0 --inputs test.npz --out ranking.csv --preview top.png

  ncip rank lm_out/ --prompts prompts.jsonl --out ranking.csv   (a causal language model)
"""


def _floats(value: str | None, name: str) -> list[float] | None:
    if value is None:
        return None
    try:
        return [float(v) for v in value.replace(" ", "").split(",") if v]
    except ValueError:
        raise StageError(
            f"--{name} must be comma-separated numbers, e.g. 0.485,0.456,0.406"
        ) from None


# The options of `ncip rank` (and those `ncip prune` shares), each declared once.
Model = Annotated[
    str | None,
    typer.Option(
        help="package.module:function or file.py:function (a factory returning an nn.Module; "
        "gets num_classes if it takes it; other arguments as literals: 'file.py:Net(hidden=256)'"
        "), torchvision:NAME, or an ncip model; not needed for "
        "ncip or Hugging Face checkpoints",
    ),
]
KOpt = Annotated[int, typer.Option(help="checkpoints NCIP selects (paper: 30)")]
AlphaOpt = Annotated[
    float, typer.Option(help="candidate pool: the last round(alpha*m) checkpoints")
]
Head = Annotated[
    str | None,
    typer.Option(
        help="the classifier layer (default: the last nn.Linear with one output per class)"
    ),
]
NumClasses = Annotated[
    int | None,
    typer.Option(
        min=2, help="classes, for a factory that takes num_classes (default: from the checkpoint)"
    ),
]
Prefix = Annotated[
    str | None,
    typer.Option(
        help="prefix to strip from the checkpoint's keys (default: found, e.g. 'module.')"
    ),
]
Ema = Annotated[bool, typer.Option("--ema", help="use the EMA weights (state_dict_ema, model_ema)")]
StateKey = Annotated[
    str | None,
    typer.Option(
        help="the key of a dict-shaped checkpoint that holds the classifier's state dict "
        "(default: state_dict, model, model_state_dict, else the only key holding one)"
    ),
]
Checkpoints = Annotated[
    list[str] | None,
    typer.Argument(
        help="a folder of checkpoints, a glob ('ckpt/epoch_*.pt'), or the files in training "
        "order: ncip or plain safetensors, .pt/.pth/.bin state dicts, Lightning .ckpt, timm and "
        "torchvision dicts, Hugging Face checkpoint-<step>/ folders",
        show_default=False,
    ),
]
CheckpointsOpt = Annotated[
    list[str] | None, typer.Option("--checkpoints", help="same as the argument")
]
InputsOpt = Annotated[
    Path | None,
    typer.Option(
        help=".npz (x, optional ids and y), .npy (memory-mapped), .pt, a table (.csv, .tsv, "
        ".parquet: a row per input; columns y/label and id are labels and ids; one text "
        "column: raw texts), raw texts (.txt: one per line; .jsonl: text, label, id), or a "
        "folder of images (ImageFolder layout or flat)"
    ),
]
Out = Annotated[
    Path,
    typer.Option(
        help="ranked table, .csv or .parquet; <stem>.selection.json (and with labels "
        "<stem>.evaluation.json) are written beside it"
    ),
]
Labels = Annotated[
    Path | None,
    typer.Option(
        help="labels (.npy or .txt, or a column of a table --inputs): compare NCIP with "
        "margin, DeepGini and random order on your model"
    ),
]
Ids = Annotated[
    Path | None,
    typer.Option(help="sample ids (.npy or .txt, or a column of a table --inputs), one per input"),
]
Prompts = Annotated[
    Path | None,
    typer.Option(
        help="a causal language model's test prompts instead of --inputs: .jsonl (prompt, "
        "optional reference and id) or .txt (one per line); with references, each "
        "continuation's BLEU-2 decides which prompts fail (see ncip.core.sequences)",
    ),
]
NewTokens = Annotated[
    int, typer.Option(min=1, help="--prompts: greedy tokens of the final checkpoint scored")
]
Failure = Annotated[
    str,
    typer.Option(
        help="--prompts with references: a continuation fails at or below this BLEU-2, "
        "'median' (of the prompts) or a number in [0, 1]"
    ),
]
Outputs = Annotated[
    str,
    typer.Option(
        help="what the model returns: auto (decided from its outputs on the first inputs and "
        "printed: rows in [0, 1] summing to 1, or one column in [0, 1], are probabilities), "
        "logits, or probs (a softmax or sigmoid at its end: not softmaxed again)"
    ),
]
Tokenizer = Annotated[
    Path | None,
    typer.Option(
        help="raw texts: the tokenizers JSON file (or a folder holding tokenizer.json) to "
        "encode them with; default: the tokenizer.json beside the final checkpoint (a "
        "Trainer's checkpoint-<step>/, ncip's own text models). Read as data, nothing "
        "downloaded"
    ),
]
MaxLength = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="raw texts: tokens kept per text (default: the tokenizer's own length, else the "
        "model's max_position_embeddings)",
    ),
]
NoScale = Annotated[bool, typer.Option("--no-scale", help="do not divide uint8 inputs by 255")]
Mean = Annotated[
    str | None, typer.Option(help="per-channel mean to subtract, e.g. 0.485,0.456,0.406")
]
Std = Annotated[str | None, typer.Option(help="per-channel std to divide by")]
SkipBad = Annotated[
    bool,
    typer.Option(
        "--skip-bad",
        help="drop checkpoints with NaN/inf weights or outputs (with a warning) instead of "
        "stopping",
    ),
]
Preview = Annotated[Path | None, typer.Option(help="a .png grid of the top-ranked image inputs")]
BatchSize = Annotated[int, typer.Option(min=1)]
Device = Annotated[str, typer.Option(help="auto, cpu or cuda[:N]")]
EnginePath = Annotated[
    str,
    typer.Option(
        "--engine",
        help="inference path: auto, sequential, channels_last, stacked (see ncip.core.engine)",
    ),
]
Precision = Annotated[str, typer.Option(help="fp32, bf16 or fp16 (autocast)")]
Compile = Annotated[
    bool, typer.Option("--compile", help="torch.compile the model (pays off on long runs)")
]
Seed = Annotated[int, typer.Option(help="tie-breaking seed")]
Quiet = Annotated[bool, typer.Option("--quiet", help="no progress bar")]
Order = Annotated[
    str,
    typer.Option(
        help="auto: what the files record (step, epoch), else the number in their names (a "
        "list of files sorted by name, as an unquoted glob expands, is ordered so too; another "
        "list keeps its order); given: the order the files are listed in (a list only)"
    ),
]
AllowUneven = Annotated[
    bool,
    typer.Option(
        "--allow-uneven",
        help="rank checkpoints that are not an even history (kept by a metric, e.g. Lightning's "
        "save_top_k with a monitor, or thinned), which are refused otherwise; the pool is then "
        "the last alpha of the checkpoints kept, not of training",
    ),
]
TrustRecordedModel = Annotated[
    bool,
    typer.Option(
        "--trust-recorded-model",
        help="import the model factory the checkpoints record (a module or file named inside "
        "them); without it, such a factory is printed as the --model to pass",
    ),
]


def _preview_images(result):
    """Input i of the ranking as an image array, for --preview (image inputs only)."""
    x = result.inputs.x
    if len(x.shape) not in (3, 4) or np.dtype(x.dtype).kind not in "uf":
        raise StageError(f"--preview needs image inputs; these have shape {list(x.shape)}")
    return lambda i: np.asarray(x[int(result.order[i]) : int(result.order[i]) + 1])[0]


@app.command(epilog=RANK_EXAMPLES)
@stage_main
def rank(
    out: Out,
    inputs: InputsOpt = None,
    prompts: Prompts = None,
    new_tokens: NewTokens = 16,
    failure: Failure = "median",
    checkpoints: Checkpoints = None,
    checkpoints_opt: CheckpointsOpt = None,
    model: Model = None,
    labels: Labels = None,
    ids: Ids = None,
    tokenizer: Tokenizer = None,
    max_length: MaxLength = None,
    head: Head = None,
    num_classes: NumClasses = None,
    prefix: Prefix = None,
    ema: Ema = False,
    state_key: StateKey = None,
    k: KOpt = K,
    alpha: AlphaOpt = ALPHA,
    no_scale: NoScale = False,
    mean: Mean = None,
    std: Std = None,
    skip_bad: SkipBad = False,
    preview: Preview = None,
    batch_size: BatchSize = 256,
    device: Device = "auto",
    engine: EnginePath = "auto",
    precision: Precision = "fp32",
    compile: Compile = False,
    seed: Seed = 0,
    quiet: Quiet = False,
    order: Order = "auto",
    trust_recorded_model: TrustRecordedModel = False,
    allow_uneven: AllowUneven = False,
    outputs: Outputs = "auto",
) -> None:
    """Rank unlabelled inputs, most likely misclassified first, from a model's own checkpoints."""
    from ncip.tool.output import check_output_path
    from ncip.tool.rank import rank as rank_inputs

    sources = list(checkpoints or []) + list(checkpoints_opt or [])
    if not sources:
        raise StageError("give the checkpoints: a folder, a glob such as 'ckpt/*.pt', or files")
    if (inputs is None) == (prompts is None):
        raise StageError(
            "give the test set: --inputs (a classifier's inputs) or --prompts (a language "
            "model's prompts), one of them"
        )
    # before any work: never over one of the run's own inputs
    check_output_path(out, preview, [inputs, prompts, labels, ids, tokenizer])
    if prompts is not None:
        from ncip.tool.sequences import rank_sequences

        with _interrupt_says(f"nothing was written; {out} is as it was"):
            result = rank_sequences(
                sources[0] if len(sources) == 1 else sources,
                prompts,
                model,
                k=k,
                alpha=alpha,
                tokenizer=tokenizer,
                new_tokens=new_tokens,
                max_prompt_tokens=max_length,
                failure=_failure(failure),
                head=head,
                prefix=prefix,
                batch_size=min(batch_size, 64),
                device=device,
                seed=seed,
                show_progress=not quiet,
                order=order,
                allow_uneven=allow_uneven,
                trust_recorded_model=trust_recorded_model,
                skip_bad=skip_bad,
            )
        _report(result, out)
        return
    with _interrupt_says(f"nothing was written; {out} is as it was"):
        result = rank_inputs(
            sources[0] if len(sources) == 1 else sources,
            inputs,
            model,
            k=k,
            alpha=alpha,
            ids=ids,
            labels=labels,
            head=head,
            num_classes=num_classes,
            prefix=prefix,
            ema=ema,
            state_key=state_key,
            scale=not no_scale,
            mean=_floats(mean, "mean"),
            std=_floats(std, "std"),
            batch_size=batch_size,
            device=device,
            skip_bad=skip_bad,
            seed=seed,
            show_progress=not quiet,
            engine_path=engine,
            precision=precision,
            compile=compile,
            trust_recorded_model=trust_recorded_model,
            order=order,
            tokenizer=tokenizer,
            max_length=max_length,
            allow_uneven=allow_uneven,
            outputs=outputs,
        )
    images = _preview_images(result) if preview is not None else None
    _report(result, out, preview, images, result.inputs.class_names)


def _report(result, out: Path, *save) -> None:
    try:
        with _interrupt_says(f"stopped while writing {out} and its sidecars: run it again"):
            written = result.save(out, *save)
    except OSError as e:  # a full disk, a folder that went away: nothing half-written is left
        raise StageError(
            f"could not write {out} ({e.strerror or e}); the earlier files are as they were "
            "unless the table is missing: free space or choose another --out, and run again"
        ) from None
    if result.evaluation is not None:
        typer.echo(result.evaluation_text())
    typer.echo(f"{result.notes[-1]} -> {', '.join(str(p) for p in written)}")


def _failure(value: str) -> str | float:
    if value == "median":
        return value
    try:
        return float(value)
    except ValueError:
        raise StageError(f"--failure is 'median' or a BLEU-2 in [0, 1], got {value!r}") from None


@contextlib.contextmanager
def _interrupt_says(what: str):
    """Ctrl-C (or SIGINT) during the work: one line saying what was left, exit code 130."""
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(f"interrupted: {what}", err=True)
        raise typer.Exit(130) from None


@app.command(epilog="Example: ncip prune ckpt/ --model mynet:Net --k 30   (a dry run; add --yes)")
@stage_main
def prune(
    folder: Annotated[Path, typer.Argument(help="a folder of one run's checkpoints (any format)")],
    model: Model = None,
    k: KOpt = K,
    alpha: AlphaOpt = ALPHA,
    head: Head = None,
    num_classes: NumClasses = None,
    prefix: Prefix = None,
    ema: Ema = False,
    state_key: StateKey = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="delete; without it, only list what would go")
    ] = False,
) -> None:
    """Delete every checkpoint NCIP would not select; `ncip rank` then ranks as before."""
    from ncip.tool.prune import apply_prune, plan_prune

    p = plan_prune(
        folder,
        model,
        k=k,
        alpha=alpha,
        head=head,
        num_classes=num_classes,
        prefix=prefix,
        ema=ema,
        state_key=state_key,
    )
    typer.echo(p.describe())
    if not p.delete:
        typer.echo("nothing to delete: NCIP uses every checkpoint here")
    elif yes:
        with _interrupt_says(
            f"the prune stopped part-way; {folder}/ncip-prune.json holds the selection: run the "
            "same command again to finish it"
        ):
            apply_prune(p)
        typer.echo(
            f"deleted {len(p.delete)} checkpoints; the selection is in {folder}/ncip-prune.json"
        )
    else:
        typer.echo("dry run: nothing was deleted; add --yes to delete")


if __name__ == "__main__":
    app()
