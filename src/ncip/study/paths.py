"""Where the study keeps each subject-run's outputs: the one home of the naming rule that the
cost collector, evaluate-rauc and the report read by. dvc.yaml writes the same paths into its
stage commands (DVC cannot call Python); tests/test_dvc_deps.py checks that they agree.

A subject-run is known by its key ``fmnist-lenet5/run-0``, which is also its folder below a
per-run output (``scores/fmnist-lenet5/run-0/``), and by its tag ``fmnist-lenet5-run-0``, the
stem of its file in a flat output folder (``metrics/retrain/fmnist-lenet5-run-0.json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Files a fresh clone holds in git that the pipeline reads (the report's sections written by
# `make sweep`, `make extended`, `make text`, `make lm`, and data/external's placeholder): a
# copy of the project that runs `dvc repro` needs them (tests, scripts/gpu_check.py). dvc.yaml
# lists them as deps; tests/test_dvc_deps.py checks the two agree.
TRACKED_INPUTS = (
    "metrics/sensitivity.md",
    "metrics/extended.md",
    "metrics/text.md",
    "metrics/lm.md",
    "data/external/README.md",
)
# The experiments' numbers a fresh clone holds in git and dvc.yaml's `metrics` list names (not
# read by any stage; a copy of the project needs them for `dvc metrics show/diff`).
EXPERIMENT_METRICS = (
    "metrics/lm.json",
    "metrics/epochs.json",
    "metrics/extended.json",
    "metrics/text.json",
)


def run_key(subject: str, run: int) -> str:
    """``<subject>/run-<r>``: the subject-run's key in records and its folder below a root."""
    return f"{subject}/run-{int(run)}"


def run_tag(subject: str, run: int) -> str:
    """``<subject>-run-<r>``: the stem of the subject-run's file in a flat folder."""
    return f"{subject}-run-{int(run)}"


@dataclass(frozen=True)
class StudyPaths:
    """Every per-run output of the default layout (dvc.yaml's), below ``root``."""

    root: Path = Path(".")

    def models(self, subject: str, run: int) -> Path:
        return Path(self.root) / "models" / run_key(subject, run)

    def selection(self, subject: str, run: int) -> Path:
        return Path(self.root) / "selection" / f"{run_key(subject, run)}.json"

    def predictions(self, subject: str, run: int) -> Path:
        return Path(self.root) / "predictions" / run_key(subject, run)

    def scores(self, subject: str, run: int) -> Path:
        return Path(self.root) / "scores" / run_key(subject, run)

    def training(self, subject: str, run: int) -> Path:
        """The published training history (CSV)."""
        return Path(self.root) / "plots" / "training" / f"{run_tag(subject, run)}.csv"

    def attacks(self, subject: str, run: int) -> Path:
        """The published attack report (JSON)."""
        return Path(self.root) / "metrics" / "attacks" / f"{run_tag(subject, run)}.json"

    def retrain(self, subject: str, run: int) -> Path:
        """The published retraining record (JSON)."""
        return Path(self.root) / "metrics" / "retrain" / f"{run_tag(subject, run)}.json"

    def analysis(self, subject: str, run: int) -> Path:
        """analyze-checkpoints' figures folder (with its timing.json)."""
        return Path(self.root) / "plots" / "analysis" / run_tag(subject, run)

    def weak_collapse(self, subject: str, run: int) -> Path:
        return Path(self.root) / "plots" / "weak_collapse" / f"{run_tag(subject, run)}.csv"
