"""The language-model study's results (stage lm-evaluate): per failure rule, each method's
RAUC-100/500/ALL over the fine-tuning seeds beside random order, and NCIP minus each other
method with two intervals.

- **Paired bootstrap** (:func:`ncip.study.statistics.paired_bootstrap`, 1,000 resamples):
  the seeds, then each seed's prompts, one prompt resample shared by the methods;
- **t-interval over the seeds** of the per-seed differences (with three seeds, 2 degrees of
  freedom: wide). A difference counts as a win or a loss only where both intervals exclude 0
  (the rule of :func:`ncip.study.statistics.paired_bootstrap` for fewer than 5 runs).

A failure is a continuation whose BLEU-2 is at or below the threshold of the rule (the seed's
test-prompt median, the primary rule; a fixed 0.1, the sensitivity row): each seed's final
model writes its own continuations, so each seed has its own failures and failure rate. Random
order's expected RAUC (:func:`ncip.core.metrics.expected_random_rauc`) is given beside the
methods: with a failure rate f, RAUC-ALL of a random order is about 1 / (2 - f).
"""

from __future__ import annotations

import pandas as pd

from ncip.core.metrics import expected_random_rauc, order_from_scores, rauc
from ncip.core.sequences import failures
from ncip.study.lm.models import CONTROLS, FAILURE_RULES, PRIMARY_RULE
from ncip.study.statistics import paired_bootstrap, t_interval

BUDGETS = (100, 500, None)
NAMES = {
    "ncip": "NCIP",
    "ncip_lastk": "NCIP, last K",
    "ncip_random": "NCIP, random K",
    "entropy": "Entropy",
    "msp": "MSP",
    "deepgini": "DeepGini",
    "margin": "Margin",
    "logppl": "Log-perplexity",
}
BASELINES = ("entropy", "msp", "deepgini", "margin", "logppl")
RESAMPLES = 1000


def _rule_name(rule) -> str:
    return "median" if rule == "median" else f"{float(rule):g}"


def _budget(n) -> str:
    return "all" if n is None else str(n)


def evaluate(tables: dict[int, pd.DataFrame], seed: int = 0) -> dict:
    """``tables[run]``: lm-score's table of each seed. Returns the metrics (JSON-able)."""
    runs = sorted(tables)
    out: dict = {"runs": runs, "prompts": int(len(tables[runs[0]])), "rules": {}}
    for rule in FAILURE_RULES:
        per_run, orders = [], []
        for run in runs:
            t = tables[run]
            fail, threshold = failures(t["bleu2"].to_numpy(), rule)
            n, f = len(fail), int(fail.sum())
            row = {"run": run, "threshold": threshold, "failures": f, "failure_rate": f / n}
            by_method = {}
            for m in NAMES:
                order = order_from_scores(t[m].to_numpy(), seed)
                by_method[m] = (order, fail)
                for b in BUDGETS:
                    row[f"{m}:{_budget(b)}"] = rauc(fail[order], b)
            for b in BUDGETS:
                row[f"random:{_budget(b)}"] = expected_random_rauc(n, f, b)
            per_run.append(row)
            orders.append(by_method)
        df = pd.DataFrame(per_run)
        paired = paired_bootstrap(orders, "ncip", BUDGETS, RESAMPLES, seed)
        rows = []
        for p in paired.itertuples():  # the verdict needs both intervals (3 seeds < 5)
            rows.append(
                {
                    "method": p.method,
                    "budget": p.budget,
                    "diff": p.diff,
                    "boot_lo": p.lo,
                    "boot_hi": p.hi,
                    "t_lo": p.t_lo,
                    "t_hi": p.t_hi,
                    "verdict": p.verdict,
                }
            )
        vs_random = {}
        for m in NAMES:  # a method against the expected random order, per seed
            d = (df[f"{m}:all"] - df["random:all"]).to_numpy()
            lo, hi = t_interval(d)
            vs_random[m] = {"diff": float(d.mean()), "t_lo": lo, "t_hi": hi}
        out["rules"][_rule_name(rule)] = {
            "per_run": df.to_dict(orient="records"),
            "mean": df.drop(columns="run").mean().to_dict(),
            "paired": rows,
            "vs_random": vs_random,
        }
    return out


def metrics_summary(result: dict) -> dict:
    """The DVC metrics (`dvc metrics diff`): mean RAUC-ALL per method and rule, failure rate."""
    out = {}
    for rule, r in result["rules"].items():
        m = r["mean"]
        out[rule] = {"failure_rate": m["failure_rate"], "random": m["random:all"]} | {
            k: m[f"{k}:all"] for k in NAMES
        }
    return out


def markdown(result: dict, info: dict, model: str, selections: dict[int, dict]) -> str:
    """The study's tables (metrics/lm/<model>.md, the report's language-model section)."""
    runs = result["runs"]
    L = [
        f"{model}: {info['parameters'] / 1e6:.2f} M parameters, pretrained for "
        f"{info['pretrain_steps']} steps on {info['pretraining_tokens']:,} tokens of WordNet "
        f"glosses and fortune quotes, fine-tuned for {info['epochs']} epochs on "
        f"{info['finetune_paragraphs']} paragraphs ({info['finetune_tokens']:,} tokens) of the "
        f"CPython documentation, {len(runs)} seeds ({', '.join(map(str, runs))}). "
        f"{result['prompts']} test prompts of {info['prompt_tokens']} tokens from "
        f"{info['held_out_pages']} held-out documentation pages; each is continued greedily for "
        f"{info['new_tokens']} tokens by the seed's final checkpoint and scored by BLEU-2 "
        "against the next "
        f"{info['new_tokens']} tokens of the page. NCIP: K = {info['k']} of the last "
        f"alpha = {info['alpha']:g} of the checkpoints, mean over the continuation's tokens.",
        "",
    ]
    for rule, r in result["rules"].items():
        m = r["mean"]
        primary = rule == PRIMARY_RULE
        what = "the seed's median" if rule == "median" else rule
        L += [
            f"#### Failure: BLEU-2 at or below {what}"
            + (" (primary, fixed before any ranking)" if primary else " (sensitivity)"),
            "",
            f"Failure rate {m['failure_rate']:.3f} (mean over seeds; thresholds "
            + ", ".join(f"{x['threshold']:.3f}" for x in r["per_run"])
            + ").",
            "",
            "| method | RAUC-100 | RAUC-500 | RAUC-ALL | method - random, RAUC-ALL [t over seeds] "
            "| NCIP - method, RAUC-ALL [bootstrap] [t over seeds] |",
            "|---|---|---|---|---|---|",
        ]
        paired = {(p["method"], p["budget"]): p for p in r["paired"]}
        for key, name in [*NAMES.items(), ("random", "Random (expected)")]:
            cells = [f"{m[f'{key}:{_budget(b)}']:.3f}" for b in BUDGETS]
            p = paired.get((key, "all"))
            diff = (
                f"{p['diff']:+.4f} [{p['boot_lo']:+.4f}, {p['boot_hi']:+.4f}] "
                f"[{p['t_lo']:+.4f}, {p['t_hi']:+.4f}] {p['verdict']}"
                if p
                else ""
            )
            v = r["vs_random"].get(key)
            rand = f"{v['diff']:+.4f} [{v['t_lo']:+.4f}, {v['t_hi']:+.4f}]" if v else ""
            L.append(f"| {name} | " + " | ".join(cells) + f" | {rand} | {diff} |")
        L.append("")
        L.append(_sentence(r, rule))
        L.append("")
    L += _selection_lines(selections)
    return "\n".join(L)


def _sentence(r: dict, rule: str) -> str:
    m = r["mean"]
    paired = {p["method"]: p for p in r["paired"] if p["budget"] == "all"}
    best = max(BASELINES, key=lambda k: m[f"{k}:all"])
    counts = {v: sum(paired[b]["verdict"] == v for b in BASELINES) for v in ("win", "tie", "loss")}
    controls = ", ".join(
        f"{NAMES[c]} {paired[c]['diff']:+.4f} ({paired[c]['verdict']})" for c in CONTROLS
    )
    vr = r["vs_random"]
    below = [b for b in BASELINES if vr[b]["t_hi"] < 0]
    ncip_vs = vr["ncip"]
    verdict = (
        "better than random order"
        if ncip_vs["t_lo"] > 0
        else "worse than random order"
        if ncip_vs["t_hi"] < 0
        else "not distinguishable from random order"
    )
    return (
        f"NCIP's RAUC-ALL {m['ncip:all']:.3f} against the best confidence score "
        f"({NAMES[best]}, {m[f'{best}:all']:.3f}) and random order ({m['random:all']:.3f}): "
        f"NCIP is {verdict} ({ncip_vs['diff']:+.4f}, t over seeds "
        f"[{ncip_vs['t_lo']:+.4f}, {ncip_vs['t_hi']:+.4f}]), and {len(below)} of the five "
        "token-level baselines are below random order beyond their interval. Against those "
        f"baselines: {counts['win']} wins, {counts['tie']} ties, {counts['loss']} losses (both "
        f"intervals). Algorithm 1 minus the controls: {controls}."
    )


def _selection_lines(selections: dict[int, dict]) -> list[str]:
    L = ["#### Checkpoints selected (sigma_cos of the LM head)", ""]
    for run, s in sorted(selections.items()):
        sig = list(s["sigma_cos"].values())
        L.append(
            f"- seed {run}: sigma_cos {sig[0]:.4f} after epoch 1, {sig[-1]:.4f} at the end "
            f"({'falling' if sig[-1] < sig[0] else 'rising'}); Algorithm 1 chose epochs "
            f"{', '.join(map(str, s['selected_epochs']))}"
        )
    L.append("")
    return L
