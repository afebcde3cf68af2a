"""A ranking's result (:class:`Ranking`) and its files: the table (CSV or Parquet), the
selection record and, with labels, the evaluation beside it, written atomically; and the checks
that an output path is safe before any work starts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ncip.core.errors import InputError
from ncip.tool.compare import format_evaluation, verdict

OUTPUT_SUFFIXES = (".csv", ".parquet")


@dataclass
class Ranking:
    """A ranking (most likely misclassified first), the checkpoint selection behind it and,
    with labels, how NCIP compares with simpler orders on the same model."""

    table: pd.DataFrame  # rank, sample_id, ncip, tvd, margin, pred (+ label)
    selection: dict[str, Any]
    evaluation: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)
    order: np.ndarray | None = None  # input indices in rank order (row i of the table)
    inputs: Any = None  # the ranked ncip.tool.inputs.Inputs, when a model ranked them (previews)
    method: str = "ncip"  # the score the ranking is ordered by (ncip.tool.choose)
    # for --plot: (score name -> scores, faults, which labelled inputs), with labels or a holdout
    curves: tuple[dict[str, np.ndarray], np.ndarray, str] | None = None

    def evaluation_text(self) -> str:
        return "" if self.evaluation is None else format_evaluation(self.evaluation)

    def save(
        self,
        out: Path | str,
        preview: Path | str | None = None,
        images: Any = None,
        class_names: list[str] | None = None,
        label_studio: Path | str | None = None,
        top: int | None = None,
        plot: Path | str | None = None,
    ) -> list[Path]:
        """Write the table (CSV or Parquet by suffix), ``<stem>.selection.json`` beside it and,
        with labels, ``<stem>.evaluation.json``; all or nothing. Returns the paths written.

        ``preview`` (a .png) needs ``images(i)``: the stored input of the i-th ranked row;
        ``label_studio`` (a .json) gets Label Studio's tasks, ``top`` writes
        ``<stem>.top.csv`` with the first ``top`` rows, ``plot`` (a .png) the detection
        curves (:mod:`ncip.tool.labelling`)."""
        from ncip.core.io import atomic_group
        from ncip.tool import labelling

        out = Path(out)
        source = getattr(self.inputs, "source", None)
        own = [source] if source and source != "array" else []
        extra = extra_paths(out, label_studio, top, plot)
        check_output_path(out, None if preview is None else Path(preview), own, extra.values())
        if plot is not None and self.curves is None:
            raise InputError(
                "--plot draws the detection curves on labelled inputs: give --labels or a "
                "--holdout with --holdout-labels"
            )
        fmt = out.suffix.lower()
        files = {
            out: lambda p: _write_table(self.table, p, fmt),
            sidecar(out, "selection"): lambda p: _write_json(p, self.selection),
        }
        if self.evaluation is not None:
            files[sidecar(out, "evaluation")] = lambda p: _write_json(
                p,
                {
                    "methods": self.evaluation.to_dict(orient="records"),
                    "summary": verdict(self.evaluation),
                },
            )
        if preview is not None:
            from ncip.tool.figures import preview_grid

            files[Path(preview)] = lambda p: preview_grid(self.table, images, p, class_names)
        if label_studio is not None:
            tasks = labelling.label_studio_tasks(
                self.table, self.order, self.inputs, self.method, class_names
            )
            files[Path(label_studio)] = lambda p: _write_json(p, tasks)
        if top is not None:
            files[extra["top"]] = lambda p: labelling.top_table(self.table, top).to_csv(
                p, index=False
            )
        if plot is not None:
            curves, fault, what = self.curves
            files[Path(plot)] = lambda p: labelling.detection_plot(curves, fault, p, what)
        from ncip.tool.files import clean_stale_temps, follow_umask

        # the table goes in place last, after its old version and any sidecar of the old run
        # that this one does not write are gone: an interruption between the renames leaves
        # no table (visibly unfinished), never a new table beside an old run's sidecars
        order = [p for p in files if p != out] + [out]
        stale = [p for p in output_paths(out, None) if p not in files]
        for p in order:
            clean_stale_temps(p)
        with atomic_group(order) as tmps:
            for p, tmp in zip(order, tmps, strict=True):
                files[p](tmp)
            follow_umask(tmps)  # temporary files are private; the outputs follow the umask
            for p in [out, *stale]:
                p.unlink(missing_ok=True)
        return list(files)


def extra_paths(
    out: Path, label_studio: Path | str | None, top: int | None, plot: Path | str | None
) -> dict[str, Path]:
    """The optional outputs asked for, by kind ("label_studio", "top", "plot"), checked."""
    if label_studio is not None and Path(label_studio).suffix.lower() != ".json":
        raise InputError(f"--label-studio {label_studio}: end it in .json")
    if plot is not None and Path(plot).suffix.lower() != ".png":
        raise InputError(f"--plot {plot}: end it in .png")
    if top is not None and (isinstance(top, bool) or int(top) != top or top < 1):
        raise InputError(f"--top {top}: give a positive number of inputs")
    paths = {
        "label_studio": Path(label_studio) if label_studio is not None else None,
        "top": out.with_name(f"{out.stem}.top.csv") if top is not None else None,
        "plot": Path(plot) if plot is not None else None,
    }
    return {k: v for k, v in paths.items() if v is not None}


def sidecar(out: Path, what: str) -> Path:
    return out.with_name(f"{out.stem}.{what}.json")


def output_paths(out: Path, preview: Path | None = None, labels: bool = True) -> list[Path]:
    """Every file a ranking writes: the table, its sidecars, the preview."""
    paths = [out, sidecar(out, "selection")] + ([sidecar(out, "evaluation")] if labels else [])
    return paths + ([Path(preview)] if preview is not None else [])


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a link loop
        raise InputError(
            f"{p} is a symbolic link loop (it points back to itself); give the file itself"
        ) from None


def check_output_path(
    out: Path, preview: Path | None = None, inputs: Sequence = (), extra: Sequence = ()
) -> None:
    """Refuse outputs before any work: a wrong suffix; an output (table, sidecar or preview)
    that is a folder, one of the run's own inputs (``inputs``: inputs, labels, ids files) or
    inside a folder of them (images), or in a place that cannot be written."""
    import os

    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise InputError(f"--out {out}: end it in .csv or .parquet")
    if preview is not None and Path(preview).suffix.lower() != ".png":
        raise InputError(f"--preview {preview}: end it in .png")
    own = {_resolved(Path(p)): str(p) for p in inputs if p is not None}
    folders = {r: s for r, s in own.items() if r.is_dir()}
    for p in [*output_paths(out, preview), *map(Path, extra)]:
        inside = next((s for r, s in folders.items() if r in _resolved(p).parents), None)
        if inside is not None:
            raise InputError(
                f"{p} lies inside {inside}, a folder of this run's inputs: it could overwrite "
                "an input there, and would be read as one next time; write it elsewhere"
            )
        if _resolved(p) in own:
            raise InputError(
                f"{p} is one of this run's inputs ({own[p.resolve()]}); writing there would "
                "overwrite it: give another --out"
            )
        if p.is_dir():
            raise InputError(
                f"{p} is a folder; give a file name inside it, such as "
                f"{p / ('ranking' + (p.suffix or '.csv'))}"
            )
        parent = p.parent if str(p.parent) else Path(".")
        existing = next((a for a in [parent, *parent.parents] if a.exists()), Path("."))
        if not existing.is_dir():
            raise InputError(f"cannot write {p}: {existing} is a file, not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise InputError(f"cannot write {p}: {existing} is not writable; choose another --out")


def _write_table(table: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == ".parquet":
        table.to_parquet(path, index=False)
    else:
        table.to_csv(path, index=False)


def _write_json(path: Path, obj: Any) -> None:
    from ncip.core.io import _finite

    path.write_text(json.dumps(_finite(obj), indent=2, allow_nan=False, default=_plain) + "\n")


def _plain(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot write {type(o).__name__} as JSON")
