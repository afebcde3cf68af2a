"""What the report reads: every other stage's outputs, gathered into one record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ncip.core.errors import InputError
from ncip.study.evaluation import aggregate, baselines, checkpoint_methods
from ncip.study.paths import run_key, run_tag
from ncip.study.subjects import parse_subject


@dataclass
class ReportInputs:
    """Everything the report shows, read from the other stages' outputs."""

    cfg: dict
    subjects: list[str]
    runs: list[int]
    independent: list[str]
    external: dict
    per_order: pd.DataFrame
    mean: pd.DataFrame
    sd: pd.DataFrame | None
    methods: list[str]
    sig: pd.DataFrame
    sig_runs: pd.DataFrame
    costs: dict
    cost: dict
    retrain: dict
    weak: pd.DataFrame
    sensitivity: str | None
    paired: pd.DataFrame
    extended: str | None = None
    aliases: dict[str, str] = field(default_factory=dict)  # external subject -> paper's subject
    training: pd.DataFrame = field(default_factory=pd.DataFrame)  # every run's history
    text: str | None = None  # metrics/text.md (`make text`)
    lm: str | None = None  # metrics/lm.md (`make lm`)
    primary: pd.DataFrame = field(default_factory=pd.DataFrame)  # metrics/primary.csv
    chooser: pd.DataFrame = field(default_factory=pd.DataFrame)  # metrics/chooser.csv


def read_inputs(params: Path, metrics_dir: Path, scores: Path, plots_dir: Path) -> ReportInputs:
    """Read the study's results for the report; ValueError when evaluate-rauc has not run."""
    from ncip.study.cost import collect
    from ncip.study.stage import read_records
    from ncip.study.subjects import external_specs, load_study

    cfg, subjects, runs = load_study(params)
    external = external_specs(params)
    per_order = pd.read_csv(metrics_dir / "per_ordering.csv")
    per_order = per_order[per_order["subject"].isin(subjects) & per_order["run"].isin(runs)]
    if per_order.empty:
        raise InputError(
            f"{metrics_dir / 'per_ordering.csv'} has no rows for these subjects; run evaluate-rauc"
        )
    mean, std = aggregate(per_order)
    methods = [m for m in baselines() + checkpoint_methods() + ["ncip"] if m in set(mean["method"])]
    # Table 5: NCIP vs each baseline, paired over the independent subjects (means over runs;
    # a variant of a subject in the study, calibrated or trained longer, is the same data and
    # architecture, so it is left out), and over their (subject, run) pairs as a descriptive
    # check
    independent = independent_subjects(subjects, external)
    test_mean = mean[(mean["split"] == "test") & mean["subject"].isin(independent)]
    wide = test_mean.pivot(index="subject", columns="method", values="rauc_all")[methods]
    test_order = per_order[(per_order["split"] == "test") & per_order["subject"].isin(independent)]
    per_run = (
        test_order.groupby(["subject", "run", "method"])["rauc_all"]
        .mean()
        .unstack("method")[methods]
    )
    keys = [(s, r) for s in subjects for r in runs]
    costs = {
        run_key(s, r): read_records(
            scores / run_key(s, r),
            {"baselines": "baselines-cost.json", "ncip": "ncip-cost.json"},
            "the scoring stages",
        )
        for s, r in keys
    }
    retrain_runs = (cfg.get("retrain") or {}).get("runs", runs)
    retrain = read_records(
        metrics_dir / "retrain",
        {run_key(s, r): f"{run_tag(s, r)}.json" for s in subjects for r in retrain_runs},
        "the retrain-* stages",
    )
    weak = [
        pd.read_csv(f).assign(subject=s, run=r)
        for s, r in keys
        if (f := plots_dir / "weak_collapse" / f"{run_tag(s, r)}.csv").exists()
    ]
    training = [
        pd.read_csv(f).assign(subject=s, run=r)
        for s, r in keys
        if (f := plots_dir / "training" / f"{run_tag(s, r)}.csv").exists()
    ]
    sens = metrics_dir / "sensitivity.md"
    paired_file = metrics_dir / "paired.csv"
    paired = pd.read_csv(paired_file) if paired_file.exists() else pd.DataFrame()
    if not paired.empty:
        paired = paired[paired["subject"].isin(subjects)]
    primary_file = metrics_dir / "primary.csv"
    primary = pd.read_csv(primary_file) if primary_file.exists() else pd.DataFrame()
    if not primary.empty:
        primary = primary[primary["subject"].isin(subjects)]
    chooser_file = metrics_dir / "chooser.csv"
    chooser = pd.read_csv(chooser_file) if chooser_file.exists() else pd.DataFrame()
    if not chooser.empty:
        chooser = chooser[chooser["subject"].isin(subjects)]
    return ReportInputs(
        cfg,
        subjects,
        runs,
        independent,
        external,
        per_order,
        mean,
        std if len(runs) > 1 else None,
        methods,
        by_family(wide),
        by_family(per_run) if len(runs) > 1 else pd.DataFrame(),
        costs,
        collect(subjects, runs),
        retrain,
        pd.concat(weak, ignore_index=True) if weak else pd.DataFrame(),
        sens.read_text() if sens.exists() else None,
        paired,
        ext.read_text() if (ext := metrics_dir / "extended.md").exists() else None,
        {name: spec.paper for name, spec in external.items() if spec.paper},
        pd.concat(training, ignore_index=True) if training else pd.DataFrame(),
        txt.read_text() if (txt := metrics_dir / "text.md").exists() else None,
        lm.read_text() if (lm := metrics_dir / "lm.md").exists() else None,
        primary,
        chooser,
    )


def by_family(wide: pd.DataFrame) -> pd.DataFrame:
    """Table 5's tests of NCIP against each column of ``wide``, Holm-corrected within each
    family: the paper's baselines among themselves (as the paper corrects), the checkpoint
    scores among themselves."""
    from ncip.study.statistics import wilcoxon_table

    parts = []
    for family in (baselines(), checkpoint_methods()):
        cols = [m for m in family if m in wide.columns]
        if cols:
            parts.append(wilcoxon_table(wide[cols + ["ncip"]]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def weak_table(r: ReportInputs) -> pd.DataFrame:
    """Fig. 9's data: checkpoints x subject NCIP RAUC-ALL (mean over runs)."""
    w = r.weak.groupby(["subject", "checkpoints"])["rauc_all"].mean().unstack("subject")
    return w.reset_index()


def independent_subjects(subjects: list[str], external: dict | None = None) -> list[str]:
    """The subjects that are not a variant of another subject of the study."""
    out = []
    for s in subjects:
        v = parse_subject(s, external)
        if not v.variant or s.rsplit("-", 1)[0] not in subjects:
            out.append(s)
    return out
