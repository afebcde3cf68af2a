"""Run the chosen baselines on one subject: their score rows and what each cost."""

from __future__ import annotations

import time

import pandas as pd

from ncip.core.logs import log
from ncip.study.data import Split
from ncip.study.scores import ScoringContext, get_method
from ncip.study.scoretable import score_rows


def run_baselines(
    ctx: ScoringContext,
    methods: list[str],
    run: int,
    labelled: dict[str, Split],
    skip_failures: bool = False,
) -> tuple[pd.DataFrame, dict]:
    """Score every split of ``ctx`` with each method (``labelled``: the same splits with their
    labels, which only the score table receives, never a method). Returns the score table and
    the cost
    record: seconds of the final model's predictions, each method's preparation and scoring
    per split (a method's own "prepare[<split>]" timings, e.g. TDPR's ranker, are moved from
    scoring to preparation), and the total.

    A method that needs image inputs is not defined for text: on token ids it is recorded as
    ``{"skipped": reason}`` and not run. With ``skip_failures`` (models trained elsewhere,
    where a baseline may not apply), a method that raises is recorded so too instead of
    stopping the run.
    """
    from ncip.study.scores.registry import NEEDS, method_info

    chosen = [get_method(m) for m in methods]  # unknown names fail here, first
    started = t0 = time.perf_counter()
    preds = {name: ctx.final_logits(name).argmax(axis=1) for name in ctx.eval_splits}
    cost: dict = {"final_model_inference": {"seconds": time.perf_counter() - t0}}
    parts = []
    for m in chosen:
        if "images" in method_info(m.name).needs and not ctx.images:
            cost[m.name] = {"skipped": f"not defined for text: it needs {NEEDS['images']}"}
            log.info("%s: not run, %s", m.name, cost[m.name]["skipped"])
            continue
        try:
            rows, cost[m.name] = _run_one(ctx, m, run, preds, labelled)
        except Exception as e:  # noqa: BLE001  (recorded, only when asked to)
            if not skip_failures:
                raise
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            cost[m.name] = {"skipped": f"{type(e).__name__}: {first}"}
            log.warning("%s cannot run on %s: %s", m.name, ctx.subject, cost[m.name]["skipped"])
            continue
        parts += rows
        log.info(
            "%s: %.2fs",
            m.name,
            cost[m.name]["prepare"]
            + sum(v for k, v in cost[m.name].items() if k.startswith("prepare["))
            + sum(cost[m.name]["score"].values()),
        )
    cost["seconds"] = time.perf_counter() - started
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), cost


def _run_one(
    ctx: ScoringContext, m, run: int, preds: dict, labelled: dict[str, Split]
) -> tuple[list, dict]:
    t0 = time.perf_counter()
    m.prepare(ctx)
    cost: dict = {"prepare": time.perf_counter() - t0, "score": {}}
    rows = []
    for name in ctx.eval_splits:
        split = labelled[name]
        t0 = time.perf_counter()
        s = m.score(ctx, name)
        cost["score"][name] = time.perf_counter() - t0
        rows.append(score_rows(ctx.subject, run, name, split.ids, split.y, preds[name], m.name, s))
    for label, seconds in ctx.costs.get(m.name, {}).items():
        cost[label] = seconds
        split_name = label[label.find("[") + 1 : -1] if "[" in label else None
        if split_name in cost["score"]:
            cost["score"][split_name] -= seconds
    return rows, cost
