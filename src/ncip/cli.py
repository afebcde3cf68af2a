"""The ``ncip`` command: list what is registered, and rank your own test inputs with NCIP."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from ncip.cli_options import (  # the options of `ncip rank` and `ncip prune`
    AllowUneven,
    AlphaOpt,
    BatchSize,
    Checkpoints,
    CheckpointsOpt,
    Classes,
    Compile,
    Device,
    Ema,
    EnginePath,
    Failure,
    Final,
    GroupedHelp,
    Head,
    Holdout,
    HoldoutLabels,
    Ids,
    InputsOpt,
    KOpt,
    LabelColumn,
    Labels,
    LabelStudio,
    MaxLength,
    Mean,
    Method,
    Model,
    NewTokens,
    NoScale,
    NumClasses,
    Order,
    Out,
    Outputs,
    Plot,
    Precision,
    Prefix,
    Preview,
    Prompts,
    Quiet,
    RankKOpt,
    Seed,
    SkipBad,
    StateKey,
    Std,
    TextColumn,
    Tokenizer,
    Top,
    TrustRecordedModel,
)
from ncip.core.collapse import ALPHA, K
from ncip.study.stage import StageError, stage_main

app = typer.Typer(add_completion=False, help=__doc__, no_args_is_help=True)

# third-party packages only the study needs (pyproject's `study` extra)
STUDY_PACKAGES = {
    "dvc",
    "scipy",
    "sklearn",
    "xgboost",
    "torchattacks",
    "seaborn",
    "mlxtend",
    "mnist1d",
    "submitit",
    "transformers",
    "accelerate",
    "rdata",
}


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
    _external_models(params)
    subjects, runs = check(params)
    typer.echo(f"{params}: valid ({len(subjects)} subjects x {len(runs)} runs)")


def _external_models(params: Path) -> None:
    """An external subject's model with literal arguments is refused, by the rule `ncip
    import-external` applies (the study's stages import the factory by name alone); here, as
    the study does not import the tool's parser."""
    import yaml

    from ncip.tool.userspec import split_call

    try:
        cfg = yaml.safe_load(Path(params).read_text()) if Path(params).is_file() else None
    except yaml.YAMLError:
        return  # check_params says so, with the line
    external = cfg.get("external") if isinstance(cfg, dict) else None
    for name, spec in (external or {}).items() if isinstance(external, dict) else ():
        model = spec.get("model") if isinstance(spec, dict) else None
        if isinstance(model, str) and split_call(model)[0] != model:
            raise StageError(
                f"{params}: external.{name}.model {model!r} passes arguments, but the study's "
                "stages import the factory by name alone; name a function that builds it "
                "without arguments (def make(num_classes): return Net(hidden=256, "
                "num_classes=num_classes))"
            )


def _class_names(classes: str | None) -> list[str] | None:
    """--classes: a file with one class name per line, else comma-separated names."""
    if classes is None:
        return None
    p = Path(classes)
    if p.is_file():
        names = [ln.strip() for ln in p.read_text().splitlines() if ln.strip()]
    else:
        names = [c.strip() for c in classes.split(",") if c.strip()]
    if not names or len(set(names)) != len(names):
        raise StageError(
            f"--classes {classes!r}: give the class names once each, in class order "
            "(comma-separated, or a file with one per line)"
        )
    return names


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
        ("checkpoint", "checkpoint scores (score-ncip; docs/methods.md)"),
    ):
        typer.echo(f"{title}:")
        names = list_methods(family)  # the checkpoint scores in their registered order
        for name in names if family == "checkpoint" else method_order(names):
            i = method_info(name)
            opts = ", ".join(f"{k}={v!r}" for k, v in i.options.items()) or "-"
            needs = ", ".join(NEEDS[n] for n in i.needs) or "the final model's outputs"
            head = f"  {name:<11} {i.display:<11} paper: {i.paper or '-':<11} options: {opts}"
            typer.echo(head)
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
    through DVC's run-cache; then run `dvc repro --pull` here (docs/scaling.md)."""
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
            'add it under `external` (docs/study.md "Study a model trained elsewhere")'
        )
    runs = load_study(params)[2]
    for name in names:
        for folder in import_subject(specs[name], runs, device):
            typer.echo(f"{name}: imported into {folder}")


RANK_EXAMPLES = """Examples:
  # a plain PyTorch loop's state dicts, one per epoch
  ncip rank ckpt/ --model mynet:Net --inputs test.npz --out ranking.csv
  # Lightning's .ckpt files, with labels: NCIP compared with simpler orders
  ncip rank 'lightning_logs/version_0/checkpoints/*.ckpt' --model train:Net \\
      --inputs x.npy --labels y.npy --out ranking.parquet
  # a Hugging Face Trainer text classifier from raw texts (model: config.json)
  ncip rank hf_out/ --inputs test.csv --out ranking.csv
  # choose the score on a labelled holdout, hand the ranking to Label Studio
  ncip rank ckpt/ --model mynet:Net --inputs pool.npz --holdout val.npz \\
      --out ranking.csv --label-studio tasks.json
  # a causal language model's prompts
  ncip rank lm_out/ --prompts prompts.jsonl --out ranking.csv
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
def _preview_images(result):
    """Input i of the ranking as an image array, for --preview (image inputs only)."""
    x = result.inputs.x
    if len(x.shape) not in (3, 4) or np.dtype(x.dtype).kind not in "uf":
        raise StageError(f"--preview needs image inputs; these have shape {list(x.shape)}")
    return lambda i: np.asarray(x[int(result.order[i]) : int(result.order[i]) + 1])[0]


@app.command(epilog=RANK_EXAMPLES, cls=GroupedHelp)
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
    classes: Classes = None,
    text_column: TextColumn = None,
    final: Final = None,
    holdout: Holdout = None,
    holdout_labels: HoldoutLabels = None,
    method: Method = None,
    label_studio: LabelStudio = None,
    top: Top = None,
    plot: Plot = None,
    label_column: LabelColumn = None,
    ids: Ids = None,
    tokenizer: Tokenizer = None,
    max_length: MaxLength = None,
    head: Head = None,
    num_classes: NumClasses = None,
    prefix: Prefix = None,
    ema: Ema = False,
    state_key: StateKey = None,
    k: RankKOpt = None,
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
    if label_column is not None:
        if labels is not None:
            raise StageError("give --labels or --label-column, not both")
        labels = label_column
    # options of the other input kind are refused, not ignored
    if prompts is not None:
        given = {
            "--labels": labels is not None,
            "--classes": classes is not None,
            "--text-column": text_column is not None,
            "--holdout": holdout is not None,
            "--holdout-labels": holdout_labels is not None,
            "--method": method is not None,
            "--label-studio": label_studio is not None,
            "--top": top is not None,
            "--plot": plot is not None,
            "--label-column": label_column is not None,
            "--ids": ids is not None,
            "--preview": preview is not None,
            "--outputs": outputs != "auto",
            "--ema": ema,
            "--state-key": state_key is not None,
            "--mean": mean is not None,
            "--std": std is not None,
            "--no-scale": no_scale,
            "--num-classes": num_classes is not None,
            "--precision": precision != "fp32",
            "--engine": engine != "auto",
            "--compile": compile,
        }
        kind, other = "--prompts (a language model's prompts)", "--inputs"
    else:
        given = {"--new-tokens": new_tokens != 16, "--failure": failure != "median"}
        kind, other = "--inputs (a classifier's inputs)", "--prompts"
    wrong = [name for name, on in given.items() if on]
    if wrong:
        raise StageError(
            f"{', '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not apply to {kind}; "
            f"drop {'it' if len(wrong) == 1 else 'them'} (or rank {other})"
        )
    # before any work: never over one of the run's own inputs
    from ncip.tool.output import extra_paths

    extra = extra_paths(out, label_studio, top, plot).values()
    check_output_path(
        out, preview, [inputs, prompts, labels, ids, tokenizer, holdout, holdout_labels], extra
    )
    source = sources[0] if len(sources) == 1 else sources
    shared = {  # what ranking inputs and ranking prompts take alike
        "model": model,
        "k": k,
        "alpha": alpha,
        "tokenizer": tokenizer,
        "head": head,
        "prefix": prefix,
        "device": device,
        "seed": seed,
        "show_progress": not quiet,
        "order": order,
        "allow_uneven": allow_uneven,
        "final": final,
        "trust_recorded_model": trust_recorded_model,
        "skip_bad": skip_bad,
    }
    if prompts is not None:
        from ncip.tool.sequences import rank_sequences

        with _interrupt_says(f"nothing was written; {out} is as it was"):
            result = rank_sequences(
                source,
                prompts,
                new_tokens=new_tokens,
                max_prompt_tokens=max_length,
                failure=_failure(failure),
                batch_size=min(batch_size, 64),
                **shared,
            )
        _report(result, out)
        return
    with _interrupt_says(f"nothing was written; {out} is as it was"):
        result = rank_inputs(
            source,
            inputs,
            ids=ids,
            labels=labels,
            num_classes=num_classes,
            ema=ema,
            state_key=state_key,
            scale=not no_scale,
            mean=_floats(mean, "mean"),
            std=_floats(std, "std"),
            batch_size=batch_size,
            engine_path=engine,
            precision=precision,
            compile=compile,
            max_length=max_length,
            outputs=outputs,
            class_names=_class_names(classes),
            text_column=text_column,
            holdout=holdout,
            holdout_labels=holdout_labels,
            method=method,
            **shared,
        )
    images = _preview_images(result) if preview is not None else None
    _report(result, out, preview, images, result.inputs.class_names, label_studio, top, plot)


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
