"""What the study cost: seconds per stage and per method, from the stages' own records.

:func:`collect` reads what every stage measured about itself and returns the layout of
``metrics/cost.json`` (declared as DVC metrics, so ``dvc metrics diff`` shows a speed
regression beside a quality one):

- ``stages``: stage -> "subject/run-r" -> seconds;
- ``methods``: method -> "subject/run-r" -> {"prepare", "score"} seconds (NCIP: selection, its
  share of the shared prediction run, scoring);
- ``shared_inference``: "subject/run-r" -> the inference predict-probabilities does once for
  every consumer: every checkpoint on every split, and the final model's features on the test
  sets and on the training split.

:func:`table9_rows` turns it into the paper's Table 9 columns, charging each method the
shared inference it reads (SA: the training-split features; the confidence scores: the final
model on the test sets; TDPR: every checkpoint, split by inputs between its training on the
validation sets and its scoring of the test sets).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ncip.study.paths import StudyPaths, run_key

CONFIDENCE = ("entropy", "deepgini", "msp", "pcs")


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except ValueError:
        return None


def _seconds(path: Path, key: str = "seconds") -> float | None:
    record = _json(path)
    return None if record is None or key not in record else float(record[key])


def _attack_seconds(path: Path) -> float | None:
    record = _json(path)
    if record is None or "attacks" not in record:
        return None
    return float(sum(s.get("seconds", 0.0) for a in record["attacks"].values() for s in a.values()))


def _training_seconds(path: Path) -> float | None:
    if not path.is_file():
        return None
    hist = pd.read_csv(path)
    return float(hist["seconds"].sum()) if "seconds" in hist else None


def collect(subjects: list[str], runs: list[int], root: Path | str = ".") -> dict[str, Any]:
    """The cost record of a study (see the module docstring); missing records are skipped."""
    paths = StudyPaths(Path(root))
    stages: dict[str, dict[str, float]] = {}
    methods: dict[str, dict[str, dict[str, float]]] = {}
    shared: dict[str, dict[str, float]] = {}

    def put(stage: str, key: str, value: float | None) -> None:
        if value is not None:
            stages.setdefault(stage, {})[key] = value

    for s in subjects:
        for r in runs:
            key = run_key(s, r)
            scores = paths.scores(s, r)
            put("train-with-checkpoints", key, _training_seconds(paths.training(s, r)))
            put("generate-adversarial", key, _attack_seconds(paths.attacks(s, r)))
            put("select-checkpoints", key, _seconds(paths.selection(s, r)))
            index = _json(paths.predictions(s, r) / "index.json")
            put("predict-probabilities", key, None if index is None else float(index["seconds"]))
            ncip = _json(scores / "ncip-cost.json")
            put("score-ncip", key, None if ncip is None else float(ncip["score"]))
            base = _json(scores / "baselines-cost.json")
            put("score-baselines", key, None if base is None else base.get("seconds"))
            put("analyze-checkpoints", key, _seconds(paths.analysis(s, r) / "timing.json"))
            put("retrain-*", key, _seconds(paths.retrain(s, r)))
            if ncip is not None:
                methods.setdefault("ncip", {})[key] = {
                    "prepare": float(ncip["select"]),
                    "predict": float(ncip["predict"]),
                    "score": float(ncip["score"]),
                }
            for m, c in (base or {}).items():
                if isinstance(c, dict) and "score" in c:
                    prep = sum(v for k, v in c.items() if k.startswith("prepare"))
                    methods.setdefault(m, {})[key] = {
                        "prepare": float(prep),
                        "score": float(sum(c["score"].values())),
                    }
            if index is not None and "timing" in index:
                t = index["timing"]
                feats = t.get("feature_seconds", {})
                shared[key] = {
                    "all_checkpoints": float(t["checkpoints_seconds"]),
                    "final_model_test_sets": float(feats.get("test", 0.0) + feats.get("adv", 0.0)),
                    "final_model_train": float(feats.get("train", 0.0)),
                    "rows": index.get("splits", {}),
                }
    return {"stages": stages, "methods": methods, "shared_inference": shared}


def _method(cost: dict, m: str, key: str, part: str) -> float:
    v = cost["methods"].get(m, {}).get(key)
    return np.nan if v is None else v[part]


def table9_rows(cost: dict) -> dict[str, list[float]]:
    """ "subject/run-r" -> the paper's Table 9 columns (paper.COST_COLUMNS order)."""
    rows = {}
    keys = sorted({k for per in cost["methods"].values() for k in per})
    for key in keys:
        sh = cost["shared_inference"].get(key, {})
        rows_of = sh.get("rows", {})
        total_rows = sum(rows_of.values()) or 1
        val_share = (rows_of.get("val", 0) + rows_of.get("val-adv", 0)) / total_rows
        test_share = (rows_of.get("test", 0) + rows_of.get("adv", 0)) / total_rows
        every = sh.get("all_checkpoints", 0.0)

        def m(name: str, part: str, key: str = key) -> float:
            return _method(cost, name, key, part)

        sa = m("lsa", "prepare") + m("lsa", "score") + m("dsa", "prepare") + m("dsa", "score")
        rows[key] = [
            sa + sh.get("final_model_train", 0.0),
            sh.get("final_model_test_sets", 0.0) + sum(m(c, "score") for c in CONFIDENCE),
            m("dropout", "score"),
            m("nns", "score"),
            m("sets", "score"),
            m("effimap", "prepare"),
            m("effimap", "score"),
            m("tdpr", "prepare") + every * val_share,
            m("tdpr", "score") + every * test_share,
            m("ncip", "prepare"),
            m("ncip", "predict"),
        ]
    return rows
